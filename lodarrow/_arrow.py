"""Placeholder: being implemented."""


def from_arrow(obj, nulls="error"):
    raise NotImplementedError


def to_arrow(t, large_offsets=True):
    raise NotImplementedError


def export_c_array(t, requested_schema=None):
    raise NotImplementedError
