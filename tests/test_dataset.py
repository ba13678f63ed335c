"""``map_parquet``: sources, output layout, row-for-row results, atomic output, errors, progress.

The udfs here are plain callables over ``pyarrow.RecordBatch`` (``map_parquet`` takes any);
lodarrow's own udfs over a dataset are in ``test_engines.py``.  Expected results are computed
on each whole input file with pyarrow alone.
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from conftest import run_python
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la
from lodarrow._tables._dataset import MapSummary, resolve_source


def make_table(n, seed, prefix="r"):
    """``id`` strings, a ``tokens`` list column with empty and null rows, a plain ``w``."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 6, n)
    tokens = [list(map(int, rng.integers(0, 100, k))) if i % 11 != 5 else None
              for i, k in enumerate(lengths)]
    return pa.table({"id": [f"{prefix}{i}" for i in range(n)],
                     "tokens": pa.array(tokens, pa.list_(pa.int32())),
                     "w": rng.random(n)})


def lengths_udf(batch):
    """A row-aligned udf: the list lengths (null for a null row) and a scaled ``w``."""
    batch = batch.append_column("n", pc.list_value_length(batch["tokens"]))
    return batch.set_column(batch.schema.get_field_index("w"), "w",
                            pc.multiply(batch["w"], 2.0))


def expected(table):
    return lengths_udf(pa.RecordBatch.from_struct_array(
        table.combine_chunks().to_struct_array().combine_chunks()))


def write(path, table, row_group_size=50):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)


@pytest.fixture
def hive(tmp_path):
    """A hive-partitioned dataset of 4 files plus the files readers skip."""
    src = tmp_path / "src"
    tables = {}
    for k, (year, part) in enumerate([(2023, 0), (2023, 1), (2024, 0), (2024, 1)]):
        rel = f"year={year}/part-{part}.parquet"
        tables[rel] = make_table(120 + 17 * k, seed=k, prefix=f"{year}-{part}-")
        write(str(src / rel), tables[rel])
    (src / "_SUCCESS").write_text("")
    (src / "year=2023" / ".part-0.parquet.crc").write_text("junk")
    return src, tables


@pytest.fixture(params=["pyarrow", "polars"])
def engine(request):
    """Both Parquet writers map_parquet can use (polars' where installed)."""
    if request.param == "polars":
        pytest.importorskip("polars")
    return request.param


