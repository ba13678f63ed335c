"""Every public function, given None or a wrong type for any argument, raises an error that
names the argument (TypeError, or for an optional argument whose None means something, the
ValueError/LoDError that says why it does not fit).

The cases are generated from ``lodarrow.__all__`` and ``inspect.signature``, so a new public
function is covered as soon as it has an entry in ``VALID_CALLS`` (a test fails until then).
"""

import inspect

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow import LoDError


def _t():
    return la.LoDTensor(np.arange(10.0).reshape(5, 2), [[0, 2, 5]])


def _identity(batch):
    return batch


def _ints():
    return la.LoDTensor(np.arange(5, dtype=np.int64).reshape(5, 1), [[0, 2, 5]])


@pytest.fixture(scope="module")
def parquet_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("pq") / "x.parquet"
    la.write_parquet({"x": _t()}, path)
    return str(path)


def _byte_ids(texts):
    """A tokenizer for la.tokenize's valid call: a document's UTF-8 bytes."""
    return [list(t.encode()) for t in texts]


def _valid_calls(parquet_path, out_path):
    """A call that succeeds, for every public function (keyword arguments)."""
    return {
        "CPUPlace": {},
        "CUDAPinnedPlace": {},
        "CUDAPlace": {"device_id": 0},
        "openmp_enabled": {},
        "LoDTensor": {"data": np.arange(5.0), "lod": [[0, 2, 5]], "place": la.CPUPlace(),
                      "copy": False},
        "create_lod_tensor": {"data": np.zeros((5, 1)), "recursive_seq_lens": [[2, 3]],
                              "place": la.CPUPlace()},
        "from_arrow": {"obj": pa.array([[1, 2], [3]]), "nulls": "error"},
        "from_list": {"nested": [[1, 2], [3]], "dtype": "int64", "lod_level": 1},
        "from_pandas": {"series": pd.Series([[1, 2], [3]]), "nulls": "error"},
        "from_table": {"table": pa.table({"x": pa.array([[1], [2, 3]])}), "columns": ["x"],
                       "nulls": "error"},
        "to_table": {"tensors": {"x": _t()}},
        "read_parquet": {"path": parquet_path, "columns": ["x"], "nulls": "error",
                         "filesystem": pafs.LocalFileSystem()},
        "iter_parquet": {"path": parquet_path, "batch_size": 10, "columns": ["x"],
                         "nulls": "error"},
        "write_parquet": {"t_or_dict": {"x": _t()}, "path": out_path, "record_lengths": True},
        "map_parquet": {"source": parquet_path, "dest": out_path + ".mapped", "udf": _identity,
                        "overwrite": True, "filesystem": pafs.LocalFileSystem(),
                        "record_lengths": True},
        "clear_lengths_cache": {"cache_dir": out_path + ".cache"},
        "clear_data_cache": {"cache_dir": out_path + ".cache"},
        "clear_decoded_cache": {"cache_dir": out_path + ".cache"},
        "lod_append": {"x": np.arange(5.0), "level": [0, 2, 5], "name": "n"},
        "lod_reset": {"x": _t(), "y": None, "target_lod": [0, 1, 5], "name": "n"},
        "sequence_concat": {"input": [_t(), _t()], "name": "n"},
        "sequence_conv": {"input": _t(), "filter": np.ones((6, 3)), "context_start": -1,
                          "context_length": 3, "context_stride": 1,
                          "padding_data": np.zeros((2, 2)), "bias": np.zeros(3), "name": "n"},
        "sequence_enumerate": {"input": _ints(), "win_size": 2, "pad_value": 0, "name": "n"},
        "sequence_erase": {"input": _ints(), "tokens": [1], "name": "n"},
        "sequence_expand": {"x": np.arange(4.0).reshape(2, 2), "y": _t(), "ref_level": 0,
                            "name": "n"},
        "sequence_expand_as": {"x": np.arange(4.0).reshape(2, 2), "y": _t(), "name": "n"},
        "sequence_first_step": {"input": _t(), "name": "n"},
        "sequence_last_step": {"input": _t(), "name": "n"},
        "sequence_mask": {"x": np.array([1, 2]), "maxlen": 3, "dtype": "int64", "name": "n"},
        "sequence_pad": {"x": _t(), "pad_value": 0.0, "maxlen": 4, "name": "n"},
        "sequence_pool": {"input": _t(), "pool_type": "max", "is_test": False,
                          "pad_value": 0.0, "return_index": True, "name": "n"},
        "sequence_reshape": {"input": _t(), "new_dim": 2, "name": "n"},
        "sequence_reverse": {"x": _t(), "name": "n"},
        "sequence_scatter": {"input": np.zeros((2, 3)),
                             "index": la.LoDTensor(np.array([[0], [1], [2]]), [[0, 2, 3]]),
                             "updates": la.LoDTensor(np.ones((3, 1)), [[0, 2, 3]]),
                             "name": "n"},
        "sequence_slice": {"input": _t(), "offset": np.array([[0], [1]]),
                           "length": np.array([[1], [2]]), "name": "n"},
        "sequence_softmax": {"input": la.LoDTensor(np.arange(5.0), [[0, 2, 5]]),
                             "use_cudnn": False, "name": "n"},
        "sequence_topk_avg_pooling": {
            "input": la.LoDTensor(np.array([4., 1., 2.]), lod=[[0, 3]]),
            "row": la.LoDTensor(np.zeros(1), lod=[[0, 1]]),
            "col": la.LoDTensor(np.zeros(3), lod=[[0, 3]]),
            "topks": [1, 2], "channel_num": 1, "name": "n"},
        "sequence_unpad": {"x": np.zeros((2, 3, 2)), "length": np.array([2, 3]), "name": "n"},
        "col": {"name": "x", "lod_level": 1, "feature_shape": None},
        "apply": {"table": pa.table({"x": pa.array([[1.0, 2.0], [3.0]])}), "op": "sequence_pool",
                  "out": "s", "device": None, "input": la.col("x"), "pool_type": "sum"},
        "sequence_lengths": {"source": pa.table({"x": pa.array([[1], [2, 3]])}), "column": "x",
                             "level": 0, "cache_dir": False},
        "batch_plan": {"lengths": np.array([3, 1, 2]), "batch_size": 2, "max_tokens": 10,
                       "cost": "packed", "window": 2, "shuffle": True, "seed": 1, "epoch": 0,
                       "drop_last": False, "num_replicas": 1, "rank": 0, "balance": "batches",
                       "oversize": "alone"},
        "collate": {"source": pa.table({"x": pa.array([[1], [2, 3]])}), "rows": [1, 0],
                    "column": "x", "level": 0, "mode": "packed_rows", "pad_value": 0,
                    "row_length": 4, "to": "numpy"},
        "batch_loader": {"source": pa.table({"x": pa.array([[1], [2, 3]]), "y": [0, 1]}),
                         "column": "x", "batch_size": 2, "cost": "padded",
                         "mode": "packed_rows", "row_length": 4, "level": 0,
                         "extra_columns": ["y"], "pad_value": 0, "to": "numpy", "bucket": True,
                         "window": 8, "row_groups": 2, "shuffle": True, "seed": 0,
                         "drop_last": False, "num_replicas": 1, "rank": 0,
                         "balance": "compute", "alpha": 0.5, "oversize": "alone",
                         "progress": False, "cache_dir": False, "cache_bytes": None,
                         "decoded_cache": False},
        "mix": {"sources": [pa.table({"x": pa.array([[1], [2, 3]])})], "weights": [1.0],
                "counts": None, "epoch_size": 4, "by": "sequences"},
        "udf": {"op": "sequence_pool", "out": "s", "device": None, "input": la.col("x"),
                "pool_type": "sum"},
        # the operator's arguments pass through as keywords
        "vjp": {"op": la.sequence_pool, "input": _t(), "pool_type": "sum"},
    }


