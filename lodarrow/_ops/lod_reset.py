"""Placeholder: being implemented."""

def lod_reset(*args, **kwargs):
    raise NotImplementedError('lod_reset')
