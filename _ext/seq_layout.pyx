"""Layout kernels: sequence_reverse, sequence_pad, sequence_unpad, sequence_enumerate,
sequence_erase and sequence_mask.

Every function writes into outputs the Python layer allocated and checked; nothing here raises.
Data movement works on bytes (rows of ``width`` bytes, one kernel for every dtype, bool and
float16 included) with ``memcpy`` of whole row blocks where rows are contiguous.  Sequences are
split into chunks (``bounds``: sequence indices, balanced by rows, or by sequence count for
``pad``) and each chunk is one ``prange`` step, so short sequences do not starve a thread.
"""
from cython.parallel cimport prange
from libc.math cimport ceil
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from _types cimport numeric_t, offset_t


# ---------------------------------------------------------------------- byte-row helpers
# Fixed-size memcpy compiles to one (unaligned-safe) load/store, so small rows move as fast
# as typed stores without assuming the alignment of views.

cdef inline void _fill_rows(char* dst, const char* row, Py_ssize_t rows,
                            Py_ssize_t w) noexcept nogil:
    """Write ``rows`` copies of the ``w``-byte ``row`` at ``dst``."""
    cdef Py_ssize_t j, done, step
    if rows <= 0 or w <= 0:
        return
    if w == 1:
        memset(dst, row[0], rows)
    elif w == 2:
        for j in range(rows):
            memcpy(dst + 2 * j, row, 2)
    elif w == 4:
        for j in range(rows):
            memcpy(dst + 4 * j, row, 4)
    elif w == 8:
        for j in range(rows):
            memcpy(dst + 8 * j, row, 8)
    else:
        # Doubling: each memcpy copies everything written so far.
        memcpy(dst, row, w)
        done = 1
        while done < rows:
            step = done if done < rows - done else rows - done
            memcpy(dst + done * w, dst, step * w)
            done += step


cdef inline void _copy_reversed(char* dst, const char* src, Py_ssize_t rows,
                                Py_ssize_t w) noexcept nogil:
    """Row ``j`` of ``dst`` = row ``rows - 1 - j`` of ``src``."""
    cdef Py_ssize_t j
    if w == 1:
        for j in range(rows):
            dst[j] = src[rows - 1 - j]
    elif w == 2:
        for j in range(rows):
            memcpy(dst + 2 * j, src + 2 * (rows - 1 - j), 2)
    elif w == 4:
        for j in range(rows):
            memcpy(dst + 4 * j, src + 4 * (rows - 1 - j), 4)
    elif w == 8:
        for j in range(rows):
            memcpy(dst + 8 * j, src + 8 * (rows - 1 - j), 8)
    else:
        for j in range(rows):
            memcpy(dst + w * j, src + w * (rows - 1 - j), w)


# ---------------------------------------------------------------------- reverse

cdef void _reverse_seqs(char* out, const char* x, const offset_t* off, Py_ssize_t lo,
                        Py_ssize_t hi, Py_ssize_t w) noexcept nogil:
    cdef Py_ssize_t s, a
    for s in range(lo, hi):
        a = off[s]
        _copy_reversed(out + a * w, x + a * w, off[s + 1] - a, w)


def reverse(uint8_t[::1] out, const uint8_t[::1] x, const offset_t[::1] offsets,
            const offset_t[::1] bounds, Py_ssize_t width, int n_threads):
    """``out`` = ``x`` with the rows of every sequence in reverse order.

    ``x`` and ``out`` hold ``offsets[-1]`` rows of ``width`` bytes (both non-empty); chunk
    ``c`` is sequences ``[bounds[c], bounds[c + 1])``.
    """
    cdef char* o = <char*>&out[0]
    cdef const char* src = <const char*>&x[0]
    cdef const offset_t* off = &offsets[0]
    cdef Py_ssize_t c, n_chunks = bounds.shape[0] - 1
    with nogil:
        if n_threads > 1:
            for c in prange(n_chunks, num_threads=n_threads, schedule="dynamic"):
                _reverse_seqs(o, src, off, bounds[c], bounds[c + 1], width)
        else:
            _reverse_seqs(o, src, off, bounds[0], bounds[n_chunks], width)


# ---------------------------------------------------------------------- pad / unpad

cdef void _pad_seqs(char* out, const char* x, const char* pad, const offset_t* off,
                    Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t padded,
                    Py_ssize_t w) noexcept nogil:
    cdef Py_ssize_t s, a, n
    cdef char* dst
    for s in range(lo, hi):
        a = off[s]
        n = off[s + 1] - a
        dst = out + s * padded * w
        if n > 0:
            memcpy(dst, x + a * w, n * w)
        _fill_rows(dst + n * w, pad, padded - n, w)


