"""The command line: ``lodarrow demo``, ``bench``, ``info PATH``, ``map SOURCE DEST`` and
``tokenize SOURCE DEST``.

Exit status: 0 on success, 1 when a check of ``demo`` fails or ``map`` fails on the data, 2 for
a usage error (``map``: an unknown operator or arguments it refuses; ``tokenize``: an option
it refuses, a source without the text column), a missing or unreadable
file, or a missing optional dependency.
"""

import argparse
import ast
import os
import re
import sys
import time
import warnings

__all__ = ["main", "build_parser"]

BENCH_EXTRA_HINT = "install the 'bench' extra (pip install -e '.[bench]' in the checkout)"


def build_parser():
    """The ``argparse`` parser of ``python -m lodarrow``."""
    parser = argparse.ArgumentParser(
        prog="lodarrow",
        description="LoD tensors on Arrow offsets: an end-to-end demo, the benchmark suite, "
                    "and the LoD structure of Parquet / Arrow IPC files.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="{demo,bench,info,map,tokenize}")

    demo = sub.add_parser("demo", help="run the end-to-end pipeline on a synthetic corpus",
                          description="Build LoDTensors from a synthetic corpus (documents -> "
                          "sentences -> tokens), round-trip them through Parquet, run the "
                          "operators, check every result and print a timing table.")
    demo.add_argument("--docs", type=int, default=None,
                      help="number of documents (default: about 300k tokens' worth)")
    demo.add_argument("--seed", type=int, default=None, help="corpus seed (default fixed)")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")

    bench = sub.add_parser("bench", help="benchmark the operators against NumPy, polars, "
                           "Awkward Array, pyarrow.compute and numba",
                           description="Time every operator and conversion against the peers "
                           "installed (each checked against lodarrow's result first). Needs "
                           "the 'bench' extra.")
    bench.add_argument("--quick", action="store_true", help="sizes divided by 10")
    bench.add_argument("--scale", type=float, default=1.0,
                       help="multiply the workload sizes by this (after --quick); e.g. "
                            "0.001 for a smoke test")
    bench.add_argument("--ops", default="", help="comma-separated operators to run: "
                       "names, prefixes or words of names ('pool,pad,arrow,parquet'); 'hub' "
                       "runs the conversions to torch, JAX, TensorFlow and Awkward "
                       "(docs/interop.md), which a plain run leaves out")
    bench.add_argument("--peers", default="", help="comma-separated peers to run "
                       "(numpy, polars, awkward, pyarrow, numba); lodarrow always runs")
    bench.add_argument("--repeat", type=int, default=None,
                       help="exact number of timed samples (default: adaptive, 3-30)")
    bench.add_argument("--budget", type=float, default=None,
                       help="seconds of timing per implementation (default 0.6, quick 0.25)")
    bench.add_argument("--probe-mib", type=int, default=1024,
                       help="size of the memory-bandwidth probe in MiB (default 1024)")
    bench.add_argument("--json", metavar="FILE", help="write the results as JSON")
    bench.add_argument("--markdown", metavar="FILE",
                       help="write the results as Markdown (a generated block of FILE; where "
                       "FILE is a checkout's docs/..., also benchmarks/README.md's list of the "
                       "rows where lodarrow is not ahead)")
    bench.add_argument("--plot", metavar="FILE.png", help="write a bar chart of GB/s")
    bench.add_argument("--readme", metavar="FILE",
                       help="write a short summary (per family of operators: the cases "
                       "lodarrow is ahead in, its median speed-up over the fastest peer) into "
                       "FILE's generated block, linking --markdown's file (README.md)")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.add_argument("--from-json", metavar="FILE",
                       help="run nothing: write --markdown (its generated blocks only), "
                       "--plot and --readme from the JSON of an earlier run (with --datasets: "
                       "that benchmark's JSON)")
    bench.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                       help="'cuda': the device rows instead: every operator on the GPU "
                       "(checked against the CPU result, then timed) beside the CPU, as GB/s "
                       "and as a fraction of the GPU's copy bandwidth measured in the same "
                       "run (needs CuPy and a GPU; --probe-mib sizes the copy)")
    bench.add_argument("--datasets", action="store_true",
                       help="instead of the operators: map_parquet against pyarrow alone, Ray "
                       "Data and Dask over a generated Parquet dataset (throughput, peak RSS "
                       "at two sizes)")
    bench.add_argument("--data-dir", default=None,
                       help="--datasets: where the dataset is generated once and reused "
                       "(default: lodarrow-bench-data in the temporary directory)")
    bench.add_argument("--size-gb", type=float, default=2.2,
                       help="--datasets: the dataset's size on disk (default 2.2; --quick 0.2)")
    bench.add_argument("--engines", default="ray,dask",
                       help="--datasets: engines to run beside map_parquet: ray, dask, spark "
                       "(default ray,dask)")
    bench.add_argument("--only", default=None,
                       help="--datasets: time only these runs (comma-separated names, e.g. "
                       "'map_parquet + udf,spark identity,spark'), at --only-size")
    bench.add_argument("--only-size", choices=("small", "large"), default="small",
                       help="--datasets --only: the size to run them at (default small)")

    info = sub.add_parser("info", help="show the LoD structure of a Parquet or Arrow IPC file, "
                          "or of a Parquet dataset directory",
                          description="Levels, sequence counts, length statistics, dtype and "
                          "feature shape of each list column (for a directory: totals over "
                          "its Parquet files).")
    info.add_argument("file", help="a Parquet or Arrow IPC file, or a directory of Parquet "
                      "files")
    info.add_argument("--json", action="store_true", help="print JSON")

    mapper = sub.add_parser(
        "map", help="run operators over a Parquet file or dataset into a new dataset",
        usage="lodarrow map SOURCE DEST --op NAME [ARG=VALUE ...] [--op NAME ...] [options]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Stream SOURCE through one operator per --op (several --op: a pipeline, "
        "applied in order) and write DEST as a Parquet dataset directory "
        "(lodarrow.map_parquet).",
        epilog="ARG=VALUE: ARG=@name is the column `name` (la.col); other values are Python "
        "literals (1, 0.5, None, True, 'text', [1, 2], (3, 4)); a bare word is a string "
        "(pool_type=average); lists may hold columns ([@a, @b]); out=a,b names several "
        "outputs.\n\n"
        "Column options (la.col's lod_level and feature_shape), after the name, each "
        "behind a colon:\n"
        "  ARG=@name:lod_level=K                      the outer K list levels are the LoD,\n"
        "                                             deeper (regular) ones feature "
        "dimensions\n"
        "  ARG=@name:lod_level=K:feature_shape=D[,D]  ... of these widths (what a column\n"
        "                                             written by Spark, DuckDB or pandas "
        "needs)\n"
        "In a list, a column's dimensions take no spaces: [@a:lod_level=1:feature_shape=2,3, "
        "@b].\n\n"
        "Example:\n\n"
        "  lodarrow map corpus/ out/ \\\n"
        "      --op sequence_pool input=@emb:lod_level=1:feature_shape=16 "
        "pool_type=average out=doc_vec \\\n"
        "      --op sequence_pad x=@tokens pad_value=0 maxlen=128 out=tok_pad,tok_len")
    mapper.add_argument("source", help="a Parquet file, a dataset directory or a glob pattern")
    mapper.add_argument("dest", help="the output dataset directory (must not exist, or be "
                        "empty, unless --overwrite)")
    mapper.add_argument("--op", nargs="+", action="append", required=True,
                        metavar="NAME",
                        help="an operator's name, then its ARG=VALUE arguments (repeat "
                        "--op for a pipeline)")
    mapper.add_argument("--batch-rows", type=int, default=None,
                        help="rows per record batch (default: about 32 MiB decoded)")
    mapper.add_argument("--threads", type=int, default=1, help="files processed at once")
    mapper.add_argument("--compression", default=None,
                        help="Parquet compression of the output (default: pyarrow's, snappy)")
    mapper.add_argument("--engine", choices=("auto", "pyarrow", "polars"), default="auto",
                        help="the Parquet writer: polars' (encodes in its own threads, "
                        "overlapped with reading) where installed and able, else pyarrow's "
                        "(default: auto)")
    mapper.add_argument("--overwrite", action="store_true",
                        help="replace DEST once the new dataset is complete")
    mapper.add_argument("--device", default=None, help="'cuda' to run the operators on the GPU")
    mapper.add_argument("--no-progress", action="store_true",
                        help="no progress bar (it shows only on a terminal anyway)")
    _tokenize_parser(sub)
    return parser


