// Layout kernels on the GPU: the twins of _ext/seq_layout.pyx (launchers in seq_layout.py):
// reverse, pad, unpad, mask, enumerate, erase.  One thread per output element, each computing
// where its value comes from; no atomics, so results are deterministic and bit-identical to
// the CPU kernels.  Values that are only moved are typed by their width (W: unsigned char,
// unsigned short, unsigned int or u64), so one instantiation serves every dtype of that size.
#include "lodarrow_common.cuh"

#define LA_GRID_LOOP(e, total) \
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < (total); \
         e += (i64)blockDim.x * gridDim.x)

// out = x with every sequence's rows reversed (width elements per row).
template <typename W>
__global__ void lodarrow_seq_reverse(W* out, const W* x, const i64* off, i64 n_seq,
                                     i64 width, i64 total) {
    LA_GRID_LOOP(e, total) {
        i64 r = e / width, c = e - r * width;
        i64 s = la_seq_of(off, n_seq, r);
        out[e] = x[(off[s] + off[s + 1] - 1 - r) * width + c];
    }
}

// Sequence s of x -> out[s, :len], the rest of out[s] rows of pad.
template <typename W>
__global__ void lodarrow_seq_pad(W* out, const W* x, const i64* off, const W* pad,
                                 i64 padded, i64 width, i64 total) {
    LA_GRID_LOOP(e, total) {
        i64 c = e % width, rest = e / width;
        i64 p = rest % padded, s = rest / padded;
        i64 a = off[s];
        out[e] = p < off[s + 1] - a ? x[(a + p) * width + c] : pad[c];
    }
}

// The first len[s] rows of x[s] -> output rows [off[s], off[s + 1]).
template <typename W>
__global__ void lodarrow_seq_unpad(W* out, const W* x, const i64* off, i64 n_seq,
                                   i64 padded, i64 width, i64 total) {
    LA_GRID_LOOP(e, total) {
        i64 r = e / width, c = e - r * width;
        i64 s = la_seq_of(off, n_seq, r);
        out[e] = x[(s * padded + (r - off[s])) * width + c];
    }
}

// j < len as a mask: integer lengths compare as i64, float ones as double (exact for every
// j an output can have).
template <typename L> __device__ __forceinline__ bool la_below(i64 j, L len) {
    return j < (i64)len;
}
template <> __device__ __forceinline__ bool la_below<float>(i64 j, float len) {
    return (double)j < (double)len;
}
template <> __device__ __forceinline__ bool la_below<double>(i64 j, double len) {
    return (double)j < len;
}

// out[i, j] = j < lengths[i] ? one : 0, out typed by its width (one: the bits of 1).
template <typename L, typename W>
__global__ void lodarrow_seq_mask(W* out, const L* lengths, i64 m, W one, i64 total) {
    LA_GRID_LOOP(e, total) {
        out[e] = la_below(e % m, lengths[e / m]) ? one : (W)0;
    }
}

// Row t of out = x[t:t + win] cut at its sequence's end, then pad[0].
template <typename W>
__global__ void lodarrow_seq_enumerate(W* out, const W* x, const i64* off, const W* pad,
                                       i64 n_seq, i64 win, i64 total) {
    LA_GRID_LOOP(e, total) {
        i64 t = e / win, k = e - t * win;
        i64 s = la_seq_of(off, n_seq, t);
        out[e] = t + k < off[s + 1] ? x[t + k] : pad[0];
    }
}

// keep[i] = x[i] is not one of the n_tok sorted tokens (binary search).
template <typename T>
__global__ void lodarrow_seq_erase_keep(bool* keep, const T* x, const T* tok, i64 n_tok,
                                        i64 total) {
    LA_GRID_LOOP(e, total) {
        T v = x[e];
        i64 lo = 0, hi = n_tok;
        while (lo < hi) {
            i64 mid = lo + (hi - lo) / 2;
            if (tok[mid] < v) lo = mid + 1; else hi = mid;
        }
        keep[e] = !(lo < n_tok && tok[lo] == v);
    }
}