def pad(uint8_t[::1] out, const uint8_t[::1] x, const uint8_t[::1] pad_row,
        const offset_t[::1] offsets, const offset_t[::1] bounds, Py_ssize_t padded_length,
        Py_ssize_t width, int n_threads):
    """Sequence ``s`` of ``x`` -> rows ``[s * padded_length, (s + 1) * padded_length)`` of ``out``.

    Rows are ``width`` bytes; the rows after a sequence's end are copies of ``pad_row``.
    ``out`` is non-empty; ``x`` may be empty (every sequence empty).
    """
    cdef char* o = <char*>&out[0]
    cdef const char* src = <const char*>&x[0] if x.shape[0] > 0 else NULL
    cdef const char* p = <const char*>&pad_row[0]
    cdef const offset_t* off = &offsets[0]
    cdef Py_ssize_t c, n_chunks = bounds.shape[0] - 1
    with nogil:
        if n_threads > 1:
            for c in prange(n_chunks, num_threads=n_threads, schedule="dynamic"):
                _pad_seqs(o, src, p, off, bounds[c], bounds[c + 1], padded_length, width)
        else:
            _pad_seqs(o, src, p, off, bounds[0], bounds[n_chunks], padded_length, width)


cdef void _unpad_seqs(char* out, const char* x, const offset_t* off, Py_ssize_t lo,
                      Py_ssize_t hi, Py_ssize_t stride, Py_ssize_t w) noexcept nogil:
    cdef Py_ssize_t s, n
    for s in range(lo, hi):
        n = off[s + 1] - off[s]
        if n > 0:
            memcpy(out + off[s] * w, x + s * stride, n * w)


def unpad(uint8_t[::1] out, const uint8_t[::1] x, const offset_t[::1] offsets,
          const offset_t[::1] bounds, Py_ssize_t padded_length, Py_ssize_t width,
          int n_threads):
    """The first ``offsets[s + 1] - offsets[s]`` rows of block ``s`` of ``x`` -> ``out``.

    ``x`` holds blocks of ``padded_length`` rows of ``width`` bytes; ``out`` (non-empty) gets
    sequence ``s`` at rows ``[offsets[s], offsets[s + 1])``.
    """
    cdef char* o = <char*>&out[0]
    cdef const char* src = <const char*>&x[0]
    cdef const offset_t* off = &offsets[0]
    cdef Py_ssize_t c, n_chunks = bounds.shape[0] - 1
    cdef Py_ssize_t stride = padded_length * width
    with nogil:
        if n_threads > 1:
            for c in prange(n_chunks, num_threads=n_threads, schedule="dynamic"):
                _unpad_seqs(o, src, off, bounds[c], bounds[c + 1], stride, width)
        else:
            _unpad_seqs(o, src, off, bounds[0], bounds[n_chunks], stride, width)


# ---------------------------------------------------------------------- enumerate
# Values move as same-size integer containers (uint8, uint16, int32, int64 views), so these
# four specialisations serve every dtype bit for bit.

cdef inline void _enumerate_full(numeric_t* out, const numeric_t* x, Py_ssize_t t0,
                                 Py_ssize_t t1, Py_ssize_t win) noexcept nogil:
    """Rows ``[t0, t1)`` whose whole window lies inside the sequence.

    Small windows get a loop of constant width, so each row is a few plain stores rather
    than an inner loop with an unknown trip count.
    """
    cdef Py_ssize_t t, k
    cdef numeric_t* row
    if win == 2:
        for t in range(t0, t1):
            out[2 * t] = x[t]
            out[2 * t + 1] = x[t + 1]
    elif win == 3:
        for t in range(t0, t1):
            out[3 * t] = x[t]
            out[3 * t + 1] = x[t + 1]
            out[3 * t + 2] = x[t + 2]
    elif win == 4:
        for t in range(t0, t1):
            out[4 * t] = x[t]
            out[4 * t + 1] = x[t + 1]
            out[4 * t + 2] = x[t + 2]
            out[4 * t + 3] = x[t + 3]
    else:
        for t in range(t0, t1):
            row = out + t * win
            for k in range(win):
                row[k] = x[t + k]


