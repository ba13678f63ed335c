"""The one source grammar of every Parquet reader: a file, a directory, a glob or a list.

:func:`resolve_source` is what :func:`lodarrow.read_parquet`, :func:`lodarrow.iter_parquet`,
:func:`lodarrow.map_parquet`, :func:`lodarrow.sequence_lengths` and
:func:`lodarrow.batch_loader` call, locally and on any filesystem alike
(docs/tables.md#dataset-directories).  Which files of a directory (or glob) are data:

1. a name starting with ``.`` or ``_`` is not (``_SUCCESS``, ``_metadata``, ``.crc`` files,
   hidden staging directories, the length sidecars of lodarrow's earlier releases), nor is
   anything below a directory so named -- pyarrow.dataset's, Spark's and Hadoop's rule;
2. a name ending with ``.parquet``, ``.parq`` or ``.pq`` (any case; ``.snappy.parquet`` too)
   is: such a file that is empty, truncated or garbled is an error naming it;
3. any other name (``README.md``, ``dataset_info.json``, ``part-00000``) is data only if the
   file starts with Parquet's magic bytes ``PAR1`` (Hadoop's extension-less part files);
   otherwise it is skipped.

A file named on its own or in a list is always read (and an error names it if it is not
Parquet).
"""

import glob
import os
import re

from lodarrow._tables._filesystems import (as_filesystem, display_path, relative,
                                           split_source)

__all__ = ["resolve_source", "SourceFiles", "is_data_file", "PARQUET_SUFFIXES"]

#: Names that are data by their extension (rule 2).
PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
#: Names that are never data (rule 1).
IGNORE_PREFIXES = (".", "_")


class SourceFiles:
    """What a source resolves to.

    Attributes
    ----------
    kind : str
        ``"file"``, ``"directory"``, ``"glob"`` or ``"list"``.
    base : str
        The directory the files' relative paths start from (hive partitions below it).
    files : list of (str, str)
        ``(path, relative path)`` of every data file: sorted by path, a list's in its order.
    filesystem : pyarrow.fs.FileSystem or None
        Where the paths live; None for local paths.

    Unpacks as ``kind, base, files``.
    """

    __slots__ = ("kind", "base", "files", "filesystem")

    def __init__(self, kind, base, files, filesystem):
        self.kind, self.base, self.files, self.filesystem = kind, base, files, filesystem

    def __iter__(self):
        return iter((self.kind, self.base, self.files))

    def name(self, path):
        """``path`` as messages show it (a URI for a remote file)."""
        return display_path(path, self.filesystem)


def resolve_source(source, fn="map_parquet", arg="source", filesystem=None):
    """The data files of a Parquet file, directory, glob pattern or list of files.

    Parameters
    ----------
    source : str, path-like, or list of them
        A file; a directory (read recursively, see the module's rules); a glob pattern
        (``"data/*/part-*.parquet"``, ``**`` recursive); a list of files.  Strings may be
        URIs (``s3://bucket/prefix``, ``gs://...``), whose filesystem pyarrow makes.
    fn : str
        The calling function's name, for messages.
    arg : str
        The calling function's name for ``source``, for messages.
    filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
        Where ``source``'s paths live.

    Returns
    -------
    SourceFiles
        Unpacks as ``(kind, base, files)``; its ``filesystem`` is None for local files.

    Raises
    ------
    TypeError
        If ``source`` or ``filesystem`` is of the wrong type.
    ValueError
        If a list is empty or names a file twice, or a directory holds no data files.
    FileNotFoundError
        If the source (or a listed file) does not exist, or a glob matches no data file.
    """
    fs = as_filesystem(filesystem, fn)
    if isinstance(source, (list, tuple)):
        if not source:
            raise ValueError(f"{fn}: {arg} is an empty list; give at least one file")
        for k, item in enumerate(source):
            if not isinstance(item, (str, os.PathLike)) or isinstance(os.fspath(item), bytes):
                raise TypeError(f"{fn}: {arg}[{k}] must be a path (str or path-like), "
                                f"got {type(item).__name__}")
        source = [os.fspath(x) for x in source]
    elif not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"{fn}: {arg} must be a path, a glob pattern or a list of paths, "
                        f"got {type(source).__name__}")
    else:
        source = os.fspath(source)
        if isinstance(source, bytes):
            raise TypeError(f"{fn}: {arg} must be a str path, not bytes")
    fs, source = split_source(source, fs, fn, arg)
    if fs is None:
        return _local(source, fn, arg)
    return _remote(source, fs, fn, arg)


