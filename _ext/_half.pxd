# float16 <-> float32 for kernels that see float16 as its uint16 bits (lodarrow_half.h).
from _types cimport uint16_t

cdef extern from "lodarrow_half.h" nogil:
    float h2f "lodarrow_h2f"(uint16_t h) noexcept
    uint16_t f2h "lodarrow_f2h"(float f) noexcept