def _ids(text):
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not ids ID[,ID...]") from None


def _tokenize_parser(sub):
    tok = sub.add_parser(
        "tokenize", help="tokenize a text corpus into a Parquet dataset of token lists",
        usage="lodarrow tokenize SOURCE DEST --tokenizer tokenizer.json [options]",
        description="Tokenize the text column of SOURCE (Parquet, JSON lines, plain or "
        ".gz/.zst/.bz2, Arrow IPC / Hugging Face datasets files) into DEST, a Parquet "
        "dataset whose token column is list<uint16> (vocabularies of up to 65,536 ids) or "
        "list<int32>, with the lengths in each file's footer for lodarrow's loader "
        "(lodarrow.tokenize; docs/tokenize.md).")
    tok.add_argument("source", help="a file, a directory or a glob pattern")
    tok.add_argument("dest", help="the output dataset directory (must not exist, or be "
                     "empty, unless --overwrite)")
    tok.add_argument("--tokenizer", required=True,
                     help="a Hugging Face tokenizer.json (the tokenizers package)")
    tok.add_argument("--text", default="text",
                     help="the text column (default text); a,b: several, joined by "
                     "--separator")
    tok.add_argument("--out", default="tokens", help="the token column (default tokens)")
    tok.add_argument("--columns", default=None,
                     help="the other columns to keep, a,b (default: all but the text)")
    for name, what in (("bos", "before"), ("eos", "after")):
        tok.add_argument(f"--{name}", type=_ids, default=None, metavar="ID[,ID]",
                         help=f"ids {what} every document")
    tok.add_argument("--separator", type=_ids, default=None, metavar="ID[,ID]",
                     help="ids between the texts of several --text columns")
    tok.add_argument("--max-length", type=int, default=None,
                     help="the longest row, in ids (bos and eos counted)")
    tok.add_argument("--overflow", choices=("split", "truncate"), default="split",
                     help="a longer document: cut into rows of --max-length ids (default), "
                     "or truncated")
    tok.add_argument("--drop-empty", action="store_true",
                     help="drop documents whose text is empty or whitespace")
    tok.add_argument("--nulls", choices=("error", "drop"), default="error",
                     help="a null text: an error (default) or the row dropped")
    tok.add_argument("--vocab-size", type=int, default=None,
                     help="the vocabulary ids are checked against (default: the tokenizer's)")
    tok.add_argument("--dtype", choices=("uint16", "int32", "int64"), default=None,
                     help="the ids' type (default: the narrowest holding the vocabulary)")
    tok.add_argument("--no-special-tokens", action="store_true",
                     help="no special tokens of the tokenizer's post-processor")
    tok.add_argument("--batch-rows", type=int, default=None,
                     help="documents per batch and row group (default: about 4 MiB of text)")
    tok.add_argument("--processes", type=int, default=None,
                     help="worker processes over files (default: one process, the "
                     "tokenizer's own threads)")
    tok.add_argument("--compression", default=None,
                     help="Parquet compression of the output (default: pyarrow's, snappy)")
    tok.add_argument("--overwrite", action="store_true",
                     help="replace DEST once the new dataset is complete")
    tok.add_argument("--no-resume", action="store_true",
                     help="start afresh instead of skipping the files an interrupted run "
                     "of the same job finished")
    tok.add_argument("--no-progress", action="store_true",
                     help="no progress bar (it shows only on a terminal anyway)")


