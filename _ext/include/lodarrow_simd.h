/* Shared by lodarrow's vector kernels (seq_pool.h, seq_softmax.h).
 *
 * LA_CLONES: on x86-64 Linux, GCC also builds an AVX2 clone of the marked function, chosen
 * at load time (the build targets baseline x86-64, so the default clone runs anywhere).
 * LA_HAVE_VEC: GCC/Clang vector extensions are available; without them the kernels fall
 * back to scalar loops. */
#ifndef LODARROW_SIMD_H
#define LODARROW_SIMD_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define LA_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LA_CLONES
#endif
#if defined(__GNUC__) || defined(__clang__)
#define LA_HAVE_VEC 1
#else
#define LA_HAVE_VEC 0
#endif

#endif
