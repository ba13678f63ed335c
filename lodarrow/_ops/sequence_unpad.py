"""Placeholder: being implemented."""

def sequence_unpad(*args, **kwargs):
    raise NotImplementedError('sequence_unpad')
