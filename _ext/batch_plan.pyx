"""Batch-plan and collation kernels for lodarrow's training layer (docs/training.md).

Every function trusts its arguments' types, shapes and values (the Python layer in
``lodarrow/_training`` checks them); indices, lengths and offsets are int64 end to end.
"""
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, qsort
from libc.string cimport memcpy, memset

cimport numpy as cnp

cnp.import_array()


ctypedef struct _item:
    int64_t length
    int64_t pos
    int64_t row


cdef int _cmp_up(const void* a, const void* b) noexcept nogil:
    cdef const _item* x = <const _item*>a
    cdef const _item* y = <const _item*>b
    if x.length != y.length:
        return -1 if x.length < y.length else 1
    return -1 if x.pos < y.pos else (1 if x.pos > y.pos else 0)


cdef int _cmp_down(const void* a, const void* b) noexcept nogil:
    cdef const _item* x = <const _item*>a
    cdef const _item* y = <const _item*>b
    if x.length != y.length:
        return -1 if x.length > y.length else 1
    return -1 if x.pos < y.pos else (1 if x.pos > y.pos else 0)


cdef int _counting_sort(const int64_t* order, const int64_t* lengths, int64_t lo, int64_t hi,
                        int64_t* out, int64_t* out_len, bint descending,
                        int64_t top) noexcept nogil:
    """Stable counting sort of ``order[lo:hi]`` by length (every length <= ``top``)."""
    cdef int64_t k, length, total = 0, c
    cdef int64_t* count = <int64_t*>calloc(top + 2, sizeof(int64_t))
    if count == NULL:
        return -1
    for k in range(lo, hi):
        length = lengths[order[k]]
        count[(top - length) if descending else length] += 1
    for k in range(top + 1):
        c = count[k]
        count[k] = total
        total += c
    for k in range(lo, hi):
        length = lengths[order[k]]
        c = (top - length) if descending else length
        out[lo + count[c]] = order[k]
        out_len[lo + count[c]] = length
        count[c] += 1
    free(count)
    return 0


cdef int _sort_one(const int64_t* order, const int64_t* lengths, int64_t lo, int64_t hi,
                   int64_t* out, int64_t* out_len, bint descending) noexcept nogil:
    """Stable sort of ``order[lo:hi]`` by length into ``out[lo:hi]``; -1 if out of memory.

    A counting sort when the longest length is at most 4x the window (the usual case), else a
    ``qsort`` of (length, position) pairs."""
    cdef int64_t n = hi - lo, k, top = 0
    if n <= 0:
        return 0
    for k in range(lo, hi):
        if lengths[order[k]] > top:
            top = lengths[order[k]]
    if top <= 4 * n + 1024:
        return _counting_sort(order, lengths, lo, hi, out, out_len, descending, top)
    cdef _item* items = <_item*>malloc(n * sizeof(_item))
    if items == NULL:
        return -1
    for k in range(n):
        items[k].row = order[lo + k]
        items[k].length = lengths[items[k].row]
        items[k].pos = k
    qsort(items, n, sizeof(_item), _cmp_down if descending else _cmp_up)
    for k in range(n):
        out[lo + k] = items[k].row
        out_len[lo + k] = items[k].length
    free(items)
    return 0


def sort_windows(const int64_t[::1] order, const int64_t[::1] lengths,
                 const int64_t[::1] windows, int64_t[::1] out, int64_t[::1] out_lengths,
                 bint descending, int num_threads):
    """Sort each window ``order[windows[w]:windows[w+1]]`` by length (stable) into ``out``,
    the lengths in that order into ``out_lengths``.

    Returns 0, or -1 when a window's scratch memory could not be allocated.
    """
    cdef Py_ssize_t w, nw = windows.shape[0] - 1
    cdef int failed = 0
    if order.shape[0] == 0:
        return 0
    cdef const int64_t* po = &order[0]
    cdef const int64_t* pl = &lengths[0]
    cdef int64_t* pout = &out[0]
    cdef int64_t* plen = &out_lengths[0]
    with nogil:
        for w in prange(nw, num_threads=max(num_threads, 1), schedule="dynamic"):
            # a reduction: a plain assignment in prange is lastprivate, whose value after
            # the loop Cython leaves undefined when the last iteration did not assign it
            failed += _sort_one(po, pl, windows[w], windows[w + 1], pout, plen, descending) != 0
    return -1 if failed else 0


cdef inline int64_t _fit_width(int64_t need, int64_t multiple, const int64_t* widths,
                               Py_ssize_t n_widths) noexcept nogil:
    """The padded width of ``need`` slots: the smallest of ``widths`` that holds it (-1 when
    none does), else ``need`` rounded up to a multiple of ``multiple``."""
    cdef Py_ssize_t k
    if n_widths > 0:
        for k in range(n_widths):
            if widths[k] >= need:
                return widths[k]
        return -1
    if multiple > 1:
        return (need + multiple - 1) // multiple * multiple
    return need


