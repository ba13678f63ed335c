"""Placeholder: being implemented."""

def sequence_erase(*args, **kwargs):
    raise NotImplementedError('sequence_erase')