def output_files(root):
    """Every file under ``root``: the data files and nothing else (the lengths are in each
    file's footer)."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            out[os.path.relpath(os.path.join(d, n), root)] = os.path.join(d, n)
    return out


def test_directory_keeps_hive_layout_and_matches_whole_files(hive, tmp_path, engine):
    src, tables = hive
    dest = tmp_path / "out"
    summary = la.map_parquet(src, dest, lengths_udf, batch_rows=32, engine=engine)
    assert isinstance(summary, MapSummary)
    files = output_files(dest)
    assert sorted(files) == sorted(tables)  # _SUCCESS and the .crc file are skipped
    for rel, table in tables.items():
        got = pq.read_table(files[rel])
        assert got.equals(pa.Table.from_batches([expected(table)])), rel
        # one row group per batch of 32 rows
        assert pq.ParquetFile(files[rel]).metadata.num_row_groups == -(-table.num_rows // 32)
    n = sum(t.num_rows for t in tables.values())
    assert (summary.files, summary.rows, summary.rows_out) == (4, n, n)
    assert summary.bytes_in == sum(os.path.getsize(src / rel) for rel in tables)
    assert summary.bytes_out == sum(os.path.getsize(p) for p in files.values())
    assert summary.seconds > 0 and summary.rows_per_second > 0
    assert summary.dest == str(dest) and "4 files" in str(summary)
    # readers see the partitions again
    ds = pads.dataset(dest, partitioning="hive")
    assert ds.to_table().num_rows == n and "year" in ds.schema.names
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]  # no staging left behind


@settings(max_examples=25)
@given(batch_rows=st.integers(1, 200), threads=st.sampled_from([1, 2, 3]),
       engine=st.sampled_from(["auto", "pyarrow"]))
def test_any_batch_size_and_thread_count_gives_the_same_files(tmp_path_factory, batch_rows,
                                                              threads, engine):
    root = tmp_path_factory.mktemp("bs")
    tables = {f"f{k}.parquet": make_table(37 * k, seed=10 + k) for k in range(3)}
    for rel, t in tables.items():
        write(str(root / "src" / rel), t, row_group_size=13)
    la.map_parquet(root / "src", root / "out", lengths_udf, batch_rows=batch_rows,
                   threads=threads, engine=engine)
    for rel, t in tables.items():
        got = pq.read_table(root / "out" / rel)
        assert got.equals(pa.Table.from_batches([expected(t)], schema=got.schema)), rel


def test_file_glob_and_list_sources(hive, tmp_path):
    src, tables = hive
    one = "year=2024/part-1.parquet"
    la.map_parquet(src / one, tmp_path / "a", lengths_udf)
    assert list(output_files(tmp_path / "a")) == ["part-1.parquet"]
    la.map_parquet(str(src / "*" / "part-0.parquet"), tmp_path / "b", lengths_udf)
    assert sorted(output_files(tmp_path / "b")) == ["year=2023/part-0.parquet",
                                                    "year=2024/part-0.parquet"]
    la.map_parquet(str(src / "**" / "*.parquet"), tmp_path / "c", lengths_udf)
    assert sorted(output_files(tmp_path / "c")) == sorted(tables)
    la.map_parquet([src / "year=2023/part-1.parquet", str(src / one)], tmp_path / "d",
                   lengths_udf)
    assert sorted(output_files(tmp_path / "d")) == ["year=2023/part-1.parquet", one]
    got = pq.read_table(tmp_path / "d" / one)
    assert got.equals(pa.Table.from_batches([expected(tables[one])]))


def test_resolve_source_kinds_and_order(hive):
    src, tables = hive
    kind, base, files = resolve_source(src)
    assert (kind, base) == ("directory", str(src))
    assert [rel for _, rel in files] == sorted(tables)
    kind, base, files = resolve_source([src / "year=2024/part-0.parquet",
                                        src / "year=2023/part-0.parquet"])
    assert kind == "list" and base == str(src)
    assert [rel for _, rel in files] == ["year=2024/part-0.parquet", "year=2023/part-0.parquet"]
    kind, base, _ = resolve_source(str(src / "year=*" / "*.parquet"))
    assert (kind, base) == ("glob", str(src))


def test_empty_file_gives_an_empty_file_with_the_output_schema(tmp_path, engine):
    write(str(tmp_path / "src" / "e.parquet"), make_table(0, 0))
    la.map_parquet(tmp_path / "src", tmp_path / "out", lengths_udf, engine=engine)
    got = pq.read_table(tmp_path / "out" / "e.parquet")
    assert got.num_rows == 0 and got.schema.names == ["id", "tokens", "w", "n"]

    class WithSchema:
        """A udf that states its output schema (as lodarrow's do): used before any data."""

        calls = 0

        def __call__(self, batch):
            WithSchema.calls += 1
            return lengths_udf(batch)

        def output_schema(self, schema):
            return schema.append(pa.field("n", pa.int32()))

    la.map_parquet(tmp_path / "src", tmp_path / "out2", WithSchema(), engine=engine)
    got = pq.read_table(tmp_path / "out2" / "e.parquet")
    assert WithSchema.calls == 0 and got.schema.field("n").type == pa.int32()


def test_table_results_are_written_too(tmp_path, engine):
    t = make_table(100, 3)
    write(str(tmp_path / "src" / "t.parquet"), t)
    la.map_parquet(tmp_path / "src", tmp_path / "out",
                   lambda b: pa.Table.from_batches([lengths_udf(b)]), batch_rows=30,
                   engine=engine)
    assert pq.read_table(tmp_path / "out" / "t.parquet").equals(
        pa.Table.from_batches([expected(t)]))


def failing_udf(bad_id):
    def udf(batch):
        if bad_id in batch["id"].to_pylist():
            raise ValueError("tokens: a null value at level 0")
        return lengths_udf(batch)
    return udf


def assert_no_output(tmp_path, dest="out"):
    names = os.listdir(tmp_path)
    assert dest not in names
    assert not [n for n in names if "lodarrow-tmp" in n], names


def test_udf_error_names_file_row_group_and_row_and_leaves_nothing(hive, tmp_path, engine):
    src, _ = hive
    # file year=2024/part-0 has rows "2024-0-0" ...; row 77 is in row group 1 (50 rows each)
    with pytest.raises(ValueError) as info:
        la.map_parquet(src, tmp_path / "out", failing_udf("2024-0-77"), batch_rows=40,
                       engine=engine)
    message = str(info.value)
    assert "year=2024/part-0.parquet" in message
    assert "row group 1, row 77:" in message
    assert "tokens: a null value at level 0" in message
    assert isinstance(info.value.__cause__, ValueError)
    assert_no_output(tmp_path)
    # the files finished before the error were renamed in the staging directory, which is gone
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_other_exception_types_keep_their_identity_and_gain_a_note(hive, tmp_path):
    src, _ = hive

    class Boom(Exception):
        def __init__(self, code, text):
            super().__init__(code, text)

    def udf(batch):
        if "2023-1-9" in batch["id"].to_pylist():
            raise Boom(7, "custom")
        return batch

    with pytest.raises(Boom) as info:
        la.map_parquet(src, tmp_path / "out", udf, batch_rows=64)
    assert info.value.args == (7, "custom")
    if sys.version_info >= (3, 11):
        assert info.value.__notes__ == [
            f"map_parquet: {str(src / 'year=2023/part-1.parquet')!r}, row group 0, row 9: "
            f"the udf failed"]
    assert_no_output(tmp_path)


def test_error_not_about_a_row_names_the_batch(hive, tmp_path):
    src, _ = hive

    def needs_column(batch):
        return batch.append_column("z", batch["missing"])

    with pytest.raises(KeyError, match=r"part-0.parquet\\?', row group 0, rows 0-39"):
        la.map_parquet(src, tmp_path / "out", needs_column, batch_rows=40)
    assert_no_output(tmp_path)


def test_failed_run_keeps_the_previous_dataset(hive, tmp_path):
    src, _ = hive
    la.map_parquet(src, tmp_path / "out", lengths_udf)
    before = {rel: Path(p).read_bytes() for rel, p in output_files(tmp_path / "out").items()}
    with pytest.raises(ValueError, match="row 3"):
        la.map_parquet(src, tmp_path / "out", failing_udf("2023-1-3"), overwrite=True)
    after = {rel: Path(p).read_bytes() for rel, p in output_files(tmp_path / "out").items()}
    assert after == before
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]
    la.map_parquet(src, tmp_path / "out", lambda b: b, overwrite=True)
    assert "n" not in pq.read_schema(tmp_path / "out" / "year=2023/part-0.parquet").names