def cut_batches(const int64_t[::1] seq_lengths, const int64_t[::1] windows,
                int64_t batch_size, int64_t max_tokens, int measure, int64_t fixed_rows,
                int64_t multiple, const int64_t[::1] widths, int64_t[::1] bounds):
    """Cut a sequence of lengths (in plan order) into batches, greedily, never across a
    window boundary.

    A batch takes the next sequence while it holds fewer than ``batch_size`` sequences (0: no
    limit) and its *slots* with that sequence (what the delivered batch will hold, padding
    included) stay within ``max_tokens`` (0: no limit) and have a width.  ``measure`` says
    what the slots are, with ``W`` the padded width (``widths`` when given, -1 past the last,
    else rounded up to ``multiple``):

    - 0, a padded batch: ``rows * W(longest)``, ``rows`` being ``fixed_rows`` or the count;
    - 1, a flat batch: ``W(sum of lengths)``;
    - 2, a flat batch counted padded too: ``max(count * longest, W(sum))``.

    An empty batch always takes the next sequence, so one whose batch alone is over the budget
    is a batch of its own.  Writes the batch boundaries (positions) to ``bounds`` and returns
    the number of batches.
    """
    cdef Py_ssize_t nw = windows.shape[0] - 1, w
    cdef Py_ssize_t n_widths = widths.shape[0]
    cdef const int64_t* pw = &widths[0] if n_widths > 0 else NULL
    cdef int64_t nb = 0, i, lo, hi, count, longest, total, length, m, width, slots, rows
    cdef bint close
    with nogil:
        bounds[0] = 0
        for w in range(nw):
            lo = windows[w]
            hi = windows[w + 1]
            count = 0
            longest = 0
            total = 0
            for i in range(lo, hi):
                length = seq_lengths[i]
                if count > 0:
                    close = batch_size > 0 and count >= batch_size
                    if not close:
                        m = longest if longest > length else length
                        if measure == 0:
                            width = _fit_width(m, multiple, pw, n_widths)
                            rows = fixed_rows if fixed_rows > 0 else count + 1
                            slots = rows * width
                        else:
                            width = _fit_width(total + length, multiple, pw, n_widths)
                            slots = width
                            if measure == 2 and (count + 1) * m > slots:
                                slots = (count + 1) * m
                        close = width < 0 or (max_tokens > 0 and slots > max_tokens)
                    if close:
                        nb += 1
                        bounds[nb] = i
                        count = 0
                        longest = 0
                        total = 0
                count += 1
                total += length
                if length > longest:
                    longest = length
            if count > 0:
                nb += 1
                bounds[nb] = hi
    return nb


def range_stats(const int64_t[::1] seq_lengths, const int64_t[::1] lo, const int64_t[::1] hi,
                int64_t[::1] tokens, int64_t[::1] longest):
    """Per batch ``b`` (``seq_lengths[lo[b]:hi[b]]``): the sum into ``tokens[b]``, the longest
    into ``longest[b]``."""
    cdef Py_ssize_t b, nb = lo.shape[0]
    cdef int64_t i, s, m, length
    with nogil:
        for b in range(nb):
            s = 0
            m = 0
            for i in range(lo[b], hi[b]):
                length = seq_lengths[i]
                s = s + length
                if length > m:
                    m = length
            tokens[b] = s
            longest[b] = m


# --- best fit: a treap of the open bins keyed by (free space, bin) -------------------------
#
# Best fit puts each item into the bin with the least free space that still holds it (the
# fullest that fits; the lowest-numbered among equals).  The bins sit in a treap (a binary
# search tree with random heap priorities: expected depth O(log n)) ordered by (free, bin), so
# that bin is the tree's lower bound of the item's size.  Nodes are bins, in flat arrays.

ctypedef struct _treap:
    int64_t* free    # free space of each bin
    int64_t* left
    int64_t* right
    uint64_t* prio


cdef inline bint _before(const _treap* t, int64_t a, int64_t b) noexcept nogil:
    """Whether bin ``a`` comes before bin ``b`` in (free space, bin) order."""
    return t.free[a] < t.free[b] or (t.free[a] == t.free[b] and a < b)


cdef int64_t _merge(_treap* t, int64_t a, int64_t b) noexcept nogil:
    """The union of treaps ``a`` and ``b``, every key of ``a`` before every key of ``b``."""
    if a < 0:
        return b
    if b < 0:
        return a
    if t.prio[a] > t.prio[b]:
        t.right[a] = _merge(t, t.right[a], b)
        return a
    t.left[b] = _merge(t, a, t.left[b])
    return b


