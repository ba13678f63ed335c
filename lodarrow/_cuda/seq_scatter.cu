// sequence_scatter on the GPU: the twin of _ext/seq_scatter.pyx (launcher in seq_scatter.py).
// One thread per index sequence: sequence i only writes row i and adds its updates in order,
// so duplicate ids accumulate exactly as on the CPU (deterministic, no atomics).
#include "lodarrow_common.cuh"

template <typename T>
__global__ void lodarrow_seq_scatter(T* out, const i64* ids, const T* updates,
                                     const i64* offsets, i64 n, i64 width) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T* row = out + i * width;
    for (i64 p = offsets[i]; p < offsets[i + 1]; ++p) row[ids[p]] += updates[p];
}
