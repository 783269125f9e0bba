#include "quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/block_grid.h"
#include "quant/formats.h"
#include "base/fp16.h"
#include "quant/sparse24.h"

namespace pagoda {
namespace {

// The O(n^3) loops of the factorization and the O(rows n^2) error feedback are the whole
// cost; clones per ISA let them vectorize where the CPU allows without assuming it.
#define PAGODA_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

PAGODA_VECTOR_CLONES
double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

PAGODA_VECTOR_CLONES
void axpy(float* y, const float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] -= a * x[i];
}

// In place: lower Cholesky factor of the n x n row-major matrix a (upper triangle left
// as is). False when a is not positive definite.
bool cholesky_lower(double* a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double* rj = a + j * n;
    const double d = rj[j] - dot(rj, rj, j);
    if (!(d > 0) || !std::isfinite(d)) return false;
    const double l = std::sqrt(d);
    rj[j] = l;
    for (int64_t i = j + 1; i < n; ++i) {
      double* ri = a + i * n;
      ri[j] = (ri[j] - dot(ri, rj, j)) / l;
    }
  }
  return true;
}

// Inverse of a lower-triangular matrix (row-major, lower part used), into inv (lower).
// Column by column of the inverse would stride; instead solve for rows of inv^T, i.e.
// forward substitution on rows: inv[i][k] for k <= i.
void invert_lower(const double* l, int64_t n, double* inv) {
  std::fill(inv, inv + n * n, 0.0);
  // Work on the transpose t = inv^T (upper), row k of t = column k of inv, computed by
  // t[k][i] = -(sum_{j=k}^{i-1} l[i][j] t[k][j]) / l[i][i]: the inner sum runs along
  // contiguous row i of l and row k of t.
  std::vector<double> t(static_cast<size_t>(n * n), 0.0);
  for (int64_t k = 0; k < n; ++k) {
    double* tk = t.data() + k * n;
    tk[k] = 1.0 / l[k * n + k];
    for (int64_t i = k + 1; i < n; ++i) tk[i] = -dot(l + i * n + k, tk + k, i - k) / l[i * n + i];
  }
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = k; i < n; ++i) inv[i * n + k] = t[k * n + i];
}

}  // namespace

Result<GptqFactor> gptq_factor(const float* hessian, int64_t cols, double damp) {
  if (cols <= 0) return error("GPTQ: empty Hessian");
  const size_t n = static_cast<size_t>(cols);
  GptqFactor f;
  f.cols = cols;
  f.dead.assign(n, 0);
  double mean_diag = 0;
  for (size_t i = 0; i < n; ++i) {
    const double h = hessian[i * n + i];
    f.dead[i] = h <= 0 ? 1 : 0;
    mean_diag += f.dead[i] ? 0.0 : h;
  }
  if (mean_diag <= 0) return error("GPTQ: the calibration activations are all zero for this layer");
  mean_diag /= static_cast<double>(n);
  // U = J chol(J H J)^-1 J with J the reversal: U is upper and U^T U = H^-1, at the cost
  // of one factorization and one triangular inverse.
  std::vector<double> a(n * n), linv(n * n);
  for (int attempt = 0; attempt < 4; ++attempt, damp *= 10) {
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        const size_t ri = n - 1 - i, rj = n - 1 - j;
        double h = hessian[ri * n + rj];
        if (i == j) h = (f.dead[ri] ? 1.0 : h) + damp * mean_diag;
        a[i * n + j] = (f.dead[ri] || f.dead[rj]) && i != j ? 0.0 : h;
      }
    if (!cholesky_lower(a.data(), cols)) continue;
    invert_lower(a.data(), cols, linv.data());
    f.u.assign(n * n, 0.0f);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i; j < n; ++j) f.u[i * n + j] = static_cast<float>(linv[(n - 1 - i) * n + (n - 1 - j)]);
    f.damp = damp;
    return f;
  }
  return error("GPTQ: the Hessian is not positive definite even with damping {} (too few calibration tokens?)", damp);
}