cdef void _split(_treap* t, int64_t node, int64_t key, int64_t* lo, int64_t* hi) noexcept nogil:
    """Split treap ``node`` into the bins before bin ``key`` (``lo``) and the rest (``hi``)."""
    if node < 0:
        lo[0] = -1
        hi[0] = -1
    elif _before(t, node, key):
        _split(t, t.right[node], key, &t.right[node], hi)
        lo[0] = node
    else:
        _split(t, t.left[node], key, lo, &t.left[node])
        hi[0] = node


cdef int64_t _drop_first(_treap* t, int64_t node) noexcept nogil:
    """Treap ``node`` without its first bin."""
    if t.left[node] < 0:
        return t.right[node]
    t.left[node] = _drop_first(t, t.left[node])
    return node


cdef int64_t _insert(_treap* t, int64_t root, int64_t b) noexcept nogil:
    cdef int64_t lo, hi
    t.left[b] = -1
    t.right[b] = -1
    _split(t, root, b, &lo, &hi)
    return _merge(t, _merge(t, lo, b), hi)


cdef int64_t _best_fit(const int64_t* sizes, int64_t n, int64_t capacity, int64_t* bin_of,
                       int64_t* offset) noexcept nogil:
    """Best fit of ``sizes[:n]`` into bins of ``capacity``; the number of bins, -1 when out of
    memory.  ``offset`` (or NULL) gets each item's first slot in its bin."""
    cdef _treap t
    cdef int64_t k, size, node, found, root = -1, nbins = 0, lo, hi
    cdef uint64_t state = 0x5EED
    if n == 0:
        return 0
    t.free = <int64_t*>malloc(n * sizeof(int64_t))
    t.left = <int64_t*>malloc(n * sizeof(int64_t))
    t.right = <int64_t*>malloc(n * sizeof(int64_t))
    t.prio = <uint64_t*>malloc(n * sizeof(uint64_t))
    if t.free == NULL or t.left == NULL or t.right == NULL or t.prio == NULL:
        free(t.free)
        free(t.left)
        free(t.right)
        free(t.prio)
        return -1
    for k in range(n):
        size = sizes[k]
        found = -1
        node = root
        while node >= 0:  # the lower bound of size: the fullest bin that holds the item
            if t.free[node] >= size:
                found = node
                node = t.left[node]
            else:
                node = t.right[node]
        if found < 0:  # a new bin
            found = nbins
            nbins += 1
            t.free[found] = capacity
            t.prio[found] = _splitmix(&state)
        else:  # out of the tree, to go back with its new key
            _split(&t, root, found, &lo, &hi)
            root = _merge(&t, lo, _drop_first(&t, hi))
        bin_of[k] = found
        if offset != NULL:
            offset[k] = capacity - t.free[found]
        t.free[found] -= size
        root = _insert(&t, root, found)
    free(t.free)
    free(t.left)
    free(t.right)
    free(t.prio)
    return nbins


def best_fit(const int64_t[::1] sizes, int64_t capacity, int64_t[::1] bin_of,
             int64_t[::1] offset=None):
    """Best fit of ``sizes`` (in the given order; sorted decreasing: best-fit decreasing) into
    bins of ``capacity``: each item goes to the fullest bin that holds it (the lowest-numbered
    among equally full ones), a new bin when none does, in O(log n).

    ``bin_of[k]`` gets the bin of item ``k``, ``offset[k]`` (if given) its first slot there
    (the bin's fill before it).  Every size must be in ``[0, capacity]``.  Returns the number
    of bins.
    """
    cdef Py_ssize_t n = sizes.shape[0]
    cdef int64_t nbins
    if n == 0:
        return 0
    cdef int64_t* po = &offset[0] if offset is not None else NULL
    with nogil:
        nbins = _best_fit(&sizes[0], n, capacity, &bin_of[0], po)
    if nbins < 0:
        raise MemoryError()
    return nbins


def best_fit_windows(const int64_t[::1] sizes, const int64_t[::1] windows, int64_t capacity,
                     int64_t[::1] bin_of, int64_t[::1] offset, int64_t[::1] n_bins,
                     int num_threads):
    """:func:`best_fit` of each window ``sizes[windows[w]:windows[w+1]]`` on its own:
    ``bin_of`` and ``offset`` as there (bins numbered from 0 in each window), ``n_bins[w]``
    the window's number of bins.

    Returns 0, or -1 when a window's scratch memory could not be allocated.
    """
    cdef Py_ssize_t w, nw = windows.shape[0] - 1
    cdef int failed = 0
    cdef int64_t lo, got
    if sizes.shape[0] == 0:
        n_bins[:] = 0
        return 0
    cdef const int64_t* ps = &sizes[0]
    cdef int64_t* pb = &bin_of[0]
    cdef int64_t* po = &offset[0]
    with nogil:
        for w in prange(nw, num_threads=max(num_threads, 1), schedule="dynamic"):
            lo = windows[w]
            got = _best_fit(ps + lo, windows[w + 1] - lo, capacity, pb + lo, po + lo)
            n_bins[w] = got
            if got < 0:
                failed += 1  # a reduction: any window's failure survives the loop
    return -1 if failed else 0


