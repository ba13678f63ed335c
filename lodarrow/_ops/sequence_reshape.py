"""Placeholder: being implemented."""

def sequence_reshape(*args, **kwargs):
    raise NotImplementedError('sequence_reshape')
