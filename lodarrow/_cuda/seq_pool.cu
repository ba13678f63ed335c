// sequence_pool on the GPU: the twin of _ext/seq_pool.pyx (launchers in seq_pool.py).
// Deterministic: every output element is computed by one thread (or one warp, combined by a
// fixed shuffle tree), so there are no atomics and results do not depend on scheduling.
#include "lodarrow_common.cuh"

// The sum family's accumulator: double for floats; a wrapping u64 for integers, whose
// average and sqrt modes divide as double (the CPU kernels do the same).
template <typename Acc> struct la_sum;

template <> struct la_sum<double> {
    template <typename V> __device__ static double load(V v) { return (double)v; }
    template <typename Out> __device__ static Out finish(double acc, i64 n, int mode) {
        return (Out)(mode == 1 ? acc / (double)n : mode == 2 ? acc / sqrt((double)n) : acc);
    }
};

template <> struct la_sum<u64> {
    template <typename V> __device__ static u64 load(V v) { return (u64)(i64)v; }
    template <typename Out> __device__ static Out finish(u64 acc, i64 n, int mode) {
        return mode == 0 ? (Out)(i64)acc
                         : (Out)(mode == 1 ? (double)(i64)acc / (double)n
                                           : (double)(i64)acc / sqrt((double)n));
    }
};

// Sum (mode 0), average (1) or sqrt-scaled sum (2): one thread per (sequence, feature).
template <typename In, typename Out, typename Acc>
__global__ void lodarrow_seq_pool_sum(Out* out, const In* x, const i64* off, const Out* pad,
                                      i64 n_seq, i64 d, int mode) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n_seq * d) return;
    i64 s = tid / d, j = tid - s * d;
    i64 a = off[s], b = off[s + 1];
    if (a == b) { out[tid] = pad[j]; return; }
    Acc acc = 0;
    for (i64 i = a; i < b; ++i) acc += la_sum<Acc>::load(x[i * d + j]);
    out[tid] = la_sum<Acc>::template finish<Out>(acc, b - a, mode);
}

// D == 1: one warp per sequence, lanes striding over its rows, a fixed shuffle tree.
template <typename In, typename Out, typename Acc>
__global__ void lodarrow_seq_pool_sum_warp(Out* out, const In* x, const i64* off,
                                           const Out* pad, i64 n_seq, int mode) {
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= n_seq) return;              // uniform across the warp
    i64 a = off[warp], b = off[warp + 1];
    Acc acc = 0;
    for (i64 i = a + lane; i < b; i += 32) acc += la_sum<Acc>::load(x[i]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) out[warp] = (a == b) ? pad[0] : la_sum<Acc>::template finish<Out>(acc, b - a, mode);
}

// Max / min with the optional arg index; NaN sticks (the first NaN wins), ties keep the first.
template <typename T>
__global__ void lodarrow_seq_pool_extreme(T* out, i64* index, const T* x, const i64* off,
                                          const T* pad, i64 n_seq, i64 d, int is_min,
                                          int with_index) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n_seq * d) return;
    i64 s = tid / d, j = tid - s * d;
    i64 a = off[s], b = off[s + 1];
    if (a == b) {
        out[tid] = pad[j];
        if (with_index) index[tid] = -1;
        return;
    }
    T m = x[a * d + j];
    i64 best = a;
    for (i64 i = a + 1; i < b; ++i) {
        T v = x[i * d + j];
        bool take = (is_min ? (v < m) : (v > m)) || (v != v && m == m);
        if (take) { m = v; best = i; }
    }
    out[tid] = m;
    if (with_index) index[tid] = best;
}

// First / last row, byte by byte (every dtype).
extern "C" __global__ void lodarrow_seq_pool_pick(unsigned char* out, const unsigned char* x,
                                                  const i64* off, const unsigned char* pad,
                                                  i64 n_seq, i64 width, int last) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n_seq * width) return;
    i64 s = tid / width, j = tid - s * width;
    i64 a = off[s], b = off[s + 1];
    out[tid] = (a == b) ? pad[j] : x[(last ? b - 1 : a) * width + j];
}