def gather_rows(const uint8_t[::1] src, int64_t row_bytes, const int64_t[::1] starts,
                const int64_t[::1] lengths, const int64_t[::1] dest, const int64_t[::1] slot,
                const uint8_t[::1] pad_row, uint8_t[::1] out, int64_t[::1] positions,
                uint8_t[::1] mask, const int32_t[::1] ids, int32_t[::1] token_ids,
                int32_t fill_id, int num_threads):
    """Copy item ``k`` (value rows ``starts[k]:starts[k]+lengths[k]`` of ``src``, each
    ``row_bytes`` long) to output rows ``dest[k]...`` of ``out``.

    Rows ``dest[k]+lengths[k]:dest[k]+slot[k]`` (the fill; ``slot`` empty: none) get
    ``pad_row``.  The per-row outputs, each skipped when empty: ``positions`` gets
    ``0..lengths[k]-1`` at the item's rows and 0 over the fill, ``mask`` 1 and 0,
    ``token_ids`` ``ids[k]`` and ``fill_id``.  One thread runs a plain loop (no OpenMP
    region to start: a batch's worth is microseconds).
    """
    cdef Py_ssize_t k, n = starts.shape[0]
    if n == 0:
        return
    # raw pointers: the per-token loops below vectorise (memoryview indexing does not)
    cdef _Items it
    it.src = &src[0] if src.shape[0] > 0 else NULL
    it.out = &out[0] if out.shape[0] > 0 else NULL
    it.pad = &pad_row[0] if pad_row.shape[0] > 0 else NULL
    it.positions = &positions[0] if positions.shape[0] > 0 else NULL
    it.mask = &mask[0] if mask.shape[0] > 0 else NULL
    it.token_ids = &token_ids[0] if token_ids.shape[0] > 0 else NULL
    it.slot = &slot[0] if slot.shape[0] > 0 else NULL
    it.ids = &ids[0] if ids.shape[0] > 0 else NULL
    it.starts = &starts[0]
    it.lengths = &lengths[0]
    it.dest = &dest[0]
    it.row_bytes = row_bytes
    it.fill_id = fill_id
    with nogil:
        if num_threads <= 1:
            for k in range(n):
                _gather_item(&it, k)
        else:
            for k in prange(n, num_threads=num_threads, schedule="dynamic", chunksize=64):
                _gather_item(&it, k)


def packed_batch(const uint8_t[::1] src, int64_t row_bytes, const int64_t[::1] starts,
                 const int64_t[::1] lengths, const int64_t[::1] rows, threads,
                 int64_t parallel_bytes, bint per_token=True):
    """One "packed" batch of the sequences ``rows`` (of ``starts`` / ``lengths``, value rows
    of ``row_bytes`` in ``src``), every array fresh, in one call (a batch's Python overhead
    is of the order of its copying); from ``parallel_bytes`` of values on, copied on
    ``threads()`` threads (asked only then: it is not free).

    Returns ``(values, position_ids, seq_idx, cu_seqlens, lengths, max_seqlen)``: the values'
    bytes back to back, int64 ``0..len-1`` a sequence, int32 the sequence's index, int32
    offsets, int64 the batch's lengths; None when the batch holds 2**31 tokens or more
    (``cu_seqlens`` would not fit int32: the caller's general path says so).  Without
    ``per_token`` ``position_ids`` and ``seq_idx`` are None (:func:`packed_tokens` makes
    them from ``cu_seqlens``).
    """
    cdef Py_ssize_t k, n = rows.shape[0]
    cdef int64_t total = 0, longest = 0, ln
    cdef cnp.npy_intp dim = n
    cdef cnp.ndarray blen = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
    cdef int64_t* bl = <int64_t*>cnp.PyArray_DATA(blen)
    for k in range(n):
        ln = lengths[rows[k]]
        bl[k] = ln
        total += ln
        if ln > longest:
            longest = ln
    if total > 2147483647:
        return None
    dim = n + 1
    cdef cnp.ndarray cu = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT32, 0)
    cdef int32_t* c = <int32_t*>cnp.PyArray_DATA(cu)
    c[0] = 0
    for k in range(n):
        c[k + 1] = <int32_t>(c[k] + bl[k])
    dim = total * row_bytes
    cdef cnp.ndarray values = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_UINT8, 0)
    dim = total
    cdef object positions = None, seq_idx = None
    cdef _Items it
    it.positions = NULL
    it.token_ids = NULL
    if per_token:
        positions = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
        seq_idx = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT32, 0)
        it.positions = <int64_t*>cnp.PyArray_DATA(positions)
        it.token_ids = <int32_t*>cnp.PyArray_DATA(seq_idx)
    it.src = &src[0] if src.shape[0] > 0 else NULL
    it.out = <uint8_t*>cnp.PyArray_DATA(values) if total * row_bytes > 0 else NULL
    it.pad = NULL
    it.mask = NULL
    it.slot = NULL
    it.ids = NULL  # the item's own index
    it.starts = &starts[0] if starts.shape[0] > 0 else NULL
    it.lengths = bl
    it.dest = NULL
    it.row_bytes = row_bytes
    it.fill_id = 0
    cdef const int64_t* r = &rows[0] if n > 0 else NULL
    cdef int num_threads = threads() if total * row_bytes >= parallel_bytes else 1
    with nogil:
        if num_threads <= 1:
            for k in range(n):
                _packed_item(&it, r, c, k)
        else:
            for k in prange(n, num_threads=num_threads, schedule="dynamic", chunksize=64):
                _packed_item(&it, r, c, k)
    return values, positions, seq_idx, cu, blen, longest


