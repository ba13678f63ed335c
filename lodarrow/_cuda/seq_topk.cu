// sequence_topk_avg_pooling on the GPU: the twin of _ext/seq_topk.pyx (launcher in
// seq_topk.py).  One thread per (output row, channel).  The j-th pick is the largest value
// after the previous pick in (value descending, index ascending) order, so no scratch memory.
#include "lodarrow_common.cuh"

template <typename T>
__global__ void lodarrow_seq_topk_avg(T* out, const T* x, const i64* in_off,
                                      const i64* row_off, const i64* col_off, const i64* ks,
                                      i64 n_k, i64 max_k, i64 n_seq, i64 total_rows,
                                      i64 channels) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= total_rows * channels) return;
    i64 R = tid / channels, ch = tid - R * channels;
    i64 s = la_seq_of(row_off, n_seq, R);
    i64 n_rows = row_off[s + 1] - row_off[s], n_cols = col_off[s + 1] - col_off[s];
    const T* v = x + in_off[s] + (ch * n_rows + (R - row_off[s])) * n_cols;
    T* o = out + (R * channels + ch) * n_k;
    for (i64 i = 0; i < n_cols; ++i) {
        if (v[i] != v[i]) {
            for (i64 q = 0; q < n_k; ++q) o[q] = la_nan(v[i]);
            return;
        }
    }
    i64 m = max_k < n_cols ? max_k : n_cols;
    double prefix = 0.0;
    T prev_v = 0;
    i64 prev_i = -1;
    for (i64 j = 0; j < m; ++j) {
        i64 bi = -1;
        T bv = 0;
        for (i64 i = 0; i < n_cols; ++i) {
            T c = v[i];
            bool after = j == 0 || c < prev_v || (c == prev_v && i > prev_i);
            if (after && (bi < 0 || c > bv)) { bi = i; bv = c; }
        }
        prefix += (double)bv;
        prev_v = bv;
        prev_i = bi;
        for (i64 q = 0; q < n_k; ++q)
            if (ks[q] == j + 1) o[q] = (T)(prefix / (double)ks[q]);
    }
    for (i64 q = 0; q < n_k; ++q)
        if (ks[q] > m) o[q] = (T)(prefix / (double)ks[q]);   // missing values count as 0
}