def main(argv=None):
    """Run the command line; return the exit status."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    if args.version:
        import lodarrow

        print(f"lodarrow {lodarrow.__version__}")
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    return {"demo": _demo, "bench": _bench, "info": _info, "map": _map,
            "tokenize": _tokenize}[args.command](args)


def _error(message):
    print(f"lodarrow: {message}", file=sys.stderr)
    return 2


def _split(text):
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _info(args):
    path = args.file
    if not os.path.exists(path):
        return _error(f"info: no such file or directory: {path}")
    from lodarrow._info import info

    try:
        text = info(path, as_json=args.json)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        return _error(f"info: cannot read {path}: {str(exc).removeprefix('info: ')}")
    print(text)
    return 0


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
_ARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class _UsageError(ValueError):
    pass


def parse_op(tokens):
    """``["sequence_pool", "input=@x", "pool_type=sum", "out=s"]`` -> ``(name, args)``.

    ``args`` holds ``col`` references for ``@name`` values, Python literals, bare words as
    strings, and ``out`` as a string or a tuple (``out=a,b``).
    """
    from lodarrow import col

    name, *pairs = tokens
    if "=" in name:
        raise _UsageError(f"--op must start with an operator name, got {name!r}")
    args = {}
    for pair in pairs:
        key, eq, text = pair.partition("=")
        if not eq or not _ARG.match(key):
            raise _UsageError(f"--op {name}: {pair!r} is not ARG=VALUE")
        if key in args:
            raise _UsageError(f"--op {name}: {key} is given twice")
        if key == "out" and "," in text and not text.lstrip().startswith(("(", "[", "'", '"')):
            args[key] = tuple(part.strip() for part in text.split(","))
        else:
            args[key] = _value(text, col, f"--op {name}: {key}")
    return name, args


def _value(text, col, where):
    text = text.strip()
    if text.startswith("@"):
        return _column(text, col, where)
    if text[:1] in "[(" and "@" in text:
        close = {"[": "]", "(": ")"}[text[0]]
        if not text.endswith(close):
            raise _UsageError(f"{where}: unbalanced {text[0]} in {text!r}")
        parts = []
        # "[@a:...:feature_shape=2,3, @b]": the dimensions (no space after their commas)
        # are one item with their column
        for part in _split_top(text[1:-1]):
            if parts and _SHAPE_TAIL.match(parts[-1]) and part.rstrip().isdigit():
                parts[-1] += "," + part
            else:
                parts.append(part)
        items = [_value(part, col, where) for part in parts if part.strip()]
        return items if close == "]" else tuple(items)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if _NAME.match(text):
            return text  # a bare word: pool_type=average
        raise _UsageError(f"{where}: cannot parse {text!r} (use @column, a Python literal "
                          f"or a bare word)") from None


#: A column whose last option is feature_shape, with digits so far (a list may go on).
_SHAPE_TAIL = re.compile(r"\s*@[^:]*(:[^:]*)*:feature_shape=[\d,\s]*\d\s*\Z")


def _column(text, col, where):
    """``@name``, ``@name:lod_level=K``, ``@name:lod_level=K:feature_shape=D[,D...]`` -> col."""
    name, *options = text[1:].split(":")
    if not name:
        raise _UsageError(f"{where}: '@' needs a column name")
    kwargs = {}
    for option in options:
        key, eq, value = (part.strip() for part in option.partition("="))
        if key not in ("lod_level", "feature_shape") or not eq:
            raise _UsageError(f"{where}: {option!r} in {text!r} is not lod_level=K or "
                              f"feature_shape=D[,D...]")
        if key in kwargs:
            raise _UsageError(f"{where}: {key} is given twice in {text!r}")
        try:
            if key == "lod_level":
                kwargs[key] = int(value)
            else:
                kwargs[key] = tuple(int(d) for d in value.split(","))
        except ValueError:
            raise _UsageError(f"{where}: {key}={value} in {text!r} must be "
                              f"{'an integer' if key == 'lod_level' else 'integers D[,D...]'}"
                              ) from None
    try:
        return col(name, **kwargs)
    except (TypeError, ValueError) as exc:
        raise _UsageError(f"{where}: {text!r}: {str(exc).removeprefix('col: ')}") from None


def _split_top(text):
    """Split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _map(args):
    # warnings (a regular list level read as a LoD level ...) in the command line's words
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _map_checked(args)


