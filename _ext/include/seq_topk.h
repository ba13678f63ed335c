/* seq_topk's small-m kernel (cimported by _ext/seq_topk.pyx). */
#ifndef LODARROW_SEQ_TOPK_H
#define LODARROW_SEQ_TOPK_H
#include <math.h>
#include <stdint.h>

#define LA_TOPK_CASCADE_MAX 8   /* largest m la_topk_* handles */

/* Top-m of a row for m <= 8: a branch-free insertion cascade keeps the m largest values
 * seen, in descending order, in registers (m compile-time slots, a max and a min per
 * slot and value).  Rows are short (about as long as m is small), so the branchy
 * "skip if below the smallest kept" test of a heap or insertion sort mispredicts about
 * half the time; this costs 2m cheap ops per value with no branch.  Slots start at
 * -inf; the first min(m, n) are the answer (a -inf value is kept as itself).  Returns
 * 1 if the row holds NaN (the caller then ignores best). */
/* a > b ? a : b and a < b ? a : b.  GCC compiles a pair of such selects on one compare
 * into a branch, so on x86 they are spelled as maxss/minss, which are exactly these. */
#if defined(__SSE2__)
#include <emmintrin.h>
#define LA_SS(OP, a, b) _mm_cvtss_f32(_mm_##OP##_ss(_mm_set_ss(a), _mm_set_ss(b)))
#define LA_SD(OP, a, b) _mm_cvtsd_f64(_mm_##OP##_sd(_mm_set_sd(a), _mm_set_sd(b)))
static inline float la_max_f32(float a, float b) { return LA_SS(max, a, b); }
static inline float la_min_f32(float a, float b) { return LA_SS(min, a, b); }
static inline double la_max_f64(double a, double b) { return LA_SD(max, a, b); }
static inline double la_min_f64(double a, double b) { return LA_SD(min, a, b); }
#else
static inline float la_max_f32(float a, float b) { return a > b ? a : b; }
static inline float la_min_f32(float a, float b) { return a < b ? a : b; }
static inline double la_max_f64(double a, double b) { return a > b ? a : b; }
static inline double la_min_f64(double a, double b) { return a < b ? a : b; }
#endif
#define LA_TOPK_CASCADE(SUF, T, M)                                                      \
static inline int la_topk##M##_##SUF(const T* row, int64_t n, T* best) {                \
    T b[M];                                                                             \
    int nan = 0;                                                                        \
    for (int p = 0; p < M; p++) b[p] = -(T)INFINITY;                                    \
    for (int64_t i = 0; i < n; i++) {                                                   \
        T t = row[i];                                                                   \
        nan |= t != t;                                                                  \
        for (int p = 0; p < M; p++) {                                                   \
            T hi = la_max_##SUF(t, b[p]);                                               \
            t = la_min_##SUF(b[p], t);                                                  \
            b[p] = hi;                                                                  \
        }                                                                               \
    }                                                                                   \
    for (int p = 0; p < M; p++) best[p] = b[p];                                         \
    return nan;                                                                         \
}
#define LA_TOPK_ALL(SUF, T)                                                             \
LA_TOPK_CASCADE(SUF, T, 1) LA_TOPK_CASCADE(SUF, T, 2) LA_TOPK_CASCADE(SUF, T, 3)        \
LA_TOPK_CASCADE(SUF, T, 4) LA_TOPK_CASCADE(SUF, T, 5) LA_TOPK_CASCADE(SUF, T, 6)        \
LA_TOPK_CASCADE(SUF, T, 7) LA_TOPK_CASCADE(SUF, T, 8)                                   \
static int la_topk_##SUF(const T* row, int64_t n, int64_t m, T* best) {                 \
    switch (m) {                                                                        \
    case 1: return la_topk1_##SUF(row, n, best);                                        \
    case 2: return la_topk2_##SUF(row, n, best);                                        \
    case 3: return la_topk3_##SUF(row, n, best);                                        \
    case 4: return la_topk4_##SUF(row, n, best);                                        \
    case 5: return la_topk5_##SUF(row, n, best);                                        \
    case 6: return la_topk6_##SUF(row, n, best);                                        \
    case 7: return la_topk7_##SUF(row, n, best);                                        \
    default: return la_topk8_##SUF(row, n, best);                                       \
    }                                                                                   \
}
LA_TOPK_ALL(f32, float)
LA_TOPK_ALL(f64, double)

#endif
