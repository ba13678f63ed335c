"""Placeholder: being implemented."""

def sequence_softmax(*args, **kwargs):
    raise NotImplementedError('sequence_softmax')
