"""``read_parquet`` / ``iter_parquet`` over every source ``map_parquet`` accepts: a file, a
dataset directory with hive partitions, a glob, a list of files (docs/tables.md, Files)."""

import re
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la


def make_table(n, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 5, n)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64) + 1000 * seed),
        "tokens": pa.array([list(map(int, rng.integers(0, 50, k))) for k in lengths],
                           pa.list_(pa.int32())),
        "emb": pa.array([rng.random((k, 3)).astype(np.float32).tolist() for k in lengths],
                        pa.list_(pa.list_(pa.float32(), 3))),
    })


PARTS = [(2023, "a"), (2023, "b"), (2024, "a")]


@pytest.fixture
def hive(tmp_path):
    """``src/year=Y/lang=L/part-0.parquet`` (3 files, 2 row groups each) + files readers skip."""
    src = tmp_path / "src"
    tables = []
    for k, (year, lang) in enumerate(PARTS):
        folder = src / f"year={year}" / f"lang={lang}"
        folder.mkdir(parents=True)
        t = make_table(7 + 3 * k, seed=k)
        pq.write_table(t, folder / "part-0.parquet", row_group_size=5)
        tables.append(t)
    (src / "_SUCCESS").write_text("")
    (src / "year=2023" / ".part-0.parquet.crc").write_text("junk")
    return src, tables


def reverse_udf():
    return la.pipeline(la.udf(la.sequence_reverse, x=la.col("tokens"), out="rev"),
                       la.udf(la.sequence_pool, input=la.col("emb"), pool_type="sum",
                              out="emb_sum"))


def expected_reverse(tables):
    whole = pa.concat_tables(tables)
    return whole.column("tokens").to_pylist(), [r[::-1] for r in whole.column("tokens")
                                                .to_pylist()]


def test_map_parquet_output_reads_back_with_read_parquet_and_iter_parquet(hive, tmp_path):
    src, tables = hive
    dest = tmp_path / "out"
    la.map_parquet(src, dest, reverse_udf())
    tokens, rev = expected_reverse(tables)
    got = la.read_parquet(dest, ["tokens", "rev", "emb_sum", "year"])
    assert got["tokens"].to_list() == tokens and got["rev"].to_list() == rev
    assert got["emb_sum"].data.shape == (len(tokens), 3)
    years = [y for (y, _), t in zip(PARTS, tables) for _ in range(t.num_rows)]
    assert got["year"].data.tolist() == years and got["year"].lod_level == 0
    # the same rows, batch by batch (batches do not cross files)
    batches = list(la.iter_parquet(dest, ["rev", "year"], batch_size=4))
    assert [r for b in batches for r in b["rev"].to_list()] == rev
    assert [y for b in batches for y in b["year"].data.tolist()] == years
    assert max(len(b["rev"]) for b in batches) == 4


def test_directory_partition_keys_come_back_as_pyarrow_reads_them(hive):
    src, _ = hive
    want = pq.read_table(src)
    assert want.schema.names == ["id", "tokens", "emb", "year", "lang"]
    with pytest.warns(UserWarning, match=r"skipped 1 column.*'lang' \(dictionary<values="
                                         r"string"):
        got = la.read_parquet(src)
    assert list(got) == ["id", "tokens", "emb", "year"]
    for name in ("id", "tokens", "emb", "year"):
        assert got[name].equals(la.from_arrow(want.column(name))), name
    assert got["emb"].feature_shape == (3,)
    with pytest.raises(TypeError, match="column 'lang'.*string"):
        la.read_parquet(src, "lang")
    with pytest.raises(TypeError, match="column 'lang'.*string"):
        la.iter_parquet(src, ["lang"]).__next__()


def test_glob_and_list_sources(hive):
    src, tables = hive
    files = [src / f"year={y}" / f"lang={g}" / "part-0.parquet" for y, g in PARTS]
    tokens, _ = expected_reverse(tables)
    got = la.read_parquet(str(src / "year=*" / "lang=*" / "*.parquet"), "tokens")
    assert got.to_list() == tokens
    got = la.read_parquet([str(f) for f in files], ["tokens", "year", "lang"][:2])
    assert got["tokens"].to_list() == tokens
    assert got["year"].data.tolist()[0] == 2023
    # a list keeps its order; keys below the files' common directory only
    got = la.read_parquet([files[2], files[0]], "tokens")
    assert got.to_list() == tables[2].column("tokens").to_pylist() + \
        tables[0].column("tokens").to_pylist()
    with pytest.warns(UserWarning, match="'lang'"):
        got = la.read_parquet(src / "year=2023")
    assert list(got) == ["id", "tokens", "emb"]  # lang: below the directory, skipped
    assert la.read_parquet([files[0], files[1]], "id").data.tolist() == \
        tables[0].column("id").to_pylist() + tables[1].column("id").to_pylist()
    batches = list(la.iter_parquet(str(src / "**" / "*.parquet"), "tokens", batch_size=100))
    assert [r for b in batches for r in b.to_list()] == tokens