def _map_checked(args):
    import lodarrow as la

    if args.batch_rows is not None and args.batch_rows < 1:
        return _error("map: --batch-rows must be >= 1")
    if args.threads < 1:
        return _error("map: --threads must be >= 1")
    if args.compression is not None and not _known_codec(args.compression):
        return _error(f"map: --compression {args.compression}: not a Parquet compression "
                      f"(none, snappy, gzip, brotli, lz4, zstd)")
    udfs = []
    try:
        for tokens in args.op:
            name, kwargs = parse_op(tokens)
            out = kwargs.pop("out", None)
            if out is None:
                raise _UsageError(f"--op {name}: give out=NAME (the output column)")
            if args.device is not None:
                kwargs["device"] = args.device
            try:
                udfs.append(la.udf(name, out=out, **kwargs))
            except (TypeError, ValueError, KeyError) as exc:
                raise _UsageError(f"--op {name}: {_message(exc)}") from None
    except (_UsageError, TypeError, ValueError, KeyError) as exc:
        return _error(f"map: {_message(exc)}")
    f = udfs[0] if len(udfs) == 1 else la.pipeline(*udfs)
    # SOURCE and DEST as map_parquet checks them, before any data is read: usage errors
    from lodarrow._tables._dataset import _check_dest, resolve_source

    try:
        kind, base, files = resolve_source(args.source, "map", "SOURCE")
        _check_dest(args.dest, kind, base, files, args.overwrite)
    except (OSError, ValueError, TypeError) as exc:
        return _error(f"map: {_message(exc)}".replace("map: map: ", "map: "))
    options = {} if args.compression is None else {"compression": args.compression}
    try:
        summary = la.map_parquet(args.source, args.dest, f, batch_rows=args.batch_rows,
                                 threads=args.threads, overwrite=args.overwrite,
                                 progress=False if args.no_progress else None,
                                 engine=args.engine, **options)
    except (FileNotFoundError, FileExistsError) as exc:
        return _error(f"map: {_message(exc)}")
    except Exception as exc:  # a failure on the data: the message names file, row group, row
        print(f"lodarrow: map failed: {_message(exc)}", file=sys.stderr)
        return 1
    print(summary)
    return 0


