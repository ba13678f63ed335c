"""Placeholder: being implemented."""

def sequence_expand(*args, **kwargs):
    raise NotImplementedError('sequence_expand')
