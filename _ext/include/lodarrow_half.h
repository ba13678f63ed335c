/* IEEE half <-> float conversions shared by lodarrow's kernels (float16 is stored as uint16).
 * Bit exact (round to nearest even), NaN kept; needs no F16C.  Must not be built with
 * -ffast-math: the subnormal rounding relies on exact float arithmetic. */
#ifndef LODARROW_HALF_H
#define LODARROW_HALF_H
#include <stdint.h>
#include <string.h>

static inline float lodarrow_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t ex = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    float out;
    if (ex == 0x1fu) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (ex == 0) {
        out = (float)mant * 5.9604644775390625e-08f;   /* mant * 2**-24, exact */
        memcpy(&bits, &out, 4);
        bits |= sign;
    } else {
        bits = sign | ((ex + 112u) << 23) | (mant << 13);
    }
    memcpy(&out, &bits, 4);
    return out;
}
static inline uint16_t lodarrow_f2h(float f) {
    uint32_t x, absx, h, rem;
    uint16_t sign;
    memcpy(&x, &f, 4);
    sign = (uint16_t)((x >> 16) & 0x8000u);
    absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {                       /* inf or NaN */
        if (absx > 0x7f800000u) {
            uint16_t m = (uint16_t)((absx >> 13) & 0x3ffu);
            return (uint16_t)(sign | 0x7c00u | (m ? m : 0x200u));
        }
        return (uint16_t)(sign | 0x7c00u);
    }
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* >= 65520: inf */
    if (absx < 0x38800000u) {                        /* half subnormal or zero */
        float r, q;
        memcpy(&r, &absx, 4);
        r *= 16777216.0f;                            /* units of 2**-24, exact */
        q = (r + 8388608.0f) - 8388608.0f;           /* round half to even */
        return (uint16_t)(sign | (uint16_t)q);
    }
    h = (((absx >> 23) - 112u) << 10) | ((absx & 0x7fffffu) >> 13);
    rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h += 1;  /* may carry: fine */
    return (uint16_t)(sign | (uint16_t)h);
}

#endif
