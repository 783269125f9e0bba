// Internal: what every SIMD body file (*_avx2.cpp, *_avx512.cpp, *_avx512bw.cpp) starts
// with. The x86 intrinsics, and two GCC 12 warnings silenced for the rest of the file: its
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
