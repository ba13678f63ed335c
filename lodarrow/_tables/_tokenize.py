"""Text to token lists: :func:`tokenize` and :func:`tokenize_udf` (docs/tokenize.md).

A text corpus (Parquet, JSON lines plain or compressed, Arrow IPC / Hugging Face ``datasets``
files, or a ``datasets.Dataset`` / ``pyarrow.Table`` in memory) is tokenized a batch of
documents at a time and written as a Parquet dataset whose token column is
``list<uint16>`` (a vocabulary of at most 65,536 ids) or ``list<int32>``, with each file's
sequence lengths recorded in its footer as lodarrow's writers record them, so
:func:`lodarrow.batch_loader` starts without a lengths pass.

The ids of a batch go from the tokenizer to Arrow without a Python object per token being
kept: ``Tokenizer.encode_batch_fast`` (the tokenizer's own threads, without the GIL) gives
one ``Encoding`` per document; the offsets come from their lengths (``len``) and their ids
lists are made and read one after the other into one preallocated NumPy array
(``numpy.fromiter`` over the chained lists, each let go once read);
bos / eos / separators, truncation and splitting are then NumPy index arithmetic on the
offsets.

Output safety and resume: every output file is written under a hidden temporary name and
renamed when complete, inside a hidden staging directory beside ``dest`` named after the
job (the inputs' names, sizes and modification times, the tokenizer and the options); the
staging directory is renamed to ``dest`` when every file is complete.  A run that is killed,
or fails, leaves the staging directory (hidden: readers skip it) and no ``dest``; the same
job run again finds it, skips the finished files and gives the dataset an uninterrupted run
gives.
"""

import collections
import dataclasses
import hashlib
import itertools
import json
import operator
import os
import queue
import re
import shutil
import sys
import threading
import time
import warnings

import numpy as np
import pyarrow as pa

from lodarrow._progress import Progress
from lodarrow._progress import mb as _mb
from lodarrow._tables._dataset import _publish, free_dest
from lodarrow._tables._lengths_store import FOOTER_KEY, LengthsRecorder
from lodarrow._tables._parquet_writers import remove_partial
from lodarrow._validation import as_positive_int, check_choice

__all__ = ["tokenize", "tokenize_udf", "TokenizeSummary", "TokenizeUdf"]

#: Bytes of text per batch when ``batch_rows`` is not given (about a million tokens).
DEFAULT_BATCH_BYTES = 4 << 20
_MIN_ROWS, _MAX_ROWS = 64, 1 << 16
#: Rows per output file for an in-memory source (a ``datasets.Dataset``, a table).
ROWS_PER_FILE = 1 << 20
_PARQUET = (".parquet", ".parq", ".pq")
_ARROW = (".arrow", ".feather", ".ipc")
_JSON = (".jsonl", ".ndjson", ".json")
_COMPRESSED = (".gz", ".zst", ".zstd", ".bz2", ".lz4")
#: Files of a ``datasets`` directory (``save_to_disk``) that are not data.
_NOT_DATA = {"dataset_info.json", "state.json", "dataset_dict.json"}
_NULLS = ("error", "drop")
_OVERFLOW = ("split", "truncate")


# ------------------------------------------------------------------------- the tokenizer
#: The last few tokenizers loaded from a ``tokenizer.json``, by the file's content.  A
#: ``tokenizers.Tokenizer`` dropped does not give all its memory back (tokenizers 0.23: about
#: 8 MB more resident a load and encode of 4,000 documents, and each later load encodes
#: slower, 2.4 s -> 2.9 s after ten on the benchmark's corpus); a process that tokenizes again
#: (a loop over shards, an engine's worker running task after task) reuses the one it loaded.
#: Never handed to the user, never changed here: sharing it is safe (encoding takes it
#: read-only, from any thread).
_LOADED = collections.OrderedDict()
_LOADED_KEEP = 4
_LOADED_LOCK = threading.Lock()


def _from_file(Tokenizer, path):
    """``(tokenizer, key)``: ``Tokenizer.from_str`` of the file at ``path``, or the one
    loaded before from the same bytes (:data:`_LOADED`), and the SHA-256 of the bytes."""
    with open(path, "rb") as f:
        data = f.read()
    key = hashlib.sha256(data).digest()
    with _LOADED_LOCK:
        tok = _LOADED.get(key)
        if tok is not None:
            _LOADED.move_to_end(key)
            return tok, key
    tok = Tokenizer.from_str(data.decode("utf-8"))
    with _LOADED_LOCK:
        tok = _LOADED.setdefault(key, tok)  # another thread's, if it loaded the same first
        _LOADED.move_to_end(key)
        while len(_LOADED) > _LOADED_KEEP:
            _LOADED.popitem(last=False)
    return tok, key


def _unpadded(tok, truncation=True):
    """``tok``, or a copy of it with padding off (and without ``truncation``, truncation
    off): a batch encode with padding on pads every document to the batch's longest, so
    its ids would differ from ``encode(text).ids`` and depend on the batch.  The caller's
    tokenizer is left as it is."""
    if getattr(tok, "padding", None) is None and (truncation or
                                                  getattr(tok, "truncation", None) is None):
        return tok
    tok = type(tok).from_str(tok.to_str())
    tok.no_padding()
    if not truncation:
        tok.no_truncation()
    return tok


def _load_tokenizer(tokenizer, fn, want=None):
    """``(tokenizer, vocabulary size or None, key)``: what encodes (a
    ``tokenizers.Tokenizer``, or the callable) for a tokenizer argument, and for a path the
    SHA-256 of its bytes (else None); ``want``: the key the file must still have (a worker
    loading the job's tokenizer again)."""
    key = None
    if isinstance(tokenizer, (str, os.PathLike)):
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError(f"{fn}: a tokenizer.json needs the tokenizers package: "
                              f"pip install tokenizers") from exc
        path = os.fspath(tokenizer)
        try:
            tokenizer, key = _from_file(Tokenizer, path)
        except OSError as exc:  # no such file, a directory, no permission: the same type
            # errno and filename kept: "[Errno 2] tokenize: cannot read the tokenizer: No
            # such file or directory: 'tok.json'"
            raise type(exc)(exc.errno, f"{fn}: cannot read the tokenizer: {exc.strerror}",
                            path) from None
        except Exception as exc:   # not a tokenizer.json: what tokenizers says, as a value
            raise ValueError(f"{fn}: cannot read the tokenizer {path!r}: {exc}") from None
        if want is not None and key != want:
            raise ValueError(f"{fn}: the tokenizer {path!r} changed since the job loaded it "
                             f"(its bytes differ): start the job (or make the udf) again")
    backend = getattr(tokenizer, "backend_tokenizer", None)  # transformers' fast tokenizers
    if backend is not None and hasattr(backend, "encode_batch"):
        vocab = len(tokenizer)
        # ft(text) turns the backend's padding and truncation off unless asked for; the
        # backend keeps whatever the file or an earlier call left there
        backend = _unpadded(backend, truncation=False)
        return backend, max(vocab, backend.get_vocab_size(with_added_tokens=True)), key
    if hasattr(tokenizer, "encode_batch") and hasattr(tokenizer, "get_vocab_size"):
        return _unpadded(tokenizer), tokenizer.get_vocab_size(with_added_tokens=True), key
    if hasattr(tokenizer, "is_fast") and not tokenizer.is_fast:
        raise TypeError(f"{fn}: {type(tokenizer).__name__} is a slow (Python) tokenizer; "
                        f"load the fast one (AutoTokenizer.from_pretrained(..., use_fast=True)) "
                        f"or pass a callable")
    if callable(tokenizer):
        return tokenizer, None, key
    raise TypeError(f"{fn}: tokenizer must be a tokenizers.Tokenizer, a path to a "
                    f"tokenizer.json, a transformers fast tokenizer or a callable mapping a "
                    f"list of str to lists of ids, got {type(tokenizer).__name__}")


def _ids_spec(value, name, fn):
    if value is None:
        return np.zeros(0, np.int64)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = [value]
    try:
        arr = np.asarray(list(value))
    except TypeError:
        arr = np.asarray(None)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"{fn}: {name} must be an id or a list of ids, got {value!r}")
    if arr.size and arr.min() < 0:
        raise ValueError(f"{fn}: {name} ids must be >= 0, got {value!r}")
    return arr.astype(np.int64)


