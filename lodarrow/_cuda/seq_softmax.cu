// sequence_softmax on the GPU: the twin of _ext/seq_softmax.pyx (launcher in seq_softmax.py).
// One warp per sequence; the maximum and the sum are combined by a fixed shuffle tree into
// lane 0 and broadcast, so every lane divides by the same value (deterministic).
#include "lodarrow_common.cuh"

__device__ __forceinline__ float la_exp(float v) { return expf(v); }
__device__ __forceinline__ double la_exp(double v) { return exp(v); }

// In: the input type; Comp: float for float32 input, double otherwise (also the output type).
template <typename In, typename Comp>
__global__ void lodarrow_seq_softmax(Comp* out, const In* x, const i64* off, i64 n_seq) {
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= n_seq) return;
    i64 a = off[warp], b = off[warp + 1];
    if (a == b) return;
    Comp m = (Comp)x[a];
    int nan = 0;
    for (i64 i = a + lane; i < b; i += 32) {
        Comp v = (Comp)x[i];
        nan |= v != v;
        m = v > m ? v : m;
    }
    for (int o = 16; o > 0; o >>= 1) {
        Comp other = __shfl_down_sync(0xffffffffu, m, o);
        m = other > m ? other : m;
    }
    m = __shfl_sync(0xffffffffu, m, 0);
    if (__any_sync(0xffffffffu, nan)) m = la_nan(m);
    Comp total = 0;
    for (i64 i = a + lane; i < b; i += 32) total += la_exp((Comp)x[i] - m);
    for (int o = 16; o > 0; o >>= 1) total += __shfl_down_sync(0xffffffffu, total, o);
    total = __shfl_sync(0xffffffffu, total, 0);
    for (i64 i = a + lane; i < b; i += 32) out[i] = la_exp((Comp)x[i] - m) / total;
}
