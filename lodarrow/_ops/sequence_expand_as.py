"""Placeholder: being implemented."""

def sequence_expand_as(*args, **kwargs):
    raise NotImplementedError('sequence_expand_as')
