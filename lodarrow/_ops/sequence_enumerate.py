"""Placeholder: being implemented."""

def sequence_enumerate(*args, **kwargs):
    raise NotImplementedError('sequence_enumerate')
