"""Placeholder: being implemented."""

def sequence_conv(*args, **kwargs):
    raise NotImplementedError('sequence_conv')
