// sequence_conv's context gather on the GPU: the twin of _ext/seq_conv.pyx (launcher in
// seq_conv.py, which multiplies each gathered block with cuBLAS).
#include "lodarrow_common.cuh"

// One thread per element of the [rows, context_length * D] block of rows r0 .. r0 + rows.
template <typename T>
__global__ void lodarrow_seq_conv_gather(T* ctx, const T* src, i64 base, const i64* off,
                                         i64 n_seq, i64 r0, i64 rows, i64 cs, i64 cl, i64 d,
                                         const T* pad, i64 up, int use_pad) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 width = cl * d;
    if (tid >= rows * width) return;
    i64 r = tid / width, c = tid - r * width;
    i64 k = c / d, j = c - k * d;
    i64 t = r0 + r;
    i64 s = la_seq_of(off, n_seq, t);
    i64 a = off[s], b = off[s + 1];
    i64 p = t + cs + k;
    T v;
    if (p >= a && p < b) v = src[(p - base) * d + j];
    else if (!use_pad) v = (T)0;
    else if (p < a) v = pad[(up + p - a) * d + j];
    else v = pad[(up + p - b) * d + j];
    ctx[tid] = v;
}
