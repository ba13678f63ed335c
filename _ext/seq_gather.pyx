"""Row-block copies for the data-moving operators: expand, expand_as, concat, slice.

Every kernel works on ``(rows, bytes_per_row)`` uint8 views (``row_bytes``), so one kernel
serves every dtype.  Arguments come as outputs, inputs, then scalars; the Python layer has
checked every offset, so the kernels trust them and never raise.

Threading: ``bounds`` (from ``chunk_bounds``) cuts the sequences into chunks of about equal
output rows, spread over ``num_threads`` threads with ``prange``; ``bounds=None`` runs all
sequences on the calling thread (small inputs, where OpenMP start-up would dominate).
"""
from cython.parallel cimport prange
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from _types cimport offset_t


# D=1 data has rows of 1, 2, 4 or 8 bytes and sequences of a few dozen bytes: a memcpy call
# per row or block would cost more than the bytes it moves.  Aligned word-sized rows move as
# machine words, and short blocks as fixed 32-byte pieces; wide rows and long blocks go
# through memcpy.
ctypedef fused word_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t


cdef inline bint _words_ok(const void* a, const void* b, Py_ssize_t width) noexcept nogil:
    """True when rows are one aligned machine word (1, 2, 4 or 8 bytes) in both buffers."""
    if width != 1 and width != 2 and width != 4 and width != 8:
        return False
    return ((<size_t>a) | (<size_t>b)) % <size_t>width == 0


