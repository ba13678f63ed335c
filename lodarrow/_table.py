"""Placeholder: being implemented."""


def from_table(table, columns=None):
    raise NotImplementedError


def to_table(tensors):
    raise NotImplementedError
