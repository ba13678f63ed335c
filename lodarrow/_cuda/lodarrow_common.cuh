// Helpers shared by lodarrow's CUDA kernels (lodarrow/_cuda/*.cu).  The Python loader
// (lodarrow._cuda.source) pastes this file in place of its #include line, so the source
// CuPy compiles, and keys its kernel cache on, is self-contained.
#ifndef LODARROW_COMMON_CUH
#define LODARROW_COMMON_CUH

typedef long long i64;
typedef unsigned long long u64;

// The sequence holding row t: the last s in [0, n_seq) with off[s] <= t.  Callers guarantee
// n_seq >= 1 and off[0] <= t < off[n_seq]; empty sequences are skipped over.
__device__ __forceinline__ i64 la_seq_of(const i64* off, i64 n_seq, i64 t) {
    i64 lo = 0, hi = n_seq - 1;
    while (lo < hi) {
        i64 mid = (lo + hi + 1) >> 1;
        if (off[mid] <= t) lo = mid; else hi = mid - 1;
    }
    return lo;
}

__device__ __forceinline__ float la_nan(float) { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double la_nan(double) { return __longlong_as_double(0x7ff8000000000000LL); }

#endif