@pytest.mark.parametrize("threads", [1, 2])
def test_keyboard_interrupt_leaves_nothing(hive, tmp_path, threads, engine):
    src, _ = hive
    calls = []

    def interrupted(batch):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return batch

    with pytest.raises(KeyboardInterrupt):
        la.map_parquet(src, tmp_path / "out", interrupted, batch_rows=20, threads=threads,
                       engine=engine)
    assert_no_output(tmp_path)


def test_killed_process_leaves_no_dataset(tmp_path):
    """SIGKILL mid-run: no ``dest``, only the hidden staging directory, which readers skip."""
    for k in range(3):
        write(str(tmp_path / "src" / f"f{k}.parquet"), make_table(200, k))
    script = textwrap.dedent(f"""
        import sys, time, lodarrow as la
        def slow(batch):
            print("batch", flush=True)
            time.sleep(0.05)
            return batch
        la.map_parquet({str(tmp_path / 'src')!r}, {str(tmp_path / 'out')!r}, slow,
                       batch_rows=10)
    """)
    import lodarrow

    env = dict(os.environ, PYTHONPATH=str(Path(lodarrow.__file__).parent.parent))
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                          env=env, cwd=tmp_path) as proc:
        watchdog = threading.Timer(300, proc.kill)  # a stuck child: readline gets EOF, fails
        watchdog.start()
        try:
            for _ in range(25):  # past the first file (20 batches): one file renamed in staging
                assert proc.stdout.readline() == "batch\n"
        finally:
            watchdog.cancel()
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
    names = os.listdir(tmp_path)
    assert "out" not in names
    staging = [n for n in names if n.startswith(".out.lodarrow-tmp-")]
    assert len(staging) == 1
    left = os.listdir(tmp_path / staging[0])
    assert "f0.parquet" in left and "f2.parquet" not in left
    # a reader of the parent directory skips the hidden staging directory
    assert pads.dataset(tmp_path, format="parquet", exclude_invalid_files=False).files == [
        str(tmp_path / "src" / f"f{k}.parquet") for k in range(3)]


def test_dest_rules(hive, tmp_path):
    src, _ = hive
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        la.map_parquet(src, tmp_path / "full", lengths_udf)
    (tmp_path / "empty").mkdir()
    la.map_parquet(src, tmp_path / "empty", lengths_udf)
    assert len(output_files(tmp_path / "empty")) == 4
    with pytest.raises(ValueError, match="inside the source directory"):
        la.map_parquet(src, src / "out", lengths_udf)
    with pytest.raises(ValueError, match="is inside dest"):
        la.map_parquet(src / "year=2023/part-0.parquet", tmp_path, lengths_udf,
                       overwrite=True)
    la.map_parquet(src / "year=2023/part-0.parquet", src / "year=2023" / "mapped", lengths_udf)
    assert (src / "year=2023" / "mapped" / "part-0.parquet").is_file()


def test_argument_errors(hive, tmp_path):
    src, _ = hive
    out = tmp_path / "out"
    with pytest.raises(TypeError, match="udf must be callable"):
        la.map_parquet(src, out, "sequence_pool")
    with pytest.raises(ValueError, match="batch_rows must be >= 1"):
        la.map_parquet(src, out, lengths_udf, batch_rows=0)
    with pytest.raises(TypeError, match="batch_rows must be an integer"):
        la.map_parquet(src, out, lengths_udf, batch_rows=1.5)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        la.map_parquet(src, out, lengths_udf, threads=0)
    with pytest.raises(TypeError, match="progress must be"):
        la.map_parquet(src, out, lengths_udf, progress="yes")
    with pytest.raises(TypeError, match="source must be a path"):
        la.map_parquet(3, out, lengths_udf)
    with pytest.raises(TypeError, match=r"source\[1\] must be a path"):
        la.map_parquet([src / "year=2023/part-0.parquet", None], out, lengths_udf)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        la.map_parquet(tmp_path / "nope", out, lengths_udf)
    with pytest.raises(FileNotFoundError, match="matches no files"):
        la.map_parquet(str(tmp_path / "*.nope"), out, lengths_udf)
    with pytest.raises(ValueError, match="empty list"):
        la.map_parquet([], out, lengths_udf)
    with pytest.raises(ValueError, match="listed twice"):
        la.map_parquet([src / "year=2023/part-0.parquet"] * 2, out, lengths_udf)
    (tmp_path / "nothing").mkdir()
    (tmp_path / "nothing" / "_SUCCESS").write_text("")
    with pytest.raises(ValueError, match="holds no data files"):
        la.map_parquet(tmp_path / "nothing", out, lengths_udf)
    with pytest.raises(TypeError, match="dest must be a path"):
        la.map_parquet(src, None, lengths_udf)
    with pytest.raises(TypeError, match="bad write option"):
        la.map_parquet(src, out, lengths_udf, no_such_option=1)
    with pytest.raises(ValueError, match=r"map_parquet: engine must be one of 'auto', "
                                         r"'pyarrow', 'polars', got 'duckdb'"):
        la.map_parquet(src, out, lengths_udf, engine="duckdb")
    with pytest.raises(TypeError, match=r"row_group_size is not a write option here: each "
                                        r"batch is one row group, so give batch_rows="):
        la.map_parquet(src, out, lengths_udf, row_group_size=10)
    assert_no_output(tmp_path)