def _tokenize(args):
    import lodarrow as la

    if args.batch_rows is not None and args.batch_rows < 1:
        return _error("tokenize: --batch-rows must be >= 1")
    if args.processes is not None and args.processes < 1:
        return _error("tokenize: --processes must be >= 1")
    if args.compression is not None and not _known_codec(args.compression):
        return _error(f"tokenize: --compression {args.compression}: not a Parquet "
                      f"compression (none, snappy, gzip, brotli, lz4, zstd)")
    # the tokenizer is loaded here, so a bad one is a usage error (2); la.tokenize then finds
    # it loaded (a tokenizer file is loaded once a process)
    from lodarrow._tables._tokenize import _load_tokenizer

    try:
        _load_tokenizer(args.tokenizer, "tokenize")
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        return _error(f"tokenize: --tokenizer {args.tokenizer}: {reason}")
    except (ImportError, ValueError) as exc:
        reason = str(exc).split(f"{args.tokenizer!r}: ", 1)[-1]
        if isinstance(exc, ValueError):
            reason = f"not a tokenizer.json ({reason})"
        return _error(f"tokenize: --tokenizer {args.tokenizer}: {reason}")
    options = {} if args.compression is None else {"compression": args.compression}
    text = list(_split(args.text))
    try:
        summary = la.tokenize(
            args.source, args.dest, args.tokenizer, text=text[0] if len(text) == 1 else text,
            out=args.out, columns=None if args.columns is None else list(_split(args.columns)),
            bos=args.bos, eos=args.eos, separator=args.separator,
            max_length=args.max_length, overflow=args.overflow, drop_empty=args.drop_empty,
            nulls=args.nulls, vocab_size=args.vocab_size, dtype=args.dtype,
            add_special_tokens=not args.no_special_tokens, batch_rows=args.batch_rows,
            processes=args.processes, progress=False if args.no_progress else None,
            overwrite=args.overwrite, resume=not args.no_resume, **options)
    except ImportError as exc:
        return _error(f"tokenize: {exc}".replace("tokenize: tokenize: ", "tokenize: "))
    except (FileNotFoundError, FileExistsError, KeyError, TypeError) as exc:
        return _error(_tokenize_words(f"tokenize: {_message(exc)}"))
    except Exception as exc:  # a failure on the data: the message names the file and row
        print(f"lodarrow: tokenize failed: {_tokenize_words(_message(exc))}", file=sys.stderr)
        return 1
    print(summary)
    return 0