cdef void _enumerate_seqs(numeric_t* out, const numeric_t* x, const offset_t* off,
                          Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t win,
                          numeric_t pad) noexcept nogil:
    cdef Py_ssize_t s, t, k, end, full
    cdef numeric_t* row
    if win == 1:
        # Every window of one value lies inside its sequence: the output is x itself.
        memcpy(out + off[lo], x + off[lo], <size_t>(off[hi] - off[lo]) * sizeof(numeric_t))
        return
    for s in range(lo, hi):
        end = off[s + 1]
        # Rows whose whole window lies inside the sequence, then the padded tail.
        full = end - win + 1 if end - win + 1 > off[s] else off[s]
        _enumerate_full(out, x, off[s], full, win)
        for t in range(full, end):
            row = out + t * win
            for k in range(end - t):
                row[k] = x[t + k]
            for k in range(end - t, win):
                row[k] = pad


def enumerate_windows(numeric_t[::1] out, const numeric_t[::1] x, const numeric_t[::1] pad,
                      const offset_t[::1] offsets, const offset_t[::1] bounds,
                      Py_ssize_t win_size, int n_threads):
    """Row ``t`` of ``out`` (``win_size`` values) = ``x[t:t + win_size]`` cut at its sequence's
    end, the rest ``pad[0]``.  ``out`` and ``x`` are non-empty.
    """
    cdef numeric_t* o = &out[0]
    cdef const numeric_t* src = &x[0]
    cdef const offset_t* off = &offsets[0]
    cdef numeric_t p = pad[0]
    cdef Py_ssize_t c, n_chunks = bounds.shape[0] - 1
    with nogil:
        if n_threads > 1:
            for c in prange(n_chunks, num_threads=n_threads, schedule="dynamic"):
                _enumerate_seqs(o, src, off, bounds[c], bounds[c + 1], win_size, p)
        else:
            _enumerate_seqs(o, src, off, bounds[0], bounds[n_chunks], win_size, p)


# ---------------------------------------------------------------------- erase
# Integer data with tokens in a compact range test membership in a byte table (``table[v -
# low]``, one branch-free load); otherwise a scan of few tokens or a binary search.

