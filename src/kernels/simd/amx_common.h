// Internal: the tile configuration the AMX bodies (*_amx.cpp) share. Include only from
// files compiled for AMX (internal linkage, one copy per including file).
//
// Every packed AMX tile runs the same shapes: the weights (B, unsigned bytes, 16 rows of
// the panel in the "rows in lanes" order the panels already have: one 64-byte register =
// one tile row of 4 quants for each of 16 rows) against one token group's activations
// (A, signed bytes, a token per tile row), into 16 int32 per token (C, a token per row: a
// register of 16 rows' dots, as the VNNI bodies hold them). Two sets are configured at
// once, full groups of 16 tokens and the call's remainder, so a call loads its
// configuration once whatever its token count.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace pagoda::simd {
namespace {

// Tile registers, as macros: GCC's tile intrinsics paste their register numbers into the
// instruction's text, so they must be literals by the time they reach them (the wrappers
// below expand these names first).
#define PAGODA_TMM_C0 0  // C, full group (16 tokens x 16 int32)
#define PAGODA_TMM_C1 1
#define PAGODA_TMM_A0 2  // A, full group (16 tokens x kBytes)
#define PAGODA_TMM_A1 3
#define PAGODA_TMM_B0 4  // B (kBytes / 4 rows x 64 bytes)
#define PAGODA_TMM_B1 5
#define PAGODA_TMM_CR 6  // C and A of the remainder group
#define PAGODA_TMM_AR 7
#define PAGODA_TILE_LOADD(t, p, stride) _tile_loadd(t, p, stride)
#define PAGODA_TILE_STORED(t, p, stride) _tile_stored(t, p, stride)
#define PAGODA_TILE_ZERO(t) _tile_zero(t)
#define PAGODA_TILE_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)
#define PAGODA_TILE_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)

// One sub-block's dots for the n (1..32) tokens whose quants start at xq (stride xs),
// its B tile at b loaded on register kB, by DP (PAGODA_TILE_DPBSUD: unsigned weights,
// DPBSSD: signed), into c[t] (a line per token): full groups of 16 on C0/A0 and C1/A1, a
// last partial group on CR/AR (configured for the call's remainder, the only partial
// group a call has). A macro, as the tile registers must be literals.
#define PAGODA_SUB_BLOCK_DOTS(DP, kB, b, xq, xs, n, c)                                   \
  do {                                                                                   \
    PAGODA_TILE_LOADD(kB, b, 64);                                                        \
    if ((n) >= 16) {                                                                     \
      PAGODA_TILE_ZERO(PAGODA_TMM_C0);                                                   \
      PAGODA_TILE_LOADD(PAGODA_TMM_A0, xq, xs);                                          \
      DP(PAGODA_TMM_C0, PAGODA_TMM_A0, kB);                                              \
      PAGODA_TILE_STORED(PAGODA_TMM_C0, c, 64);                                          \
    }                                                                                    \
    if ((n) >= 32) {                                                                     \
      PAGODA_TILE_ZERO(PAGODA_TMM_C1);                                                   \
      PAGODA_TILE_LOADD(PAGODA_TMM_A1, (xq) + 16 * (xs), xs);                            \
      DP(PAGODA_TMM_C1, PAGODA_TMM_A1, kB);                                              \
      PAGODA_TILE_STORED(PAGODA_TMM_C1, (c) + 16, 64);                                   \
    }                                                                                    \
    if ((n) % 16 != 0) {                                                                 \
      const int g_ = (n) & ~15;                                                          \
      PAGODA_TILE_ZERO(PAGODA_TMM_CR);                                                   \
      PAGODA_TILE_LOADD(PAGODA_TMM_AR, (xq) + static_cast<size_t>(g_) * (xs), xs);       \
      DP(PAGODA_TMM_CR, PAGODA_TMM_AR, kB);                                              \
      PAGODA_TILE_STORED(PAGODA_TMM_CR, (c) + g_, 64);                                   \
    }                                                                                    \
  } while (0)

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads the configuration for groups of 16 tokens plus one of `rest` (0..15) tokens,
// with kBytes (16, 32 or 64: a sub-block's quants) activation bytes per tile row.
template <int kBytes>
inline void configure_tiles(int rest) {
  static_assert(kBytes == 16 || kBytes == 32 || kBytes == 64, "a tile row is 16, 32 or 64 quants");
  TileConfig c;
  for (int t : {PAGODA_TMM_C0, PAGODA_TMM_C1}) c.colsb[t] = 64, c.rows[t] = 16;
  for (int t : {PAGODA_TMM_A0, PAGODA_TMM_A1}) c.colsb[t] = kBytes, c.rows[t] = 16;
  for (int t : {PAGODA_TMM_B0, PAGODA_TMM_B1}) c.colsb[t] = 64, c.rows[t] = kBytes / 4;
  const auto r = static_cast<uint8_t>(rest > 0 ? rest : 1);
  c.colsb[PAGODA_TMM_CR] = 64, c.rows[PAGODA_TMM_CR] = r;
  c.colsb[PAGODA_TMM_AR] = kBytes, c.rows[PAGODA_TMM_AR] = r;
  _tile_loadconfig(&c);
}

}  // namespace
}  // namespace pagoda::simd