def _tokenize_words(text):
    text = text.replace("tokenize: tokenize: ", "tokenize: ")
    for api, cli in (("nulls='drop'", "--nulls drop"), ("give text=", "give --text"),
                     ("give vocab_size=", "give --vocab-size"), ("give columns=", "give --columns"),
                     ("give a smaller batch_rows", "give a smaller --batch-rows")):
        text = text.replace(api, cli)
    return text


def _known_codec(name):
    import pyarrow as pa

    if name.lower() in ("none", "uncompressed"):
        return True
    try:
        return pa.Codec.is_available(name)
    except (ValueError, TypeError):
        return False


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"lodarrow: warning: {_cli_words(str(message))}", file=sys.stderr)


def _message(exc):
    """An exception's message (and notes) in the command line's words (:func:`_cli_words`)."""
    text = exc.args[0] if isinstance(exc, KeyError) and len(exc.args) == 1 else str(exc)
    text = str(text)
    notes = getattr(exc, "__notes__", None)
    return _cli_words("\n".join([text, *notes]) if notes else text)


#: ``la.col('x')``, ``col("x", lod_level=1, feature_shape=(16,))`` in a Python message.
_COL_CALL = re.compile(r"""(?:\bla\.)?\bcol\((?P<q>['"])(?P<name>[^'"]*)(?P=q)"""
                       r"""(?P<opts>(?:,\s*(?:lod_level=-?\d+|feature_shape=\([\d,\s]*\)))*)"""
                       r"""\)""")
_COL_OPTION = re.compile(r"(lod_level|feature_shape)=(\([\d,\s]*\)|-?\d+)")
#: What the Python API says, and what the command line says instead.
_CLI_WORDS = (
    ("pass overwrite=True", "pass --overwrite"),
    ("overwrite=True", "--overwrite"),
    ("map_parquet: batch_rows", "--batch-rows"),
    ("map_parquet: threads", "--threads"),
    ("bad write option for pyarrow.parquet.ParquetWriter", "bad --compression"),
    ("la.col(list column)", "@column"),
    ("col(..., feature_shape=(...))", "@name:lod_level=K:feature_shape=D[,D...]"),
    ("the udf's output_schema refuses the file's schema: ",
     "the operators do not fit the file's columns: "),
    (": the udf failed: ", ": the operators failed: "),
)
_API_PREFIX = re.compile(r"(^|: |\n)(?:map_parquet|udf|output_schema): ")


def _cli_words(text):
    """A message of the Python API in the command line's words: ``la.col('emb')`` is
    ``@emb``, ``col('emb', lod_level=1, feature_shape=(16,))`` is
    ``@emb:lod_level=1:feature_shape=16``, ``overwrite=True`` is ``--overwrite`` ...; the
    ``map_parquet:`` / ``udf:`` prefixes go (the command line says ``lodarrow: map``)."""
    def column(m):
        opts = "".join(f":{key}={value.strip('()').replace(' ', '').rstrip(',')}"
                       for key, value in _COL_OPTION.findall(m.group("opts")))
        return f"@{m.group('name')}{opts}"

    text = _COL_CALL.sub(column, text)
    for api, cli in _CLI_WORDS:
        text = text.replace(api, cli)
    return _API_PREFIX.sub(r"\1", text)


def _demo(args):
    from lodarrow._demo import run_demo

    kwargs = {"progress": not args.no_progress}
    if args.docs is not None:
        if args.docs < 1:
            return _error("demo: --docs must be >= 1")
        kwargs["n_docs"] = args.docs
    if args.seed is not None:
        kwargs["seed"] = args.seed
    return 0 if run_demo(**kwargs) else 1


