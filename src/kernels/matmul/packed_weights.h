// Weights repacked at load time into panels of 16 rows ("rows in lanes"), for the
// formats and SIMD targets where that pays: Q4_0, Q5_0, Q8_0, Q4_K and Q6_K on AVX-512
// VNNI. In a panel, block b of all 16 rows sits together: the quants transposed so that
// 32-bit lane r of a 512-bit register holds four consecutive quants of row r, as unsigned
// bytes (Q8_0: q ^ 0x80; Q4_0/Q5_0: the file's nibble bytes as they are, Q5_0's fifth
// bits in one more register), and the 16 rows' FP16 scales (packed_layout.h). One
// broadcast activation dword
// then feeds 64 multiply-adds for 16 rows, with no horizontal sums, no per-call
// transposition and no scale shuffles: the decode GEMV needs about a third of the
// instructions per weight byte of the row-major kernels, and the prefill tile skips the
// repack it would otherwise do on every call. A Q4_0, Q5_0, Q8_0 or Q6_K panel takes the
// bytes of its 16 rows in the file (Q6_K: plus 32 when the block count is odd; Q4_K: 2.8% more,
// its scales and mins unpacked to bytes), so a packed matrix replaces its mapped pages.
//
// The GEMV (one token) and the tile (several) compute every output the same way, block
// by block in one FP32 accumulator, so a row's result does not depend on the batch it is
// computed in (packed formats are batch-invariant on their target).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace pagoda {

inline constexpr int64_t kPanelRows = 16;

struct PackedKernels {
  // y[r] = dot(row r, x) for r < rows, from the panels at `panels` (the first row is a
  // panel's first); x is one activation row in the format's vec-dot type (Q8_0, Q8_K).
  void (*gemv)(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, float* y) = nullptr;
  // y[t * y_stride + r] for r < rows, t < tokens (at most 64): activation rows at x with
  // stride x_stride. Equal bit for bit to gemv on each token.
  void (*tile)(int64_t n, const uint8_t* panels, int64_t rows, const uint8_t* x, size_t x_stride, int64_t tokens,
               float* y, size_t y_stride) = nullptr;
};

// The packed kernels for type t on this machine, or null when matrices of type t stay
// row-major here (format not packed, CPU without AVX-512 VNNI, PAGODA_CPU capping it, or
// PAGODA_REPACK=0 in the environment).
const PackedKernels* packed_kernels(DType t);
// The kernels that run matrices already packed: the AMX tile where this CPU (and its
// kernel) allow AMX-INT8 and type t has one, else the VNNI bodies; null without VNNI.
const PackedKernels* packed_kernels_best(DType t);
// The same for an explicit target (tests, benchmarks); null where none exists. The AMX
// kernels share the VNNI GEMV: one token gains nothing from tiles.
const PackedKernels* packed_kernels_avx512(DType t);
const PackedKernels* packed_kernels_amx(DType t);

// Whether type t has a packed layout at all, and its bytes for a rows x cols matrix
// (rows rounded up to whole panels; cols a multiple of the format's block).
bool has_packed_layout(DType t);
size_t packed_bytes(DType t, int64_t rows, int64_t cols);
// Bytes of one panel (16 rows, all their blocks).
size_t packed_panel_bytes(DType t, int64_t cols);

// Writes panels [p0, p1) of the rows x cols matrix at w (row stride w_stride) to `out`,
// the start of the whole packed matrix. Rows past `rows` in the last panel are zeros
// (scale 0), so their outputs are 0 and never read.
void pack_panels(DType t, const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols, int64_t p0, int64_t p1,
                 uint8_t* out);

}  // namespace pagoda
