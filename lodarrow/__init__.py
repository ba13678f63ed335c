"""lodarrow: nested variable-length sequence tensors (PaddlePaddle's LoDTensor) on Arrow offsets.

A :class:`LoDTensor` is a dense array whose rows are cut into nested sequences by int64 offset
levels.  Every level maps onto an Arrow list-offsets buffer, so conversion to and from Arrow,
Parquet, pandas and NumPy is lossless and zero-copy where Arrow allows.  The sequence operators
(``sequence_pool``, ``sequence_expand``, ``sequence_pad`` ...) run as Cython kernels on the CPU
and through CuPy on the GPU, chosen by where the data lives.

``import lodarrow`` imports neither pandas, CuPy nor ``pyarrow.parquet``.
"""

__version__ = "0.1.0"

# first: importing it raises ImportError where the installed pyarrow is older than the floor
from lodarrow import _versions  # noqa: F401
from lodarrow._errors import BackendError, LoDError, RegularLevelWarning
from lodarrow._threads import openmp_environment as _openmp_environment
from lodarrow._threads import watch_teams_with as _watch_teams_with

try:
    with _openmp_environment():  # OpenMP loads here (its spin count: lodarrow/_threads.py)
        from lodarrow._ext.lod_utils import openmp_enabled
        from lodarrow._ext.lod_utils import openmp_team_ids as _openmp_team_ids
except ImportError as _exc:  # a source checkout whose extensions were never built
    raise ImportError(
        "lodarrow's compiled kernels are not built in this directory "
        f"({__path__[0]}); install with `pip install -e .` (or build in place with "
        "`python setup.py build_ext --inplace`), or run from outside the source tree"
    ) from _exc
_watch_teams_with(_openmp_team_ids)  # the thread policy tells its own workers apart
from lodarrow._place import CPUPlace, CUDAPinnedPlace, CUDAPlace
from lodarrow._construct import create_lod_tensor, from_list
from lodarrow._tensor import LoDTensor
from lodarrow._interop._arrow import from_arrow
from lodarrow._tables._table import from_table, to_table
from lodarrow._tables._parquet import iter_parquet, read_parquet, write_parquet
from lodarrow._interop._pandas import from_pandas
from lodarrow._tables._dataset import map_parquet
from lodarrow._tables._lengths_store import clear_lengths_cache
from lodarrow._tables._data_cache import clear_data_cache
from lodarrow._tables._decoded_cache import clear_decoded_cache
from lodarrow import _ops
from lodarrow._ops import *  # noqa: F401,F403  (the operators, listed once: _ops.__all__)
from lodarrow._tables._apply import apply, col
from lodarrow._tables._udf import pipeline, udf
from lodarrow._tables._spark import spark_map
from lodarrow._tables._engine_writers import dask_write_parquet, ray_parquet_sink
from lodarrow._tables._tokenize import tokenize, tokenize_udf
from lodarrow._hub._torch import from_torch, to_torch
from lodarrow._hub._awkward import from_awkward, to_awkward
from lodarrow._hub._jax import from_jax, to_jax
from lodarrow._hub._tf import from_tf, to_tf
from lodarrow._hub._paddle import from_paddle, to_paddle
from lodarrow._training import (BatchLoader, batch_loader, batch_plan, collate, mix,
                                sequence_lengths)
from lodarrow._grad import vjp

__all__ = [
    "BackendError",
    "BatchLoader",
    "CPUPlace",
    "CUDAPinnedPlace",
    "CUDAPlace",
    "LoDError",
    "LoDTensor",
    "RegularLevelWarning",
    "apply",
    "batch_loader",
    "batch_plan",
    "col",
    "collate",
    "create_lod_tensor",
    "dask_write_parquet",
    "from_arrow",
    "from_list",
    "from_pandas",
    "from_table",
    "iter_parquet",
    "map_parquet",
    "openmp_enabled",
    "pipeline",
    "ray_parquet_sink",
    "read_parquet",
    "sequence_lengths",
    "spark_map",
    "to_table",
    "udf",
    "write_parquet",
]
__all__ += ["from_awkward", "from_torch", "to_awkward", "to_torch"]  # the conversion hub
__all__ += ["from_jax", "to_jax", "from_tf", "to_tf", "from_paddle", "to_paddle"]
__all__ += ["clear_lengths_cache"]  # the lengths cache (docs/training.md#lengths-cache)
__all__ += ["clear_data_cache"]  # docs/training.md#a-local-cache-for-remote-corpora
__all__ += ["clear_decoded_cache"]  # docs/training.md#a-decoded-cache
__all__ += ["mix"]  # docs/training.md#mixing-corpora
__all__ += ["vjp"]  # gradients (docs/gradients.md)
__all__ += ["tokenize", "tokenize_udf"]  # text to token lists (docs/tokenize.md)
__all__ += _ops.__all__  # the operators
