"""One key-value entry added to the footer of a finished Parquet file.

pyarrow's and polars' writers take key-value metadata before they write the footer, but what
lodarrow records there (each file's sequence lengths, bound to the row groups as written:
lodarrow._tables._lengths_store) is known only once the row groups are written.  This module
edits the footer itself: a Parquet footer is the Thrift ``FileMetaData`` struct (compact
protocol) followed by its length and ``PAR1``; its field 5 is the list of ``KeyValue``
entries.  :func:`with_key_value` walks the struct's top-level fields, replaces or appends one
entry, and writes the fields back in their order; :func:`replace_footer` writes the new footer
where the old one started.  The data pages are not touched, and every reader that ignores an
unknown key reads the same rows.

The value must be text (UTF-8): the Thrift field is a ``string``, and readers built on Rust's
``parquet`` crate (polars) refuse a footer whose values are not valid UTF-8.

:func:`page_header` reads the Thrift ``PageHeader`` in front of a page of a column chunk with
the same walk (lodarrow._tables._lengths_store binds the entry to the first bytes of a data
page, which the footer does not cover).
"""

import hashlib
import struct

import pyarrow as pa

__all__ = ["read_tail", "with_key_value", "parse_footer", "digest_without", "replace_footer",
           "page_header", "DATA_PAGES"]

# compact protocol type ids
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT, _UUID = \
    range(1, 14)
#: FileMetaData's fields: 5 the key-value list; 8 and 9 exist only in encrypted files
#: (a signed plaintext footer must not change).
_KEY_VALUE, _ENCRYPTION = 5, (8, 9)
_MAGIC = b"PAR1"
#: PageHeader's ``type``: DATA_PAGE and DATA_PAGE_V2 (the others: INDEX_PAGE, DICTIONARY_PAGE).
DATA_PAGES = (0, 3)


def read_tail(f):
    """``(footer, start)`` of the open Parquet file ``f`` (binary, seekable): the Thrift
    bytes and the offset where they start; ``ValueError`` if it ends with no plaintext
    footer."""
    size = f.seek(0, 2)
    if size < 12:
        raise ValueError("too short to be Parquet")
    f.seek(size - 8)
    tail = f.read(8)
    if tail[4:] != _MAGIC:
        raise ValueError("no plaintext Parquet footer")
    n = struct.unpack("<i", tail[:4])[0]
    if n <= 0 or n + 12 > size:
        raise ValueError("a damaged footer length")
    start = size - 8 - n
    f.seek(start)
    footer = f.read(n)
    if len(footer) != n:
        raise ValueError("a short read of the footer")
    return footer, start


def parse_footer(footer):
    """pyarrow's ``FileMetaData`` of Thrift footer bytes."""
    import pyarrow.parquet as pq

    return pq.read_metadata(pa.BufferReader(_framed(footer)))


def replace_footer(f, start, footer):
    """Write ``footer`` (Thrift bytes) at ``start`` of the open file ``f`` and end the file
    after it."""
    f.seek(start)
    f.write(footer + struct.pack("<i", len(footer)) + _MAGIC)
    f.truncate()


def _key_value_bytes(key, value):
    """A ``KeyValue`` struct as the compact protocol writes it."""
    return (b"\x18" + _varint(len(key)) + key + b"\x18" + _varint(len(value)) + value
            + b"\x00")


def digest_without(meta, key, value):
    """SHA-256 (hex) of the footer of ``meta`` (pyarrow's ``FileMetaData``) as pyarrow
    serializes it, with the entry ``key: value`` cut out; None when that entry is not found
    exactly once.

    What it covers: the schema, the row count, every row group's row count, byte sizes and
    column chunks (offsets, compressed and uncompressed sizes, encodings, statistics), the
    other key-value entries and the writer; the same for a footer read back as for the one
    written, since both are pyarrow's serialization of the same fields.
    """
    sink = pa.BufferOutputStream()
    meta.write_metadata_file(sink)
    data = sink.getvalue().to_pybytes()  # PAR1, the footer, its length, PAR1
    head = b"\x18" + _varint(len(key)) + key + b"\x18" + _varint(len(value))
    at = data.find(head, 4)  # a short needle: found at memchr speed
    end = at + len(head) + len(value) + 1  # the entry's stop byte included
    if (at < 0 or not data.startswith(value, at + len(head)) or data[end - 1] != 0
            or data.find(head, end) >= 0):
        return None
    h = hashlib.sha256(memoryview(data)[4:at])
    h.update(memoryview(data)[end:-8])
    return h.hexdigest()


def with_key_value(footer, key, value):
    """The Thrift ``FileMetaData`` ``footer`` with the key-value entry ``key`` set to
    ``value`` (replacing an entry of that key, else appended); ``ValueError`` for a footer
    this walk does not read, or one of an encrypted file."""
    try:
        return _with_key_value(bytes(footer), key, value)
    except IndexError:
        raise ValueError("a truncated footer") from None