def _bench(args):
    if args.device == "cuda":
        return _bench_device(args)
    if args.datasets:
        return _bench_datasets(args)
    if args.from_json:
        return _bench_from_json(args)
    missing = [mod for mod in ("rich",) if not _importable(mod)]
    if args.plot and not _importable("matplotlib"):
        missing.append("matplotlib")
    if missing:
        return _error(f"bench needs {', '.join(missing)}: {BENCH_EXTRA_HINT}")
    if args.scale <= 0:
        return _error("bench: --scale must be > 0")
    if args.repeat is not None and args.repeat < 1:
        return _error("bench: --repeat must be >= 1")
    if args.probe_mib < 1:
        return _error("bench: --probe-mib must be >= 1")
    from rich.console import Console

    from lodarrow._bench import _report, _runner

    options = _runner.BenchOptions(
        quick=args.quick, scale=args.scale, ops=_split(args.ops), peers=_split(args.peers),
        repeat=args.repeat, budget=args.budget, probe_mib=args.probe_mib,
        progress=not args.no_progress)
    unknown = [p for p in options.peers
               if not any(_runner._wanted(lib, (p,)) for lib in _runner._peers.PEER_LIBRARIES)]
    if unknown:
        return _error(f"bench: unknown peer(s) {', '.join(unknown)}; choose from "
                      f"{', '.join(_runner._peers.PEER_LIBRARIES)}")
    if not _runner.select_cases(options):
        return _error(f"bench: --ops {args.ops!r} matches no benchmark")
    console = Console()
    if not console.is_terminal:  # files and pipes: wide enough that the table does not fold
        console = Console(width=max(console.width, 160))
    from lodarrow._bench import _docs

    revision = _docs.revision()  # the code measured: read before the run, not after it
    t0 = time.perf_counter()
    report = _runner.run_bench(options, console=Console(stderr=True))
    report["wall_s"] = time.perf_counter() - t0
    report["command"] = "python -m lodarrow " + " ".join(args.argv)
    report["revision"] = revision
    _report.print_table(report, console)
    if args.json:
        _report.write_json(report, args.json)
    if args.markdown:
        _report.write_markdown(report, args.markdown, plot=args.plot)
    if args.plot:
        _report.write_plot(report, args.plot)
    if args.readme:
        _report.write_summary(report, args.readme, _summary_link(args))
    return 0


def _summary_link(args):
    """The link from ``--readme``'s file to ``--markdown``'s (``docs/performance.md`` when no
    --markdown is given)."""
    if not args.markdown:
        return "docs/performance.md"
    return os.path.relpath(os.path.abspath(args.markdown),
                           os.path.dirname(os.path.abspath(args.readme))).replace(os.sep, "/")


def _bench_from_json(args):
    """``bench --from-json FILE``: the Markdown block and the plot of an earlier run, again."""
    import json

    if not (args.markdown or args.plot or args.readme):
        return _error("bench --from-json: give --markdown, --plot and/or --readme to write")
    if args.plot and not _importable("matplotlib"):
        return _error(f"bench needs matplotlib: {BENCH_EXTRA_HINT}")
    from lodarrow._bench import _report

    try:
        with open(args.from_json) as fh:
            report = json.load(fh)
    except (OSError, ValueError) as exc:
        return _error(f"bench --from-json: cannot read {args.from_json}: {exc}")
    if args.markdown:
        _report.write_markdown(report, args.markdown, plot=args.plot)
    if args.plot:
        _report.write_plot(report, args.plot)
    if args.readme:
        _report.write_summary(report, args.readme, _summary_link(args))
    return 0


