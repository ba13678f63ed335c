"""Placeholder: being implemented."""

def sequence_mask(*args, **kwargs):
    raise NotImplementedError('sequence_mask')