def _with_key_value(footer, key, value):
    fields, end = _fields(footer, 0)
    if end != len(footer):
        raise ValueError("trailing bytes after the footer")
    if any(fid in _ENCRYPTION for fid, _, _, _ in fields):
        raise ValueError("an encrypted file's footer")
    ours = _key_value_bytes(key, value)
    ids = [fid for fid, _, _, _ in fields]
    if _KEY_VALUE not in ids:  # no key-value list yet: one, before the first later field
        at = next((k for k, fid in enumerate(ids) if fid > _KEY_VALUE), len(fields))
        fields.insert(at, (_KEY_VALUE, _LIST, None, None))
    out, prev = [], 0
    for fid, typ, a, b in fields:
        if fid != _KEY_VALUE:
            out.append(_header(fid, typ, prev) + footer[a:b])
        elif a is None:
            out.append(_header(fid, _LIST, prev) + _list_header(1) + ours)
        else:
            if typ != _LIST:
                raise ValueError("a key-value field that is not a list")
            entries = [e for e in _list_items(footer, a) if _entry_key(footer, e) != key]
            body = b"".join(footer[s:t] for s, t in entries) + ours
            out.append(_header(fid, typ, prev) + _list_header(len(entries) + 1) + body)
        prev = fid
    return b"".join(out) + b"\x00"


def page_header(data):
    """``(page type, header length, compressed page size)`` of the Thrift ``PageHeader`` at
    the start of ``data`` (bytes of a column chunk from a page's start); ``IndexError`` where
    ``data`` ends inside the header, ``ValueError`` for bytes that are not a page header."""
    data = bytes(data)
    fields, end = _fields(data, 0)
    if end > len(data):
        raise IndexError("the page header goes on past the bytes read")
    ints = {}
    for fid, typ, a, _ in fields:
        if fid in (1, 3) and typ == _I32:
            z = _read_varint(data, a)[0]
            ints[fid] = (z >> 1) ^ -(z & 1)
    if len(ints) != 2 or ints[3] < 0:
        raise ValueError("not a Parquet page header")
    return ints[1], end, ints[3]


# ---------------------------------------------------------------------------- the walk
def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data, i):
    shift = result = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def _fields(data, i):
    """``([(field id, type, value start, value end)], end)`` of the struct at ``i``."""
    out, fid = [], 0
    while True:
        head = data[i]
        i += 1
        if head == 0:
            return out, i
        typ, delta = head & 0x0F, head >> 4
        if delta:
            fid += delta
        else:  # a long-form header: the id as a zigzag varint
            z, i = _read_varint(data, i)
            fid = (z >> 1) ^ -(z & 1)
        start = i
        if typ not in (_TRUE, _FALSE):  # a boolean field's value is its type
            i = _skip(data, i, typ)
        out.append((fid, typ, start, i))


def _skip(data, i, typ):
    """The index after the value of type ``typ`` at ``i``."""
    if typ in (_TRUE, _FALSE, _BYTE):  # a boolean in a list is one byte
        return i + 1
    if typ in (_I16, _I32, _I64):
        return _read_varint(data, i)[1]
    if typ == _DOUBLE:
        return i + 8
    if typ == _UUID:
        return i + 16
    if typ == _BINARY:
        n, i = _read_varint(data, i)
        return i + n
    if typ in (_LIST, _SET):
        n, elem, i = _list_start(data, i)
        for _ in range(n):
            i = _skip(data, i, elem)
        return i
    if typ == _MAP:
        n, i = _read_varint(data, i)
        if n:
            kinds = data[i]
            i += 1
            for _ in range(n):
                i = _skip(data, _skip(data, i, kinds >> 4), kinds & 0x0F)
        return i
    if typ == _STRUCT:
        return _fields(data, i)[1]
    raise ValueError(f"an unknown Thrift type {typ}")


def _list_start(data, i):
    head = data[i]
    i += 1
    n, elem = head >> 4, head & 0x0F
    if n == 15:
        n, i = _read_varint(data, i)
    return n, elem, i


def _list_items(data, i):
    """``[(start, end)]`` of the structs of the list at ``i``."""
    n, elem, i = _list_start(data, i)
    if n and elem != _STRUCT:
        raise ValueError("a key-value list of something else than structs")
    spans = []
    for _ in range(n):
        end = _skip(data, i, _STRUCT)
        spans.append((i, end))
        i = end
    return spans


def _entry_key(data, span):
    fields, _ = _fields(data, span[0])
    for fid, typ, a, _ in fields:
        if fid == 1 and typ == _BINARY:
            n, a = _read_varint(data, a)
            return bytes(data[a:a + n])
    return None


def _header(fid, typ, prev):
    delta = fid - prev
    if 0 < delta <= 15:
        return bytes([(delta << 4) | typ])
    return bytes([typ]) + _varint((fid << 1) ^ (fid >> 15))


def _list_header(n):
    return bytes([(n << 4) | _STRUCT]) if n < 15 else bytes([0xF0 | _STRUCT]) + _varint(n)


def _framed(footer):
    return _MAGIC + footer + struct.pack("<i", len(footer)) + _MAGIC
