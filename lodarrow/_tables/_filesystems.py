"""Where Parquet files live: local paths, URIs (``s3://``, ``gs://``) and filesystems.

One vocabulary for every reader and writer of lodarrow (docs/scale-out.md#remote-corpora):

- a *local* source is an ``os`` path; its filesystem is ``None`` and the ``os`` and
  ``pyarrow.parquet`` functions open it directly;
- a *remote* source is a path inside a ``pyarrow.fs.FileSystem``: one given with
  ``filesystem=`` (a pyarrow filesystem, or an fsspec one wrapped in
  ``pyarrow.fs.PyFileSystem(FSSpecHandler(fs))``), or the one a URI names
  (``pyarrow.fs.FileSystem.from_uri``: ``s3://bucket/key`` -> S3, ``gs://`` -> GCS, with
  credentials and endpoints from the environment as pyarrow reads them).

Every error about a file names the file: :func:`open_parquet` and :func:`read_footer` turn
pyarrow's bare messages ("Parquet file size is 0 bytes", "Parquet magic bytes not found")
into the same exception type with the file and the caller in front.

``pyarrow.fs`` and ``pyarrow.parquet`` are imported inside the functions.
"""

import hashlib
import re
import struct

import pyarrow as pa

__all__ = ["as_filesystem", "split_source", "display_path", "open_parquet", "read_footer",
           "reraise", "is_uri", "join", "parent", "relative"]

#: URI schemes whose path is a filesystem's (``from_uri``); ``file://`` is a local path.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: How a remote path is shown in messages, by ``FileSystem.type_name``.
_SCHEMES = {"s3": "s3://", "gcs": "gs://", "hdfs": "hdfs://"}
#: Bytes read from the end of a file for its footer in one request (as pyarrow does: most
#: footers fit, so a remote file's metadata costs one ranged GET).
_TAIL = 64 << 10

#: Exception types whose constructor takes one message (re-raised with the file in front).
_MESSAGE_TYPES = (ValueError, TypeError, IndexError, KeyError, RuntimeError, OSError,
                  ArithmeticError, NotImplementedError, AssertionError)


def is_uri(text):
    """Whether ``text`` (a str) starts with ``scheme://``."""
    return isinstance(text, str) and _URI.match(text) is not None


def as_filesystem(filesystem, fn):
    """``filesystem`` as a ``pyarrow.fs.FileSystem`` (None stays None).

    An fsspec filesystem (anything with fsspec's ``AbstractFileSystem`` interface) is wrapped
    in ``pyarrow.fs.PyFileSystem(FSSpecHandler(...))``; pyarrow's local filesystem becomes
    None (a local path).
    """
    if filesystem is None:
        return None
    import pyarrow.fs as pafs

    if isinstance(filesystem, pafs.FileSystem):
        return None if filesystem.type_name == "local" else filesystem
    if _is_fsspec(filesystem):
        protocol = filesystem.protocol
        protocol = protocol[0] if isinstance(protocol, (tuple, list)) else protocol
        if protocol in ("file", "local"):
            return None
        return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
    raise TypeError(f"{fn}: filesystem must be a pyarrow.fs.FileSystem or an fsspec "
                    f"filesystem, got {type(filesystem).__name__}")


def _is_fsspec(obj):
    try:
        from fsspec import AbstractFileSystem
    except ImportError:
        return False
    return isinstance(obj, AbstractFileSystem)


def split_source(source, filesystem, fn, arg):
    """``(filesystem, source)``: the filesystem a source lives on and its paths in it.

    ``filesystem`` (already through :func:`as_filesystem`) wins; else a URI names its own
    (every URI of a list the same one).  A URI given with a filesystem loses its scheme
    (``s3://bucket/key`` -> ``bucket/key``, what pyarrow's and fsspec's object-store
    filesystems take).  ``file://`` URIs are local paths.  Returns ``(None, source)`` for a
    local source.
    """
    items = source if isinstance(source, (list, tuple)) else [source]
    uris = [x for x in items if is_uri(x)]
    if not uris:
        return filesystem, source
    if filesystem is not None:
        stripped = [_URI.sub("", x) if is_uri(x) else x for x in items]
        return filesystem, stripped if isinstance(source, (list, tuple)) else stripped[0]
    import pyarrow.fs as pafs

    found, paths = None, []
    for k, x in enumerate(items):
        if not is_uri(x):
            raise ValueError(f"{fn}: {arg} mixes URIs and local paths ({x!r}); give every "
                             f"file as a URI of the same filesystem")
        scheme = _URI.match(x).group(1).lower()
        if scheme == "file":
            fs_, path = None, x[len("file://"):]
        else:
            # pyarrow parses the URI before its first glob character ("?" starts a query,
            # ``s3://bucket/key?endpoint_override=...``, as in from_uri)
            try:
                head, rest = _split_glob(x)
                fs_, path = pafs.FileSystem.from_uri(head)
            except (pa.ArrowException, OSError, ValueError) as exc:
                where = f"{arg}[{k}]" if isinstance(source, (list, tuple)) else arg
                raise ValueError(f"{fn}: {where} {x!r}: no filesystem for this URI "
                                 f"({exc}); pass filesystem= instead") from None
            path += rest
            if fs_.type_name == "local":
                fs_ = None
        if k == 0:
            found = (scheme, fs_)
        elif scheme != found[0]:
            raise ValueError(f"{fn}: {arg} mixes filesystems ({found[0]}:// and "
                             f"{scheme}://); a source lives on one filesystem")
        paths.append(path)
    fs_ = found[1]
    return fs_, paths if isinstance(source, (list, tuple)) else paths[0]


