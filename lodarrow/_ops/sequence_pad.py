"""Placeholder: being implemented."""

def sequence_pad(*args, **kwargs):
    raise NotImplementedError('sequence_pad')
