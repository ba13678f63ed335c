"""Placeholder: being implemented."""

def sequence_scatter(*args, **kwargs):
    raise NotImplementedError('sequence_scatter')