cdef inline void _packed_item(const _Items* it, const int64_t* rows, const int32_t* cu,
                              Py_ssize_t k) noexcept nogil:
    cdef int64_t d = cu[k]
    cdef int64_t ln = it.lengths[k]
    cdef int64_t rb = it.row_bytes
    if ln > 0 and rb > 0:
        memcpy(it.out + d * rb, it.src + it.starts[rows[k]] * rb, ln * rb)
    if it.positions != NULL:
        _iota(it.positions + d, ln)
        _fill32(it.token_ids + d, ln, <int32_t>k)


def packed_tokens(const int32_t[::1] cu):
    """The per-token arrays of a "packed" batch from its ``cu_seqlens`` (see
    :func:`packed_batch`): ``position_ids`` (int64, ``0..len-1`` a sequence) and ``seq_idx``
    (int32, the sequence's index), each ``(cu[-1],)``."""
    cdef Py_ssize_t n = cu.shape[0] - 1, k
    cdef cnp.npy_intp dim = cu[n] if n > 0 else 0
    cdef cnp.ndarray positions = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
    cdef cnp.ndarray seq_idx = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT32, 0)
    cdef int64_t* pos = <int64_t*>cnp.PyArray_DATA(positions)
    cdef int32_t* sid = <int32_t*>cnp.PyArray_DATA(seq_idx)
    with nogil:
        for k in range(n):
            _iota(pos + cu[k], cu[k + 1] - cu[k])
            _fill32(sid + cu[k], cu[k + 1] - cu[k], <int32_t>k)
    return positions, seq_idx


ctypedef struct _Items:
    const uint8_t* src
    uint8_t* out
    const uint8_t* pad
    int64_t* positions
    uint8_t* mask
    int32_t* token_ids
    const int64_t* slot
    const int64_t* starts
    const int64_t* lengths
    const int64_t* dest
    const int32_t* ids
    int64_t row_bytes
    int32_t fill_id


cdef inline void _gather_item(const _Items* it, Py_ssize_t k) noexcept nogil:
    cdef int64_t d = it.dest[k]
    cdef int64_t ln = it.lengths[k]
    cdef int64_t rb = it.row_bytes
    cdef int64_t fill_to
    if ln > 0 and rb > 0:
        memcpy(it.out + d * rb, it.src + it.starts[k] * rb, ln * rb)
    if it.positions != NULL:
        _iota(it.positions + d, ln)
    if it.mask != NULL and ln > 0:
        memset(it.mask + d, 1, ln)
    if it.token_ids != NULL:
        _fill32(it.token_ids + d, ln, it.ids[k])
    if it.slot != NULL:
        fill_to = it.slot[k] - ln  # the fill after the item
        if fill_to > 0:
            if rb > 0:
                _fill_rows(it.out + (d + ln) * rb, it.pad, rb, fill_to)
            if it.positions != NULL:
                memset(it.positions + d + ln, 0, fill_to * sizeof(int64_t))
            if it.mask != NULL:
                memset(it.mask + d + ln, 0, fill_to)
            if it.token_ids != NULL:
                _fill32(it.token_ids + d + ln, fill_to, it.fill_id)