def test_write_options_choose_the_writer(hive, tmp_path):
    """Options polars takes go to polars; a pyarrow-only option or type keeps pyarrow's
    writer; engine="polars" says why it cannot; the files read back the same."""
    pytest.importorskip("polars")
    src, tables = hive
    rel = "year=2023/part-1.parquet"

    def writer(dest):
        return pq.ParquetFile(tmp_path / dest / rel).metadata.created_by

    la.map_parquet(src, tmp_path / "zstd", lengths_udf, compression="zstd")
    assert writer("zstd").startswith("Polars")
    column = pq.ParquetFile(tmp_path / "zstd" / rel).metadata.row_group(0).column(1)
    assert column.compression == "ZSTD"
    la.map_parquet(src, tmp_path / "dict", lengths_udf, use_dictionary=False)
    assert writer("dict").startswith("parquet-cpp-arrow")
    with pytest.raises(ValueError, match=r"map_parquet: engine='polars' cannot write this "
                                         r"table: pyarrow's option use_dictionary= has no "
                                         r"polars equivalent"):
        la.map_parquet(src, tmp_path / "no", lengths_udf, use_dictionary=False, engine="polars")

    def as_dictionary(batch):
        return batch.set_column(0, "id", batch["id"].dictionary_encode())

    la.map_parquet(src, tmp_path / "dictionary", as_dictionary)
    assert writer("dictionary").startswith("parquet-cpp-arrow")
    for dest in ("zstd", "dict"):
        got = pq.read_table(tmp_path / dest / rel)
        assert got.equals(pa.Table.from_batches([expected(tables[rel])])), dest


def test_bad_udf_results_and_bad_files(hive, tmp_path):
    src, _ = hive
    with pytest.raises(TypeError, match=r"returned dict; it must return a pyarrow"):
        la.map_parquet(src, tmp_path / "out", lambda b: b.to_pydict())
    flip = iter(range(10**6))

    def unstable(batch):  # a different schema from the second batch on
        return batch if next(flip) == 0 else batch.drop_columns(["w"])

    with pytest.raises(ValueError, match=r"row group 1, row 50: the udf returned a batch whose "
                                         r"schema differs"):
        la.map_parquet(src, tmp_path / "out", unstable, batch_rows=50)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "a.parquet").write_bytes(b"PAR1 but not really")
    with pytest.raises(pa.ArrowInvalid, match=r"cannot read '.*a.parquet' as Parquet"):
        la.map_parquet(tmp_path / "junk", tmp_path / "out", lengths_udf)
    assert_no_output(tmp_path)


def test_progress_bar(hive, tmp_path, capsys):
    src, tables = hive
    la.map_parquet(src, tmp_path / "a", lengths_udf)  # stderr is not a terminal: off
    assert capsys.readouterr().err == ""
    la.map_parquet(src, tmp_path / "b", lengths_udf, progress=True)
    err = capsys.readouterr().err
    n = sum(t.num_rows for t in tables.values())
    last = err.rstrip("\n").split("\r")[-1]
    assert last.startswith("map_parquet [####################] 4/4 files")
    assert f"{n:,} rows" in last and "MB/s" in last and err.endswith("\n")
    la.map_parquet(src, tmp_path / "c", lengths_udf, progress=False)
    assert capsys.readouterr().err == ""


def test_progress_bar_on_a_terminal_by_default(hive, tmp_path):
    """``progress=None`` shows the bar when stderr is a terminal (a pseudo-terminal here)."""
    pty = pytest.importorskip("pty")
    src, _ = hive
    code = (f"import lodarrow as la; la.map_parquet({str(src)!r}, {str(tmp_path / 'o')!r}, "
            f"lambda b: b)")
    import lodarrow

    env = dict(os.environ, PYTHONPATH=str(Path(lodarrow.__file__).parent.parent))
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-c", code], stderr=secondary,
                              stdout=subprocess.PIPE, env=env, cwd=tmp_path, timeout=120)
        os.close(secondary)
        secondary = None
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # EIO once the child's side is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if secondary is not None:
            os.close(secondary)
        os.close(primary)
    assert proc.returncode == 0
    assert b"map_parquet [####################] 4/4 files" in b"".join(chunks)