class _Encoder:
    """The tokenizer and the options: turns a table of text into a table of token lists.

    Picklable (the engines ship it to workers): a ``tokenizers.Tokenizer`` pickles itself,
    a path is loaded again in the worker.
    """

    def __init__(self, tokenizer, text, out, columns, bos, eos, separator, max_length,
                 overflow, drop_empty, nulls, vocab_size, dtype, add_special_tokens, fn):
        self._arg = tokenizer
        self._fn = fn
        # the key: a worker's load checks the file is still the one loaded here
        encode, vocab, self._key = _load_tokenizer(tokenizer, fn)
        self._tok = encode
        if isinstance(text, str):
            text = (text,)
        if (not isinstance(text, (list, tuple)) or not text
                or not all(isinstance(t, str) for t in text)):
            raise TypeError(f"{fn}: text must be a column name or a list of them, got {text!r}")
        if len(set(text)) != len(text):
            raise ValueError(f"{fn}: text names a column twice: {list(text)}")
        if not isinstance(out, str) or not out:
            raise TypeError(f"{fn}: out must be a column name, got {out!r}")
        if columns is not None:
            if isinstance(columns, str):
                columns = [columns]
            if not isinstance(columns, (list, tuple)) or \
                    not all(isinstance(c, str) for c in columns):
                raise TypeError(f"{fn}: columns must be a list of column names or None, "
                                f"got {columns!r}")
            if out in columns:
                raise ValueError(f"{fn}: out={out!r} is also among the columns kept; choose "
                                 f"another name for the token column")
            columns = tuple(columns)
        self.text, self.out, self.columns = tuple(text), out, columns
        self.bos = _ids_spec(bos, "bos", fn)
        self.eos = _ids_spec(eos, "eos", fn)
        self.sep = _ids_spec(separator, "separator", fn)
        if max_length is not None:
            if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)):
                raise TypeError(f"{fn}: max_length must be an int or None, got {max_length!r}")
            if max_length < 1:
                raise ValueError(f"{fn}: max_length must be >= 1, got {max_length}")
            max_length = int(max_length)
        check_choice(overflow, f"{fn}: overflow", _OVERFLOW)
        specials = self.bos.size + self.eos.size
        if overflow == "truncate" and max_length is not None and max_length < specials:
            raise ValueError(f"{fn}: max_length={max_length} is shorter than bos and eos "
                             f"({specials} ids), which truncate keeps in every row")
        check_choice(nulls, f"{fn}: nulls", _NULLS)
        for name, flag in (("drop_empty", drop_empty), ("add_special_tokens",
                                                          add_special_tokens)):
            if not isinstance(flag, bool):
                raise TypeError(f"{fn}: {name} must be a bool, got {type(flag).__name__}")
        self.max_length, self.overflow, self.nulls = max_length, overflow, nulls
        self.drop_empty, self.add_special_tokens = drop_empty, add_special_tokens
        if vocab_size is not None:
            vocab_size = as_positive_int(vocab_size, f"{fn}: vocab_size")
            if vocab is not None and vocab_size < vocab:
                raise ValueError(f"{fn}: vocab_size={vocab_size} is smaller than the "
                                 f"tokenizer's vocabulary ({vocab} ids)")
        self.vocab_size = vocab_size or vocab
        if dtype is None:
            dtype = "uint16" if self.vocab_size is not None and self.vocab_size <= 1 << 16 \
                else "int32"
        check_choice(dtype, f"{fn}: dtype", ("uint16", "int32", "int64"))
        self.dtype = np.dtype(dtype)
        limit = int(np.iinfo(self.dtype).max) + 1
        if self.vocab_size is not None and self.vocab_size > limit:
            raise ValueError(f"{fn}: dtype={dtype!r} cannot hold the vocabulary's "
                             f"{self.vocab_size} ids")
        self.limit = self.vocab_size if self.vocab_size is not None else limit
        for name, ids in (("bos", self.bos), ("eos", self.eos), ("separator", self.sep)):
            if ids.size and ids.max() >= self.limit:
                raise ValueError(f"{fn}: {name} id {int(ids.max())} is outside the vocabulary "
                                 f"(ids 0-{self.limit - 1}); give vocab_size= to declare a "
                                 f"larger one")
        self._fast = getattr(self._tok, "encode_batch_fast", None)
        self.batch_rows = None  # tokenize's batch_rows (None: about 4 MiB of text)

    # -- pickling: a path is loaded again in the worker, when first used (refused if its
    # bytes changed): an error while unpickling would kill a process pool's worker, not
    # reach the caller
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fast"] = None
        if isinstance(self._arg, (str, os.PathLike)):
            state["_tok"] = None
        else:
            state["_arg"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self._tok is not None:
            self._fast = getattr(self._tok, "encode_batch_fast", None)

    def load(self):
        """The tokenizer, loaded here if this encoder came pickled with a path."""
        if self._tok is None:
            self._tok, _, _ = _load_tokenizer(self._arg, self._fn, want=self._key)
            self._fast = getattr(self._tok, "encode_batch_fast", None)
        return self._tok

    @property
    def arrow_type(self):
        return pa.list_(pa.from_numpy_dtype(self.dtype))

    def identity(self):
        """A text that changes with the tokenizer and every option (the resume key)."""
        tok = self._tok
        if self._key is not None:  # the bytes loaded (cheaper than to_str)
            who = self._key.hex()
        elif hasattr(tok, "to_str"):
            who = hashlib.sha256(tok.to_str().encode()).hexdigest()
        else:
            who = f"{getattr(tok, '__module__', '')}.{getattr(tok, '__qualname__', type(tok))}"
        return json.dumps([who, self.text, self.out, self.columns, self.bos.tolist(),
                           self.eos.tolist(), self.sep.tolist(), self.max_length, self.overflow,
                           self.drop_empty, self.nulls, self.vocab_size, str(self.dtype),
                           self.add_special_tokens])

    # -- schema
    def check_schema(self, schema, where):
        """Refuse a schema without a string text column (or without a kept column)."""
        for name in self.text:
            i = schema.get_field_index(name)
            if i < 0:
                raise KeyError(f"{where}: no text column {name!r}; the columns are "
                               f"{schema.names} (give text=)")
            t = schema.field(i).type
            if pa.types.is_dictionary(t):  # pandas' categorical: read as its strings
                t = t.value_type
            if not (pa.types.is_string(t) or pa.types.is_large_string(t)
                    or pa.types.is_string_view(t) or pa.types.is_null(t)):
                raise TypeError(f"{where}: the text column {name!r} is of type {t}, not "
                                f"strings")
        for name in self.columns or ():
            if schema.get_field_index(name) < 0:
                raise KeyError(f"{where}: no column {name!r} to keep; the columns are "
                               f"{schema.names}")
        if self.columns is None and self.out in schema.names and self.out not in self.text:
            raise ValueError(f"{where}: out={self.out!r} is already a column; choose another "
                             f"name for the token column, or give columns=")

    def kept(self, schema):
        if self.columns is not None:
            return list(self.columns)
        return [n for n in schema.names if n not in self.text]

    def read_columns(self, schema):
        """The columns to read: the text and the kept ones, in the file's order."""
        want = set(self.text) | set(self.kept(schema))
        return [n for n in schema.names if n in want]

    def output_schema(self, schema):
        self.check_schema(schema, "tokenize")
        fields = [schema.field(n) for n in self.kept(schema)]
        return pa.schema(fields + [pa.field(self.out, self.arrow_type)])

    # -- encoding
    def _raw(self, texts):
        """The tokenizer's output for ``texts`` (Encodings, or what a callable returns)."""
        self.load()
        fast = self._fast or getattr(self._tok, "encode_batch", None)
        if fast is not None:
            return fast(texts, add_special_tokens=self.add_special_tokens)
        return self._tok(texts)

    def _arrays(self, raw, n):
        """``(offsets int64, values self.dtype)`` of the tokenizer's output for ``n`` texts."""
        if isinstance(raw, (pa.ListArray, pa.LargeListArray, pa.ChunkedArray)):
            arr = raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw
            if len(arr) != n or arr.null_count:
                raise ValueError(f"the tokenizer returned {len(arr)} lists "
                                 f"({arr.null_count} null) for {n} texts")
            offsets = np.asarray(arr.offsets, np.int64)
            values = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
            if values.null_count:
                raise ValueError("the tokenizer returned null ids")
            offsets = offsets - offsets[0]
            return offsets, self._checked_values(np.asarray(values), offsets)
        encodings = self._fast is not None or hasattr(self._tok, "encode_batch")
        if encodings and _all_encodings(raw):
            return self._encoding_arrays(raw, n)
        if encodings:
            ids = [e.ids for e in raw]  # the one Python list per document
        else:
            ids = list(raw)
        del raw  # the Encodings (strings, offsets): freed once their ids are taken
        if len(ids) != n:
            raise ValueError(f"the tokenizer returned {len(ids)} lists of ids for {n} texts")
        lengths = np.fromiter(map(len, ids), np.int64, count=n)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        chain = itertools.chain.from_iterable(ids)
        if not encodings and ids and all(isinstance(x, np.ndarray) for x in ids):
            # NumPy arrays keep their dtype (a cast to self.dtype would wrap an id around);
            # an empty one holds no id whatever its dtype (np.array([]) is float64)
            filled = [x for x in ids if x.size]
            for row, x in enumerate(ids):
                if x.size and x.dtype.kind not in "iu":
                    err = TypeError(f"row {row}: the tokenizer returned ids of dtype "
                                    f"{x.dtype}, not integers")
                    err.row = row
                    raise err
            values = np.concatenate(filled) if filled else np.zeros(0, self.dtype)
        elif encodings:
            # Python ints: one preallocated array filled from the lists (an id too large
            # for self.dtype raises, then it is read again as int64 and checked)
            try:
                values = np.fromiter(chain, self.dtype, count=total)
            except (OverflowError, ValueError, TypeError):
                values = np.fromiter(itertools.chain.from_iterable(ids), np.int64, count=total)
        else:  # a callable's lists may hold NumPy scalars: int64, checked, then cast
            values = np.fromiter(chain, np.int64, count=total)
        return offsets, self._checked_values(values, offsets)

    def _encoding_arrays(self, encodings, n):
        """:meth:`_arrays` of a list of ``tokenizers.Encoding``: the lengths from
        ``len(e)`` (no list made for them), the ids streamed into one preallocated array,
        each document's ids list made, read and let go in turn (never a batch's lists at
        once: the garbage collector does not walk them, each is read while in cache)."""
        if len(encodings) != n:
            raise ValueError(f"the tokenizer returned {len(encodings)} lists of ids for {n} "
                             f"texts")
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.fromiter(map(len, encodings), np.int64, count=n), out=offsets[1:])
        total = int(offsets[-1])
        try:  # an id too large for self.dtype raises: read again as int64, then checked
            values = np.fromiter(_chain(map(_IDS, encodings)), self.dtype, count=total)
        except (OverflowError, ValueError, TypeError):
            values = np.fromiter(_chain(map(_IDS, encodings)), np.int64, count=total)
        return offsets, self._checked_values(values, offsets)

    def _checked_values(self, values, offsets):
        """``values`` in ``self.dtype``; an id outside the vocabulary is a ValueError naming
        the first row that holds one (``.row``)."""
        if values.dtype.kind not in "iu":
            raise TypeError(f"the tokenizer returned ids of dtype {values.dtype}, not integers")
        if values.size:
            bad = None
            if values.max() >= self.limit or (values.dtype.kind == "i" and values.min() < 0):
                bad = np.flatnonzero((values >= self.limit) | (values < 0))[0]
            if bad is not None:
                row = int(np.searchsorted(offsets, bad, side="right") - 1)
                err = ValueError(f"row {row}: the tokenizer returned id {int(values[bad])}, "
                                 f"outside the vocabulary (ids 0-{self.limit - 1})")
                err.row = row
                raise err
        return values.astype(self.dtype, copy=False)

    def encode_table(self, table, start=0):
        """``(out_table, counts)``: ``table``'s rows tokenized; ``start`` is the row number
        of ``table``'s first row in its file (for errors: ``.row``)."""
        return self.finish(self.prepare(table, start))

    def prepare(self, table, start=0):
        """The first half of :meth:`encode_table`: rows dropped, the tokenizer run (in its
        own threads, without the GIL)."""
        return self.encode(self.texts(table, start))

    def texts(self, table, start=0):
        """:meth:`prepare` up to the tokenizer: rows dropped, the texts as Python strings
        (``tokenize`` does this for the next batch while the tokenizer runs on this one)."""
        counts = dict(documents=table.num_rows, dropped_nulls=0, dropped_empty=0,
                      truncated_tokens=0)
        keep = None
        for name in self.text:
            col = _text_column(table, name)
            if col.null_count:
                if self.nulls == "error":
                    first = int(np.flatnonzero(np.asarray(col.is_null()))[0])
                    err = ValueError(f"row {start + first}: the text column {name!r} is null "
                                     f"(nulls='drop' drops such rows)")
                    err.row = start + first
                    raise err
                valid = np.asarray(col.is_valid())
                keep = valid if keep is None else keep & valid
        if keep is not None:
            counts["dropped_nulls"] = int(len(keep) - keep.sum())
        if self.drop_empty:
            import pyarrow.compute as pc

            blank = None
            for name in self.text:
                col = _text_column(table, name)
                if pa.types.is_null(col.type):
                    continue
                b = np.asarray(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(col)), 0)
                               .fill_null(True))
                blank = b if blank is None else blank & b
            if blank is not None:
                if keep is not None:
                    blank &= keep
                    counts["dropped_empty"] = int(blank.sum())
                    keep = keep & ~blank
                else:
                    counts["dropped_empty"] = int(blank.sum())
                    keep = ~blank
        if keep is not None and not keep.all():
            table = table.filter(pa.array(keep))
        n = table.num_rows
        texts = []
        for name in self.text:
            col = _text_column(table, name)
            texts.append([""] * n if pa.types.is_null(col.type) else col.to_pylist())
        return table, start, keep, counts, texts

    def encode(self, item):
        """:meth:`prepare` from :meth:`texts`' result: the tokenizer run on each text
        column."""
        table, start, keep, counts, texts = item
        return table, start, keep, counts, [self._raw(t) for t in texts]

    def finish(self, prepared):
        """The second half of :meth:`encode_table`: ids to Arrow, checked, assembled."""
        table, start, keep, counts, raws = prepared
        n = table.num_rows
        try:
            parts = []
            for k in range(len(raws)):
                raw, raws[k] = raws[k], None  # freed inside _arrays once its ids are taken
                parts.append(self._arrays(raw, n))
                del raw
        except (ValueError, TypeError) as exc:
            row = getattr(exc, "row", None)
            if row is None:
                raise
            if keep is not None:
                row = int(np.flatnonzero(keep)[row])
            err = type(exc)(str(exc).replace(f"row {exc.row}:", f"row {start + row}:", 1))
            err.row = start + row
            raise err from None
        offsets, values, counts["truncated_tokens"], index = self._assemble(parts, n)
        if offsets[-1] > np.iinfo(np.int32).max:
            raise ValueError(f"rows {start}-{start + n - 1} hold {int(offsets[-1])} tokens, "
                             f"more than a list column's 32-bit offsets hold; give a smaller "
                             f"batch_rows")
        tokens = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                          pa.array(values, pa.from_numpy_dtype(self.dtype)))
        kept = self.kept(table.schema)
        arrays = []
        for name in kept:
            col = table.column(name)
            # split: the other columns repeated for every piece of a document
            arrays.append(col.take(pa.array(index)) if index is not None else col)
        out = pa.Table.from_arrays(arrays + [tokens], schema=pa.schema(
            [table.schema.field(k) for k in kept] + [pa.field(self.out, self.arrow_type)],
            metadata=table.schema.metadata))
        counts["rows"] = out.num_rows
        counts["tokens"] = int(offsets[-1])
        return out, counts

    def _assemble(self, parts, n):
        """bos + text ids (+ separator + text ids ...) + eos per row; then max_length.

        Returns ``(offsets, values, truncated tokens, rows)``: ``rows`` is None, or (a
        document split by ``max_length``) the source row of every output row.
        """
        bos, eos, sep = self.bos, self.eos, self.sep
        if len(parts) == 1 and not bos.size and not eos.size:
            offsets, values = parts[0]
        else:
            lengths = np.full(n, bos.size + eos.size + sep.size * (len(parts) - 1), np.int64)
            for o, _ in parts:
                lengths += np.diff(o)
            offsets = np.zeros(n + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            values = np.empty(int(offsets[-1]), self.dtype)
            at = offsets[:-1].copy()

            def put_const(ids):
                if ids.size:
                    values[(at[:, None] + np.arange(ids.size)).ravel()] = np.tile(
                        ids.astype(self.dtype), n)
                    at[:] += ids.size

            put_const(bos)
            for k, (o, v) in enumerate(parts):
                if k:
                    put_const(sep)
                lens = np.diff(o)
                if v.size:
                    pos = np.repeat(at - o[:-1], lens) + np.arange(v.size)
                    values[pos] = v
                at += lens
            put_const(eos)
        m = self.max_length
        lengths = np.diff(offsets)
        if m is None or not n or lengths.max() <= m:
            return offsets, values, 0, None
        if self.overflow == "truncate":
            new_lengths = np.minimum(lengths, m)
            new_offsets = np.zeros(n + 1, np.int64)
            np.cumsum(new_lengths, out=new_offsets[1:])
            pos = np.repeat(offsets[:-1] - new_offsets[:-1], new_lengths) + \
                np.arange(int(new_offsets[-1]))
            e = eos.size
            if e:  # the content is cut, the eos kept (bos is within the first m - e)
                tail = np.arange(-e, 0)
                pos[(new_offsets[1:, None] + tail).ravel()] = (offsets[1:, None] + tail).ravel()
            return new_offsets, values[pos], int(offsets[-1] - new_offsets[-1]), None
        pieces = np.maximum(-(-lengths // m), 1)
        rows = np.repeat(np.arange(n), pieces)
        first = np.cumsum(pieces) - pieces
        within = np.arange(len(rows)) - np.repeat(first, pieces)
        starts = offsets[rows] + within * m
        return np.concatenate([starts, offsets[-1:]]), values, 0, rows


_chain = itertools.chain.from_iterable
_IDS = operator.attrgetter("ids")


def _all_encodings(raw):
    """Whether ``raw`` is a list of ``tokenizers.Encoding`` (whose ``len`` is its ids')."""
    cls = getattr(sys.modules.get("tokenizers"), "Encoding", None)
    return cls is not None and isinstance(raw, list) and all(type(e) is cls for e in raw)


def _text_column(table, name):
    """A text column, a dictionary-encoded one (pandas' categorical) as its strings."""
    col = table.column(name)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return col


# ------------------------------------------------------------------------- the engines' udf
class TokenizeUdf:
    """:func:`tokenize`'s encoding as a udf: a picklable callable over one table.

    Made by :func:`lodarrow.tokenize_udf`; ``f(batch)`` tokenizes a ``pyarrow.Table`` or
    ``RecordBatch`` (gives the same kind) or a pandas DataFrame (gives one with
    ``pd.ArrowDtype`` columns); ``f.output_schema(schema)`` and ``f.dask_meta(ddf)`` give the
    output's schema without data.
    """

    __slots__ = ("encoder",)

    def __init__(self, encoder):
        self.encoder = encoder

    def __getstate__(self):
        return self.encoder

    def __setstate__(self, state):
        self.encoder = state

    def __call__(self, batch):
        """Tokenize one table (see the class)."""
        enc = self.encoder
        if isinstance(batch, pa.RecordBatch):
            enc.check_schema(batch.schema, "tokenize_udf")
            out, _ = enc.encode_table(pa.Table.from_batches([batch]))
            return pa.RecordBatch.from_arrays([c.combine_chunks() for c in out.columns],
                                              schema=out.schema)
        if isinstance(batch, pa.Table):
            enc.check_schema(batch.schema, "tokenize_udf")
            return enc.encode_table(batch)[0]
        if type(batch).__module__.partition(".")[0] == "pandas":
            import pandas as pd

            table = pa.Table.from_pandas(batch, preserve_index=False)
            enc.check_schema(table.schema, "tokenize_udf")
            return enc.encode_table(table)[0].to_pandas(types_mapper=pd.ArrowDtype)
        raise TypeError(f"tokenize_udf: a batch must be a pyarrow Table or RecordBatch or a "
                        f"pandas DataFrame, got {type(batch).__name__}")

    def output_schema(self, schema):
        """The output's schema for an input of ``schema`` (a ``pyarrow.Schema``)."""
        return self.encoder.output_schema(schema)

    def dask_meta(self, ddf):
        """The empty pandas DataFrame Dask's ``map_partitions(f, meta=...)`` needs."""
        import pandas as pd

        meta = getattr(ddf, "_meta", ddf).iloc[:0]
        schema = pa.Schema.from_pandas(meta, preserve_index=False)
        out = self.output_schema(schema).empty_table()
        return out.to_pandas(types_mapper=pd.ArrowDtype)

    def __repr__(self):
        e = self.encoder
        return f"tokenize_udf(text={list(e.text)}, out={e.out!r}, dtype={e.dtype.name})"


def tokenize_udf(tokenizer, *, text="text", out="tokens", columns=None, bos=None, eos=None,
                 separator=None, max_length=None, overflow="split", drop_empty=False,
                 nulls="error", vocab_size=None, dtype=None, add_special_tokens=True):
    """Make :func:`tokenize`'s encoding a udf for Ray Data, Dask and Spark.

    Each call tokenizes one batch exactly as :func:`tokenize` tokenizes each of its batches
    (the same rows, ids and types), so an engine's output equals ``tokenize``'s.

    Parameters
    ----------
    tokenizer : tokenizers.Tokenizer, str, transformers fast tokenizer or callable
        As for :func:`tokenize`.  It is pickled to the workers (a path is loaded again
        where each worker runs, when first used, and a file whose bytes changed since the
        udf was made is refused with a ``ValueError``).
    text : str or list of str, default "text"
        The text column(s), as for :func:`tokenize`.
    out : str, default "tokens"
        The token column.
    columns : list of str, optional
        The other columns kept (default: all but the text).
    bos, eos, separator : int or list of int, optional
        Ids before / after each document, and between several text columns.
    max_length : int, optional
        The longest row, in ids.
    overflow : {"split", "truncate"}, default "split"
        What a longer document becomes.
    drop_empty : bool, default False
        Drop documents whose text is empty or only whitespace.
    nulls : {"error", "drop"}, default "error"
        What a null text does.
    vocab_size : int, optional
        The vocabulary ids are checked against (default: the tokenizer's).
    dtype : {"uint16", "int32", "int64"}, optional
        The ids' type (default: the narrowest that holds the vocabulary).
    add_special_tokens : bool, default True
        Passed to the tokenizer's ``encode_batch``.

    Returns
    -------
    TokenizeUdf
        ``f(table)`` gives the tokenized table (the same kind: Arrow table or batch, or a
        pandas DataFrame with ``pd.ArrowDtype`` columns); ``f.output_schema(schema)``;
        ``f.dask_meta(ddf)``.  ``ds.map_batches(f, batch_format="pyarrow")`` (Ray),
        ``ddf.map_partitions(f, meta=f.dask_meta(ddf))`` (Dask), ``la.spark_map(df, f)``.

    Raises
    ------
    TypeError, ValueError
        For an argument :func:`tokenize` refuses; when called, for a batch without a string
        text column, a null text (``nulls="error"``) or an id outside the vocabulary; in a
        worker, for a tokenizer file whose bytes changed since the udf was made.
    FileNotFoundError, OSError
        A tokenizer file that cannot be opened (missing: ``FileNotFoundError``), when the udf
        is made or where a worker loads it again.

    See Also
    --------
    tokenize : The same on one machine, into a Parquet dataset (docs/tokenize.md).

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> f = la.tokenize_udf(lambda texts: [[len(w) for w in t.split()] for t in texts],
    ...                     vocab_size=100, eos=0)
    >>> f(pa.table({"id": [7, 8], "text": ["a bb", "ccc"]})).to_pylist()
    [{'id': 7, 'tokens': [1, 2, 0]}, {'id': 8, 'tokens': [3, 0]}]
    """
    return TokenizeUdf(_Encoder(tokenizer, text, out, columns, bos, eos, separator,
                                max_length, overflow, drop_empty, nulls, vocab_size, dtype,
                                add_special_tokens, "tokenize_udf"))


# ------------------------------------------------------------------------- sources
@dataclasses.dataclass
class _Input:
    kind: str           # "parquet", "json", "arrow", "memory"
    path: object        # a path, or (table, start, stop) for memory
    rel: str            # the output's path relative to dest
    size: int
    mtime_ns: int = 0


def _kind_of(name):
    low = name.lower()
    for c in _COMPRESSED:
        if low.endswith(c):
            low = low[:-len(c)]
            break
    else:
        if low.endswith(_PARQUET):
            return "parquet"
        if low.endswith(_ARROW):
            return "arrow"
    if low.endswith(_JSON):
        return "json"
    return None


def _out_name(rel):
    low = rel.lower()
    for c in _COMPRESSED:
        if low.endswith(c):
            rel, low = rel[:-len(c)], low[:-len(c)]
            break
    stem = rel.rsplit(".", 1)[0] if "." in os.path.basename(rel) else rel
    return stem + ".parquet"


def _has_glob(text):
    return any(c in text for c in "*?[")


def _resolve(source, fn):
    """The inputs of ``source`` (``_Input`` list) and whether it can resume."""
    if _is_dataset(source):
        return _memory_inputs(_dataset_table(source, fn)), getattr(source, "_fingerprint", None)
    if isinstance(source, (pa.Table, pa.RecordBatch)):
        table = pa.Table.from_batches([source]) if isinstance(source, pa.RecordBatch) \
            else source
        return _memory_inputs(table), None
    if isinstance(source, str) and re.match(r"[a-z][a-z0-9+.-]*://", source):
        raise ValueError(f"{fn}: source {source!r} is a URI; tokenize reads local files "
                         f"(copy them first, or run la.tokenize_udf on an engine)")
    if isinstance(source, (str, os.PathLike)):
        paths, base = _expand(os.fspath(source), fn)
    elif isinstance(source, (list, tuple)) and source and \
            all(isinstance(p, (str, os.PathLike)) for p in source):
        paths = [os.path.abspath(os.fspath(p)) for p in source]
        for p in paths:
            if not os.path.isfile(p):
                raise FileNotFoundError(f"{fn}: no such file: {p!r}")
        base = os.path.commonpath([os.path.dirname(p) for p in paths])
    else:
        raise TypeError(f"{fn}: source must be a path, a glob, a list of files, a "
                        f"datasets.Dataset or a pyarrow.Table, got {type(source).__name__}")
    inputs = []
    for p in paths:
        kind = _kind_of(os.path.basename(p))
        if kind is None:
            kind = _sniff(p)
        if kind is None:
            raise ValueError(f"{fn}: {p!r} is neither Parquet (.parquet), JSON lines (.jsonl, "
                             f".json, .ndjson, optionally .gz/.zst/.bz2) nor Arrow IPC "
                             f"(.arrow, .feather)")
        st = os.stat(p)
        rel = os.path.relpath(p, base).replace(os.sep, "/")
        inputs.append(_Input(kind, p, _out_name(rel), st.st_size, st.st_mtime_ns))
    seen = {}
    for i in inputs:
        if i.rel in seen:
            raise ValueError(f"{fn}: {seen[i.rel]!r} and {i.path!r} would both be written to "
                             f"{i.rel!r}; tokenize them separately")
        seen[i.rel] = i.path
    return inputs, True


def _sniff(path):
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return None
    if head[:4] == b"PAR1":
        return "parquet"
    if head == b"ARROW1" or head[:4] == b"\xff\xff\xff\xff":
        return "arrow"
    return None


def _expand(source, fn):
    if os.path.isdir(source):
        base = os.path.abspath(source)
        found = []
        for root, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            for name in sorted(files):
                if name.startswith((".", "_")) or name in _NOT_DATA:
                    continue
                p = os.path.join(root, name)
                if _kind_of(name) or _sniff(p):
                    found.append(p)
        if not found:
            raise ValueError(f"{fn}: the directory {source!r} holds no Parquet, JSON lines or "
                             f"Arrow files")
        return found, base
    if _has_glob(source):
        import glob

        found = sorted(os.path.abspath(p) for p in glob.glob(source, recursive=True)
                       if os.path.isfile(p))
        if not found:
            raise FileNotFoundError(f"{fn}: the pattern {source!r} matches no file")
        parts = source.split(os.sep)
        lead = next(i for i, part in enumerate(parts) if _has_glob(part))
        base = os.path.abspath(os.sep.join(parts[:lead]) or ".")
        return found, base
    if not os.path.exists(source):
        raise FileNotFoundError(f"{fn}: no such file or directory: {source!r}")
    p = os.path.abspath(source)
    return [p], os.path.dirname(p)


def _is_dataset(obj):
    return type(obj).__module__.startswith("datasets.") and hasattr(obj, "with_format")


def _dataset_table(ds, fn):
    if not hasattr(ds, "data") or not hasattr(ds, "num_rows"):
        raise TypeError(f"{fn}: give one split of a datasets.DatasetDict (ds['train'])")
    if getattr(ds, "_indices", None) is not None:
        ds = ds.flatten_indices()  # a select / shuffle: the rows in the dataset's order
    return ds.data.table


def _memory_inputs(table):
    n = table.num_rows
    width = max(5, len(str(max(n - 1, 0) // ROWS_PER_FILE)))
    starts = range(0, max(n, 1), ROWS_PER_FILE)
    return [_Input("memory", (table, s, min(s + ROWS_PER_FILE, n)),
                   f"part-{k:0{width}d}.parquet", 0) for k, s in enumerate(starts)]


def _json_options(enc, block):
    import pyarrow.json as pj

    return (pj.ReadOptions(block_size=block, use_threads=True),
            pj.ParseOptions(explicit_schema=pa.schema([(t, pa.string()) for t in enc.text]),
                            unexpected_field_behavior="infer"))


def _open(inp, enc, fn, block=None):
    """``(schema, batches)`` of one input: checks it can be read and its schema, then
    streams tables."""
    where = f"{fn}: {inp.path!r}" if inp.kind != "memory" else f"{fn}: the source"
    try:
        if inp.kind == "parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(inp.path, pre_buffer=False, buffer_size=1 << 20)
            schema = pf.schema_arrow
            enc.check_schema(schema, where)
            return schema, _parquet_batches(pf, enc, schema)
        if inp.kind == "memory":
            table, a, b = inp.path
            enc.check_schema(table.schema, where)
            return table.schema, _table_batches(table.slice(a, b - a), enc)
        if inp.kind == "arrow":
            source = pa.memory_map(inp.path)
            try:
                table = pa.ipc.open_file(source).read_all()
            except pa.ArrowInvalid:
                source.seek(0)
                table = pa.ipc.open_stream(source).read_all()
            enc.check_schema(table.schema, where)
            return table.schema, _table_batches(table, enc)
        import pyarrow.json as pj

        block = block or DEFAULT_BATCH_BYTES
        while True:  # a block must hold a whole line: larger ones for longer lines
            stream = pa.input_stream(inp.path, compression="detect")
            try:
                reader = pj.open_json(stream, *_json_options(enc, block))
                break
            except pa.ArrowInvalid as exc:
                stream.close()
                if "straddling" not in str(exc) or block >= 1 << 31:
                    raise
                block *= 4
        enc.check_schema(reader.schema, where)
        return reader.schema, _json_batches(reader, enc, inp.path, where)
    except (KeyError, TypeError, ValueError) as exc:
        message = exc.args[0] if exc.args else ""
        if isinstance(message, str) and message.startswith(where) and \
                not isinstance(exc, pa.ArrowException):
            raise
        _raise_read(exc, inp, where, enc)
    except (OSError, pa.ArrowException, EOFError) as exc:
        _raise_read(exc, inp, where, enc)


def _raise_read(exc, inp, where, enc):
    line = _first_bad_json_line(inp.path, enc.text) if inp.kind == "json" else None
    extra = f", line {line}" if line is not None else ""
    kind = type(exc) if type(exc).__module__ == "builtins" else ValueError
    if kind is OSError:  # a damaged file (a truncated .gz) is not an OS error
        kind = ValueError
    if isinstance(exc, pa.ArrowException) and not isinstance(exc, (ValueError, OSError)):
        kind = ValueError
    raise kind(f"{where}{extra}: cannot read: {exc}") from exc


def _check_json_head(inp, enc, fn):
    """A JSON lines file opens, holds a row, and its first line is an object with string
    text fields."""
    import io

    where = f"{fn}: {inp.path!r}"
    try:
        with pa.input_stream(inp.path, compression="detect") as raw, \
                io.TextIOWrapper(raw, encoding="utf-8") as f:
            line, number = "", 0
            while not line.strip():
                line, number = f.readline(), number + 1
                if not line:
                    # pyarrow's JSON reader refuses it ("Empty JSON stream"): said now,
                    # before anything is written, not when its turn comes
                    raise ValueError(f"{where}: no rows (the file is empty or holds only "
                                     f"blank lines): leave it out of source")
    except (OSError, UnicodeDecodeError, EOFError, pa.ArrowException) as exc:
        # a missing or forbidden file keeps its type; a file that does not decode
        # (a damaged gzip, not UTF-8) is a ValueError, as a damaged Parquet file is
        kind = type(exc) if isinstance(exc, (FileNotFoundError, PermissionError,
                                             IsADirectoryError)) else ValueError
        raise kind(f"{where}: cannot read: {exc}") from exc
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"{where}, line {number}: cannot read: not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{where}, line {number}: cannot read: not a JSON object")
    for name in enc.text:
        if name not in obj:
            raise KeyError(f"{where}: no text column {name!r}; the columns are "
                           f"{list(obj)} (give text=)")
        if not isinstance(obj[name], (str, type(None))):
            raise TypeError(f"{where}: the text column {name!r} is of type "
                            f"{type(obj[name]).__name__}, not strings")


def _first_bad_json_line(path, texts):
    """The first line (1-based) of a JSON lines file that is not an object or whose text
    is not a string or null (None when every line reads): where pyarrow's error happened."""
    import io

    try:
        with pa.input_stream(path, compression="detect") as raw, \
                io.TextIOWrapper(raw, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    return number
                if not isinstance(obj, dict):
                    return number
                for t in texts or ():
                    if not isinstance(obj.get(t), (str, type(None))):
                        return number
    except (OSError, UnicodeDecodeError, EOFError, pa.ArrowException):
        return None
    return None


def _parquet_batches(pf, enc, schema):
    meta = pf.metadata
    cols = enc.read_columns(schema)
    if enc.batch_rows:
        rows = enc.batch_rows
    else:
        text_bytes = 0
        names = set(enc.text)
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            for c in range(rg.num_columns):
                if rg.column(c).path_in_schema.split(".")[0] in names:
                    text_bytes += rg.column(c).total_uncompressed_size
        rows = _rows_for(meta.num_rows, text_bytes)
    for batch in pf.iter_batches(batch_size=rows, columns=cols, use_threads=True):
        yield pa.Table.from_batches([batch])


def _rows_for(n, nbytes):
    if not n or not nbytes:
        return _MAX_ROWS
    return max(_MIN_ROWS, min(_MAX_ROWS, int(DEFAULT_BATCH_BYTES * n // nbytes)))


def _table_batches(table, enc):
    table = table.select(enc.read_columns(table.schema))
    if enc.batch_rows:
        rows = enc.batch_rows
    else:
        nbytes = sum(table.column(t).nbytes for t in enc.text)
        rows = _rows_for(table.num_rows, nbytes)
    for start in range(0, table.num_rows, rows):
        yield table.slice(start, rows)


def _missing_text_line(path, texts):
    """The first line (1-based) of a JSON lines file without one of the text keys and the
    key, or None: pyarrow reads a missing key as a null."""
    import io

    with pa.input_stream(path, compression="detect") as raw, \
            io.TextIOWrapper(raw, encoding="utf-8") as f:
        for k, line in enumerate(f):
            if line.strip():
                obj = json.loads(line)
                for t in texts:
                    if t not in obj:
                        return k + 1, t
    return None


def _json_batches(reader, enc, path, where):
    schema = reader.schema
    cols = enc.read_columns(schema)
    checked = False
    for batch in reader:
        t = pa.Table.from_batches([batch])
        if not checked and any(t.column(n).null_count for n in enc.text):
            # a null may be a missing key: an error, whatever nulls= says (once a file)
            checked = True
            try:
                missing = _missing_text_line(path, enc.text)
            except (OSError, ValueError, TypeError, EOFError, pa.ArrowException):
                missing = None  # unreadable further on: reported when reached
            if missing is not None:
                raise ValueError(f"{where}, line {missing[0]}: no text key {missing[1]!r} "
                                 f"(a missing key is an error; a null text is written "
                                 f"\"{missing[1]}\": null)")
        if enc.batch_rows and t.num_rows > enc.batch_rows:
            for s in range(0, t.num_rows, enc.batch_rows):
                yield t.select(cols).slice(s, enc.batch_rows)
        else:
            yield t.select(cols)


# ------------------------------------------------------------------------- one file
class _Moment:
    """Something that happens once, in another thread, and what to do then: :meth:`then`
    registers a call (made at once when it has happened), :meth:`happen` makes the calls,
    :meth:`cancel` (the consumer stopped) drops them and waits for one being made."""

    def __init__(self):
        self._lock = threading.Lock()
        self._fns = []
        self._done = self._cancelled = False

    def then(self, fn):
        with self._lock:
            if not self._done:
                self._fns.append(fn)
                return
            if self._cancelled:
                return
        fn()

    def happen(self):
        with self._lock:
            self._done = True
            fns, self._fns = self._fns, []
            for fn in fns if not self._cancelled else ():
                try:
                    fn()
                except Exception:  # noqa: BLE001, S110 - the next file raises in its turn
                    pass

    def cancel(self):
        with self._lock:
            self._done = self._cancelled = True
            self._fns = []


class _ReadAhead:
    """An iterator's items made in a thread ahead of the one consuming them: item ``j`` once
    the consumer has taken item ``j - 1`` and the consumer's own consumer (:meth:`passed`)
    item ``j - 2`` (and ``owed`` items before: another file's); one item being made at a
    time.  ``read`` (a :class:`_Moment`) happens once the iterator is exhausted;
    :meth:`close` waits for an item being made and gives it to ``on_drop``."""

    _END = object()

    def __init__(self, it, on_drop, owed=0):
        from concurrent.futures import ThreadPoolExecutor

        self._it, self._on_drop = it, on_drop
        self.read = _Moment()
        self._cond = threading.Condition()
        self._asked = self._took = 0
        self._passed = -owed  # items downstream to be taken first (another file's)
        self._next = None  # the item being made (a future)
        self._over = False  # exhausted, failed or stopped: nothing more is made
        self.stopped = False
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="lodarrow-tokenize-read")
        with self._cond:
            self._ask()

    def _ask(self):
        """The next item made if it may be (under the condition)."""
        j = self._asked
        if self._next is None and not self._over and j <= self._took and \
                j <= self._passed + 1:
            self._asked += 1
            self._next = self._pool.submit(self._make)
            self._cond.notify_all()

    def _make(self):
        item = next(self._it, self._END)
        if item is self._END:
            self.read.happen()
        return item

    def passed(self):
        """One more item taken downstream of the consumer."""
        with self._cond:
            self._passed += 1
            self._ask()

    def at_end(self):
        """Whether the iterator is known to be exhausted after the item last taken."""
        with self._cond:
            f = self._next
        return f is not None and f.done() and f.exception() is None and \
            f.result() is self._END

    def stop(self):
        """Make nothing more, and end a wait in :meth:`__iter__` (the consumer stopped)."""
        self.read.cancel()
        with self._cond:
            self._over = self.stopped = True
            self._cond.notify_all()

    def __iter__(self):
        while True:
            with self._cond:
                while self._next is None and not self._over:
                    self._cond.wait(0.1)
                pending = self._next
            if pending is None:
                return
            try:
                item = pending.result()  # raises what reading raised
            except BaseException:
                with self._cond:
                    self._next, self._over = None, True
                raise
            with self._cond:
                self._next = None
                if item is self._END:
                    self._over = True
                    return
                self._took += 1
                self._ask()
            yield item

    def close(self):
        self.read.cancel()
        with self._cond:
            self._over = True
            pending, self._next = self._next, None
        if pending is not None:
            try:
                item = pending.result()
            except BaseException:  # noqa: BLE001 - the consumer has stopped already
                item = self._END
            if item is not self._END:
                self._on_drop(item)
        self._pool.shutdown(wait=True)
        self._it.close()


class _Prefetch:
    """An iterator run in a thread, its items handed over through a queue of one (bounded:
    memory).

    ``on_drop(item)`` is called for every item produced but never handed over (the
    consumer stopped early): the in-flight count stays exact.  ``on_take()`` is called as
    the consumer takes each item, ``on_close()`` in :meth:`close`.  ``encoded`` and
    ``taken`` (:class:`_Moment`) happen once ``it`` is exhausted (or earlier: ``it`` may
    make ``encoded`` happen itself), and once the consumer holds the last item.
    """

    _END = object()

    def __init__(self, it, on_drop=None, on_take=None, on_close=None, encoded=None):
        self.encoded, self.taken = encoded or _Moment(), _Moment()
        self._q = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._on_drop = on_drop or (lambda item: None)
        self._on_take = on_take or (lambda: None)
        self._on_close = on_close or (lambda: None)
        self._cond = threading.Condition()  # items put and taken
        self._put_n = self._taken_n = 0
        self._t = threading.Thread(target=self._run, args=(it,), daemon=True,
                                   name="lodarrow-tokenize-ahead")
        self._t.start()

    def _put(self, entry):
        """Put ``entry`` unless the consumer stopped (then False)."""
        while not self._stop.is_set():
            try:
                self._q.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, it):
        try:
            for item in it:
                with self._cond:
                    self._put_n += 1
                if not self._put((True, item)):
                    self._on_drop(item)
                    return
                del item
            if not self._stop.is_set():
                self.encoded.happen()
            with self._cond:  # until the consumer holds the last item
                while self._taken_n < self._put_n and not self._stop.is_set():
                    self._cond.wait(0.1)
            if not self._stop.is_set():
                self.taken.happen()
            self._put((True, self._END))
        except BaseException as exc:  # handed to the consumer
            self._put((False, exc))
        finally:
            close = getattr(it, "close", None)
            if close is not None:  # a generator stopped early: its clean-up now
                close()

    def __iter__(self):
        while True:
            ok, item = self._q.get()
            if not ok:
                raise item
            if item is self._END:
                return
            with self._cond:
                self._taken_n += 1
                self._cond.notify_all()
            self._on_take()
            yield item

    def close(self):
        with self._cond:
            self._stop.set()
            self._cond.notify_all()
        self._on_close()
        self.encoded.cancel()
        self.taken.cancel()
        self._t.join(timeout=5)
        while True:
            try:
                ok, item = self._q.get_nowait()
            except queue.Empty:
                break
            if ok and item is not self._END:
                self._on_drop(item)


#: Batches in flight at once, five at most (one read ahead, one waiting to be taken, one
#: being encoded and converted, one waiting to be written, one being written), across the
#: file being converted and the next one: what the memory bound counts.  Tests read the high-water
#: mark.
IN_FLIGHT = {"now": 0, "max": 0}
_IN_FLIGHT_LOCK = threading.Lock()


def _flight(delta):
    with _IN_FLIGHT_LOCK:
        IN_FLIGHT["now"] += delta
        IN_FLIGHT["max"] = max(IN_FLIGHT["max"], IN_FLIGHT["now"])


def _tokenize_file(inp, enc, out_path, write_options, bar, fn, started=None, nxt=None):
    """One input to one output file (written to a temporary name, then renamed); returns
    the counts.

    ``started``: ``(schema, reader)`` of this input from :func:`_start_reading` (the
    previous file started it), or None.  ``nxt``: the next input's :class:`_NextFile`, or
    None: it is opened and its first batch read once this input's last is (in this input's
    threads), so that the tokenizer goes on to it, read already, once this file's last
    batch is converted, written and its file closed.
    """
    import pyarrow.parquet as pq

    block = None
    while True:
        try:
            return _tokenize_file_once(pq, inp, enc, out_path, write_options, bar, fn, block,
                                       started, nxt)
        except _BlockTooSmall:
            started = None
            block = (block or DEFAULT_BATCH_BYTES) * 4
            if block > 1 << 31:
                raise ValueError(f"{fn}: {inp.path!r}: a line is longer than 2 GiB") from None


class _BlockTooSmall(Exception):
    pass


def _read_ahead(inp, enc, fn, block=None, owed=0):
    """``(schema, ahead)``: ``inp`` opened and its batches read (rows dropped, the texts
    made Python strings) ahead in a thread (:class:`_ReadAhead`)."""
    schema, batches = _open(inp, enc, fn, block)

    def texts():
        start = 0
        for table in batches:
            _flight(+1)
            try:
                item = enc.texts(table, start)
            except BaseException:
                _flight(-1)
                raise
            start += table.num_rows
            yield item

    return schema, _ReadAhead(texts(), on_drop=lambda item: _flight(-1), owed=owed)


def _start_reading(inp, enc, fn, block=None, owed=0, gate=None):
    """``(schema, reader)``: ``inp``'s batches read ahead (:func:`_read_ahead`) and, once
    ``gate`` (an Event, or None) is set, handed to the caller through a thread
    (:class:`_Prefetch`); the caller encodes each (the tokenizer's threads, without the
    GIL) and converts it.  Batch ``j`` is read once batch ``j - 2`` is taken by the caller
    (in flight, this file's: one read ahead, one waiting, and the caller's).
    ``reader.read``, ``reader.encoded`` and ``reader.taken`` (:class:`_Moment`) happen
    once the last batch is read, handed on, and taken by the caller; ``reader.passed()``
    stands for one batch taken (``owed``: another file's, taken after this reading
    started)."""
    schema, ahead = _read_ahead(inp, enc, fn, block, owed)
    encoded = _Moment()

    def prepared():
        try:
            while gate is not None and not gate.wait(0.1):  # the first batch read meanwhile
                if ahead.stopped:
                    return
            for item in ahead:
                if ahead.at_end():  # the last batch: the next file's may be handed over now
                    encoded.happen()
                yield item
                del item
        finally:
            ahead.close()

    reader = _Prefetch(prepared(), on_drop=lambda item: _flight(-1), on_take=ahead.passed,
                       on_close=ahead.stop, encoded=encoded)
    reader.read, reader.passed = ahead.read, ahead.passed
    return schema, reader


def _tokenize_file_once(pq, inp, enc, out_path, write_options, bar, fn, block,
                        started=None, nxt=None):
    where = f"{fn}: {inp.path!r}" if inp.kind != "memory" else f"{fn}: the source"
    schema, reader = started or _start_reading(inp, enc, fn, block)
    if nxt is not None:  # no pause of the tokenizer between files
        reader.read.then(nxt.open)
        reader.encoded.then(nxt.start)
        reader.taken.then(nxt.passed)
    try:
        out_schema = enc.output_schema(schema)
        folder, leaf = os.path.split(out_path)
        os.makedirs(folder, exist_ok=True)
    except BaseException:
        reader.close()
        raise
    # unique to this run: a worker of a killed run still writing cannot clash with it
    tmp = os.path.join(folder, f".{leaf}.{os.getpid()}-{os.urandom(4).hex()}{_TMP}")
    totals = dict(documents=0, rows=0, tokens=0, dropped_nulls=0, dropped_empty=0,
                  truncated_tokens=0)
    recorder = LengthsRecorder(out_schema)
    writer_q = queue.Queue(maxsize=1)
    write_error = []

    def write_loop(writer):
        while True:
            item = writer_q.get()
            if item is None:
                return
            try:
                if not write_error:
                    writer.write_table(item, row_group_size=max(item.num_rows, 1))
            except BaseException as exc:
                write_error.append(exc)
            finally:
                _flight(-1)

    writer = None
    thread = None
    bytes_per_row = None
    sent = 0.0
    try:
        writer = pq.ParquetWriter(tmp, out_schema, **write_options)
        thread = threading.Thread(target=write_loop, args=(writer,), daemon=True,
                                  name="lodarrow-tokenize-write")
        thread.start()
        items = iter(reader)
        while True:
            try:
                item = next(items)
            except StopIteration:
                break
            except (pa.ArrowInvalid, OSError) as exc:
                if "straddling" in str(exc) and inp.kind == "json":
                    raise _BlockTooSmall() from None
                line = _first_bad_json_line(inp.path, enc.text) if inp.kind == "json" \
                    else None
                extra = f", line {line}" if line is not None else \
                    f" (after {totals['documents']} rows)"
                # a damaged file (a truncated .gz, .zst, .bz2) is a ValueError
                kind = type(exc) if isinstance(exc, (FileNotFoundError, PermissionError)) \
                    else ValueError
                raise kind(f"{where}{extra}: cannot read: {exc}") from exc
            except ValueError as exc:
                if getattr(exc, "row", None) is None:
                    raise
                raise ValueError(f"{where}, {exc}") from exc
            start, n = item[1], item[3]["documents"]
            try:
                # encoded here, not ahead in a thread: the tokenizer's threads take every
                # core, and the conversion below run beside them only takes turns with them
                # (3-4% more CPU a token measured, on two cores, and wider swings)
                out, counts = enc.finish(enc.encode(item))
            except (ValueError, TypeError) as exc:
                _flight(-1)
                raise type(exc)(f"{where}, {exc}" if getattr(exc, "row", None) is not None
                                else f"{where}, rows {start}-{start + n - 1}: {exc}") from exc
            except Exception as exc:  # e.g. a callable tokenizer's own error: kept, located
                _flight(-1)
                exc.add_note(f"{where}, rows {start}-{start + n - 1}")
                raise
            except BaseException:
                _flight(-1)
                raise
            del item
            if not out.schema.equals(out_schema, check_metadata=False):
                out = out.cast(out_schema)
            out = out.replace_schema_metadata(out_schema.metadata)
            for k, v in counts.items():
                totals[k] += v
            recorder.add(out)
            if write_error:
                _flight(-1)
                raise write_error[0]
            writer_q.put(out)
            if bytes_per_row is None:  # known for Parquet; else counted at the end
                rows_all = _rows_hint(inp)
                bytes_per_row = inp.size / rows_all if rows_all else 0.0
            share = min(bytes_per_row * n, inp.size - sent)
            sent += share
            bar.advance(n, share, tokens=counts["tokens"])
        writer_q.put(None)
        thread.join()
        thread = None
        if write_error:
            raise write_error[0]
        # the counts, for the summary of a run that resumes with this file done
        writer.add_key_value_metadata({_COUNTS_KEY: json.dumps(totals)})
        writer.close()
        writer = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stamped = recorder.stamp(tmp, fn=fn)
        if not stamped and write_options.get("store_schema", True):
            # never a finished file without its lengths (a resume would accept it)
            why = "; ".join(str(w.message) for w in caught) or "not recorded"
            raise OSError(f"{where}: cannot record the sequence lengths in the output's "
                          f"footer: {why}")
        os.replace(tmp, out_path)
    except BaseException:
        reader.close()
        if thread is not None:
            writer_q.put(None)
            thread.join()
        if writer is not None:
            try:
                writer.close()
            except Exception:
                pass
        remove_partial(tmp)
        raise
    reader.close()
    bar.advance(0, inp.size - sent)
    bar.file_done()
    totals["bytes_out"] = os.path.getsize(out_path)
    return totals


def _rows_hint(inp):
    """The input's rows where its metadata says (Parquet), else None."""
    if inp.kind == "parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_metadata(inp.path).num_rows
        except (OSError, pa.ArrowException):
            return None
    return None


def _worker(args):
    """A worker process's file (``processes=``): one file, no progress bar."""
    inp, enc, out_path, write_options = args
    enc.load()  # here, not while unpickling: an error reaches the caller through the future
    return _tokenize_file(inp, enc, out_path, write_options, Progress(1, 0, False), "tokenize")


def _init_worker(threads):
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    _die_with_parent()


def _die_with_parent():
    """End this worker when the process that started it dies (a killed run leaves no
    worker writing): PR_SET_PDEATHSIG on Linux, else a thread watching ``os.getppid()``."""
    import multiprocessing

    starter = multiprocessing.parent_process()
    parent = starter.pid if starter is not None else os.getppid()
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0:  # 1: PR_SET_PDEATHSIG
            if os.getppid() != parent:  # it died before the call
                os._exit(1)
            return
    except (OSError, AttributeError, ValueError):
        pass

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="lodarrow-tokenize-parent").start()


_TMP = ".lodarrow-tmp"
_COUNTS_KEY = "lodarrow.tokenize"


def _lock_staging(staging, fn):
    """An exclusive lock on the staging directory (held until the descriptor is closed):
    two runs of the same job refuse each other instead of writing the same files."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        return None
    fd = os.open(staging, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise RuntimeError(f"{fn}: another run of this job is writing {staging!r}; wait for "
                           f"it to end (or end it) and run again") from None
    return fd


def _clear_stale(staging, keep):
    """Remove the temporary files a killed run left in ``staging`` (every file, unless
    ``keep``: a resume keeps the finished ones)."""
    for root, dirs, files in os.walk(staging):
        for f in files:
            if not keep or f.endswith(_TMP):
                os.remove(os.path.join(root, f))


def _finished_counts(path, write_options):
    """The counts of a finished output file (read from its footer), or None when the file
    must be written again: missing, unreadable, or without its counts or its lengths."""
    import pyarrow.parquet as pq

    if not os.path.exists(path):
        return None
    try:
        meta = pq.read_metadata(path).metadata or {}
        counts = json.loads(meta[_COUNTS_KEY.encode()])
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None
    if FOOTER_KEY not in meta and write_options.get("store_schema", True):
        return None
    return counts


# ------------------------------------------------------------------------- the summary
@dataclasses.dataclass(frozen=True)
class TokenizeSummary:
    """What :func:`tokenize` did.

    Attributes
    ----------
    dest : str
        The output dataset directory.
    files : int
        Output files (one per input file; an in-memory source is cut into parts).
    resumed : int
        Files an earlier, interrupted run of the same job had finished (not redone).
    documents : int
        Input rows read (by this run).
    rows : int
        Rows written (documents less the dropped ones, more where ``overflow="split"``
        cut a document into several rows).
    tokens : int
        Token ids written (bos, eos and separators included).
    dropped_nulls, dropped_empty : int
        Documents dropped for a null text (``nulls="drop"``) or an empty one
        (``drop_empty=True``).
    truncated_tokens : int
        Ids cut off by ``max_length`` with ``overflow="truncate"``.
    dtype : str
        The token column's value type, ``"uint16"`` or ``"int32"`` (or the ``dtype=`` given).
    vocab_size : int or None
        The vocabulary the ids were checked against.
    bytes_in, bytes_out : int
        Bytes of the input files and of the output files on disk.
    seconds : float
        Wall time of the run.
    """

    dest: str
    files: int
    resumed: int
    documents: int
    rows: int
    tokens: int
    dropped_nulls: int
    dropped_empty: int
    truncated_tokens: int
    dtype: str
    vocab_size: object
    bytes_in: int
    bytes_out: int
    seconds: float

    @property
    def tokens_per_second(self):
        """Tokens written per second of wall time."""
        return self.tokens / self.seconds if self.seconds > 0 else float("inf")

    def __str__(self):
        resumed = f" ({self.resumed} resumed)" if self.resumed else ""
        return (f"{self.files} files{resumed}, {self.documents:,} documents -> {self.rows:,} "
                f"rows, {self.tokens:,} tokens (list<{self.dtype}>) in {self.seconds:.2f} s "
                f"({self.tokens_per_second:,.0f} tokens/s), {_mb(self.bytes_in)} -> "
                f"{_mb(self.bytes_out)} -> {self.dest}")


# ------------------------------------------------------------------------- tokenize
def tokenize(source, dest, tokenizer, *, text="text", out="tokens", columns=None, bos=None,
             eos=None, separator=None, max_length=None, overflow="split", drop_empty=False,
             nulls="error", vocab_size=None, dtype=None, add_special_tokens=True,
             batch_rows=None, processes=None, progress=None, overwrite=False, resume=True,
             **write_options):
    """Tokenize a text corpus into a Parquet dataset of token lists the loader reads directly.

    Each input is read a batch of documents at a time, tokenized, and written to one output
    file at the same relative path under ``dest`` (``.parquet``; one row group per batch),
    rows in the input's order.  Every document's ids are exactly the tokenizer's ``encode``
    of its text (with ``bos`` / ``eos`` / ``separator`` ids around them where given).  Each
    file's footer records its sequence lengths (as :func:`lodarrow.write_parquet` does), so
    :func:`lodarrow.batch_loader` and :func:`lodarrow.sequence_lengths` start without a
    lengths pass.  See docs/tokenize.md.

    Parameters
    ----------
    source : str, path-like, list of them, datasets.Dataset or pyarrow.Table
        A file, a directory (read recursively; names starting with ``.`` or ``_`` and a
        ``datasets`` directory's ``dataset_info.json`` / ``state.json`` are skipped), a glob
        or a list of files: Parquet (``.parquet``), JSON lines (``.jsonl``, ``.ndjson``,
        ``.json``, each optionally ``.gz``, ``.zst``, ``.bz2``) or Arrow IPC (``.arrow``,
        ``.feather``: ``datasets``' ``save_to_disk`` and cache files).  Or a
        ``datasets.Dataset`` (its rows in its order) or a ``pyarrow.Table`` in memory,
        written as parts of 2**20 rows.
    dest : str or path-like
        The output dataset directory; it must not exist (or be empty) unless ``overwrite``.
        It appears only when every file is written.
    tokenizer : tokenizers.Tokenizer, str, transformers fast tokenizer or callable
        A Hugging Face ``tokenizers.Tokenizer``, a path to its ``tokenizer.json``, a
        ``transformers`` fast tokenizer (its ``backend_tokenizer`` encodes), or a callable
        mapping a list of str to a list of id sequences (lists, NumPy arrays) or a
        ``pyarrow`` list array.  A path is loaded once a process: a later call given a
        file of the same bytes reuses that tokenizer (docs/tokenize.md).
    text : str or list of str, default "text"
        The text column.  Several columns are tokenized each on its own and joined per row
        with ``separator`` between them.
    out : str, default "tokens"
        The token column, written last.
    columns : list of str, optional
        The other columns to keep, in this order.  By default every column but the text.
    bos, eos : int or list of int, optional
        Ids put before / after every document's ids (after the tokenizer's own special
        tokens, see ``add_special_tokens``): ``eos=`` is Megatron's ``--append-eod``.
    separator : int or list of int, optional
        Ids between the texts of several ``text`` columns.
    max_length : int, optional
        The longest row written, in ids (bos and eos counted).
    overflow : {"split", "truncate"}, default "split"
        A longer document is cut into consecutive rows of ``max_length`` ids (the last one
        shorter; its other columns repeated), or truncated to ``max_length`` ids: bos, the
        first ``max_length - len(bos) - len(eos)`` ids of the text, eos (the ids cut off
        counted in ``truncated_tokens``; a ``max_length`` shorter than bos and eos is a
        ValueError).
    drop_empty : bool, default False
        Drop documents whose text is empty or only whitespace (before tokenizing).
    nulls : {"error", "drop"}, default "error"
        A null text is an error naming the file and row, or the row is dropped (counted).
    vocab_size : int, optional
        The vocabulary every id must fall in.  By default the tokenizer's (added tokens
        included); a callable's ids are then only checked to fit ``dtype``.
    dtype : {"uint16", "int32", "int64"}, optional
        The token column's value type.  By default the narrowest that holds the vocabulary:
        ``uint16`` for up to 65,536 ids, else ``int32`` (``int32`` for a callable without
        ``vocab_size``).
    add_special_tokens : bool, default True
        Passed to the tokenizer's ``encode_batch`` (its post-processor's BOS / CLS ...), as
        its ``encode`` does by default.
    batch_rows : int, optional
        Documents per batch (and per row group).  By default about 4 MiB of text per batch
        (between 64 and 65,536 documents): about a million tokens per row group.
    processes : int, optional
        Worker processes, each tokenizing whole files with one tokenizer thread.  By
        default one process whose tokenizer uses every core (``encode_batch``'s own
        threads, without the GIL) while reading and writing overlap in other threads: the
        faster of the two on a 2-core machine, and the only one that
        parallelises a single file (docs/tokenize.md, "Measured").  Workers are started
        by "spawn": a script passing ``processes`` runs under
        ``if __name__ == "__main__":``.
    progress : bool, optional
        A progress bar on stderr (files, documents, tokens, tokens/s, bytes); by default
        only when stderr is a terminal.
    overwrite : bool, default False
        Replace an existing ``dest`` once the new dataset is complete.
    resume : bool, default True
        Keep the finished files of a killed or failed run (in a hidden staging directory
        beside ``dest``, named after the job) and skip them when the same job runs again.
        False starts afresh (and removes what a failed run wrote).
    **write_options
        Passed to ``pyarrow.parquet.ParquetWriter`` (``compression``, ...).

    Returns
    -------
    TokenizeSummary
        ``files``, ``resumed``, ``documents``, ``rows``, ``tokens``, the dropped and
        truncated counts, ``dtype``, ``vocab_size``, bytes and ``seconds``.

    Raises
    ------
    TypeError
        For an argument of the wrong type, or a text column that is not strings (naming
        the file and the column's type).
    KeyError
        If an input has no text column, or lacks a column of ``columns`` (naming the file).
    ValueError
        For a bad option value, a null text (``nulls="error"``) or an id outside the
        vocabulary (naming the file and the row), an input that cannot be parsed (naming
        the file and, for JSON lines, the line), a URI ``source`` (local files only), a
        tokenizer file that is not a ``tokenizer.json``, or whose bytes a ``processes=``
        worker finds changed since the job loaded it.
    FileNotFoundError, FileExistsError
        If ``source`` or the tokenizer file does not exist; if ``dest`` exists and
        ``overwrite`` is false (another ``OSError`` reading the tokenizer file, e.g. a
        directory, keeps its type).
    Exception
        A callable tokenizer's own error keeps its type, with a note naming the file and
        the batch's rows.

    See Also
    --------
    tokenize_udf : The same encoding as a udf for Ray Data, Dask and Spark.
    batch_loader : Training batches from the token lists.

    Notes
    -----
    Every input's schema is checked before anything is tokenized, and ids are checked
    against the vocabulary in every batch before it is written; ``dest`` itself appears
    only when every file is complete (a staging directory renamed to it), so a run that
    fails leaves no dataset.  Memory: at most five batches in flight per call (one read
    ahead, one waiting, one being tokenized and converted to Arrow, one waiting to be
    written, one being written; a batch is about 4 MiB of text, its ``Encoding`` objects
    and its ids), whatever the corpus's size.

    Examples
    --------
    >>> import os, tempfile, pyarrow as pa, pyarrow.parquet as pq, lodarrow as la
    >>> root = tempfile.mkdtemp()
    >>> pq.write_table(pa.table({"id": [1, 2], "text": ["to be", "or not to be"]}),
    ...                os.path.join(root, "a.parquet"))
    >>> words = {"to": 1, "be": 2, "or": 3, "not": 4}
    >>> s = la.tokenize(os.path.join(root, "a.parquet"), os.path.join(root, "tok"),
    ...                 lambda texts: [[words[w] for w in t.split()] for t in texts],
    ...                 vocab_size=5, eos=0, progress=False)
    >>> s.tokens, s.dtype
    (8, 'uint16')
    >>> pq.read_table(os.path.join(root, "tok")).to_pylist()
    [{'id': 1, 'tokens': [1, 2, 0]}, {'id': 2, 'tokens': [3, 4, 1, 2, 0]}]
    """
    fn = "tokenize"
    t0 = time.perf_counter()
    enc = _Encoder(tokenizer, text, out, columns, bos, eos, separator, max_length, overflow,
                   drop_empty, nulls, vocab_size, dtype, add_special_tokens, fn)
    enc.batch_rows = None if batch_rows is None else as_positive_int(batch_rows,
                                                                     f"{fn}: batch_rows")
    if processes is not None:
        processes = as_positive_int(processes, f"{fn}: processes")
    for name, flag in (("overwrite", overwrite), ("resume", resume)):
        if not isinstance(flag, bool):
            raise TypeError(f"{fn}: {name} must be a bool, got {type(flag).__name__}")
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"{fn}: progress must be True, False or None")
    if "row_group_size" in write_options:
        raise TypeError(f"{fn}: row_group_size is not a write option here: each batch is one "
                        f"row group, so give batch_rows= instead")
    try:
        import pyarrow.parquet as pq

        pq.ParquetWriter(pa.BufferOutputStream(), pa.schema([("x", pa.int8())]),
                         **write_options).close()
    except TypeError as exc:
        raise TypeError(f"{fn}: bad write option for pyarrow.parquet.ParquetWriter "
                        f"({exc})") from None
    if not isinstance(dest, (str, os.PathLike)):
        raise TypeError(f"{fn}: dest must be a path, got {type(dest).__name__}")
    inputs, resumable = _resolve(source, fn)
    dest = free_dest(dest, overwrite, fn)
    for inp in inputs:
        if inp.kind != "memory" and (os.path.realpath(inp.path) + os.sep).startswith(
                os.path.realpath(dest) + os.sep):
            raise ValueError(f"{fn}: the input {inp.path!r} is inside dest {dest!r}; write "
                             f"the output somewhere else")
    # every input is opened and its schema checked before anything is written
    for inp in inputs:
        if inp.kind == "json":
            _check_json_head(inp, enc, fn)  # the first line (a block is parsed when read)
        else:
            _open(inp, enc, fn)
    if progress is None:
        try:
            progress = sys.stderr.isatty()
        except (AttributeError, ValueError):
            progress = False

    parent, name = os.path.split(dest)
    os.makedirs(parent, exist_ok=True)
    resume = resume and bool(resumable)
    key = hashlib.sha256(json.dumps(
        [enc.identity(), sorted(write_options.items(), key=str), str(resumable),
         [(i.rel, i.size, i.mtime_ns) for i in inputs]], default=str).encode()).hexdigest()
    if not resumable:  # a table in memory: no identity to resume by, a staging of its own
        import uuid

        key = uuid.uuid4().hex
    staging = os.path.join(parent, f".{name}.lodarrow-tokenize-{key[:16]}")
    os.makedirs(staging, exist_ok=True)
    lock = _lock_staging(staging, fn)
    try:
        return _run_locked(inputs, enc, staging, dest, resume, overwrite, write_options,
                           processes, progress, fn, t0)
    finally:
        if lock is not None:
            os.close(lock)


def _run_locked(inputs, enc, staging, dest, resume, overwrite, write_options, processes,
                progress, fn, t0):
    """:func:`tokenize` once the staging directory is locked."""
    _clear_stale(staging, keep=resume)
    totals = dict(documents=0, rows=0, tokens=0, dropped_nulls=0, dropped_empty=0,
                  truncated_tokens=0, bytes_out=0)
    done = []
    for i in inputs:
        counts = _finished_counts(os.path.join(staging, *i.rel.split("/")), write_options)
        done.append(counts is not None)
        for k in totals:
            if k != "bytes_out":
                totals[k] += int(counts.get(k, 0)) if counts else 0
    todo = [k for k in range(len(inputs)) if not done[k]]
    bar = Progress(len(inputs), sum(i.size for i in inputs), enabled=progress,
                   label=fn, tokens=True)
    for _ in range(len(inputs) - len(todo)):
        bar.file_done()
    ok = False
    try:
        paths = {k: os.path.join(staging, *inputs[k].rel.split("/")) for k in todo}
        if processes is None or processes == 1 or len(todo) <= 1:
            results = _in_turn(inputs, enc, paths, todo, write_options, bar, fn)
        else:
            results = _in_processes(inputs, enc, paths, todo, write_options, processes, bar)
        for r in results:
            for k in totals:
                totals[k] += r[k]
        ok = True
    finally:
        bar.close(ok)
        if not ok and not resume:
            shutil.rmtree(staging, ignore_errors=True)
    for k in range(len(inputs)):
        if done[k]:
            totals["bytes_out"] += os.path.getsize(os.path.join(staging,
                                                                *inputs[k].rel.split("/")))
    _publish(staging, dest, overwrite)
    return TokenizeSummary(
        dest=dest, files=len(inputs), resumed=sum(done), documents=totals["documents"],
        rows=totals["rows"], tokens=totals["tokens"], dropped_nulls=totals["dropped_nulls"],
        dropped_empty=totals["dropped_empty"], truncated_tokens=totals["truncated_tokens"],
        dtype=enc.dtype.name, vocab_size=enc.vocab_size,
        bytes_in=sum(i.size for i in inputs), bytes_out=totals["bytes_out"],
        seconds=time.perf_counter() - t0)


class _NextFile:
    """The next input's reading, started by the file before it (in that file's threads):
    opened, its first batch read and its hand-over thread started once that file's last
    batch is read (:meth:`open`), its first batch handed on once that one's last is
    (:meth:`start`), its second read once that one's last is taken for conversion
    (:meth:`passed`).  In flight at most five batches all told: that file's last being
    encoded and converted and two being written, this one's first waiting and second read
    ahead.
    An input that cannot be opened here is opened again in its turn, which raises, naming
    it."""

    _ERRORS = (OSError, ValueError, TypeError, KeyError, pa.ArrowException)

    def __init__(self, inp, enc, fn):
        self._args = (inp, enc, fn)
        self._lock = threading.Lock()
        self._gate = threading.Event()
        self.started = None
        self._opened = self._passed = self._closed = False

    def open(self):
        with self._lock:
            if not self._opened and not self._closed:
                self._opened = True
                try:
                    self.started = _start_reading(*self._args, owed=0 if self._passed else 1,
                                                  gate=self._gate)
                except self._ERRORS:
                    pass

    def start(self):
        self.open()  # opened already, unless the file before it had no batch to read
        self._gate.set()

    def passed(self):
        with self._lock:
            if not self._passed:
                self._passed = True
                if self.started is not None:
                    self.started[1].passed()

    def take(self):
        """``(schema, reader)`` or None: the reading, handed over to its file."""
        self.start()
        with self._lock:
            started, self.started = self.started, None
            return started

    def close(self):
        with self._lock:
            self._closed = True
            started, self.started = self.started, None
        if started is not None:
            started[1].close()
        self._gate.set()


def _in_turn(inputs, enc, paths, todo, write_options, bar, fn):
    """The files one after the other in this process, each next file's reading started by
    the one before it (:class:`_NextFile`: no pause of the tokenizer between files)."""
    results = []
    nxt = None
    try:
        for i, k in enumerate(todo):
            started = nxt.take() if nxt is not None else None
            nxt = _NextFile(inputs[todo[i + 1]], enc, fn) if i + 1 < len(todo) else None
            results.append(_tokenize_file(inputs[k], enc, paths[k], write_options, bar, fn,
                                          started, nxt))
    finally:  # a failure left the next file's reading going
        if nxt is not None:
            nxt.close()
    return results


def _in_processes(inputs, enc, paths, todo, write_options, processes, bar):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(processes, len(todo)), mp_context=ctx,
                             initializer=_init_worker, initargs=(1,)) as pool:
        futures = [pool.submit(_worker, (inputs[k], enc, paths[k], write_options))
                   for k in todo]
        results = []
        try:
            for k, f in zip(todo, futures):
                r = f.result()
                bar.advance(r["documents"], inputs[k].size, tokens=r["tokens"])
                bar.file_done()
                results.append(r)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    return results