cdef inline void _fill_rows(uint8_t* dst, const uint8_t* pad, int64_t row_bytes,
                            int64_t count) noexcept nogil:
    """``count`` copies of the ``row_bytes`` of ``pad`` at ``dst``: one copy, then the filled
    part doubled (about log2(count) memcpy calls, not one a row)."""
    cdef int64_t done = 1
    cdef int64_t c
    if count <= 0:
        return
    memcpy(dst, pad, row_bytes)
    while done < count:
        c = done if done < count - done else count - done
        memcpy(dst + done * row_bytes, dst, c * row_bytes)
        done += c


cdef inline void _iota(int64_t* out, int64_t n) noexcept nogil:
    cdef int64_t j
    for j in range(n):
        out[j] = j


cdef inline void _fill32(int32_t* out, int64_t n, int32_t value) noexcept nogil:
    cdef int64_t j
    for j in range(n):
        out[j] = value


cdef inline uint64_t _splitmix(uint64_t* state) noexcept nogil:
    state[0] += <uint64_t>0x9E3779B97F4A7C15
    cdef uint64_t z = state[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)


cdef inline uint64_t _below(uint64_t* state, uint64_t bound) noexcept nogil:
    """A uniform integer in ``[0, bound)``: Lemire's multiply-shift with rejection on 32-bit
    halves (portable C) below 2**32, a rejecting modulo above."""
    cdef uint64_t x, m, threshold, limit
    cdef uint32_t b32
    if bound <= <uint64_t>0xFFFFFFFF:
        b32 = <uint32_t>bound
        x = _splitmix(state) >> 32
        m = x * b32
        if <uint32_t>m < b32:
            threshold = (<uint32_t>(0 - b32)) % b32
            while <uint32_t>m < threshold:
                x = _splitmix(state) >> 32
                m = x * b32
        return m >> 32
    limit = <uint64_t>0xFFFFFFFFFFFFFFFF - (<uint64_t>0xFFFFFFFFFFFFFFFF % bound + 1) % bound
    x = _splitmix(state)
    while x > limit:
        x = _splitmix(state)
    return x % bound


def permutation(int64_t[::1] out, uint64_t seed):
    """Write a uniformly random permutation of ``0..len(out)-1`` to ``out`` (Fisher-Yates,
    SplitMix64 from ``seed``): the same seed gives the same permutation on every machine."""
    cdef Py_ssize_t n = out.shape[0], i
    cdef uint64_t state = seed, j
    cdef int64_t tmp
    with nogil:
        for i in range(n):
            out[i] = i
        for i in range(n - 1, 0, -1):
            j = _below(&state, <uint64_t>(i + 1))
            tmp = out[i]
            out[i] = out[j]
            out[j] = tmp


def gather_padded(const uint8_t[::1] src, int64_t row_bytes, const int64_t[::1] starts,
                  const int64_t[::1] rows, const int64_t[::1] lengths, int64_t longest,
                  const uint8_t[::1] pad_row, uint8_t[::1] out, uint8_t[::1] mask,
                  int num_threads):
    """The padded batch of ``rows``: sequence ``rows[k]`` (value rows ``starts[rows[k]]...``,
    ``lengths[k]`` of them) to output rows ``k * longest...``, padded with ``pad_row`` to
    ``longest``; ``mask`` gets 1 on the sequence, 0 on the padding (an empty ``mask``: none
    written).  One thread runs a plain loop (no OpenMP region to start)."""
    cdef Py_ssize_t k, n = rows.shape[0]
    if n == 0 or longest == 0:
        return
    cdef _Padded pd
    pd.src = &src[0] if src.shape[0] > 0 else NULL
    pd.out = &out[0] if out.shape[0] > 0 else NULL
    pd.pad = &pad_row[0] if pad_row.shape[0] > 0 else NULL
    pd.mask = &mask[0] if mask.shape[0] > 0 else NULL
    pd.starts = &starts[0]
    pd.rows = &rows[0]
    pd.lengths = &lengths[0]
    pd.row_bytes = row_bytes
    pd.longest = longest
    with nogil:
        if num_threads <= 1:
            for k in range(n):
                _pad_one(&pd, k)
        else:
            for k in prange(n, num_threads=num_threads, schedule="static"):
                _pad_one(&pd, k)


ctypedef struct _Padded:
    const uint8_t* src
    uint8_t* out
    const uint8_t* pad
    uint8_t* mask
    const int64_t* starts
    const int64_t* rows
    const int64_t* lengths
    int64_t row_bytes
    int64_t longest


cdef inline void _pad_one(const _Padded* pd, Py_ssize_t k) noexcept nogil:
    cdef int64_t d = k * pd.longest
    cdef int64_t ln = pd.lengths[k]
    cdef int64_t rb = pd.row_bytes
    if ln > 0 and rb > 0:
        memcpy(pd.out + d * rb, pd.src + pd.starts[pd.rows[k]] * rb, ln * rb)
    if pd.mask != NULL:
        memset(pd.mask + d, 1, ln)
        memset(pd.mask + d + ln, 0, pd.longest - ln)
    if rb > 0:
        _fill_rows(pd.out + (d + ln) * rb, pd.pad, rb, pd.longest - ln)