cdef inline bint _is_token(numeric_t v, const numeric_t* tok, Py_ssize_t n,
                           const uint8_t* table, uint64_t size, int64_t low) noexcept nogil:
    """``v`` is a token (compared by value: NaN matches nothing, -0.0 == 0.0)."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    cdef uint64_t u
    if numeric_t is not float and numeric_t is not double:
        if table != NULL:
            # Wraps, so out-of-range values land on the zero sentinel table[size]: no branch.
            u = <uint64_t>(<int64_t>v) - <uint64_t>low
            return table[u if u < size else size]
    if n <= 8:
        for mid in range(n):
            if v == tok[mid]:
                return True
        return False
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if tok[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo < n and tok[lo] == v


cdef void _erase_count_seqs(offset_t* counts, const numeric_t* x, const numeric_t* tok,
                            Py_ssize_t n_tok, const uint8_t* table, uint64_t size,
                            int64_t low, const offset_t* off, Py_ssize_t lo,
                            Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t s, t
    cdef offset_t kept
    for s in range(lo, hi):
        kept = 0
        for t in range(off[s], off[s + 1]):
            kept += 1 - <offset_t>_is_token(x[t], tok, n_tok, table, size, low)
        counts[s] = kept


cdef void _erase_copy_seqs(numeric_t* out, const numeric_t* x, const numeric_t* tok,
                           Py_ssize_t n_tok, const uint8_t* table, uint64_t size, int64_t low,
                           const offset_t* off, const offset_t* new_off, Py_ssize_t lo,
                           Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t s, t, j
    for s in range(lo, hi):
        j = new_off[s]
        for t in range(off[s], off[s + 1]):
            if not _is_token(x[t], tok, n_tok, table, size, low):
                out[j] = x[t]
                j += 1


def erase_count(offset_t[::1] counts, const numeric_t[::1] x, const numeric_t[::1] tokens,
                const uint8_t[::1] table, int64_t table_low, const offset_t[::1] offsets,
                const offset_t[::1] bounds, int n_threads):
    """``counts[s]`` = rows of sequence ``s`` whose value is not a token.

    ``tokens`` is sorted and non-empty; ``table`` (integer data only, may be empty) marks the
    tokens as ``table[v - table_low] == 1`` and ends with a zero sentinel.  ``x`` is non-empty.
    """
    cdef offset_t* cnt = &counts[0]
    cdef const numeric_t* src = &x[0]
    cdef const numeric_t* tok = &tokens[0]
    cdef const uint8_t* tab = &table[0] if table.shape[0] > 0 else NULL
    cdef uint64_t size = table.shape[0] - 1 if table.shape[0] > 0 else 0
    cdef const offset_t* off = &offsets[0]
    cdef Py_ssize_t c, n_tok = tokens.shape[0], n_chunks = bounds.shape[0] - 1
    with nogil:
        if n_threads > 1:
            for c in prange(n_chunks, num_threads=n_threads, schedule="dynamic"):
                _erase_count_seqs(cnt, src, tok, n_tok, tab, size, table_low, off, bounds[c],
                                  bounds[c + 1])
        else:
            _erase_count_seqs(cnt, src, tok, n_tok, tab, size, table_low, off, bounds[0],
                              bounds[n_chunks])


def erase_copy(numeric_t[::1] out, const numeric_t[::1] x, const numeric_t[::1] tokens,
               const uint8_t[::1] table, int64_t table_low, const offset_t[::1] offsets,
               const offset_t[::1] new_offsets, const offset_t[::1] bounds, int n_threads):
    """Copy the non-token rows of sequence ``s`` to ``out[new_offsets[s]:]``, in order.

    Arguments as ``erase_count``; ``out`` is non-empty and ``new_offsets`` the running sum of
    the counts.
    """
    cdef numeric_t* o = &out[0]
    cdef const numeric_t* src = &x[0]
    cdef const numeric_t* tok = &tokens[0]
    cdef const uint8_t* tab = &table[0] if table.shape[0] > 0 else NULL
    cdef uint64_t size = table.shape[0] - 1 if table.shape[0] > 0 else 0
    cdef const offset_t* off = &offsets[0]
    cdef const offset_t* new_off = &new_offsets[0]
    cdef Py_ssize_t c, n_tok = tokens.shape[0], n_chunks = bounds.shape[0] - 1
    with nogil:
        if n_threads > 1:
            for c in prange(n_chunks, num_threads=n_threads, schedule="dynamic"):
                _erase_copy_seqs(o, src, tok, n_tok, tab, size, table_low, off, new_off,
                                 bounds[c], bounds[c + 1])
        else:
            _erase_copy_seqs(o, src, tok, n_tok, tab, size, table_low, off, new_off,
                             bounds[0], bounds[n_chunks])


# ---------------------------------------------------------------------- mask

cdef inline Py_ssize_t _mask_count(numeric_t v, Py_ssize_t m) noexcept nogil:
    """How many ``j`` in ``[0, m)`` satisfy ``j < v`` (NaN: none)."""
    if numeric_t is float or numeric_t is double:
        if not (v > 0):
            return 0
        if v >= m:
            return m
        return <Py_ssize_t>ceil(v)
    else:
        if v <= 0:
            return 0
        if v >= m:
            return m
        return <Py_ssize_t>v


cdef inline void _mask_row(char* row, Py_ssize_t k, Py_ssize_t m, Py_ssize_t size,
                           uint64_t one) noexcept nogil:
    """``k`` elements of value ``one`` (its bit pattern, ``size`` bytes), then zeros."""
    cdef Py_ssize_t j
    cdef uint16_t one16 = <uint16_t>one
    cdef uint32_t one32 = <uint32_t>one
    if size == 1:
        memset(row, <int>(one & 0xFF), k)
    elif size == 2:
        for j in range(k):
            memcpy(row + 2 * j, &one16, 2)
    elif size == 4:
        for j in range(k):
            memcpy(row + 4 * j, &one32, 4)
    else:
        for j in range(k):
            memcpy(row + 8 * j, &one, 8)
    memset(row + k * size, 0, (m - k) * size)


def mask(uint8_t[::1] out, const numeric_t[::1] x, Py_ssize_t maxlen, Py_ssize_t itemsize,
         uint64_t one_bits, int n_threads):
    """Row ``i`` of ``out`` (``maxlen`` elements of ``itemsize`` bytes): element ``j`` is
    ``one_bits`` where ``j < x[i]``, else zero bits.  ``out`` and ``x`` are non-empty.
    """
    cdef char* o = <char*>&out[0]
    cdef const numeric_t* src = &x[0]
    cdef Py_ssize_t i, n = x.shape[0], row = maxlen * itemsize
    with nogil:
        if n_threads > 1:
            for i in prange(n, num_threads=n_threads, schedule="static"):
                _mask_row(o + i * row, _mask_count(src[i], maxlen), maxlen, itemsize, one_bits)
        else:
            for i in range(n):
                _mask_row(o + i * row, _mask_count(src[i], maxlen), maxlen, itemsize, one_bits)