def test_summary_rates():
    s = MapSummary(dest="d", files=2, rows=10, rows_out=10, bytes_in=2_000_000,
                   bytes_out=1_000_000, seconds=2.0)
    assert s.rows_per_second == 5 and s.bytes_per_second == 1e6
    assert str(s) == "2 files, 10 rows, 2.0 MB -> 1.0 MB in 2.00 s (1.0 MB/s) -> d"
    assert str(MapSummary("d", 1, 3, 3, 0, 0, 1.0)).startswith("1 file, 3 rows, ")
    assert MapSummary("d", 0, 0, 0, 0, 0, 0.0).rows_per_second == float("inf")


def test_map_parquet_is_public():
    assert la.map_parquet.__module__ == "lodarrow._tables._dataset"
    assert "map_parquet" in la.__all__
    assert run_python(["-c", "import lodarrow, sys; lodarrow.map_parquet; "
                             "assert 'pyarrow.parquet' not in sys.modules"]).returncode == 0


# ====================================================================== lodarrow map
def test_parse_op_values():
    from lodarrow._cli import parse_op

    name, args = parse_op(["sequence_pool", "input=@emb", "pool_type=average", "pad_value=-1.5",
                           "out=doc_vec"])
    assert name == "sequence_pool"
    assert args == {"input": la.col("emb"), "pool_type": "average", "pad_value": -1.5,
                    "out": "doc_vec"}
    _, args = parse_op(["sequence_concat", "input=[@a, @b]", "out=c"])
    assert args["input"] == [la.col("a"), la.col("b")]
    _, args = parse_op(["sequence_pad", "x=@t", "maxlen=None", "pad_value=0", "out=p,l",
                        "flag=True", "tokens=[0, 2]", "shape=(3, 4)", "s='@literal'"])
    assert args == {"x": la.col("t"), "maxlen": None, "pad_value": 0, "out": ("p", "l"),
                    "flag": True, "tokens": [0, 2], "shape": (3, 4), "s": "@literal"}
    _, args = parse_op(["sequence_pool", "out=('a', 'b')", "pair=(@x, 1)"])
    assert args == {"out": ("a", "b"), "pair": (la.col("x"), 1)}


@pytest.mark.parametrize("tokens, message", [
    (["x=@a"], "must start with an operator name"),
    (["sequence_pool", "input"], "'input' is not ARG=VALUE"),
    (["sequence_pool", "1x=2"], "is not ARG=VALUE"),
    (["sequence_pool", "a=1", "a=2"], "a is given twice"),
    (["sequence_pool", "a=@"], "'@' needs a column name"),
    (["sequence_pool", "a=1 +"], "cannot parse '1 +'"),
    (["sequence_pool", "a=[@x, 1"], "unbalanced"),
])
def test_parse_op_errors(tokens, message):
    from lodarrow._cli import _UsageError, parse_op

    with pytest.raises(_UsageError, match=re.escape(message)):
        parse_op(tokens)


def test_parse_op_column_options():
    from lodarrow._cli import parse_op

    _, args = parse_op(["sequence_pool", "input=@emb:lod_level=1:feature_shape=16",
                        "x=@t:lod_level=0", "y=@m:lod_level=2:feature_shape=2,3",
                        "z=[@a:lod_level=1:feature_shape=2,3, @b, @c:lod_level=1]",
                        "w=(@d:lod_level=1:feature_shape=4, 1)"])
    assert args == {"input": la.col("emb", lod_level=1, feature_shape=(16,)),
                    "x": la.col("t", lod_level=0),
                    "y": la.col("m", lod_level=2, feature_shape=(2, 3)),
                    "z": [la.col("a", lod_level=1, feature_shape=(2, 3)), la.col("b"),
                          la.col("c", lod_level=1)],
                    "w": (la.col("d", lod_level=1, feature_shape=(4,)), 1)}


@pytest.mark.parametrize("value, message", [
    ("@e:lod=1", ("--op sequence_pool: input: 'lod=1' in '@e:lod=1' is not lod_level=K or "
                  "feature_shape=D[,D...]")),
    ("@e:lod_level", "'lod_level' in '@e:lod_level' is not lod_level=K"),
    ("@e:lod_level=x", "lod_level=x in '@e:lod_level=x' must be an integer"),
    ("@e:lod_level=1:feature_shape=2,a",
     "feature_shape=2,a in '@e:lod_level=1:feature_shape=2,a' must be integers"),
    ("@e:lod_level=1:lod_level=2", "lod_level is given twice in"),
    ("@e:lod_level=-1", "'@e:lod_level=-1': lod_level must be >= 0"),
    ("@:lod_level=1", "'@' needs a column name"),
])
def test_parse_op_column_option_errors(value, message):
    from lodarrow._cli import _UsageError, parse_op

    with pytest.raises(_UsageError, match=re.escape(message)):
        parse_op(["sequence_pool", f"input={value}"])


