"""``lodarrow info``: the LoD structure of the list columns of Parquet / Arrow IPC files."""

import json

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from strategies import lod_tensors

import lodarrow as la
from lodarrow._info import info


def reference_levels(items, n_levels):
    """Per-level statistics of nested Python lists, computed with plain loops."""
    stats = [{"lengths": [], "nulls": 0} for _ in range(n_levels)]
    rows = 0

    def walk(seq, k):
        nonlocal rows
        if k == n_levels:
            rows += 1
            return
        if seq is None:
            stats[k]["nulls"] += 1
            return
        stats[k]["lengths"].append(len(seq))
        for child in seq:
            walk(child, k + 1)

    for item in items:
        walk(item, 0)
    out = []
    for k, s in enumerate(stats):
        lens = s["lengths"]
        out.append({"level": k, "sequences": len(lens) + s["nulls"],
                    "min": min(lens) if lens else None,
                    "mean": sum(lens) / len(lens) if lens else None,
                    "max": max(lens) if lens else None,
                    "empty": sum(1 for n in lens if n == 0), "nulls": s["nulls"]})
    return out, rows


def column(report, name):
    return next(c for c in report["columns"] if c["name"] == name)


def check_column(col, items, n_levels, dtype, feature_shape):
    levels, rows = reference_levels(items, n_levels)
    assert col["list_column"] is True
    assert col["lod_level"] == n_levels
    assert col["dtype"] == dtype and col["supported"] is True
    assert col["feature_shape"] == list(feature_shape)
    assert col["rows"] == rows
    assert len(col["levels"]) == n_levels
    for got, want in zip(col["levels"], levels):
        assert got.keys() == want.keys()
        for key in want:
            if key == "mean" and want[key] is not None:
                assert got[key] == pytest.approx(want[key])
            else:
                assert got[key] == want[key], key


def test_file_written_by_pyarrow(tmp_path):
    x = [[[1.0, 2.0], []], [], None, [[3.0]]]
    y = [[[1, 2], [3, 4]], [], [[5, 6]], [[7, 8]]]
    table = pa.table({
        "x": pa.array(x, pa.list_(pa.large_list(pa.float32()))),
        "y": pa.array(y, pa.large_list(pa.list_(pa.int16(), 2))),
        "label": pa.array([0, 1, 0, 1], pa.int8()),
        "name": pa.array(["a", "b", "c", "d"]),
    })
    path = tmp_path / "pyarrow.parquet"
    pq.write_table(table, path, row_group_size=3)
    report = json.loads(info(path, as_json=True))
    assert report["format"] == "parquet" and report["num_rows"] == 4
    assert report["num_row_groups"] == 2
    check_column(column(report, "x"), x, 2, "float32", ())
    check_column(column(report, "y"), y, 1, "int16", (2,))
    assert column(report, "label") == {"name": "label", "arrow_type": "int8",
                                       "list_column": False}
    assert column(report, "name")["list_column"] is False
    text = info(path)
    assert "column 'x': list<element: large_list<element: float>>" in text
    assert "LoD levels: 2   dtype: float32   feature shape: ()   rows: 3" in text
    assert "LoD levels: 1   dtype: int16   feature shape: (2,)   rows: 4" in text
    assert "column 'label': int8\n  not a list column" in text
    # level 0 of x: 4 sequences (one null), lengths 2, 0, 1
    assert "      0          4    0  1.00    2      1      1" in text


def test_file_written_by_polars(tmp_path):
    v = [[[1, 2], [3]], [], None, [[], [4, 5, 6]]]
    w = [[1.5, None], [], [2.5], []]
    df = pl.DataFrame({"v": v, "w": w, "s": ["a", "b", "c", "d"]},
                      schema={"v": pl.List(pl.List(pl.Int64)), "w": pl.List(pl.Float64),
                              "s": pl.String})
    path = tmp_path / "polars.parquet"
    df.write_parquet(path)
    report = json.loads(info(str(path), as_json=True))
    assert report["num_rows"] == 4
    check_column(column(report, "v"), v, 2, "int64", ())
    check_column(column(report, "w"), w, 1, "float64", ())
    assert column(report, "w")["null_values"] == 1
    assert column(report, "s")["list_column"] is False
    assert "1 null values (from_arrow raises on these)" in info(path)


@settings(max_examples=20)
@given(t=lod_tensors(min_levels=1))
def test_lodarrow_files_match_the_tensor(t):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/t.parquet"
        la.write_parquet(t, path, row_group_size=2)
        report = json.loads(info(path, as_json=True))
    col = column(report, "data")
    check_column(col, t.to_list(), t.lod_level, str(t.dtype), t.feature_shape)
    assert col["rows"] == t.data.shape[0]
    assert [lv["sequences"] for lv in col["levels"]] == [len(o) - 1 for o in t.lod()]


