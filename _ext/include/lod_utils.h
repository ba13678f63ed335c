/* lod_utils' offsets scan (cimported by _ext/lod_utils.pyx). */
#ifndef LODARROW_LOD_UTILS_H
#define LODARROW_LOD_UTILS_H
#include <stdint.h>
#include "lodarrow_simd.h"

/* Offsets tested per block: 32 KiB of int64.  A block costs one branch; only the first bad
 * block is searched element by element. */
#define LA_SCAN_BLOCK 4096

/* Nonzero if p[i] < p[i - 1] for some i in [lo, hi) (lo >= 1).  No early exit and no
 * branch inside: the compares are OR-ed together so the loop vectorises.  Two spellings:
 * - CMP, a plain compare: one vpcmpgtq per 4 offsets with AVX2.  Baseline x86-64 (SSE2) has
 *   no 64-bit compare, and GCC leaves this loop scalar there;
 * - SUB, the compare as integer arithmetic (Hacker's Delight 2-12: a < b is the sign of
 *   (a - b) ^ ((a ^ b) & ((a - b) ^ a)), exact for all int64 with wrapping unsigned
 *   arithmetic), which SSE2 vectorises. */
#define LA_BLOCK_DECREASES_CMP(p, lo, hi, acc)                                            \
    for (int64_t i_ = (lo); i_ < (hi); i_++)                                              \
        acc |= (uint64_t)((p)[i_] < (p)[i_ - 1]);
#define LA_BLOCK_DECREASES_SUB(p, lo, hi, acc)                                            \
    for (int64_t i_ = (lo); i_ < (hi); i_++) {                                            \
        uint64_t a_ = (uint64_t)(p)[i_], b_ = (uint64_t)(p)[i_ - 1], d_ = a_ - b_;         \
        acc |= (d_ ^ ((a_ ^ b_) & (d_ ^ a_))) >> 63;                                      \
    }

/* The first i in [lo, hi) (lo >= 1) with p[i] < p[i - 1], or -1. */
#define LA_FIRST_DECREASE_BODY(BLOCK_TEST)                                                \
    for (int64_t b = lo; b < hi; b += LA_SCAN_BLOCK) {                                    \
        int64_t e = hi - b > LA_SCAN_BLOCK ? b + LA_SCAN_BLOCK : hi;                      \
        uint64_t acc = 0;                                                                 \
        BLOCK_TEST(p, b, e, acc)                                                          \
        if (acc) {                                                                        \
            for (int64_t i = b; i < e; i++)                                               \
                if (p[i] < p[i - 1])                                                      \
                    return i;                                                             \
        }                                                                                 \
    }                                                                                     \
    return -1;

/* The portable scan (any compiler, any CPU); also what the tests run against the AVX2 one. */
static int64_t la_first_decrease_portable(const int64_t *p, int64_t lo, int64_t hi)
{
    LA_FIRST_DECREASE_BODY(LA_BLOCK_DECREASES_SUB)
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
/* The build targets baseline x86-64: the AVX2 scan is compiled beside it and chosen at run
 * time (as LA_CLONES does, but the two need different spellings of the loop). */
__attribute__((target("avx2"))) static int64_t
la_first_decrease_avx2(const int64_t *p, int64_t lo, int64_t hi)
{
    LA_FIRST_DECREASE_BODY(LA_BLOCK_DECREASES_CMP)
}

static int64_t la_first_decrease(const int64_t *p, int64_t lo, int64_t hi)
{
    if (__builtin_cpu_supports("avx2"))
        return la_first_decrease_avx2(p, lo, hi);
    return la_first_decrease_portable(p, lo, hi);
}
#else
static int64_t la_first_decrease(const int64_t *p, int64_t lo, int64_t hi)
{
    return la_first_decrease_portable(p, lo, hi);
}
#endif

#endif