@pytest.mark.parametrize("api, cli", [
    ("to read the column 'emb' write la.col('emb')", "to read the column 'emb' write @emb"),
    ('write la.col("my col")', "write @my col"),
    ("with col('emb', lod_level=1, feature_shape=(16,)); an explicit",
     "with @emb:lod_level=1:feature_shape=16; an explicit"),
    ("col('m', lod_level=2, feature_shape=(2, 3))", "@m:lod_level=2:feature_shape=2,3"),
    ("col('x', lod_level=0) folds", "@x:lod_level=0 folds"),
    ("give col(..., feature_shape=(...)) so", "give @name:lod_level=K:feature_shape=D[,D...] so"),
    ("give offset=la.col(list column) whose", "give offset=@column whose"),
    (("map_parquet: dest '/d' exists and is not an empty directory; pass overwrite=True to "
      "replace it"),
     "dest '/d' exists and is not an empty directory; pass --overwrite to replace it"),
    ("map_parquet: batch_rows must be >= 1", "--batch-rows must be >= 1"),
    (("map_parquet: '/a.parquet': the udf's output_schema refuses the file's schema: "
      "output_schema: no column 'x'"),
     "'/a.parquet': the operators do not fit the file's columns: no column 'x'"),
    ("udf: sequence_pad without maxlen", "sequence_pad without maxlen"),
    ("map_parquet: '/a.parquet', row group 0, row 3: the udf failed: column 'x': no",
     "'/a.parquet', row group 0, row 3: the operators failed: column 'x': no"),
])
def test_messages_in_the_command_line_words(api, cli):
    from lodarrow._cli import _cli_words

    assert _cli_words(api) == cli


def test_map_help_shows_the_column_options():
    proc = run_python(["-m", "lodarrow", "map", "--help"], env={"COLUMNS": "100"})
    assert proc.returncode == 0
    assert "ARG=@name:lod_level=K:feature_shape=D[,D]" in proc.stdout
    assert "input=@emb:lod_level=1:feature_shape=16" in proc.stdout  # the example


def run_map(*args):
    return run_python(["-m", "lodarrow", "map", *map(str, args)], timeout=300)


def test_map_cli_column_options_match_col(tmp_path):
    """A FixedSizeList feature dimension turned into lists (Spark, DuckDB, pandas) read
    back with @emb:lod_level=1:feature_shape=2, as col(..., lod_level=1, feature_shape=(2,))."""
    src = tmp_path / "src"
    emb = [[[1.0, 2.0], [3.0, 4.0]], [], [[5.0, 6.0]]]
    write(str(src / "a.parquet"), pa.table({"emb": pa.array(emb, pa.list_(pa.list_(
        pa.float32())))}))
    proc = run_map(src, tmp_path / "cli", "--op", "sequence_pool",
                   "input=@emb:lod_level=1:feature_shape=2", "pool_type=sum", "out=s")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # an explicit lod_level: no warning
    f = la.udf(la.sequence_pool, input=la.col("emb", lod_level=1, feature_shape=(2,)),
               pool_type="sum", out="s")
    la.map_parquet(src, tmp_path / "api", f)
    got = pq.read_table(tmp_path / "cli" / "a.parquet")
    assert got.equals(pq.read_table(tmp_path / "api" / "a.parquet"))
    assert got.column("s").to_pylist() == [[4.0, 6.0], [0.0, 0.0], [5.0, 6.0]]
    # without the options: the warning, in the command line's words
    proc = run_map(src, tmp_path / "warned", "--op", "sequence_pool", "input=@emb",
                   "pool_type=sum", "out=s")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("lodarrow: warning: ")
    assert "@emb:lod_level=1:feature_shape=2" in proc.stderr and "col(" not in proc.stderr
    assert proc.stderr.count("\n") == 1  # once, not once per batch or a traceback line


def test_map_cli_bare_column_name_suggests_the_at_spelling(corpus, tmp_path):
    proc = run_map(corpus, tmp_path / "out", "--op", "sequence_pool", "input=x",
                   "pool_type=sum", "out=s")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("lodarrow: map: --op sequence_pool: ")
    assert "write @x" in proc.stderr and "la.col" not in proc.stderr


@pytest.fixture
def corpus(tmp_path):
    """Two files: ``id``, ``x: list<double>`` (a null row), ``tok: list<int64>``."""
    src = tmp_path / "corpus"
    for k in range(2):
        rows = 30 + k
        x = [[float(i), float(i) / 2][: i % 3] if i != 4 else None for i in range(rows)]
        tok = [list(range(i % 5)) for i in range(rows)]
        write(str(src / f"p{k}.parquet"), pa.table({
            "id": [f"{k}-{i}" for i in range(rows)], "x": pa.array(x, pa.list_(pa.float64())),
            "tok": pa.array(tok, pa.list_(pa.int64()))}), row_group_size=8)
    return src


