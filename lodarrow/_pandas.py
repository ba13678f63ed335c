"""Placeholder: being implemented."""


def from_pandas(series):
    raise NotImplementedError


def to_pandas(t):
    raise NotImplementedError
