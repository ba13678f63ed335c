"""Placeholder: being implemented."""


def read_parquet(path, columns=None):
    raise NotImplementedError


def write_parquet(t, path, **kwargs):
    raise NotImplementedError


def iter_parquet(path, batch_size=65536):
    raise NotImplementedError