def test_map_cli_matches_map_parquet_with_the_same_pipeline(corpus, tmp_path):
    proc = run_map(corpus, tmp_path / "cli", "--batch-rows", "5",
                   "--op", "sequence_pool", "input=@x", "pool_type=sum", "out=s",
                   "--op", "sequence_pad", "x=@tok", "pad_value=-1", "maxlen=4",
                   "out=tp,tl",
                   "--op", "sequence_concat", "input=[@x, @x]", "out=xx")
    assert proc.returncode == 0, proc.stderr
    assert "2 files, 61 rows" in proc.stdout and str(tmp_path / "cli") in proc.stdout
    assert proc.stderr == ""  # not a terminal: no progress bar
    f = la.pipeline(
        la.udf(la.sequence_pool, input=la.col("x"), pool_type="sum", out="s"),
        la.udf(la.sequence_pad, x=la.col("tok"), pad_value=-1, maxlen=4, out=("tp", "tl")),
        la.udf(la.sequence_concat, input=[la.col("x"), la.col("x")], out="xx"))
    la.map_parquet(corpus, tmp_path / "api", f)
    for k in range(2):
        got = pq.read_table(tmp_path / "cli" / f"p{k}.parquet")
        assert got.equals(pq.read_table(tmp_path / "api" / f"p{k}.parquet"))
        assert got.schema.names == ["id", "x", "tok", "s", "tp", "tl", "xx"]
    assert got.column("s").to_pylist()[3:6] == [0.0, None, 7.5]  # row 4 of x is null


def test_map_cli_failure_on_the_data_exits_1_naming_the_row(corpus, tmp_path):
    write(str(corpus / "p1.parquet"), pa.table({
        "id": ["a", "b", "c"], "x": pa.array([[1.0], [2.0, None], []], pa.list_(pa.float64())),
        "tok": pa.array([[1], [2], [3]], pa.list_(pa.int64()))}), row_group_size=2)
    proc = run_map(corpus, tmp_path / "out", "--op", "sequence_pool", "input=@x",
                   "pool_type=max", "out=m")
    assert proc.returncode == 1
    assert "map failed" in proc.stderr and "p1.parquet', row group 0, row 1" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, message", [
    (["--op", "no_such_op", "x=@x", "out=y"], "no_such_op"),
    (["--op", "sequence_pool", "input=@x", "pool_type=sum"], "give out=NAME"),
    (["--op", "sequence_pool", "input=@x", "pool_type=sum", "out=y", "bad"],
     "'bad' is not ARG=VALUE"),
    (["--op", "sequence_pad", "x=@x", "out=p,l"], "maxlen"),
    (["--op", "sequence_reverse", "x=@x", "out=r", "--batch-rows", "0"], "--batch-rows"),
    (["--op", "sequence_reverse", "x=@x", "out=r", "--threads", "0"], "--threads"),
    (["--op", "sequence_reverse", "x=@x", "out=r", "--compression", "foo"],
     "--compression foo: not a Parquet compression"),
    (["--op", "sequence_reverse", "x=@x:lod=1", "out=r"], "is not lod_level=K"),
    (["--op", "sequence_pad", "x=@x", "out=p,l"], "--op sequence_pad: sequence_pad without "
                                                  "maxlen"),
])
def test_map_cli_usage_errors_exit_2(corpus, tmp_path, args, message):
    proc = run_map(corpus, tmp_path / "out", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.startswith("lodarrow: map")
    assert not (tmp_path / "out").exists()


def test_map_cli_missing_source_and_existing_dest_exit_2(corpus, tmp_path):
    proc = run_map(tmp_path / "nope", tmp_path / "out", "--op", "sequence_reverse", "x=@x",
                   "out=r")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"lodarrow: map: SOURCE {str(tmp_path / 'nope')!r} does not "
                                  f"exist"), proc.stderr
    proc = run_map(corpus, corpus / "out", "--op", "sequence_reverse", "x=@x", "out=r")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"lodarrow: map: dest {str(corpus / 'out')!r} is inside the "
                                  f"source directory"), proc.stderr
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("")
    proc = run_map(corpus, tmp_path / "out", "--op", "sequence_reverse", "x=@x", "out=r")
    assert proc.returncode == 2 and "pass --overwrite to replace it" in proc.stderr
    assert "overwrite=True" not in proc.stderr  # the command line's words
    proc = run_map(corpus, tmp_path / "out", "--overwrite", "--compression", "zstd",
                   "--no-progress", "--op", "sequence_reverse", "x=@x", "out=r")
    assert proc.returncode == 0, proc.stderr
    assert sorted(output_files(tmp_path / "out")) == ["p0.parquet", "p1.parquet"]
    meta = pq.ParquetFile(tmp_path / "out" / "p0.parquet").metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    for engine, writer in (("pyarrow", "parquet-cpp-arrow"), ("polars", "Polars")):
        proc = run_map(corpus, tmp_path / engine, "--engine", engine, "--no-progress",
                       "--op", "sequence_reverse", "x=@x", "out=r")
        assert proc.returncode == 0, proc.stderr
        meta = pq.ParquetFile(tmp_path / engine / "p0.parquet").metadata
        assert meta.created_by.startswith(writer)
    assert pq.read_table(tmp_path / "pyarrow").equals(pq.read_table(tmp_path / "polars"))
    proc = run_map(corpus, tmp_path / "x", "--engine", "duckdb", "--op", "sequence_reverse",
                   "x=@x", "out=r")
    assert proc.returncode == 2 and "--engine: invalid choice: 'duckdb'" in proc.stderr