ctypedef struct _piece:
    int64_t seq
    int64_t k


cdef int _cmp_piece(const void* a, const void* b) noexcept nogil:
    cdef const _piece* x = <const _piece*>a
    cdef const _piece* y = <const _piece*>b
    if x.seq != y.seq:
        return -1 if x.seq < y.seq else 1
    return -1 if x.k < y.k else (1 if x.k > y.k else 0)


def rows_batch(const uint8_t[::1] src, int64_t row_bytes, const int64_t[::1] starts,
               const int64_t[::1] seq_lengths, const int64_t[::1] seq,
               const int64_t[::1] local, const int64_t[::1] first, const int64_t[::1] length,
               const int64_t[::1] row, const int64_t[::1] offset, int64_t n_out,
               int64_t row_length, const uint8_t[::1] pad_row, bint per_token):
    """One batch of items laid out in rows (mode "blocks", or "packed_rows" from a plan), in
    one call: item ``k`` (a piece of sequence ``seq[k]``, ``length[k]`` value rows from
    ``starts[local[k]] + first[k]``) goes to row ``row[k] - row[0]`` at slot ``offset[k]``;
    items are sorted by (row, offset), a row's back to back from slot 0 (the caller's plan
    says so).  ``n_out`` rows of ``row_length`` slots (at least the items' rows), the slots
    after a row's last item ``pad_row``.

    Returns ``(values, position_ids, attention_mask, seq_idx, cu_seqlens, piece_ids, rows,
    first_item, lengths, seq_row, max_seqlen)``: the values' bytes; the per-token arrays of
    :func:`rows_tokens` (None each unless ``per_token``); int32 ``cu_seqlens``
    ``(n_out, most_per_row + 1)``, each row's padded by repeating its last entry; int32
    ``piece_ids`` ``(n_out, most_per_row)``, each item's sequence as its index in ``rows``
    (-1 past a row's items), which with ``cu_seqlens`` is what :func:`rows_tokens` makes
    the per-token arrays of; ``rows`` the sequences (``seq``'s distinct values, sorted),
    ``first_item`` each one's first item, ``lengths`` each one's ``seq_lengths`` (through
    ``local``), ``seq_row`` the row of its first item; ``max_seqlen`` the longest item.
    None when the items are none or a row is past int32.
    """
    cdef Py_ssize_t m = seq.shape[0], k, j, u, r
    if m == 0 or row_length > 2147483647 or n_out <= 0:
        return None
    cdef int64_t first_row = row[0]
    cdef cnp.npy_intp dims[2]
    cdef _piece* pieces = <_piece*>malloc(m * sizeof(_piece))
    cdef int32_t* item_idx = <int32_t*>malloc(m * sizeof(int32_t))
    cdef int64_t* counts = <int64_t*>calloc(n_out, sizeof(int64_t))
    if pieces == NULL or item_idx == NULL or counts == NULL:
        free(pieces)
        free(item_idx)
        free(counts)
        raise MemoryError("collation: out of memory sorting a batch's items")
    cdef int64_t most = 0, longest = 0, n_unique = 0
    with nogil:
        for k in range(m):
            pieces[k].seq = seq[k]
            pieces[k].k = k
            counts[row[k] - first_row] += 1
            if length[k] > longest:
                longest = length[k]
        qsort(pieces, m, sizeof(_piece), _cmp_piece)
        for k in range(m):
            if k == 0 or pieces[k].seq != pieces[k - 1].seq:
                n_unique += 1
            item_idx[pieces[k].k] = <int32_t>(n_unique - 1)
        for r in range(n_out):
            if counts[r] > most:
                most = counts[r]
    dims[0] = n_unique
    cdef cnp.ndarray rows_out = cnp.PyArray_EMPTY(1, dims, cnp.NPY_INT64, 0)
    cdef cnp.ndarray first_out = cnp.PyArray_EMPTY(1, dims, cnp.NPY_INT64, 0)
    cdef cnp.ndarray lengths_out = cnp.PyArray_EMPTY(1, dims, cnp.NPY_INT64, 0)
    cdef cnp.ndarray seq_row_out = cnp.PyArray_EMPTY(1, dims, cnp.NPY_INT64, 0)
    cdef int64_t* ro = <int64_t*>cnp.PyArray_DATA(rows_out)
    cdef int64_t* fo = <int64_t*>cnp.PyArray_DATA(first_out)
    cdef int64_t* lo = <int64_t*>cnp.PyArray_DATA(lengths_out)
    cdef int64_t* so = <int64_t*>cnp.PyArray_DATA(seq_row_out)
    dims[0] = n_out
    dims[1] = most + 1
    cdef cnp.ndarray cu = cnp.PyArray_EMPTY(2, dims, cnp.NPY_INT32, 0)
    dims[1] = most if most > 0 else 1
    cdef cnp.ndarray ids = cnp.PyArray_EMPTY(2, dims, cnp.NPY_INT32, 0)
    dims[0] = n_out * row_length * row_bytes
    cdef cnp.ndarray values = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT8, 0)
    cdef int32_t* c = <int32_t*>cnp.PyArray_DATA(cu)
    cdef int32_t* d = <int32_t*>cnp.PyArray_DATA(ids)
    cdef uint8_t* out = <uint8_t*>cnp.PyArray_DATA(values)
    cdef const uint8_t* s = &src[0] if src.shape[0] > 0 else NULL
    cdef const uint8_t* pad = &pad_row[0] if pad_row.shape[0] > 0 else NULL
    cdef int64_t w = most + 1, wi = dims[1], rr, at, used, slot, end
    with nogil:
        j = 0
        for k in range(m):
            if k == 0 or pieces[k].seq != pieces[k - 1].seq:
                ro[j] = pieces[k].seq
                fo[j] = pieces[k].k
                lo[j] = seq_lengths[local[pieces[k].k]]
                so[j] = row[pieces[k].k] - first_row
                j += 1
        k = 0
        for r in range(n_out):
            c[r * w] = 0
            at = 0
            used = 0
            while k < m and row[k] - first_row == r:
                end = offset[k] + length[k]
                c[r * w + at + 1] = <int32_t>end
                d[r * wi + at] = item_idx[k]
                if length[k] > 0 and row_bytes > 0:
                    memcpy(out + (r * row_length + offset[k]) * row_bytes,
                           s + (starts[local[k]] + first[k]) * row_bytes, length[k] * row_bytes)
                used = end
                at += 1
                k += 1
            for slot in range(at + 1, w):
                c[r * w + slot] = c[r * w + at]
            for slot in range(at, wi):
                d[r * wi + slot] = -1
            if row_bytes > 0 and used < row_length:
                _fill_rows(out + (r * row_length + used) * row_bytes, pad, row_bytes,
                           row_length - used)
    free(pieces)
    free(item_idx)
    free(counts)
    positions = mask = seq_idx = None
    if per_token:
        positions, mask, seq_idx = rows_tokens(cu, ids, row_length)
    return (values, positions, mask, seq_idx, cu, ids, rows_out, first_out, lengths_out,
            seq_row_out, longest)