# ------------------------------------------------------------------ row repeats
cdef inline void _expand_rows_words(word_t* out, const word_t* src, const offset_t* rep_off,
                                    Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Fill each sequence with 32-byte stores of a broadcast pattern.

    A store may run up to 31 bytes past its sequence into rows that later sequences of the
    same chunk overwrite (they are written in increasing order by the same thread); near
    the chunk's end, where that is not so, exact stores are used.  Fewer, fixed-size stores
    keep short sequences from costing a mispredicted loop exit per row.
    """
    cdef Py_ssize_t i, j, k, k1
    cdef Py_ssize_t step = 32 // sizeof(word_t)
    cdef Py_ssize_t limit = rep_off[hi]
    cdef word_t v
    cdef word_t pat[32]
    for i in range(lo, hi):
        k = rep_off[i]
        k1 = rep_off[i + 1]
        v = src[i]
        if k1 + step <= limit:
            for j in range(step):
                pat[j] = v
            while k < k1:
                memcpy(&out[k], pat, 32)
                k = k + step
        else:
            for k in range(k, k1):
                out[k] = v


cdef inline void _expand_rows_bytes(uint8_t* out, const uint8_t* src, const offset_t* rep_off,
                                    Py_ssize_t lo, Py_ssize_t hi,
                                    Py_ssize_t width) noexcept nogil:
    """Rows of any width.  Widths of 64 bytes (D=16 float32) and other multiples of 16 up
    to 256 move in fixed 16-byte pieces, which compile to plain vector loads and stores; a
    memcpy call per row would cost more than the row."""
    cdef Py_ssize_t i, k, b
    cdef uint8_t* dst
    cdef const uint8_t* row
    if width == 64:
        for i in range(lo, hi):
            row = src + i * 64
            for k in range(rep_off[i], rep_off[i + 1]):
                memcpy(out + k * 64, row, 64)
    elif width % 16 == 0 and width <= 256:
        for i in range(lo, hi):
            row = src + i * width
            for k in range(rep_off[i], rep_off[i + 1]):
                dst = out + k * width
                for b in range(0, width, 16):
                    memcpy(dst + b, row + b, 16)
    else:
        for i in range(lo, hi):
            for k in range(rep_off[i], rep_off[i + 1]):
                memcpy(out + k * width, src + i * width, <size_t>width)


cdef inline void _expand_rows_range(uint8_t* out, const uint8_t* src, const offset_t* rep_off,
                                    Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t width,
                                    bint words) noexcept nogil:
    if not words:
        _expand_rows_bytes(out, src, rep_off, lo, hi, width)
    elif width == 4:
        _expand_rows_words(<uint32_t*>out, <const uint32_t*>src, rep_off, lo, hi)
    elif width == 8:
        _expand_rows_words(<uint64_t*>out, <const uint64_t*>src, rep_off, lo, hi)
    elif width == 2:
        _expand_rows_words(<uint16_t*>out, <const uint16_t*>src, rep_off, lo, hi)
    else:
        _expand_rows_words(<uint8_t*>out, <const uint8_t*>src, rep_off, lo, hi)


def expand_rows(uint8_t[:, ::1] out, const uint8_t[:, ::1] src, const offset_t[::1] rep_off,
                const offset_t[::1] bounds=None, int num_threads=1):
    """Repeat row ``i`` of ``src`` into the output rows ``[rep_off[i], rep_off[i + 1])``.

    ``sequence_expand`` of a tensor without LoD and ``sequence_expand_as``.  ``out`` has
    ``rep_off[-1]`` rows; ``src`` has ``len(rep_off) - 1`` rows of the same width.
    """
    cdef Py_ssize_t width = out.shape[1]
    cdef Py_ssize_t n = rep_off.shape[0] - 1
    cdef Py_ssize_t c, n_chunks
    if n <= 0 or width == 0 or out.shape[0] == 0:
        return
    cdef uint8_t* op = &out[0, 0]
    cdef const uint8_t* sp = &src[0, 0]
    cdef const offset_t* rp = &rep_off[0]
    cdef bint words = _words_ok(op, sp, width)
    if bounds is None:
        with nogil:
            _expand_rows_range(op, sp, rp, 0, n, width, words)
        return
    cdef const offset_t* bp = &bounds[0]
    n_chunks = bounds.shape[0] - 1
    with nogil:
        for c in prange(n_chunks, num_threads=num_threads, schedule="dynamic"):
            _expand_rows_range(op, sp, rp, bp[c], bp[c + 1], width, words)


# ------------------------------------------------------------------ block copies
cdef inline void _copy_block(uint8_t* dst, const uint8_t* src, size_t nbytes,
                             const uint8_t* dst_limit, const uint8_t* src_limit) noexcept nogil:
    """Copy a short block in 32-byte pieces where running past its end is harmless.

    The last piece may read up to 31 bytes past the block (still inside the source buffer:
    ``src_limit``) and write up to 31 bytes past it into rows that the same thread writes
    later (``dst_limit``: the end of its chunk).  Blocks of D=1 rows are a few dozen bytes;
    a fixed-size copy avoids a memcpy call per block.  Long blocks use memcpy.
    """
    cdef size_t b
    cdef size_t padded = (nbytes + 31) & ~(<size_t>31)
    if nbytes == 0:
        return
    if nbytes <= 256 and dst + padded <= dst_limit and src + padded <= src_limit:
        b = 0
        while b < padded:
            memcpy(dst + b, src + b, 32)
            b = b + 32
    else:
        memcpy(dst, src, nbytes)


cdef inline void _expand_blocks_range(uint8_t* out, const uint8_t* src,
                                      const offset_t* src_off, const offset_t* rep_off,
                                      const offset_t* out_lod, Py_ssize_t lo, Py_ssize_t hi,
                                      Py_ssize_t width, const uint8_t* src_limit) noexcept nogil:
    cdef Py_ssize_t i, k
    cdef size_t block
    cdef uint8_t* dst
    cdef const uint8_t* blk
    # Copies run in increasing output order, so overruns land on rows written later.
    cdef const uint8_t* dst_limit = out + out_lod[rep_off[hi]] * width
    for i in range(lo, hi):
        block = <size_t>((src_off[i + 1] - src_off[i]) * width)
        if block == 0:
            continue
        dst = out + out_lod[rep_off[i]] * width
        blk = src + src_off[i] * width
        for k in range(rep_off[i + 1] - rep_off[i]):
            _copy_block(dst + k * block, blk, block, dst_limit, src_limit)


def expand_blocks(uint8_t[:, ::1] out, const uint8_t[:, ::1] src, const offset_t[::1] src_off,
                  const offset_t[::1] rep_off, const offset_t[::1] out_lod,
                  const offset_t[::1] bounds=None, int num_threads=1):
    """Repeat block ``i`` of ``src`` (rows ``[src_off[i], src_off[i + 1])``) whole.

    Block ``i`` is written ``rep_off[i + 1] - rep_off[i]`` times, back to back, from output
    row ``out_lod[rep_off[i]]`` (``out_lod`` is the output's offsets: one entry per copy).
    ``sequence_expand`` of a tensor with a 1-level LoD.
    """
    cdef Py_ssize_t width = out.shape[1]
    cdef Py_ssize_t n = rep_off.shape[0] - 1
    cdef Py_ssize_t c, n_chunks
    if n <= 0 or width == 0 or out.shape[0] == 0:
        return
    cdef uint8_t* op = &out[0, 0]
    cdef const uint8_t* sp = &src[0, 0]
    cdef const offset_t* so = &src_off[0]
    cdef const offset_t* rp = &rep_off[0]
    cdef const offset_t* ol = &out_lod[0]
    cdef const uint8_t* src_limit = sp + src.shape[0] * width
    if bounds is None:
        with nogil:
            _expand_blocks_range(op, sp, so, rp, ol, 0, n, width, src_limit)
        return
    cdef const offset_t* bp = &bounds[0]
    n_chunks = bounds.shape[0] - 1
    with nogil:
        for c in prange(n_chunks, num_threads=num_threads, schedule="dynamic"):
            _expand_blocks_range(op, sp, so, rp, ol, bp[c], bp[c + 1], width, src_limit)


cdef inline void _gather_blocks_range(uint8_t* out, const uint8_t* src,
                                      const offset_t* src_start, const offset_t* out_off,
                                      Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t width,
                                      const uint8_t* src_limit) noexcept nogil:
    cdef Py_ssize_t i
    cdef const uint8_t* dst_limit = out + out_off[hi] * width
    for i in range(lo, hi):
        _copy_block(out + out_off[i] * width, src + src_start[i] * width,
                    <size_t>((out_off[i + 1] - out_off[i]) * width), dst_limit, src_limit)


def gather_blocks(uint8_t[:, ::1] out, const uint8_t[:, ::1] src,
                  const offset_t[::1] src_start, const offset_t[::1] out_off,
                  const offset_t[::1] bounds=None, int num_threads=1):
    """Copy ``out_off[i + 1] - out_off[i]`` rows of ``src`` from row ``src_start[i]`` to
    output row ``out_off[i]``, for every block ``i`` (``sequence_slice``)."""
    cdef Py_ssize_t width = out.shape[1]
    cdef Py_ssize_t n = out_off.shape[0] - 1
    cdef Py_ssize_t c, n_chunks
    if n <= 0 or width == 0 or out.shape[0] == 0:
        return
    cdef uint8_t* op = &out[0, 0]
    cdef const uint8_t* sp = &src[0, 0]
    cdef const offset_t* ss = &src_start[0]
    cdef const offset_t* oo = &out_off[0]
    cdef const uint8_t* src_limit = sp + src.shape[0] * width
    if bounds is None:
        with nogil:
            _gather_blocks_range(op, sp, ss, oo, 0, n, width, src_limit)
        return
    cdef const offset_t* bp = &bounds[0]
    n_chunks = bounds.shape[0] - 1
    with nogil:
        for c in prange(n_chunks, num_threads=num_threads, schedule="dynamic"):
            _gather_blocks_range(op, sp, ss, oo, bp[c], bp[c + 1], width, src_limit)


cdef inline void _concat_range(uint8_t* out, const uint8_t** srcs,
                               const uint8_t** src_limits, const offset_t** offs,
                               Py_ssize_t n_inputs, const offset_t* out_off, Py_ssize_t lo,
                               Py_ssize_t hi, Py_ssize_t width) noexcept nogil:
    cdef Py_ssize_t i, k
    cdef size_t nbytes
    cdef uint8_t* dst
    cdef const offset_t* off
    # The output is written in increasing order, so overruns land on rows written later.
    cdef const uint8_t* dst_limit = out + out_off[hi] * width
    for i in range(lo, hi):
        dst = out + out_off[i] * width
        for k in range(n_inputs):
            off = offs[k]
            nbytes = <size_t>((off[i + 1] - off[i]) * width)
            if nbytes:
                _copy_block(dst, srcs[k] + off[i] * width, nbytes, dst_limit, src_limits[k])
                dst = dst + nbytes


def concat_blocks(uint8_t[:, ::1] out, list srcs, list offsets, const offset_t[::1] out_off,
                  const offset_t[::1] bounds=None, int num_threads=1):
    """Output sequence ``i`` (rows from ``out_off[i]``) = sequence ``i`` of every input, in
    order: ``srcs[k]`` rows ``[offsets[k][i], offsets[k][i + 1])`` (``sequence_concat``).

    ``srcs`` are uint8 row views as wide as ``out``; ``offsets`` their last levels, each with
    ``len(out_off)`` entries.  The output is written once, front to back.
    """
    cdef Py_ssize_t width = out.shape[1]
    cdef Py_ssize_t n = out_off.shape[0] - 1
    cdef Py_ssize_t n_inputs = len(srcs)
    cdef Py_ssize_t k, c, n_chunks
    cdef const uint8_t[:, ::1] src
    cdef const offset_t[::1] off
    if n <= 0 or width == 0 or out.shape[0] == 0:
        return
    # Raw pointers for the nogil loop; the caller's lists keep the arrays alive.
    cdef const uint8_t** sp = <const uint8_t**>malloc(n_inputs * sizeof(uint8_t*))
    cdef const uint8_t** sl = <const uint8_t**>malloc(n_inputs * sizeof(uint8_t*))
    cdef const offset_t** opp = <const offset_t**>malloc(n_inputs * sizeof(offset_t*))
    if sp == NULL or sl == NULL or opp == NULL:
        free(sp)
        free(sl)
        free(opp)
        raise MemoryError()
    cdef uint8_t* op = &out[0, 0]
    cdef const offset_t* oo = &out_off[0]
    cdef const offset_t* bp
    try:
        for k in range(n_inputs):
            src = srcs[k]
            off = offsets[k]
            sp[k] = &src[0, 0] if src.shape[0] else NULL
            sl[k] = sp[k] + src.shape[0] * width if src.shape[0] else NULL
            opp[k] = &off[0]
        if bounds is None:
            with nogil:
                _concat_range(op, sp, sl, opp, n_inputs, oo, 0, n, width)
        else:
            bp = &bounds[0]
            n_chunks = bounds.shape[0] - 1
            with nogil:
                for c in prange(n_chunks, num_threads=num_threads, schedule="dynamic"):
                    _concat_range(op, sp, sl, opp, n_inputs, oo, bp[c], bp[c + 1], width)
    finally:
        free(sp)
        free(sl)
        free(opp)


def expand_lod(const offset_t[::1] x_off, const offset_t[::1] rep_off, offset_t[::1] out_lod):
    """Write the output offsets of a whole-block ``sequence_expand`` into ``out_lod``.

    Block ``i`` (``x_off[i + 1] - x_off[i]`` rows) contributes ``rep_off[i + 1] - rep_off[i]``
    sequences of its length; ``out_lod`` has ``rep_off[-1] + 1`` entries.  One pass, no
    temporaries (NumPy would need diff, repeat and cumsum).
    """
    cdef Py_ssize_t i, k, j = 0
    cdef Py_ssize_t n = rep_off.shape[0] - 1
    cdef offset_t acc = 0, block
    with nogil:
        out_lod[0] = 0
        for i in range(n):
            block = x_off[i + 1] - x_off[i]
            for k in range(rep_off[i + 1] - rep_off[i]):
                acc = acc + block
                j = j + 1
                out_lod[j] = acc


def slice_plan(const offset_t[::1] seq_off, const offset_t[::1] offset,
               const offset_t[::1] length, offset_t[::1] src_start, offset_t[::1] out_off):
    """Plan ``sequence_slice``: ``src_start[i] = seq_off[i] + offset[i]`` and ``out_off`` the
    running sum of ``length`` (``len(length) + 1`` entries).

    Returns the first sequence whose offset or length is negative or whose slice runs past
    its end, or -1 when every slice is valid (only then are the outputs complete).
    """
    cdef Py_ssize_t i, n = offset.shape[0]
    cdef Py_ssize_t bad = -1
    cdef offset_t acc = 0, seq_len
    with nogil:
        out_off[0] = 0
        for i in range(n):
            seq_len = seq_off[i + 1] - seq_off[i]
            # offset <= seq_len first, so seq_len - offset cannot overflow.
            if offset[i] < 0 or length[i] < 0 or offset[i] > seq_len \
                    or length[i] > seq_len - offset[i]:
                bad = i
                break
            src_start[i] = seq_off[i] + offset[i]
            acc = acc + length[i]
            out_off[i + 1] = acc
    return bad