def _split_glob(uri):
    """``(head, rest)``: the URI up to the directory before its first ``*`` or ``[``, and
    the pattern after it (empty for a URI without a glob)."""
    m = re.search(r"[*\[]", uri)
    if m is None:
        return uri, ""
    cut = uri.rfind("/", 0, m.start())
    if cut < uri.index("://") + 3:  # a glob in the bucket's name: no directory before it
        raise ValueError(f"the glob {uri!r} must name its bucket without * or [")
    return uri[:cut], uri[cut:]


def display_path(path, filesystem):
    """How a file is named in messages: the path, or the URI of a remote one."""
    if filesystem is None:
        return path
    prefix = _SCHEMES.get(filesystem.type_name)
    if prefix is not None:
        return prefix + path
    return f"{path} (on {filesystem.type_name})"


def join(*parts):
    """A filesystem path joined with ``/`` (remote paths never use ``os.sep``)."""
    return "/".join(p.strip("/") if i else p.rstrip("/") for i, p in enumerate(parts) if p)


def parent(path):
    return path.rstrip("/").rpartition("/")[0]


def relative(path, base):
    base = base.rstrip("/")
    return path[len(base) + 1:] if base and path.startswith(base + "/") else path


def reraise(exc, context):
    """Raise ``exc`` again with ``context`` (the caller and the file) in front of its message.

    Builtin and pyarrow exceptions are raised as a new exception of the same type (so
    ``except ValueError`` and ``except pa.ArrowInvalid`` still catch them), chained to the
    original; others gain ``context`` as a note.
    """
    new = None
    if isinstance(exc, _MESSAGE_TYPES) and \
            type(exc).__module__.partition(".")[0] in ("builtins", "pyarrow", "lodarrow"):
        message = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) \
            else str(exc)
        try:
            new = type(exc)(f"{context}: {message}")
        except Exception:  # a constructor that takes more: fall back to a note
            new = None
    if new is None:
        if hasattr(exc, "add_note"):
            exc.add_note(context)
        raise exc
    raise new from exc


def open_input(path, filesystem, fn):
    """A random-access file of ``path``; a missing or unreadable file names itself."""
    try:
        if filesystem is None:
            return pa.OSFile(path, "r")
        return filesystem.open_input_file(path)
    except (pa.ArrowException, OSError) as exc:
        reraise(exc, f"{fn}: cannot open {display_path(path, filesystem)!r}")


def changed_since_footer(what):
    """The error for a file read after its footer was, and changed since (``what``: how);
    the caller names the file and the row group."""
    return OSError(f"changed after the loader read its footer ({what}); its row groups are no "
                   f"longer the ones planned: make a new loader to read the new version")


def read_footer(path, filesystem, fn):
    """``(metadata, digest, size)`` of a Parquet file from its tail, in one read where it fits.

    ``digest`` is the SHA-256 of the footer bytes (the Thrift ``FileMetaData``: every row
    group's offsets, sizes and statistics, and the writer), part of the file's fingerprint
    (lodarrow._tables._lengths_store).  A file too short, without the ``PAR1`` magic or with a
    damaged footer raises ``pyarrow.ArrowInvalid`` naming the file.
    """
    import pyarrow.parquet as pq

    name = display_path(path, filesystem)
    f = open_input(path, filesystem, fn)
    try:
        size = f.size()
        if size < 12:
            raise pa.ArrowInvalid(f"{fn}: cannot read {name!r} as Parquet: the file is "
                                  f"{size} bytes, too short to be Parquet (at least 12)")
        take = min(size, _TAIL)
        tail = f.read_at(take, size - take)
        if tail[-4:] != b"PAR1":
            raise pa.ArrowInvalid(f"{fn}: cannot read {name!r} as Parquet: it does not end "
                                  f"with the Parquet magic bytes (truncated, or not Parquet)")
        n = struct.unpack("<i", tail[-8:-4])[0]
        if n <= 0 or n + 12 > size:
            raise pa.ArrowInvalid(f"{fn}: cannot read {name!r} as Parquet: its footer length "
                                  f"({n} bytes) does not fit the file ({size} bytes)")
        if n + 8 > take:
            tail = f.read_at(n + 8, size - n - 8)
        footer = tail[len(tail) - n - 8:len(tail) - 8]
    except (pa.ArrowException, OSError) as exc:
        if str(exc).startswith(f"{fn}: "):
            raise
        reraise(exc, f"{fn}: cannot read {name!r} as Parquet")
    finally:
        f.close()
    try:
        # the footer alone, framed as a file: pyarrow parses it without reading the file again
        meta = pq.read_metadata(pa.BufferReader(b"PAR1" + footer + tail[-8:]))
    except (pa.ArrowException, OSError) as exc:
        reraise(exc, f"{fn}: cannot read {name!r} as Parquet (damaged footer)")
    return meta, hashlib.sha256(footer).hexdigest(), size


def open_parquet(path, filesystem, fn, *, metadata=None, **options):
    """``pyarrow.parquet.ParquetFile`` of ``path``; an error names the file.

    ``options`` go to ``ParquetFile`` (``pre_buffer``, ``buffer_size``, ...).  ``metadata``
    (from :func:`read_footer`) saves reading the footer again.  Reads of a remote file are
    ranged: only the column chunks asked for are fetched.
    """
    import pyarrow.parquet as pq

    name = display_path(path, filesystem)
    try:
        return pq.ParquetFile(path, filesystem=filesystem, metadata=metadata, **options)
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            reraise(exc, f"{fn}: cannot open {name!r}")
        reraise(exc, f"{fn}: cannot read {name!r} as Parquet")
