// Internal: the plain (non-SIMD) parts the W8A8 tile bodies share -- per-thread buffers,
// the split of a batch into register blocks of tokens, and the staging of their
// activations. Included by w8a8_avx512_body.h and w8a8_avx2.cpp; everything lands in an
// anonymous namespace, so each target's file has its own copy (nothing compiled for one
// instruction set can be linked into code that runs on another).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/w8a8_kernels.h"

namespace pagoda::simd {
namespace {

struct alignas(64) Z64 {
  uint8_t b[64];
};

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Per-thread buffers of a tile body, grown on demand and kept.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { delete[] p_; }
  Z64* get(size_t n) {
    if (n > cap_) {
      delete[] p_;
      p_ = new Z64[n];
      cap_ = n;
    }
    return p_;
  }

 private:
  Z64* p_ = nullptr;
  size_t cap_ = 0;
};

// Tokens staged at once: bounds the staging buffer (kChunk * n bytes); a multiple of
// every block width.
constexpr int64_t kChunk = 240;

// A block of kT tokens staged for a micro-kernel: dword j of token t at dw[j * kT + t], so
// the kernel reads each step's broadcasts at constant offsets; per token the offset
// correction -128 * sum(x) (for VNNI's unsigned weights) and the scale.
struct Group {
  int64_t t0;  // first token, relative to the chunk
  int kT;
  const int32_t* dw;
  const int32_t* corr;
  const float* scale;
};

// Splits tc tokens into blocks of kMax, except that with kMax = 12, 16-19 left go as
// 8 + 8 (a block of 4 keeps too few multiply chains in flight), then 8, 4, 2, 1.
template <int kMax>
int plan_groups(int64_t tc, int* sizes) {
  int n = 0;
  int64_t left = tc;
  while (left >= kMax + 8 || (left >= kMax && (kMax <= 8 || left < 16))) {
    sizes[n++] = kMax;
    left -= kMax;
  }
  constexpr int kTail[] = {8, 8, 4, 2, 1};
  for (int k : kTail)
    if (left >= k) {
      sizes[n++] = k;
      left -= k;
    }
  return n;
}

// Scratch for staging kChunk tokens of nj dwords: the dwords, then corrections and scales.
inline size_t stage_regs(int64_t nj) { return static_cast<size_t>(kChunk * nj * 4 + 2 * kChunk * 4 + 63) / 64; }

// Stages tokens [c0, c0 + tc) of x (nj dwords each, inside the zero-padded rows) into
// `stage` as blocks of kMax tokens; returns the number of groups written to `groups`
// (at most kChunk).
template <int kMax>
int stage_groups(const W8A8Acts& x, int64_t c0, int64_t tc, int64_t nj, Z64* stage, Group* groups) {
  auto* dws = reinterpret_cast<int32_t*>(stage);
  int32_t* corr = dws + kChunk * nj;
  float* scale = reinterpret_cast<float*>(corr + kChunk);
  int sizes[kChunk];
  const int ng = plan_groups<kMax>(tc, sizes);
  int64_t t0 = 0;
  for (int gi = 0; gi < ng; ++gi) {
    const int kT = sizes[gi];
    int32_t* dw = dws + t0 * nj;
    for (int t = 0; t < kT; ++t) {
      const int64_t tok = c0 + t0 + t;
      const int8_t* row = x.q + tok * static_cast<int64_t>(x.stride);
      for (int64_t j = 0; j < nj; ++j) std::memcpy(dw + j * kT + t, row + 4 * j, 4);
      corr[t0 + t] = -128 * x.sum[tok];
      scale[t0 + t] = x.scale[tok];
    }
    groups[gi] = Group{t0, kT, dw, corr + t0, scale + t0};
    t0 += kT;
  }
  return ng;
}

}  // namespace
}  // namespace pagoda::simd