def test_a_single_file_has_no_partition_columns(hive):
    src, tables = hive
    path = src / "year=2024" / "lang=a" / "part-0.parquet"
    got = la.read_parquet(path)
    assert list(got) == ["id", "tokens", "emb"]
    assert got["tokens"].to_list() == tables[2].column("tokens").to_pylist()


def test_files_differing_in_schema_name_the_file(hive):
    src, _ = hive
    odd = src / "year=2024" / "lang=b"
    odd.mkdir()
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()),
                             "tokens": pa.array([[1.5]], pa.list_(pa.float64()))}),
                   odd / "part-0.parquet")
    for fn in (la.read_parquet, la.iter_parquet):
        with pytest.raises(ValueError, match="schema of " + re.escape(repr(str(
                odd / "part-0.parquet"))) + r" differs from that of the first file, .*year=2023/"
                r"lang=a/part-0\.parquet'.*column 'tokens' is list<element: double> where "
                r"the first file has list<element: int32>"):
            fn(src, "tokens")


def test_missing_sources_are_file_not_found():
    for fn in (la.read_parquet, la.iter_parquet):
        name = fn.__name__
        with pytest.raises(FileNotFoundError, match=f"{name}: path '/no/such/dir' does not "
                                                    f"exist"):
            fn("/no/such/dir")
        with pytest.raises(FileNotFoundError, match=f"{name}: the glob '/no/such/\\*.parquet' "
                                                    f"matches no files"):
            fn("/no/such/*.parquet")
        with pytest.raises(FileNotFoundError, match=re.escape(f"{name}: path[1] '/no/x' is not "
                                                              f"a file")):
            fn([__file__, "/no/x"])
        with pytest.raises(ValueError, match=f"{name}: path is an empty list"):
            fn([])


def test_empty_directory_and_non_parquet_file(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="read_parquet: the directory .* holds no data files"):
        la.read_parquet(tmp_path / "empty")
    bad = tmp_path / "d"
    bad.mkdir()
    pq.write_table(pa.table({"x": [[1]]}), bad / "a.parquet")
    (bad / "notes.txt").write_text("not parquet")
    (bad / "README.md").write_text("# a corpus")
    (bad / "dataset_info.json").write_text("{}")
    (bad / "_SUCCESS").write_text("")
    (bad / ".a.parquet.crc").write_bytes(b"crc")
    # Hadoop's extension-less part file: data by its magic bytes
    pq.write_table(pa.table({"x": [[2, 3]]}), bad / "part-00000")
    assert la.read_parquet(bad).recursive_sequence_lengths() == [[1, 2]]
    for name, data, why in (("b.parquet", b"", "0 bytes, too short"),
                            ("b.parquet", b"PAR1" + b"x" * 40, "magic bytes"),
                            ("b.parquet", (bad / "a.parquet").read_bytes()[:-30], "magic"),
                            ("b.parquet", (bad / "a.parquet").read_bytes()[:-8] + b"\xff\xff"
                             b"\x00\x00PAR1", "does not fit")):
        (bad / name).write_bytes(data)
        for fn in (la.read_parquet, la.iter_parquet, la.sequence_lengths):
            with pytest.raises(pa.ArrowInvalid, match=re.escape(str(bad / name)) + ".*" + why):
                fn(bad)
    (bad / "b.parquet").unlink()


def test_file_like_objects_still_read(tmp_path):
    t = la.LoDTensor(np.arange(5), lengths=[[2, 3]])
    sink = pa.BufferOutputStream()
    la.write_parquet(t, sink)
    buf = sink.getvalue()
    assert la.read_parquet(pa.BufferReader(buf)).equals(t)
    assert [b.lod() for b in la.iter_parquet(pa.BufferReader(buf), batch_size=1)] == \
        [[[0, 2]], [[0, 3]]]


def test_lodarrow_types_are_restored_in_every_file(tmp_path):
    """write_parquet without the Arrow schema: each file's lodarrow metadata restores it."""
    t = la.LoDTensor(np.arange(12, dtype=np.float16).reshape(6, 2), lengths=[[2, 4]])
    for k in range(2):
        la.write_parquet({"x": t}, tmp_path / f"p{k}.parquet", store_schema=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = la.read_parquet(tmp_path, "x")
    assert got.dtype == np.float16 and got.feature_shape == (2,)
    assert got.lod() == [[0, 2, 6, 8, 12]]


def test_a_uri_is_one_file_opened_by_pyarrow(tmp_path):
    t = la.LoDTensor(np.arange(5), lengths=[[2, 3]])
    la.write_parquet(t, tmp_path / "t.parquet")
    uri = (tmp_path / "t.parquet").as_uri()  # file:///...
    assert la.read_parquet(uri).equals(t)
    assert [b.lod() for b in la.iter_parquet(uri, batch_size=1)] == [[[0, 2]], [[0, 3]]]
