"""A LoDTensor's nested Arrow array, assembled in one import through the Arrow C data interface.

``pa.Array.from_buffers`` costs about a microsecond a layer (a ``pa.py_buffer`` per buffer,
then a Python-level array per layer); a small tensor's ``to_arrow`` was mostly that.  Here the
whole chain of ``ArrowArray`` structs (the LoD levels, the feature dimensions'
``FixedSizeList`` s, the values) is filled in C over the NumPy arrays' memory and handed to
pyarrow in one ``Array._import_from_c``: zero-copy, as before, at one Python call.

Memory: the root struct is filled on the stack and *moved* by Arrow into the imported array
(as the C data interface has consumers do); the children, every buffer and child pointer
array and a reference to a tuple of the NumPy arrays (the owner) live in one ``malloc``
block, the root's ``private_data``.  Arrow calls the root's release callback once the imported
array and every buffer sliced from it are gone, from whichever thread drops the last
reference: it releases the children, drops the owner (under the GIL, unless the interpreter
is already finalised: then the NumPy memory is left to the process's end, as pyarrow's own
``py_buffer`` does) and frees the block.

The arguments are trusted (``lodarrow/_interop/_arrow.py`` builds them).
"""
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport int64_t, uintptr_t
from libc.stdlib cimport free, malloc

cimport numpy as cnp

import numpy as np
import pyarrow as pa

cnp.import_array()

cdef extern from *:
    """
    #ifndef ARROW_C_DATA_INTERFACE
    #define ARROW_C_DATA_INTERFACE
    struct ArrowArray {
      int64_t length;
      int64_t null_count;
      int64_t offset;
      int64_t n_buffers;
      int64_t n_children;
      const void** buffers;
      struct ArrowArray** children;
      struct ArrowArray* dictionary;
      void (*release)(struct ArrowArray*);
      void* private_data;
    };
    #endif
    """
    struct ArrowArray:
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void** buffers
        ArrowArray** children
        ArrowArray* dictionary
        void (*release)(ArrowArray*) noexcept nogil
        void* private_data

cdef extern from "Python.h":
    int Py_IsInitialized() nogil

_import_from_c = pa.Array._import_from_c


cdef void _release_child(ArrowArray* node) noexcept nogil:
    # a child's memory belongs to the root's block
    node.release = NULL


ctypedef struct _Block:
    PyObject* owner           # (values, offsets): keeps the memory alive


cdef void _release_root(ArrowArray* root) noexcept nogil:
    cdef ArrowArray* node = root
    cdef _Block* block = <_Block*>root.private_data
    while node.n_children:
        node = node.children[0]
        if node.release != NULL:
            node.release(node)
    root.release = NULL
    if Py_IsInitialized():
        with gil:
            Py_DECREF(<object>block.owner)
    free(block)


cdef inline void _fill(ArrowArray* node, int64_t length, const void** buffers, int n_buffers,
                       ArrowArray** child) noexcept nogil:
    node.length = length
    node.null_count = 0
    node.offset = 0
    node.n_buffers = n_buffers
    node.n_children = 1 if child != NULL else 0
    node.buffers = buffers
    node.children = child
    node.dictionary = NULL
    node.release = _release_child
    node.private_data = NULL


def import_nested(object arrow_type, cnp.ndarray values, int64_t n_values, int64_t rows,
                  tuple widths, tuple offsets):
    """The ``pyarrow.Array`` of type ``arrow_type`` over these buffers, without copying them.

    Parameters
    ----------
    arrow_type : pyarrow.DataType
        The outermost type: a list level per entry of ``offsets`` (``List`` for int32 offsets,
        ``LargeList`` for int64), then a ``FixedSizeList`` per entry of ``widths``, then the
        values' type.
    values : numpy.ndarray
        The values' buffer (bool: already bit-packed); made C-contiguous if it is not (a
        copy).
    n_values : int
        How many values (bits for bool).
    rows : int
        How many data rows (the length of the outermost ``FixedSizeList``).
    widths : tuple of int
        The feature shape, outermost first.
    offsets : tuple of numpy.ndarray
        Each LoD level's offsets, outermost first, starting at 0; made C-contiguous where
        they are not (a copy).

    Returns
    -------
    pyarrow.Array
        Sharing the memory of ``values`` and ``offsets``, which it keeps alive.
    """
    if not cnp.PyArray_IS_C_CONTIGUOUS(values):
        values = np.ascontiguousarray(values)
    for level in offsets:
        if not cnp.PyArray_IS_C_CONTIGUOUS(level):
            offsets = tuple(np.ascontiguousarray(o) for o in offsets)
            break
    cdef Py_ssize_t n_levels = len(offsets), n_features = len(widths)
    cdef Py_ssize_t n_nodes = n_levels + n_features + 1, i, j
    # the block: header, the nodes, 2 buffer pointers and a child
    # pointer per node
    cdef size_t at_buffers = sizeof(_Block) + n_nodes * sizeof(ArrowArray)
    cdef size_t at_children = at_buffers + 2 * n_nodes * sizeof(void*)
    cdef char* mem = <char*>malloc(at_children + n_nodes * sizeof(void*))
    if mem == NULL:
        raise MemoryError("to_arrow: cannot allocate the Arrow C structs")
    cdef ArrowArray root
    cdef _Block* block = <_Block*>mem
    cdef ArrowArray* nodes = <ArrowArray*>(mem + sizeof(_Block))
    cdef const void** buffers = <const void**>(mem + at_buffers)
    cdef ArrowArray** children = <ArrowArray**>(mem + at_children)
    cdef cnp.ndarray off
    cdef int64_t length = rows
    for i in range(n_levels):
        off = <cnp.ndarray>offsets[i]
        buffers[2 * i] = NULL
        buffers[2 * i + 1] = cnp.PyArray_DATA(off)
        children[i] = &nodes[i + 1]
        _fill(&nodes[i], cnp.PyArray_DIM(off, 0) - 1, &buffers[2 * i], 2, &children[i])
    for j in range(n_features):  # FixedSizeList j: rows * prod(widths[:j]) lists
        i = n_levels + j
        buffers[2 * i] = NULL
        children[i] = &nodes[i + 1]
        _fill(&nodes[i], length, &buffers[2 * i], 1, &children[i])
        length *= <int64_t>widths[j]
    i = n_nodes - 1
    buffers[2 * i] = NULL
    buffers[2 * i + 1] = cnp.PyArray_DATA(values)
    _fill(&nodes[i], n_values, &buffers[2 * i], 2, NULL)

    root = nodes[0]  # the root goes to Arrow from the stack; nodes[0] stays a spare copy
    owner = (values, offsets)
    Py_INCREF(owner)
    block.owner = <PyObject*>owner
    root.private_data = block
    root.release = _release_root
    try:
        return _import_from_c(<uintptr_t>&root, arrow_type)
    except BaseException:
        # Arrow moves the root before any check (and releases it when the import fails);
        # a call failing before that leaves it to us
        if root.release != NULL:
            root.release(&root)
        raise