def is_data_file(name, head):
    """Whether a file of a directory or glob is data (the module's rules), from its name
    and ``head()`` (its first four bytes, asked only for a name of no Parquet extension)."""
    if name.startswith(IGNORE_PREFIXES):
        return False
    if name.lower().endswith(PARQUET_SUFFIXES):
        return True
    return head() == b"PAR1"


def _local_head(path):
    try:
        with open(path, "rb") as f:
            return f.read(4)
    except OSError:
        return b""


def _no_data(fn, text):
    return ValueError(f"{fn}: the directory {text!r} holds no data files (names starting "
                      f"with '.' or '_' are skipped, and files that are neither named "
                      f"*.parquet nor start with Parquet's magic bytes)")


def _local(source, fn, arg):
    if isinstance(source, list):
        paths = []
        for k, item in enumerate(source):
            path = os.path.abspath(item)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{fn}: {arg}[{k}] {item!r} is not a file")
            if path in paths:
                raise ValueError(f"{fn}: {arg}[{k}] {item!r} is listed twice")
            paths.append(path)
        base = os.path.commonpath([os.path.dirname(p) for p in paths])
        return SourceFiles("list", base, [(p, os.path.relpath(p, base)) for p in paths], None)
    text = source
    path = os.path.abspath(text)
    if os.path.isfile(path):
        return SourceFiles("file", os.path.dirname(path), [(path, os.path.basename(path))],
                           None)
    if os.path.isdir(path):
        files = []
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith(IGNORE_PREFIXES))
            for n in sorted(names):
                full = os.path.join(root, n)
                if is_data_file(n, lambda full=full: _local_head(full)):
                    files.append((full, os.path.relpath(full, path)))
        if not files:
            raise _no_data(fn, text)
        return SourceFiles("directory", path, files, None)
    if glob.has_magic(text):
        matches = sorted({os.path.abspath(m) for m in glob.glob(text, recursive=True)
                          if os.path.isfile(m)})
        parts = []
        for part in os.path.abspath(text).split(os.sep):
            if glob.has_magic(part):
                break
            parts.append(part)
        base = os.sep.join(parts) or os.sep
        files = [(m, os.path.relpath(m, base)) for m in matches
                 if _data_below(os.path.relpath(m, base).split(os.sep),
                                lambda m=m: _local_head(m))]
        if not files:
            raise FileNotFoundError(f"{fn}: the glob {text!r} matches no files"
                                    + (" that are data (see the rules in docs/tables.md)"
                                       if matches else ""))
        return SourceFiles("glob", base, files, None)
    raise FileNotFoundError(f"{fn}: {arg} {text!r} does not exist (give a Parquet file, a "
                            f"directory, a glob pattern or a list of files)")


def _data_below(parts, head):
    """A glob's match is data when no directory below the glob's base is hidden and its
    name passes :func:`is_data_file`."""
    return not any(p.startswith(IGNORE_PREFIXES) for p in parts[:-1]) \
        and is_data_file(parts[-1], head)


