"""Placeholder: being implemented."""

def sequence_concat(*args, **kwargs):
    raise NotImplementedError('sequence_concat')
