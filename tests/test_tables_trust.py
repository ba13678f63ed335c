"""The table layer's promises (docs/tables.md): null rows of any column flow through a
pipeline, mistakes surface when a udf is made, one udf means the same thing wherever it runs,
and errors name the table row.
"""

import pickle
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la

D = 16


def trial_table(n=40, seed=0):
    """The trial's documents: ids, a partition key, titles with nulls, ``tokens:
    list<list<int32>>`` with null and empty rows, ``emb: list<fixed_size_list<float32, 16>>``
    with null and empty rows."""
    rng = np.random.default_rng(seed)
    tokens, emb, titles = [], [], []
    for i in range(n):
        titles.append(None if i % 7 == 3 else f"doc {i}")
        if i % 5 == 2:
            tokens.append(None)
        elif i % 9 == 4:
            tokens.append([])
        else:
            tokens.append([rng.integers(0, 100, rng.integers(0, 6)).tolist()
                           for _ in range(rng.integers(1, 4))])
        if i % 6 == 1:
            emb.append(None)
        elif i % 11 == 5:
            emb.append([])
        else:
            emb.append(rng.standard_normal((rng.integers(1, 4), D)).astype(np.float32))
    emb_type = pa.list_(pa.list_(pa.float32(), D))
    emb_arr = pa.array([None if e is None else [list(map(float, r)) for r in e] for e in emb],
                       type=emb_type)
    return pa.table({
        "doc_id": pa.array(np.arange(n, dtype=np.int64)),
        "part": pa.array([f"p{i % 2}" for i in range(n)]),
        "title": pa.array(titles, pa.string()),
        "tokens": pa.array(tokens, pa.list_(pa.list_(pa.int32()))),
        "emb": emb_arr,
    })


def reference_pool_expand(table):
    """``dv``: each document's mean sentence vector repeated once per sentence (NumPy, from
    Python lists); None for a null ``emb`` row; pad value 0 for an empty one."""
    out = []
    for doc in table.column("emb").to_pylist():
        if doc is None:
            out.append(None)
            continue
        vec = np.mean(np.asarray(doc, dtype=np.float32), axis=0) if doc else \
            np.zeros(D, dtype=np.float32)
        out.append([vec.tolist()] * len(doc))
    return out


def trial_pipeline(emb):
    return la.pipeline(
        la.udf(la.sequence_pool, input=emb, pool_type="average", out="doc_vec"),
        la.udf(la.sequence_expand_as, x=la.col("doc_vec"), y=emb, out="dv"))


def dv_rows(table):
    """``dv`` as Python lists of float32-rounded values, by doc_id."""
    ids = table.column("doc_id").to_pylist()
    dv = table.column("dv").to_pylist()
    return {i: None if v is None else np.asarray(v, dtype=np.float32).tolist()
            for i, v in zip(ids, dv)}


# ---------------------------------------------------------------------------- nulls
def test_the_trial_pipeline_chains_over_null_rows():
    table = trial_table()
    out = trial_pipeline(la.col("emb"))(table)
    want = reference_pool_expand(table)
    got = out.column("dv").to_pylist()
    assert [g is None for g in got] == [w is None for w in want]
    for g, w in zip(got, want):
        if w is not None:
            np.testing.assert_allclose(np.asarray(g, dtype=np.float32).reshape(-1, D) if g
                                       else np.zeros((0, D)), np.asarray(w).reshape(-1, D),
                                       rtol=1e-6)
    # the pooled column carries the null rows the next step reads
    assert out.column("doc_vec").null_count == table.column("emb").null_count


def test_expand_over_null_rows_gives_null_rows_not_an_alignment_error():
    table = pa.table({"tokens": pa.array([None, [1, 2, 3], None, [4]], pa.list_(pa.int32())),
                      "one": pa.array([[[0]], [[0, 0]], [[0]], [[0]]])})
    out = la.apply(table, la.sequence_expand, x=la.col("tokens"), y=la.col("one"),
                   ref_level=0, out="e")
    assert out.column("e").to_pylist() == [None, [1, 2, 3], None, [4]]
    assert out.column("e").type == pa.list_(pa.int32())


