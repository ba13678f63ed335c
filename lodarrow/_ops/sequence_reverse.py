"""Placeholder: being implemented."""

def sequence_reverse(*args, **kwargs):
    raise NotImplementedError('sequence_reverse')