def _remote(source, fs, fn, arg):
    import pyarrow.fs as pafs

    if isinstance(source, list):
        paths = [p.rstrip("/") for p in source]
        infos = _infos(fs, paths, fn)
        for k, (item, info) in enumerate(zip(source, infos)):
            if info.type != pafs.FileType.File:
                raise FileNotFoundError(f"{fn}: {arg}[{k}] "
                                        f"{display_path(item, fs)!r} is not a file")
            if paths.index(paths[k]) != k:
                raise ValueError(f"{fn}: {arg}[{k}] {display_path(item, fs)!r} is listed "
                                 f"twice")
        base = _common_dir(paths)
        return SourceFiles("list", base, [(p, relative(p, base)) for p in paths], fs)
    text = source.rstrip("/")
    if not _has_glob(text):
        info = _infos(fs, [text], fn)[0]
        if info.type == pafs.FileType.File:
            return SourceFiles("file", text.rpartition("/")[0],
                               [(text, text.rpartition("/")[2])], fs)
        if info.type == pafs.FileType.Directory:
            files = _walk(fs, text, None, fn)
            if not files:
                raise _no_data(fn, display_path(text, fs))
            return SourceFiles("directory", text, files, fs)
        raise FileNotFoundError(f"{fn}: {arg} {display_path(text, fs)!r} does not exist "
                                f"(give a Parquet file, a directory, a glob pattern or a "
                                f"list of files)")
    parts = text.split("/")
    k = next(i for i, p in enumerate(parts) if _has_glob(p))
    base = "/".join(parts[:k])
    pattern = _glob_regex("/".join(parts[k:]))
    info = _infos(fs, [base], fn)[0] if base else None
    files = [] if info is not None and info.type != pafs.FileType.Directory \
        else _walk(fs, base, pattern, fn)
    if not files:
        raise FileNotFoundError(f"{fn}: the glob {display_path(text, fs)!r} matches no "
                                f"files that are data")
    return SourceFiles("glob", base, files, fs)


def _infos(fs, paths, fn):
    import pyarrow as pa

    try:
        return fs.get_file_info(paths)
    except (pa.ArrowException, OSError) as exc:
        from lodarrow._tables._filesystems import reraise

        reraise(exc, f"{fn}: cannot list {display_path(paths[0], fs)!r}")


def _walk(fs, base, pattern, fn):
    """The data files below ``base`` (relative paths matching ``pattern``), sorted."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    except (pa.ArrowException, OSError) as exc:
        from lodarrow._tables._filesystems import reraise

        reraise(exc, f"{fn}: cannot list {display_path(base, fs)!r}")
    files = []
    for info in sorted((i for i in infos if i.type == pafs.FileType.File),
                       key=lambda i: i.path):
        rel = relative(info.path, base)
        if pattern is not None and not pattern.fullmatch(rel):
            continue
        if _data_below(rel.split("/"), lambda info=info: _remote_head(fs, info)):
            files.append((info.path, rel))
    return files


def _remote_head(fs, info):
    if info.size is not None and info.size < 12:
        return b""
    try:
        with fs.open_input_file(info.path) as f:
            return f.read_at(4, 0)
    except Exception:  # unreadable: not data (a data file's own error comes when it is read)
        return b""


def _common_dir(paths):
    parts = [p.split("/")[:-1] for p in paths]
    common = []
    for column in zip(*parts):
        if any(c != column[0] for c in column):
            break
        common.append(column[0])
    return "/".join(common)


def _has_glob(text):
    return re.search(r"[*?\[]", text) is not None


def _glob_regex(pattern):
    """A regular expression for a glob over ``/``-separated paths: ``*`` and ``?`` stay
    within a name (and, as ``glob.glob``, match no leading ``.``), ``**`` spans
    directories, ``[...]`` is a character class."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/.][^/]*/)*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append("(?:[^/.][^/]*(?:/[^/.][^/]*)*)?")
            i += 2
            continue
        at_start = i == 0 or pattern[i - 1] == "/"
        if c == "*":
            out.append("(?:[^/.][^/]*)?" if at_start else "[^/]*")
        elif c == "?":
            out.append("[^/.]" if at_start else "[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))