@pytest.mark.parametrize("null_in", ["list", "plain", "fixed"])
def test_a_null_row_of_any_input_column_is_a_null_row_of_every_output(null_in):
    x = pa.array([[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]])
    off = pa.array([0, 5, 1], pa.int64())  # row 1 runs past its sequence unless it is null
    fx = pa.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], pa.list_(pa.float64(), 2))
    if null_in == "list":
        x = pa.array([[1.0, 2.0], None, [4.0, 5.0, 6.0]])
    elif null_in == "plain":
        off = pa.array([0, None, 1], pa.int64())
    else:
        fx = pa.array([[1.0, 1.0], None, [3.0, 3.0]], pa.list_(pa.float64(), 2))
    table = pa.table({"x": x, "off": off, "len": pa.array([2, 1, 2]), "fx": fx})
    if null_in != "fixed":
        out = la.apply(table, la.sequence_slice, input=la.col("x"), offset=la.col("off"),
                       length=la.col("len"), out="s")
        assert out.column("s").to_pylist() == [[1.0, 2.0], None, [5.0, 6.0]]
    out = la.apply(table, la.sequence_expand_as, x=la.col("fx"), y=la.col("x"), out="e")
    assert out.column("e").to_pylist()[0] == [[1.0, 1.0]] * 2
    assert out.column("e").to_pylist()[1] is None or null_in == "plain"
    assert out.column("e").to_pylist()[2] == [[3.0, 3.0]] * 3
    pooled = la.apply(table, la.sequence_pool, input=la.col("x"),
                      pool_type="sum", out="p")
    assert pooled.column("p").is_null().to_pylist() == [False, null_in == "list", False]


def test_offset_and_length_overflow_without_null_rows_names_the_table_row():
    table = pa.table({"x": pa.array([[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]]),
                      "off": pa.array([0, 1, 0], pa.int64()), "len": pa.array([1, 1, 1])})
    with pytest.raises(IndexError, match=r"apply: table row 1: sequence_slice: sequence 0 has "
                                         r"1 rows, but offset\[0\] \+ length\[0\] = 1 \+ 1"):
        la.apply(table, la.sequence_slice, input=la.col("x"), offset=la.col("off"),
                 length=la.col("len"), out="s")


def test_nulls_inside_rows_still_raise_with_the_row_and_level():
    table = pa.table({"x": pa.array([[1.0], None, [2.0, None]]), "n": pa.array([1, None, 2])})
    with pytest.raises(ValueError, match=r"column 'x' has a null value inside row 2 at level 1"):
        la.apply(table, la.sequence_expand_as, x=la.col("n"), y=la.col("x"), out="e")


# ---------------------------------------------------------------------------- contracts
def test_every_operator_declares_a_table_form_that_fits_its_signature():
    import inspect

    from lodarrow._ops import CONTRACTS

    assert set(CONTRACTS) == set(la._ops.__all__)
    for name, contract in CONTRACTS.items():
        params = inspect.signature(getattr(la, name)).parameters
        declared = set(contract.tensors) | set(contract.plain) | set(contract.udf_columns)
        declared |= {contract.width} if contract.width else set()
        assert declared <= set(params), (name, declared - set(params))
        assert set(contract.plain) <= set(contract.tensors), name


# ---------------------------------------------------------------------------- at udf()
def test_a_typo_in_an_argument_name_is_a_type_error_naming_the_closest():
    with pytest.raises(TypeError, match=r"udf: sequence_pool has no argument 'inputs'; did you "
                                        r"mean 'input'\?"):
        la.udf(la.sequence_pool, inputs=la.col("emb"), pool_type="sum", out="s")
    with pytest.raises(TypeError, match=r"apply: sequence_reverse has no argument 'y'"):
        la.apply(pa.table({"x": [[1.0]]}), la.sequence_reverse, x=la.col("x"), y=1, out="r")
    with pytest.raises(TypeError, match=r"udf: sequence_pool needs the argument\(s\) "
                                        r"'pool_type'"):
        la.udf(la.sequence_pool, input=la.col("emb"), out="s")


