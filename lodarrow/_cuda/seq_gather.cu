// Row gathers on the GPU: the twins of _ext/seq_gather.pyx (launchers in seq_gather.py).
// Whole rows move as machine words W (uint4, u64, unsigned int, unsigned short or unsigned
// char, the widest that divides the row width and both base addresses): one thread per
// output word finds its sequence by a binary search in the offsets, so the work is balanced
// however the lengths are spread, and every word is written exactly once (no atomics).
#include "lodarrow_common.cuh"

#define LA_GRID_LOOP(e, total) \
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < (total); \
         e += (i64)blockDim.x * gridDim.x)

// Row i of src into output rows [rep_off[i], rep_off[i + 1]).
template <typename W>
__global__ void lodarrow_expand_rows(W* out, const W* src, const i64* rep_off, i64 n,
                                     i64 total, i64 wpr) {
    LA_GRID_LOOP(e, total) {
        i64 r = e / wpr, c = e - r * wpr;
        i64 i = la_seq_of(rep_off, n, r);
        out[e] = src[i * wpr + c];
    }
}

// Block i of src (rows [src_off[i], src_off[i + 1])) once per output sequence it covers.
template <typename W>
__global__ void lodarrow_expand_blocks(W* out, const W* src, const i64* src_off,
                                       const i64* rep_off, const i64* out_lod, i64 n,
                                       i64 n_out_seq, i64 total, i64 wpr) {
    LA_GRID_LOOP(e, total) {
        i64 r = e / wpr, c = e - r * wpr;
        i64 j = la_seq_of(out_lod, n_out_seq, r);   // output sequence
        i64 i = la_seq_of(rep_off, n, j);           // the block it copies
        out[e] = src[(src_off[i] + (r - out_lod[j])) * wpr + c];
    }
}

// Output rows [out_off[i], out_off[i + 1]) from src rows starting at src_start[i].
template <typename W>
__global__ void lodarrow_gather_blocks(W* out, const W* src, const i64* src_start,
                                       const i64* out_off, i64 n, i64 total, i64 wpr) {
    LA_GRID_LOOP(e, total) {
        i64 r = e / wpr, c = e - r * wpr;
        i64 i = la_seq_of(out_off, n, r);
        out[e] = src[(src_start[i] + (r - out_off[i])) * wpr + c];
    }
}

// src block i (rows [src_off[i], src_off[i + 1])) to output rows from cursor[i].
template <typename W>
__global__ void lodarrow_place_blocks(W* out, const W* src, const i64* src_off,
                                      const i64* cursor, i64 n, i64 total, i64 wpr) {
    LA_GRID_LOOP(e, total) {
        i64 r = e / wpr, c = e - r * wpr;
        i64 i = la_seq_of(src_off, n, r);
        out[(cursor[i] + (r - src_off[i])) * wpr + c] = src[e];
    }
}
