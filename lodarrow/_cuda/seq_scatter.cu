// sequence_scatter on the GPU: the twin of _ext/seq_scatter.pyx (launcher in seq_scatter.py).
// One thread per index sequence: sequence i only writes row i and adds its updates in order,
// so duplicate ids accumulate exactly as on the CPU (deterministic, no atomics on the data).
// The ids are checked as they are used: a thread meeting an id outside [0, width) stops and
// records m - p in *bad with an atomic max, so *bad ends as m minus the first bad position
// (0: none); the launcher turns it back into the position.
#include "lodarrow_common.cuh"

template <typename T>
__global__ void lodarrow_seq_scatter(T* out, const i64* ids, const T* updates,
                                     const i64* offsets, i64 n, i64 width, i64 m,
                                     u64* bad) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T* row = out + i * width;
    for (i64 p = offsets[i]; p < offsets[i + 1]; ++p) {
        i64 c = ids[p];
        // One unsigned compare covers both ends: a negative id wraps to a huge value.
        if ((u64)c >= (u64)width) {
            atomicMax(bad, (u64)(m - p));
            return;
        }
        row[c] += updates[p];
    }
}