def test_arrow_ipc_file_and_stream(tmp_path):
    t = la.LoDTensor(np.arange(14, dtype=np.float16).reshape(7, 2), lod=[[0, 2, 3],
                                                                       [0, 2, 4, 7]])
    table = la.to_table({"t": t, "k": la.LoDTensor(np.array([1, 2]))})
    file_path, stream_path = tmp_path / "t.arrow", tmp_path / "t.arrows"
    with pa.ipc.new_file(file_path, table.schema) as writer:
        writer.write_table(table)
        writer.write_table(table)
    with pa.ipc.new_stream(stream_path, table.schema) as writer:
        writer.write_table(table)
    report = json.loads(info(file_path, as_json=True))
    assert report["format"] == "arrow-ipc-file" and report["num_batches"] == 2
    assert report["num_rows"] == 4
    check_column(column(report, "t"), t.to_list() * 2, 2, "float16", (2,))
    report = json.loads(info(stream_path, as_json=True))
    assert report["format"] == "arrow-ipc-stream" and report["num_rows"] == 2
    check_column(column(report, "t"), t.to_list(), 2, "float16", (2,))
    assert "arrow-ipc-stream, 2 rows" in info(stream_path)


def test_unsupported_values_and_fixed_size_only(tmp_path):
    table = pa.table({"s": pa.array([["a", "b"], []]),
                      "f": pa.array([[1, 2], [3, 4]], pa.list_(pa.int32(), 2))})
    path = tmp_path / "odd.parquet"
    pq.write_table(table, path)
    report = json.loads(info(path, as_json=True))
    s = column(report, "s")
    assert s["list_column"] and s["supported"] is False and s["dtype"] == "string"
    assert s["levels"][0]["sequences"] == 2 and s["levels"][0]["max"] == 2
    f = column(report, "f")
    assert f["lod_level"] == 0 and f["feature_shape"] == [2] and f["rows"] == 2
    assert "dtype: string (not a LoDTensor dtype)" in info(path)


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no such file"):
        info(tmp_path / "missing.parquet")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a table at all")
    with pytest.raises(ValueError, match=r"neither a Parquet nor an Arrow IPC file"):
        info(junk)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 truncated")
    with pytest.raises(ValueError, match=r"not a valid Parquet file"):
        info(broken)


def test_dataset_directory_totals_over_files(tmp_path):
    x = [[[1.0, 2.0], []], [], None, [[3.0]], [[4.0, 5.0, 6.0]], []]
    parts = {"k=a/p0.parquet": x[:2], "k=a/p1.parquet": x[2:3], "k=b/p0.parquet": x[3:]}
    for rel, items in parts.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        pq.write_table(pa.table({"x": pa.array(items, pa.list_(pa.list_(pa.float32()))),
                                 "s": ["z"] * len(items)}), tmp_path / rel, row_group_size=2)
    (tmp_path / "_SUCCESS").write_text("")
    report = json.loads(info(tmp_path, as_json=True))
    assert report["format"] == "parquet-dataset"
    assert report["num_rows"] == 6 and report["num_files"] == 3
    assert report["num_row_groups"] == 1 + 1 + 2
    assert [f["path"] for f in report["files"]] == sorted(parts)
    assert [f["num_rows"] for f in report["files"]] == [2, 1, 3]
    assert all(f["bytes"] == (tmp_path / f["path"]).stat().st_size for f in report["files"])
    check_column(column(report, "x"), x, 2, "float32", ())
    assert column(report, "s")["list_column"] is False
    assert info(tmp_path).startswith(f"{tmp_path}: parquet-dataset, 6 rows, 3 files, "
                                     f"4 row groups")


def test_dataset_directory_errors(tmp_path):
    with pytest.raises(ValueError, match=r"holds no data files"):
        info(tmp_path)
    pq.write_table(pa.table({"x": pa.array([[1]], pa.list_(pa.int64()))}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"x": pa.array([[[1]]], pa.list_(pa.list_(pa.int64())))}),
                   tmp_path / "b.parquet")
    with pytest.raises(ValueError, match=r"column 'x' is list<element: list.*b.parquet"):
        info(tmp_path)
    (tmp_path / "b.parquet").unlink()
    with pa.ipc.new_file(tmp_path / "c.arrow", pa.schema([("x", pa.int8())])):
        pass
    # not named *.parquet and without Parquet's magic bytes: not data (docs/tables.md)
    assert [f["path"] for f in json.loads(info(tmp_path, as_json=True))["files"]] == \
        ["a.parquet"]
