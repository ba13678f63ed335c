"""Placeholder: being implemented."""

def sequence_slice(*args, **kwargs):
    raise NotImplementedError('sequence_slice')