#: The conversion hub (docs/interop.md): function -> the library its valid call needs; without
#: that library its cases are skipped (the test extra installs them all).
HUB_LIBRARIES = {"to_torch": "torch", "from_torch": "torch", "to_awkward": "awkward",
                 "from_awkward": "awkward", "to_jax": "jax", "from_jax": "jax",
                 "to_tf": "tensorflow", "from_tf": "tensorflow", "to_paddle": "paddle",
                 "from_paddle": "paddle"}


#: The engines' writers: valid calls where the engine's library is installed.
WRITER_LIBRARIES = {"ray_parquet_sink": "ray", "dask_write_parquet": "dask"}
OPTIONAL_LIBRARIES = {**HUB_LIBRARIES, **WRITER_LIBRARIES}


def _installed(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _hub_calls():
    """Valid calls of the hub functions whose library is installed (imported only here)."""
    out = {}
    if _installed("torch"):
        import torch

        out["to_torch"] = {"obj": _t(), "layout": "varlen", "column": None,
                           "cu_seqlens_dtype": "int32", "pad_value": 0, "maxlen": None,
                           "nulls": "error"}
        out["from_torch"] = {"obj": torch.arange(5.0), "cu_seqlens": torch.tensor([0, 2, 5]),
                             "lod": None, "lengths": None}
    if _installed("jax"):
        import jax.numpy as jnp

        out["to_jax"] = {"obj": la.LoDTensor(np.arange(5, dtype=np.float32), [[0, 2, 5]]),
                         "layout": "segments", "column": None, "pad_value": 0, "maxlen": None,
                         "nulls": "error"}
        out["from_jax"] = {"obj": jnp.arange(5.0), "segment_ids": jnp.array([0, 0, 1, 1, 1]),
                           "num_segments": 2, "group_sizes": None, "lod": None,
                           "lengths": None}
    if _installed("tensorflow"):
        import tensorflow as tf

        out["to_tf"] = {"obj": _t(), "column": None, "nulls": "error"}
        out["from_tf"] = {"obj": tf.ragged.constant([[1.0, 2.0], [3.0]]), "lengths": None}
    if _installed("awkward"):
        import awkward as ak

        out["to_awkward"] = {"obj": _t(), "column": None, "nulls": "error"}
        out["from_awkward"] = {"array": ak.Array([[1.0, 2.0], [3.0]])}
    return out


#: Paddle cannot share a process with TensorFlow: its argument checks run with its other tests,
#: in a process of their own (tests/hub_paddle_cases.py).
OWN_PROCESS = {"to_paddle", "from_paddle"}


def _skip_missing_library(func):
    if func in OWN_PROCESS:
        pytest.skip(f"{func}: checked in tests/hub_paddle_cases.py (a process of its own)")
    lib = OPTIONAL_LIBRARIES.get(func)
    if lib is not None and not _installed(lib):
        pytest.skip(f"{func} needs {lib}, which is not installed")


#: Functions whose only parameter is ``*args``: a valid call, and the argument's name.
STAR_CALLS = {
    "pipeline": (lambda: (la.udf("sequence_pool", out="s", input=la.col("x"), pool_type="sum"),),
                 "udfs"),
}


#: Public classes that functions return, made by those functions, not by calling the class:
#: their arguments are checked by the function that makes them.
MADE_BY = {"BatchLoader": "batch_loader"}


def _public_functions():
    for name in sorted(la.__all__):
        obj = getattr(la, name)
        if name in MADE_BY or isinstance(obj, type) and issubclass(obj, BaseException):
            continue
        yield name, obj


#: Functions whose valid call needs an engine (run with ``-m engines``).
ENGINE_FUNCTIONS = {"spark_map"}


def _cases():
    for name, obj in _public_functions():
        if name in STAR_CALLS:
            continue
        params = [p for p in inspect.signature(obj).parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        marks = [pytest.mark.engines] if name in ENGINE_FUNCTIONS else []
        if not params:
            yield pytest.param(name, None, id=name, marks=marks)
        for p in params:
            yield pytest.param(name, p.name, id=f"{name}-{p.name}", marks=marks)


@pytest.fixture
def calls(parquet_path, tmp_path, request):
    out = _valid_calls(parquet_path, str(tmp_path / "out.parquet"))
    out.update(_hub_calls())
    if _installed("ray"):  # the sink is only built: no Ray is started
        out["ray_parquet_sink"] = {"dest": str(tmp_path / "ray-out"), "partition_cols": ["k"],
                                   "overwrite": True, "engine": "auto"}
    if _installed("dask"):
        import dask.dataframe as dd

        frame = pd.DataFrame({"k": ["a", "b", "a"], "x": [1.0, 2.0, 3.0]})
        out["dask_write_parquet"] = {"ddf": dd.from_pandas(frame, npartitions=2),
                                     "dest": str(tmp_path / "dask-out"),
                                     "partition_cols": ["k"], "overwrite": True,
                                     "engine": "auto"}
    # la.tokenize: a text file and a callable tokenizer (no tokenizers library needed)
    texts = str(tmp_path / "texts.parquet")
    pq.write_table(pa.table({"text": ["ab c", "", "d"]}), texts)
    options = {"text": "text", "out": "tokens", "columns": None, "bos": 1, "eos": 2,
               "separator": None, "max_length": 4, "overflow": "split", "drop_empty": False,
               "nulls": "error", "vocab_size": 256, "dtype": "int32",
               "add_special_tokens": True}
    out["tokenize"] = {"source": texts, "dest": str(tmp_path / "tokens"),
                       "tokenizer": _byte_ids, **options, "batch_rows": 2, "processes": 1,
                       "progress": False, "overwrite": True, "resume": False}
    out["tokenize_udf"] = {"tokenizer": _byte_ids, **options}
    # a Spark DataFrame only for the spark_map cases (the local Spark of conftest.py)
    spark = request.getfixturevalue("spark") if "spark_map" in request.node.name else None
    out["spark_map"] = {
        "df": spark.createDataFrame(pa.table({"x": pa.array([[1.0, 2.0], [3.0]])}))
        if spark is not None else None,
        "f": la.udf("sequence_pool", out="s", input=la.col("x"), pool_type="sum")}
    return out


def test_every_public_function_has_a_valid_call(calls):
    missing = [name for name, _ in _public_functions()
               if name not in calls and name not in STAR_CALLS and name not in OWN_PROCESS
               and not (name in OPTIONAL_LIBRARIES
                        and not _installed(OPTIONAL_LIBRARIES[name]))]
    assert not missing, f"add a valid call for {missing} to VALID_CALLS"


@pytest.mark.parametrize("func, param", list(_cases()))
def test_none_argument_is_named(calls, func, param):
    _skip_missing_library(func)
    obj = getattr(la, func)
    kwargs = dict(calls[func])
    try:
        result = obj(**kwargs)  # the valid call works, so a failure below is due to the None
        if func == "iter_parquet":
            list(result)
    except la.BackendError:  # a CUDA place without CuPy or a GPU: its arguments still checked
        pass
    if param is None:
        return
    default = inspect.signature(obj).parameters[param].default
    kwargs[param] = None
    if default is None:  # None means something here: it may work, or fail naming the argument
        try:
            result = obj(**kwargs)
            if func == "iter_parquet":
                list(result)
        except (TypeError, ValueError, LoDError) as exc:
            assert param in str(exc), f"{func}({param}=None): {exc!r} does not name {param}"
        return
    with pytest.raises(TypeError) as info:
        result = obj(**kwargs)
        if func == "iter_parquet":
            list(result)
    assert param in str(info.value), f"{func}({param}=None): {info.value!r}"


class _Opaque:
    """An argument of no type any function accepts."""

    def __repr__(self):
        return "<opaque>"


@pytest.mark.parametrize("func, param", [c for c in _cases() if c.values[1] not in (None, "name")])
def test_wrong_type_argument_is_named(calls, func, param):
    _skip_missing_library(func)
    obj = getattr(la, func)
    kwargs = dict(calls[func])
    kwargs[param] = _Opaque()
    with pytest.raises(TypeError) as info:
        result = obj(**kwargs)
        if func == "iter_parquet":
            list(result)
    assert param in str(info.value), f"{func}({param}=<opaque>): {info.value!r}"


_METHOD_CALLS = {
    "set.array": lambda t, bad: la.LoDTensor().set(bad),
    "set.place": lambda t, bad: la.LoDTensor().set(np.zeros(2), bad if bad is not None else 1),
    "set_lod.lod": lambda t, bad: t.set_lod(bad),
    "set_recursive_sequence_lengths.recursive_sequence_lengths":
        lambda t, bad: t.set_recursive_sequence_lengths(bad),
    "take.indices": lambda t, bad: t.take(bad),
    "to.place": lambda t, bad: t.to(bad),
    "cuda.device_id": lambda t, bad: t.cuda(bad),
    "num_sequences.level": lambda t, bad: t.num_sequences(bad),
    "merge_levels.outer": lambda t, bad: t.merge_levels(bad, 0),
    "merge_levels.inner": lambda t, bad: t.merge_levels(0, bad),
    "to_arrow.large_offsets": lambda t, bad: t.to_arrow(bad),
    "from_lengths.lengths": lambda t, bad: la.LoDTensor.from_lengths(np.zeros(5), bad),
}


@pytest.mark.parametrize("bad", [None, _Opaque()], ids=["None", "opaque"])
@pytest.mark.parametrize("func", list(STAR_CALLS))
def test_star_arguments_are_named(func, bad):
    valid, arg = STAR_CALLS[func]
    getattr(la, func)(*valid())  # the valid call works
    with pytest.raises(TypeError) as info:
        getattr(la, func)(*valid(), bad)
    assert arg in str(info.value), str(info.value)


# lengths=None means a plain tensor and large_offsets=None the width the tensor was read
# with, so from_lengths and to_arrow are only given a wrong type.
_NONE_IS_VALID = ("from_lengths.lengths", "to_arrow.large_offsets")
_METHOD_CASES = [(m, bad) for m in _METHOD_CALLS for bad in (None, _Opaque())
                 if not (bad is None and m in _NONE_IS_VALID)]


@pytest.mark.parametrize("method, bad", _METHOD_CASES,
                         ids=[f"{m}-{'None' if b is None else 'opaque'}" for m, b in _METHOD_CASES])
def test_methods_name_a_bad_argument(method, bad):
    arg = method.rsplit(".", 1)[1]
    with pytest.raises(TypeError) as info:
        _METHOD_CALLS[method](_t(), bad)
    message = str(info.value)
    assert arg in message, message
