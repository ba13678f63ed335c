# The one home of lodarrow's C typedefs and fused types.  Every kernel cimports from here.
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)

# Offsets are int64 end to end: more than 2**31 rows must work.
ctypedef int64_t offset_t

# Every numeric dtype lodarrow computes on.  bool moves as uint8 (same itemsize) and float16
# as float32 (converted at the boundary; there is no portable C half type).
ctypedef fused numeric_t:
    int8_t
    uint8_t
    int16_t
    uint16_t
    int32_t
    int64_t
    float
    double

ctypedef fused floating_t:
    float
    double

ctypedef fused integral_t:
    int8_t
    uint8_t
    int16_t
    uint16_t
    int32_t
    int64_t
