// Internal: the SIMD packers of packed_weights.h's panels, for the formats whose packing
// sits on a hot path (packed_pack_avx512.cpp). Each writes exactly the bytes the scalar
// packer (packed_weights.cpp) writes. Pure functions; run only where the CPU has the
// target (pack_panels checks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace pagoda::simd {

// Panels [p0, p1) of the rows x cols matrix at w, as pack_panels; false (nothing
// written) for a type without an AVX-512 packer (only Q8_0 and Q4_0 have one).
bool pack_legacy_avx512(DType t, const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols, int64_t p0, int64_t p1,
                        uint8_t* out);

}  // namespace pagoda::simd
