// Shared helpers of the quant tests: the type lists, seeded test rows, and row buffers
// sized (and aligned) from the dtype table with a canary tail to catch overruns.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/formats.h"
#include "quant/sparse24.h"
#include "tensor/dtype.h"

namespace pagoda::testing {

// Every type of tensor/formats.inc with arithmetic, so a new format is tested by its row.
inline const std::vector<DType>& dequantizable_types() {
  static const std::vector<DType> v = [] {
    std::vector<DType> out;
#define PAGODA_FORMAT(NAME, ...) \
  if (can_dequantize(DType::NAME)) out.push_back(DType::NAME);
#include "tensor/formats.inc"
    return out;
  }();
  return v;
}

// The formats that keep every value (all but the 2:4 sparse ones, which drop half by
// design and have their own tests, sparse24_test.cpp).
inline const std::vector<DType>& dense_types() {
  static const std::vector<DType> v = [] {
    std::vector<DType> out;
    for (DType t : dequantizable_types())
      if (!is_sparse24(t)) out.push_back(t);
    return out;
  }();
  return v;
}
inline std::string type_name(DType t) { return std::string(dtype_name(t)); }

// A byte buffer for one row of type t, 8-byte aligned, followed by kCanary bytes of 0xA5
// that no row function may touch.
class RowBuffer {
 public:
  static constexpr size_t kCanary = 64;
  RowBuffer(DType t, int64_t n) : bytes_(row_bytes(t, n)), words_((bytes_ + kCanary + 7) / 8) {
    std::memset(words_.data(), 0xA5, words_.size() * 8);
  }
  void* data() { return words_.data(); }
  const void* data() const { return words_.data(); }
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(words_.data()); }
  size_t size() const { return bytes_; }
  bool canary_intact() const {
    for (size_t i = bytes_; i < bytes_ + kCanary; ++i)
      if (bytes()[i] != 0xA5) return false;
    return true;
  }

 private:
  size_t bytes_;
  std::vector<uint64_t> words_;
};

enum class Shape { kGaussian, kUniform, kPositive, kOutliers, kMixedScales };

inline const char* shape_name(Shape s) {
  switch (s) {
    case Shape::kGaussian: return "gaussian";
    case Shape::kUniform: return "uniform";
    case Shape::kPositive: return "positive";
    case Shape::kOutliers: return "outliers";
    case Shape::kMixedScales: return "mixed_scales";
  }
  return "?";
}

// Test rows resembling weights and activations: Gaussian, uniform, all-positive (so the
// formats with a min must use it), Gaussian with rare 20-sigma outliers, and blocks whose
// magnitude varies over six decades.
inline std::vector<float> make_row(Shape shape, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float v = 0.0f;
    switch (shape) {
      case Shape::kGaussian: v = normal(rng); break;
      case Shape::kUniform: v = uniform(rng); break;
      case Shape::kPositive: v = 3.0f + uniform(rng); break;
      case Shape::kOutliers: v = (rng() % 97 == 0) ? 20.0f * normal(rng) : normal(rng); break;
      case Shape::kMixedScales:
        v = normal(rng) * std::pow(10.0f, static_cast<float>((i / 32) % 7) - 3.0f);
        break;
    }
    x[static_cast<size_t>(i)] = v;
  }
  return x;
}

// Round to nearest on a block's decode grid, as the calibrated quantizers round, gives
// the bytes of the round-to-nearest reference; except the 32-value formats, whose
// references round with the scale (and min) before their FP16 rounding, so near ties they
// may pick the neighbouring level.
// There the grid's choice must decode at least as close to the source.
inline void expect_grid_rounding_matches_rtn(DType t, const float* x, int64_t n, const std::vector<uint8_t>& rtn,
                                             const std::vector<uint8_t>& ours, const std::string& what) {
  if (dtype_info(t).block_size != 32) {
    EXPECT_EQ(rtn, ours) << what;
    return;
  }
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  dequantize_row(t, rtn.data(), a.data(), n);
  dequantize_row(t, ours.data(), b.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_LE(std::fabs(b[static_cast<size_t>(i)] - x[i]), std::fabs(a[static_cast<size_t>(i)] - x[i])) << what << " value " << i;
}

}  // namespace pagoda::testing