def test_literal_values_go_through_the_operator_checks_at_udf_creation():
    x = la.LoDTensor(np.arange(3.0), [[0, 3]])
    with pytest.raises(ValueError) as tensor_error:
        la.sequence_pool(x, "avg")
    with pytest.raises(ValueError) as udf_error:
        la.udf(la.sequence_pool, input=la.col("emb"), pool_type="avg", out="s")
    assert str(udf_error.value) == str(tensor_error.value)
    with pytest.raises(ValueError, match=r"sequence_enumerate: win_size must be >= 1"):
        la.udf(la.sequence_enumerate, input=la.col("t"), win_size=0, out="w")
    with pytest.raises(ValueError, match=r"sequence_pad: maxlen must be None, -1 or >= 0"):
        la.udf(la.sequence_pad, x=la.col("t"), pad_value=0, maxlen=-3, out=("p", "l"))
    with pytest.raises(TypeError, match=r"sequence_mask: dtype 'nope' is not a dtype"):
        la.udf(la.sequence_mask, x=la.col("n"), maxlen=3, dtype="nope", out="m")
    with pytest.raises(ValueError, match=r"sequence_reshape: new_dim must be >= 1"):
        la.udf(la.sequence_reshape, input=la.col("t"), new_dim=0, out="r")
    with pytest.raises(ValueError, match=r"returns 2 results here, so out needs 2"):
        la.udf(la.sequence_pool, input=la.col("e"), pool_type="max", return_index=True,
               out="s")


def test_a_bare_column_name_suggests_col():
    with pytest.raises(TypeError, match=r"udf: sequence_pool's input takes a tensor or a "
                                        r"column, got the string 'emb'; to read the column "
                                        r"'emb' write la.col\('emb'\)"):
        la.udf(la.sequence_pool, input="emb", pool_type="sum", out="s")
    with pytest.raises(TypeError, match=r"la.col\('b'\)"):
        la.udf(la.sequence_concat, input=[la.col("a"), "b"], out="c")


def test_a_udf_that_passes_its_checks_still_pickles_and_runs():
    f = la.udf(la.sequence_pool, input=la.col("emb"), pool_type="SUM", out="s")
    g = pickle.loads(pickle.dumps(f))
    out = g(pa.table({"emb": pa.array([[1.0, 2.0], None, [3.0]])}))
    assert out.column("s").to_pylist() == [3.0, None, 3.0]


@pytest.mark.parametrize("column, kind", [
    (pa.array(["a", None, "c"]), "a string column"),
    (pa.array([{"a": 1}, None, {"a": 2}]), "a struct column"),
])
def test_a_col_naming_a_string_or_struct_column_says_so_before_its_nulls(column, kind):
    table = pa.table({"title": column, "x": pa.array([[1.0], [2.0], [3.0]])})
    with pytest.raises(TypeError, match=rf"apply: column 'title' is {kind}"):
        la.apply(table, la.sequence_expand_as, x=la.col("title"), y=la.col("x"), out="e")


