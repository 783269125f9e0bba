// Internal: what every SIMD body file (*_avx2.cpp, *_avx512.cpp, *_avx512bw.cpp) starts
// with. The x86 intrinsics, the unaligned byte loads every body uses (internal linkage,
// so each target's copy stays its own), and two GCC 12 warnings silenced for the rest of the file: its
// intrinsic headers seed gathers and many AVX-512 operations with a self-initialized
// "undefined" register (GCC PR105593), which -Wuninitialized / -Wmaybe-uninitialized
// report once they are inlined. Include it first, only from body files (its pragmas stay
// in force to the end of the translation unit).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pagoda::simd {
namespace {

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline uint32_t load32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint16_t load16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
// The FP16 value at p (every body target has F16C).
inline float half(const void* p) { return _cvtsh_ss(load16(p)); }
inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

}  // namespace
}  // namespace pagoda::simd