void gptq_quantize(DType t, const GptqFactor& f, float* w, int64_t rows, void* dst, ThreadPool& pool) {
  const int64_t cols = f.cols;
  const int64_t bs = dtype_info(t).block_size;
  const size_t block_bytes = row_bytes(t, bs);
  const size_t out_row = row_bytes(t, cols);
  pool.parallel_for(rows, 1, [&](int64_t r0, int64_t r1, int) {
    BlockGrid grid;
    int levels[BlockGrid::kMaxValues];
    for (int64_t r = r0; r < r1; ++r) {
      float* wr = w + r * cols;
      auto* out = static_cast<uint8_t*>(dst) + static_cast<size_t>(r) * out_row;
      for (int64_t c = 0; c < cols; ++c)
        if (f.dead[static_cast<size_t>(c)]) wr[c] = 0.0f;
      for (int64_t b0 = 0; b0 < cols; b0 += bs) {
        make_block_grid(t, wr + b0, grid);
        for (int64_t e = 0; e < bs; ++e) {
          const int64_t c = b0 + e;
          const int level = nearest_level(grid, static_cast<int>(e), wr[c]);
          levels[e] = level;
          const float q = grid_value(grid, static_cast<int>(e), level);
          const float* uc = f.u.data() + c * cols;
          const float err = (wr[c] - q) / uc[c];
          wr[c] = q;
          axpy(wr + c + 1, uc + c + 1, err, cols - c - 1);
        }
        encode_block_levels(grid, levels, out + static_cast<size_t>(b0 / bs) * block_bytes);
      }
    }
  });
}

void sparsegpt_quantize_2_4(DType t, const GptqFactor& f, float* w, int64_t rows, void* dst, ThreadPool& pool) {
  const int64_t cols = f.cols;
  const bool q8 = t == DType::Q8_0_S24;
  const size_t out_row = row_bytes(t, cols);
  pool.parallel_for(rows, 1, [&](int64_t r0, int64_t r1, int) {
    float score[kS24Block], kept[kS24Kept];
    uint8_t keep[kS24Block];
    int levels[kS24Kept];
    for (int64_t r = r0; r < r1; ++r) {
      float* wr = w + r * cols;
      auto* out = static_cast<uint8_t*>(dst) + static_cast<size_t>(r) * out_row;
      for (int64_t c = 0; c < cols; ++c)
        if (f.dead[static_cast<size_t>(c)]) wr[c] = 0.0f;
      for (int64_t b0 = 0; b0 < cols; b0 += kS24Block) {
        for (int e = 0; e < kS24Block; ++e) {
          const float d = f.u[static_cast<size_t>((b0 + e) * cols + b0 + e)];
          score[e] = wr[b0 + e] * wr[b0 + e] / (d * d);
        }
        s24_select(score, kS24Block, keep);
        int k = 0;
        for (int e = 0; e < kS24Block; ++e)
          if (keep[e]) kept[k++] = wr[b0 + e];
        // The dense format's scale over the kept values as they stand (its RTN quantizer).
        uint16_t d16;
        if (q8) {
          BlockQ8_0 blk;
          quantize_row(DType::Q8_0, kept, &blk, kS24Kept);
          d16 = blk.d;
        } else {
          BlockQ4_0 blk;
          quantize_row(DType::Q4_0, kept, &blk, kS24Kept);
          d16 = blk.d;
        }
        const float d = fp16_to_fp32(d16);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        k = 0;
        for (int e = 0; e < kS24Block; ++e) {
          const int64_t c = b0 + e;
          float q = 0.0f;
          if (keep[e]) {
            const int lv = q8 ? std::clamp(static_cast<int>(std::lround(wr[c] * id)), -127, 127)
                              : std::clamp(static_cast<int>(std::lround(wr[c] * id)) + 8, 0, 15);
            levels[k++] = lv;
            q = static_cast<float>(q8 ? lv : lv - 8) * d;
          }
          const float* uc = f.u.data() + c * cols;
          const float err = (wr[c] - q) / uc[c];
          wr[c] = q;
          axpy(wr + c + 1, uc + c + 1, err, cols - c - 1);
        }
        uint8_t* blk = out + static_cast<size_t>(b0 / kS24Block) * dtype_info(t).type_size;
        std::memcpy(blk, &d16, 2);
        s24_encode(keep, blk + 2);
        if (q8) {
          for (int j = 0; j < kS24Kept; ++j) blk[8 + j] = static_cast<uint8_t>(static_cast<int8_t>(levels[j]));
        } else {
          for (int j = 0; j < kS24Kept / 2; ++j)
            blk[8 + j] = static_cast<uint8_t>(levels[j] | levels[j + kS24Kept / 2] << 4);
        }
      }
    }
  });
}

}  // namespace pagoda