# ---------------------------------------------------------------------------- one meaning
def test_a_regular_innermost_level_read_without_lod_level_warns_once():
    lost = trial_table().column("emb").cast(pa.list_(pa.list_(pa.float32())))
    table = pa.table({"emb": lost})
    with pytest.warns(la.RegularLevelWarning) as seen:
        la.apply(table, la.sequence_pool, input=la.col("emb"), pool_type="sum", out="s")
    assert len(seen) == 1
    message = str(seen[0].message)
    assert "'emb'" in message and "16 entries" in message
    assert "col('emb', lod_level=1, feature_shape=(16,))" in message
    assert issubclass(la.RegularLevelWarning, UserWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        la.apply(table, la.sequence_pool, input=la.col("emb", lod_level=1), pool_type="sum",
                 out="s")
        # the Arrow file's own type (FixedSizeList) and ragged lists do not warn
        la.apply(trial_table(), la.sequence_pool, input=la.col("emb"), pool_type="sum",
                 out="s")
        la.apply(pa.table({"t": [[1, 2], [3, 4, 5]]}), la.sequence_reverse, x=la.col("t"),
                 out="r")
        la.apply(pa.table({"t": [[1, 2]]}), la.sequence_reverse, x=la.col("t"), out="r")
        la.apply(pa.table({"t": [[1], [2]]}), la.sequence_reverse, x=la.col("t"), out="r")


def test_one_level_regular_lists_suggest_a_plain_column():
    table = pa.table({"v": pa.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
                      "y": pa.array([[1], [2, 3]])})
    with pytest.warns(la.RegularLevelWarning, match=r"col\('v', lod_level=0, "
                                                    r"feature_shape=\(3,\)\)"):
        la.apply(table, la.sequence_reverse, x=la.col("v"), out="r")


# ---------------------------------------------------------------------------- one udf, every way
@pytest.fixture(scope="module")
def trial_dataset(tmp_path_factory):
    """The trial table as a hive-partitioned dataset (part=p0 / part=p1)."""
    root = tmp_path_factory.mktemp("trial") / "docs"
    table = trial_table()
    pq.write_to_dataset(table, str(root), partition_cols=["part"])
    return root, table


def test_the_trial_pipeline_gives_the_same_rows_on_arrow_pandas_and_map_parquet(
        trial_dataset, tmp_path):
    import pandas as pd

    root, table = trial_dataset
    want = dv_rows(trial_pipeline(la.col("emb"))(table))
    # the same meaning on the Arrow table with an explicit lod_level
    f = trial_pipeline(la.col("emb", lod_level=1, feature_shape=(D,)))
    assert dv_rows(f(table)) == want
    # pd.read_parquet's default object columns: the fixed size is lost; lod_level restores it
    frame = pd.read_parquet(str(root))
    assert frame["emb"].dtype == object
    with pytest.warns(la.RegularLevelWarning, match=r"col\('emb', lod_level=1, "
                                                    r"feature_shape=\(16,\)\)"):
        la.apply(frame, la.sequence_pool, input=la.col("emb"), pool_type="average", out="v")
    got = f(frame)
    assert dv_rows(pa.table({"doc_id": pa.array(got["doc_id"].to_numpy()),
                             "dv": got["dv"].array.__arrow_array__()})) == want
    # pandas with the Arrow dtype backend keeps the fixed size: no lod_level needed
    frame = pd.read_parquet(str(root), dtype_backend="pyarrow")
    got = trial_pipeline(la.col("emb"))(frame)
    assert dv_rows(pa.table({"doc_id": got["doc_id"].array.__arrow_array__(),
                             "dv": got["dv"].array.__arrow_array__()})) == want
    # map_parquet over the hive dataset
    la.map_parquet(str(root), str(tmp_path / "out"), f)
    mapped = pq.read_table(str(tmp_path / "out"))
    assert dv_rows(mapped) == want
    # and read back by lodarrow itself (a dataset directory)
    assert la.read_parquet(str(tmp_path / "out"), "dv", nulls="empty").to_list() == \
        [v if v is not None else [] for v in mapped.column("dv").to_pylist()]


def test_the_trial_pipeline_gives_the_same_rows_through_the_command_line(trial_dataset,
                                                                        tmp_path):
    from conftest import run_python

    root, table = trial_dataset
    want = dv_rows(trial_pipeline(la.col("emb"))(table))
    emb = f"@emb:lod_level=1:feature_shape={D}"
    proc = run_python(["-m", "lodarrow", "map", str(root), str(tmp_path / "cli"), "--no-progress",
                       "--op", "sequence_pool", f"input={emb}", "pool_type=average",
                       "out=doc_vec",
                       "--op", "sequence_expand_as", "x=@doc_vec", f"y={emb}", "out=dv"],
                      timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert dv_rows(pq.read_table(str(tmp_path / "cli"))) == want


@pytest.mark.engines
def test_the_trial_pipeline_gives_the_same_rows_on_spark(trial_dataset, spark):
    root, table = trial_dataset
    want = dv_rows(trial_pipeline(la.col("emb"))(table))
    f = trial_pipeline(la.col("emb", lod_level=1, feature_shape=(D,)))
    df = spark.read.parquet(str(root))
    rows = la.spark_map(df, f).select("doc_id", "dv").toArrow()
    assert dv_rows(rows) == want


# ---------------------------------------------------------------------------- errors
def test_apply_and_map_parquet_errors_name_the_table_row(tmp_path):
    lengths = [1, 2, 1, 5, 1, 1]
    x = pa.array([[float(i)] * n for i, n in enumerate(lengths)])
    table = pa.table({"id": list(range(6)), "x": x})
    with pytest.raises(ValueError) as info:
        la.apply(table, la.sequence_pad, x=la.col("x"), pad_value=0.0, maxlen=3,
                 out=("p", "l"))
    message = str(info.value)
    assert message.startswith("apply: table row 3: sequence_pad: maxlen=3 is shorter")
    assert "sequence 0 has 5 rows" in message  # counted within the row, not the batch
    assert info.value.table_row == 3
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(table, str(src / "a.parquet"), row_group_size=2)
    f = la.udf(la.sequence_pad, x=la.col("x"), pad_value=0.0, maxlen=3, out=("p", "l"))
    with pytest.raises(ValueError) as info:
        la.map_parquet(str(src), str(tmp_path / "out"), f, batch_rows=6)
    message = str(info.value)
    assert "a.parquet', row group 1, row 3: the udf failed: sequence_pad: maxlen=3" in message
    assert "sequence 0 has 5 rows" in message and "table row" not in message
