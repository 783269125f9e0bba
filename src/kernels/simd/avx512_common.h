// Internal: small helpers shared by the AVX-512 bodies (legacy_avx512.cpp,
// packed_avx512.cpp, packed_k4_avx512.cpp). Include only from *_avx512.cpp files:
// everything here has internal linkage, so each including file gets its own AVX-512 copy
// and none can be picked by the linker for code that runs on other CPUs.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pagoda::simd {
namespace {

// One 512-bit register's worth of bytes, for aligned scratch buffers.
struct alignas(64) Z64 {
  uint8_t b[64];
};

// An activation dword on all 16 lanes, for dpbusd against a register of 16 rows.
inline __m512i bcast(const uint8_t* p) { return _mm512_set1_epi32(static_cast<int>(load32(p))); }

// The lanes of a panel that hold rows (its last may hold fewer than 16).
inline __mmask16 row_mask(int64_t valid) {
  return valid >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << valid) - 1);
}

// Prefetches the block_bytes at p (a block of a panel stream) with the given hint (GCC's
// hints are an enum, clang's are ints: decltype takes whichever this compiler has).
using PrefetchHint = decltype(_MM_HINT_T0);
template <PrefetchHint kHint>
inline void prefetch_block(const uint8_t* p, size_t block_bytes) {
  for (size_t o = 0; o < block_bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), kHint);
}

}  // namespace
}  // namespace pagoda::simd