def _bench_device(args):
    """``bench --device cuda``: the operators on the GPU beside the CPU (plain text out)."""
    host_only = [flag for flag, given in (("--datasets", args.datasets), ("--peers", args.peers),
                                          ("--plot", args.plot),
                                          ("--readme", args.readme)) if given]
    if host_only:
        return _error(f"bench --device cuda: {', '.join(host_only)} apply to the host bench "
                      f"only (the device rows are lodarrow on the GPU beside its CPU kernels)")
    if args.scale <= 0:
        return _error("bench: --scale must be > 0")
    if args.repeat is not None and args.repeat < 1:
        return _error("bench: --repeat must be >= 1")
    if args.probe_mib < 1:
        return _error("bench: --probe-mib must be >= 1")
    from lodarrow._bench import _device, _runner
    from lodarrow._cupy import require_gpu
    from lodarrow._errors import BackendError

    try:
        require_gpu(0, "bench --device cuda")
    except BackendError as exc:
        return _error(str(exc))
    options = _runner.BenchOptions(
        quick=args.quick, scale=args.scale, ops=_split(args.ops), repeat=args.repeat,
        budget=args.budget, probe_mib=args.probe_mib, progress=not args.no_progress)
    if not _device.select_device_cases(options):
        return _error(f"bench: --ops {args.ops!r} matches no operator")
    progress = (lambda msg: print(msg, file=sys.stderr, flush=True)) if options.progress \
        else (lambda msg: None)
    t0 = time.perf_counter()
    report = _device.run_device_bench(options, progress=progress)
    report["wall_s"] = time.perf_counter() - t0
    report["command"] = "python -m lodarrow " + " ".join(args.argv)
    for line in _device.device_lines(report):
        print(line)
    print(_device.format_table(report))
    if args.json:
        from lodarrow._bench import _report

        _report.write_json(report, args.json)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(_device.to_markdown(report))
    bad = [r for r in report["rows"] if r.get("status") != "ok"]
    return 1 if bad else 0


def _bench_datasets(args):
    import json
    import tempfile

    from lodarrow._bench import _datasets

    if args.readme:
        return _error("bench --datasets: --readme summarises the operators' run only")
    if args.from_json:  # the block of an earlier run, written again from its JSON
        if not args.markdown:
            return _error("bench --datasets --from-json: give --markdown to write")
        try:
            with open(args.from_json) as f:
                report = json.load(f)
        except (OSError, ValueError) as exc:
            return _error(f"bench --from-json: cannot read {args.from_json}: {exc}")
        _datasets.write_section(args.markdown,
                                _datasets.to_markdown(report, report.get("command", "?")))
        return 0
    size = 0.2 if args.quick and args.size_gb == 2.2 else args.size_gb
    if size <= 0:
        return _error("bench: --size-gb must be > 0")
    engines = _split(args.engines)
    unknown = [e for e in engines if e not in ("ray", "dask", "spark")]
    if unknown:
        return _error(f"bench: unknown engine(s) {', '.join(unknown)}; choose from ray, dask, "
                      f"spark")
    only = _split(args.only) if args.only else None
    bad = [r for r in only or () if r not in _datasets.RUNS]
    if bad:
        return _error(f"bench: unknown run(s) {', '.join(bad)}; choose from "
                      f"{', '.join(_datasets.RUNS)}")
    missing = [mod for e in engines for mod in {"ray": ("ray",), "dask": ("dask", "distributed"),
                                                 "spark": ("pyspark",)}[e]
               if not _importable(mod)]
    if missing:
        return _error(f"bench --datasets needs {', '.join(missing)}: install the engines' "
                      f"extras (pip install -e '.[ray,dask,spark]' in the checkout), or "
                      f"--engines to choose")
    data_dir = args.data_dir or os.path.join(tempfile.gettempdir(), "lodarrow-bench-data")

    def log(text):
        if not args.no_progress:
            print(text, file=sys.stderr, flush=True)

    from lodarrow._bench import _docs

    revision = _docs.revision()  # the code measured: read before the run, not after it
    report = _datasets.run_datasets(data_dir, size, engines=engines, log=log, only=only,
                                    only_size=args.only_size)
    command = "python -m lodarrow " + " ".join(args.argv)
    report["command"] = command
    report["revision"] = revision
    text = _datasets.to_markdown(report, command)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    if args.markdown:  # replaces the datasets section of an existing file (performance.md)
        _datasets.write_section(args.markdown, text)
    return 0


def _importable(module):
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
