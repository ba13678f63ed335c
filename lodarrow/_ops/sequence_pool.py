"""Placeholder: being implemented."""

def sequence_pool(*args, **kwargs):
    raise NotImplementedError('sequence_pool')


def sequence_first_step(*args, **kwargs):
    raise NotImplementedError('sequence_first_step')


def sequence_last_step(*args, **kwargs):
    raise NotImplementedError('sequence_last_step')