# ====================================================================== the dataset benchmark
def test_dataset_benchmark_runs_agree_and_report(tmp_path):
    """The benchmark's generator and runs on a tiny dataset (speed is never asserted)."""
    from lodarrow._bench import _datasets

    src = tmp_path / "data"
    files = _datasets.generate(str(src), 0.0005)
    assert files == _datasets.generate(str(src), 0.0005)  # reused, not regenerated
    table = pq.read_table(files[0])
    assert table.schema.names == ["doc_id", "title", "tokens", "emb"]
    assert table.column("emb").type == pa.list_(pa.list_(pa.float32(), 16))
    assert table.column("tokens").null_count == table.column("emb").null_count
    rows = []
    for name in ("pyarrow copy", "hand loop + udf", "map_parquet + udf"):
        r = _datasets.run_one(name, str(src), str(tmp_path / name), 100)
        assert r["rows_out"] == sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        rows.append(dict(r, size="small", files=len(files), bytes_in=1, rows_in=1))
    base = os.path.basename(files[0])
    assert pq.read_table(tmp_path / "pyarrow copy" / base).equals(table)
    want = pq.read_table(tmp_path / "hand loop + udf" / base)
    assert pq.read_table(tmp_path / "map_parquet + udf" / base).equals(want)
    assert want.schema.names[-3:] == ["doc_vec", "max_token", "last_emb"]
    _datasets._add_ratios(rows)
    report = {"rows": rows, "machine": {"cpu": "x", "cores": 2, "versions": {
        "python": "3", "pyarrow": "26"}, "load_average": (1.0,), "load_average_end": (2.0,)},
        "batch_rows": 100, "wall_s": 1.0, "data_dir": str(src)}
    text = _datasets.to_markdown(report, "python -m lodarrow bench --datasets")
    assert "| small | map_parquet + udf |" in text and "x the hand loop's throughput" in text


def test_dataset_section_replaces_itself_and_survives_the_operator_report(tmp_path):
    from lodarrow._bench import _datasets, _report

    path = tmp_path / "performance.md"
    path.write_text("# Performance\n\n## Results\n\n| rows |\n")
    _datasets.write_section(path, "## Datasets: old\n\nold figures\n")
    _datasets.write_section(path, "## Datasets: new\n\nnew figures\n")
    text = path.read_text()
    assert text == "# Performance\n\n## Results\n\n| rows |\n\n## Datasets: new\n\nnew figures\n"
    assert _report._kept_sections(path) == ["## Datasets: new\n\nnew figures\n"]
    assert _report._kept_sections(tmp_path / "absent.md") == []


def test_operator_report_keeps_every_section_it_does_not_write(tmp_path, monkeypatch):
    """A new run rewrites the machine and results sections, and keeps the others in order."""
    from lodarrow._bench import _report

    path = tmp_path / "performance.md"
    path.write_text("# Performance\n\n## Machine and run\n\n- old\n\n## Results\n\n| old |\n\n"
                    "## Parquet writes\n\nprose\n\n## Datasets: x\n\nfigures\n")
    new = "# Performance\n\n## Machine and run\n\n- new\n\n## Results\n\n| new |\n"
    monkeypatch.setattr(_report, "to_markdown", lambda report, plot=None: new)
    _report.write_markdown({}, path)
    text = path.read_text()
    assert text.startswith(new) and "| old |" not in text and "- old" not in text
    assert text.index("## Results") < text.index("## Parquet writes\n\nprose\n") \
        < text.index("## Datasets: x\n\nfigures\n")


def test_a_write_error_is_raised_with_its_location(tmp_path, monkeypatch):
    """An error of the writer reaches the caller, named by file and row group, and leaves no
    output."""
    import pyarrow.parquet as pq

    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"x": pa.array([[1.0], [2.0, 3.0]] * 50)}), src, row_group_size=10)
    real = pq.ParquetWriter.write
    calls = []

    def flaky(self, table, *args, **kwargs):
        calls.append(len(table))
        if len(calls) == 3:
            raise OSError("disk full")
        return real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write", flaky)
    with pytest.raises(OSError, match=r"in.parquet', row group 2, row 20: cannot write the "
                                      r"output: disk full"):
        la.map_parquet(str(src), str(tmp_path / "out"), lambda b: b, batch_rows=10,
                       engine="pyarrow")
    assert not (tmp_path / "out").exists()


def test_a_polars_write_error_is_raised_with_its_file(tmp_path, monkeypatch):
    """polars encodes in its own threads, so its error names the file; no output is left."""
    pl = pytest.importorskip("polars")
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"x": pa.array([[1.0], [2.0, 3.0]] * 50)}), src, row_group_size=10)
    real = pl.from_arrow
    calls = []

    def flaky(data, *args, **kwargs):
        calls.append(len(data))
        if len(calls) == 3:
            raise OSError("disk full")
        return real(data, *args, **kwargs)

    monkeypatch.setattr(pl, "from_arrow", flaky)
    with pytest.raises(OSError, match=r"in.parquet': cannot write the output: disk full"):
        la.map_parquet(str(src), str(tmp_path / "out"), lambda b: b, batch_rows=10,
                       engine="polars")
    assert calls and not (tmp_path / "out").exists()
    assert os.listdir(tmp_path) == ["in.parquet"]