def rows_tokens(const int32_t[:, ::1] cu, const int32_t[:, ::1] piece_ids, int64_t row_length):
    """The per-token arrays of a batch of rows from its ``cu_seqlens`` and ``piece_ids`` (see
    :func:`rows_batch`): ``position_ids`` (int64, ``0..`` in each item, 0 on padding),
    ``attention_mask`` (bool, True on tokens) and ``seq_idx`` (int32, the item's
    ``piece_ids`` entry, -1 on padding), each ``(rows, row_length)``."""
    cdef Py_ssize_t n = cu.shape[0], w = piece_ids.shape[1], r, j
    cdef cnp.npy_intp dims[2]
    dims[0] = n
    dims[1] = row_length
    cdef cnp.ndarray positions = cnp.PyArray_EMPTY(2, dims, cnp.NPY_INT64, 0)
    cdef cnp.ndarray mask = cnp.PyArray_EMPTY(2, dims, cnp.NPY_BOOL, 0)
    cdef cnp.ndarray seq_idx = cnp.PyArray_EMPTY(2, dims, cnp.NPY_INT32, 0)
    cdef int64_t* pos = <int64_t*>cnp.PyArray_DATA(positions)
    cdef uint8_t* msk = <uint8_t*>cnp.PyArray_DATA(mask)
    cdef int32_t* sid = <int32_t*>cnp.PyArray_DATA(seq_idx)
    cdef int64_t lo, hi, used, base
    cdef int32_t id_
    with nogil:
        for r in range(n):
            base = r * row_length
            used = 0
            for j in range(w):
                id_ = piece_ids[r, j]
                if id_ < 0:
                    break
                lo = cu[r, j]
                hi = cu[r, j + 1]
                _iota(pos + base + lo, hi - lo)
                if hi > lo:
                    memset(msk + base + lo, 1, hi - lo)
                _fill32(sid + base + lo, hi - lo, id_)
                used = hi
            if used < row_length:
                memset(pos + base + used, 0, (row_length - used) * sizeof(int64_t))
                memset(msk + base + used, 0, row_length - used)
                _fill32(sid + base + used, row_length - used, -1)
    return positions, mask, seq_idx
