#include "kernels/matmul/matmul.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "base/aligned_buffer.h"
#include "kernels/matmul/dot_kernels.h"
#include "kernels/matmul/packed_weights.h"
#include "kernels/matmul/w8a8_kernels.h"
#include "quant/formats.h"
#include "quant/w8a8.h"

namespace pagoda {
namespace {

// Converted activations of the current call. Only the engine thread calls matmul, so one
// buffer per thread is enough and never shrinks.
thread_local std::vector<uint8_t> t_xq;

// A worker's rows of a format that tiles as another (DotKernels::expand_row), re-encoded
// once per matmul call: in the other format's panels where it has a packed tile, else as
// its rows. On huge pages (AlignedBuffer) as the packed weights are: the token tiles
// stream it once each (Q8_0_S24 prefill 3-5% faster than on 4 KiB pages).
thread_local AlignedBuffer t_expanded;

uint8_t* expanded_scratch(size_t bytes) {
  if (t_expanded.size() < bytes) {
    t_expanded = AlignedBuffer();  // the old one goes first: at most one is held
    t_expanded = AlignedBuffer(bytes);
    if (t_expanded.data() == nullptr) throw std::bad_alloc();
  }
  return t_expanded.data();
}

// Output rows per work item. Small enough that two threads split even a 256-row matrix,
// large enough that a tile kernel has rows to reuse each activation block on.
constexpr int64_t kRowGrain = 16;
// Tokens per tile: the activation rows a tile keeps hot while it streams weight rows.
constexpr int64_t kTokenTile = 64;
// Prefill and batched tiles split their rows statically (one chunk per thread): a tile
// call stages its activations first, a cost per call that eight chunks per thread
// multiplied (prefill 3-7% slower on Gemma 3 270M and a 1B shape), while the region is
// long enough that a late thread costs little of it.
constexpr int kTileChunks = 1;

// W8A8 activations of the current call: rows (64-byte aligned), scales, quant sums and
// the staged blocks the tile reads.
struct alignas(64) Line {
  int8_t b[64];
};
thread_local std::vector<Line> t_w8a8_q;
thread_local std::vector<float> t_w8a8_scale;
thread_local std::vector<int32_t> t_w8a8_sum;
thread_local std::vector<Line> t_w8a8_staged;

// W8A8 rows per work item of the tile: two 16-row panels (w8a8_avx512_body.h).
constexpr int64_t kW8A8RowGrain = 32;

// W8A8 (I8 quants, row_scales): activations are quantized and staged once per call, in
// parallel by blocks of 8 tokens, then the tile gets every token of the call, so each
// thread repacks its weight rows once, not once per 64 tokens.
void matmul_w8a8(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (n_tokens <= 0) return;
  const W8A8Kernels& k = w8a8_kernels();
  const int64_t cols = w.cols;
  const size_t stride = w8a8_act_stride(cols);
  const int64_t blocks = (n_tokens + kW8A8BlockTokens - 1) / kW8A8BlockTokens;
  const size_t block_dwords = static_cast<size_t>(w8a8_staged_dwords(cols) * kW8A8BlockTokens);
  const bool tiled = n_tokens > 1;
  t_w8a8_q.resize(stride / sizeof(Line) * static_cast<size_t>(n_tokens));
  t_w8a8_scale.resize(static_cast<size_t>(n_tokens));
  t_w8a8_sum.resize(static_cast<size_t>(n_tokens));
  if (tiled) t_w8a8_staged.resize((block_dwords * 4 * static_cast<size_t>(blocks) + 63) / 64);
  // Pointers, not the thread_local vectors: the workers have their own.
  int8_t* q = t_w8a8_q.data()->b;
  float* scale = t_w8a8_scale.data();
  int32_t* sum = t_w8a8_sum.data();
  int32_t* staged = tiled ? reinterpret_cast<int32_t*>(t_w8a8_staged.data()) : nullptr;
  const W8A8Acts acts{q, stride, scale, sum, staged};
  pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t t0 = b * kW8A8BlockTokens, t1 = std::min(n_tokens, t0 + kW8A8BlockTokens);
      for (int64_t t = t0; t < t1; ++t)
        scale[t] = k.quantize_x(x + t * cols, cols, q + static_cast<size_t>(t) * stride, &sum[t]);
      if (tiled) w8a8_stage_block(acts, t0, t1 - t0, cols, staged + static_cast<size_t>(b) * block_dwords);
    }
  });
  const auto* wq = reinterpret_cast<const int8_t*>(w.data);
  if (!tiled) {
    pool.parallel_for(w.rows, kRowGrain, [&](int64_t r0, int64_t r1, int) {
      k.gemv(cols, wq + r0 * w.row_stride, w.row_stride, w.row_scales + r0, r1 - r0, acts, y + r0);
    });
    return;
  }
  pool.parallel_for(
      w.rows, kW8A8RowGrain,
      [&](int64_t r0, int64_t r1, int) {
        k.tile(cols, wq + r0 * w.row_stride, w.row_stride, w.row_scales + r0, r1 - r0, acts, n_tokens, y + r0,
               static_cast<size_t>(w.rows));
      },
      kTileChunks);
}

// Output rows [r0, r1) of a one-token matmul into y[0 ..), one row at a time. The
// kernels' dot_rows (four rows sharing the activation loads) wins only while the matrix
// is in cache; a decode streams every matrix from DRAM, where four interleaved row
// streams defeat the hardware prefetcher: one row at a time decoded 1.2x (Q4_0) and
// 1.75x (Q4_K) faster on a 1B-shaped model unpacked (PAGODA_REPACK=0), and read 2-3.5x
// the bytes per second in bench/micro (gemv_dot vs gemv_rows, 32768 x 2048, Zen 5).
// Kernels whose dot_rows streams rows one after another (gemv_by_rows: the 2:4 sparse
// formats, which stage the activations once per call) get the whole range at once.
void gemv_rows(const DotKernels& k, const WeightView& w, int64_t r0, int64_t r1, const uint8_t* xb, float* y) {
  if (k.gemv_by_rows) {
    k.dot_rows(w.cols, w.row(r0), w.row_stride, r1 - r0, xb, y);
    return;
  }
  for (int64_t r = r0; r < r1; ++r) y[r - r0] = k.dot(w.cols, w.row(r), xb);
}

// The activations of a call converted to the vec-dot type of weights of type t, in
// parallel by token (or x itself when that type is F32).
const uint8_t* convert_activations(const DotKernels& k, DType t, int64_t cols, const float* x, int64_t n_tokens,
                                   ThreadPool& pool) {
  const DType xt = vec_dot_type(t);
  if (xt == DType::F32) return reinterpret_cast<const uint8_t*>(x);
  const size_t xrow = row_bytes(xt, cols);
  t_xq.resize(xrow * static_cast<size_t>(n_tokens));
  uint8_t* dst = t_xq.data();
  if (n_tokens == 1) {
    k.quantize_x(x, dst, cols);
    return dst;
  }
  pool.parallel_for(n_tokens, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) k.quantize_x(x + t * cols, dst + static_cast<size_t>(t) * xrow, cols);
  });
  return dst;
}

// Rows [r0, r1) of a format that tiles as another (2:4 sparse as its dense counterpart),
// expanded once for all token tiles: straight into the counterpart's panels, run on its
// packed tile (what its own dense matrices run on), where the format can expand into
// panels; else into rows for the counterpart's row-major tile.
void tile_expanded(const DotKernels& k, const WeightView& w, int64_t r0, int64_t r1, const uint8_t* xb, size_t xrow,
                   int64_t n_tokens, float* y) {
  const int64_t rows = r1 - r0;
  const PackedKernels* pk = k.expand_panels != nullptr ? packed_kernels(k.expanded) : nullptr;
  const size_t stride = row_bytes(k.expanded, w.cols);
  uint8_t* e = expanded_scratch(pk != nullptr ? packed_bytes(k.expanded, rows, w.cols) : stride * static_cast<size_t>(rows));
  if (pk != nullptr) k.expand_panels(w.row(r0), w.row_stride, rows, w.cols, e);
  else
    for (int64_t r = 0; r < rows; ++r) k.expand_row(w.row(r0 + r), e + static_cast<size_t>(r) * stride, w.cols);
  const DotKernels& ek = dot_kernels(k.expanded);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
    const int64_t tokens = std::min(kTokenTile, n_tokens - t0);
    const uint8_t* x = xb + static_cast<size_t>(t0) * xrow;
    float* out = y + t0 * w.rows + r0;
    if (pk != nullptr)
      pk->tile(w.cols, e, rows, x, xrow, tokens, out, static_cast<size_t>(w.rows));
    else
      ek.tile(w.cols, e, stride, rows, x, xrow, tokens, out, static_cast<size_t>(w.rows));
  }
}

// Weights in 16-row panels: a thread's rows start on a panel, so its share is a
// contiguous run of panels.
void matmul_packed(const WeightView& w, const uint8_t* xb, int64_t n_tokens, float* y, ThreadPool& pool) {
  const PackedKernels* pk = packed_kernels_best(w.type);
  assert(pk != nullptr);
  const size_t panel = packed_panel_bytes(w.type, w.cols);
  const size_t xrow = row_bytes(vec_dot_type(w.type), w.cols);
  pool.parallel_for(
      w.rows, kPanelRows,
      [&](int64_t r0, int64_t r1, int) {
        const uint8_t* p = w.packed + static_cast<size_t>(r0 / kPanelRows) * panel;
        if (n_tokens == 1) {
          pk->gemv(w.cols, p, r1 - r0, xb, y + r0);
          return;
        }
        for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
          const int64_t tokens = std::min(kTokenTile, n_tokens - t0);
          pk->tile(w.cols, p, r1 - r0, xb + static_cast<size_t>(t0) * xrow, xrow, tokens, y + t0 * w.rows + r0,
                   static_cast<size_t>(w.rows));
        }
      },
      n_tokens == 1 ? ThreadPool::kDefaultChunks : kTileChunks);
}

}  // namespace

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (w.type == DType::I8) {
    assert(w.row_scales != nullptr);
    matmul_w8a8(w, x, n_tokens, y, pool);
    return;
  }
  if (n_tokens <= 0) return;
  const DotKernels& k = dot_kernels(w.type);
  const uint8_t* xb = convert_activations(k, w.type, w.cols, x, n_tokens, pool);
  if (w.packed != nullptr) {
    matmul_packed(w, xb, n_tokens, y, pool);
    return;
  }
  const size_t xrow = row_bytes(vec_dot_type(w.type), w.cols);
  if (n_tokens == 1) {
    // Decode: a GEMV, bound by reading the weights once.
    pool.parallel_for(w.rows, kRowGrain, [&](int64_t r0, int64_t r1, int) {
      gemv_rows(k, w, r0, r1, xb, y + r0);
    });
    return;
  }
  pool.parallel_for(
      w.rows, kRowGrain,
      [&](int64_t r0, int64_t r1, int) {
        if (k.expand_row != nullptr) {
          tile_expanded(k, w, r0, r1, xb, xrow, n_tokens, y);
          return;
        }
        for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
          const int64_t tokens = std::min(kTokenTile, n_tokens - t0);
          k.tile(w.cols, w.row(r0), w.row_stride, r1 - r0, xb + static_cast<size_t>(t0) * xrow, xrow, tokens,
                 y + t0 * w.rows + r0, static_cast<size_t>(w.rows));
        }
      },
      kTileChunks);
}

void matmul_shared_input(std::span<const WeightView* const> ws, const float* x, int64_t n_tokens,
                         std::span<float* const> ys, ThreadPool& pool) {
  assert(ws.size() == ys.size());
  constexpr size_t kMaxGroup = 4;
  bool fused = n_tokens == 1 && !ws.empty() && ws.size() <= kMaxGroup;
  // Matrices fuse when their activations convert alike (one vec-dot type: Qwen2's Q5_0
  // Q/K beside a Q8_0 V, a Q6_K V beside Q4_K Q/K), all are packed or none, and every
  // packed matrix starts on a panel. Each keeps its own kernels.
  const bool packed = !ws.empty() && ws[0]->packed != nullptr;
  for (const WeightView* w : ws)
    fused = fused && vec_dot_type(w->type) == vec_dot_type(ws[0]->type) && w->cols == ws[0]->cols &&
            w->type != DType::I8 && (w->packed != nullptr) == packed && (!packed || w->rows % kPanelRows == 0);
  if (!fused) {
    for (size_t i = 0; i < ws.size(); ++i) matmul(*ws[i], x, n_tokens, ys[i], pool);
    return;
  }
  const WeightView& w0 = *ws[0];
  const uint8_t* xb = convert_activations(dot_kernels(w0.type), w0.type, w0.cols, x, 1, pool);
  const DotKernels* ks[kMaxGroup];
  const PackedKernels* pks[kMaxGroup];
  size_t panels[kMaxGroup];
  static_assert(kRowGrain % kPanelRows == 0);
  int64_t first[kMaxGroup + 1] = {0};
  for (size_t i = 0; i < ws.size(); ++i) {
    first[i + 1] = first[i] + ws[i]->rows;
    ks[i] = &dot_kernels(ws[i]->type);
    pks[i] = packed ? packed_kernels_best(ws[i]->type) : nullptr;
    panels[i] = packed ? packed_panel_bytes(ws[i]->type, ws[i]->cols) : 0;
  }
  pool.parallel_for(first[ws.size()], kRowGrain, [&](int64_t r0, int64_t r1, int) {
    // The range may span matrices: one call per matrix's share of it.
    for (size_t m = 0; m < ws.size() && r0 < r1; ++m) {
      if (first[m + 1] <= r0) continue;
      const int64_t end = std::min(r1, first[m + 1]);
      const WeightView& w = *ws[m];
      if (pks[m] != nullptr)
        pks[m]->gemv(w.cols, w.packed + static_cast<size_t>((r0 - first[m]) / kPanelRows) * panels[m], end - r0, xb,
                     ys[m] + (r0 - first[m]));
      else
        gemv_rows(*ks[m], w, r0 - first[m], end - first[m], xb, ys[m] + (r0 - first[m]));
      r0 = end;
    }
  });
}

namespace {
// matmul_jobs' converted activations (a separate buffer: matmul's own is reused by the W8A8
// and single jobs run beside them).
thread_local std::vector<uint8_t> t_jobs_xq;
// Below this many floats converted in all, the conversions run on the calling thread.
constexpr int64_t kMinParallelConvert = 16384;
}  // namespace

void matmul_jobs(std::span<const MatmulJob> jobs, ThreadPool& pool) {
  struct Prepared {
    const MatmulJob* job;
    const DotKernels* k;
    const PackedKernels* pk;
    size_t xrow;        // bytes of one converted activation row
    size_t x_offset;    // into t_jobs_xq; SIZE_MAX: x itself (F32 vec-dot type)
    bool convert;       // this job converts (others may share its offset)
    int64_t first_row;  // in the concatenated row space, a multiple of kRowGrain
  };
  std::vector<Prepared> prep;
  prep.reserve(jobs.size());
  size_t xq_bytes = 0;
  int64_t rows = 0;
  int64_t convert_floats = 0;
  for (const MatmulJob& j : jobs) {
    if (j.n_tokens <= 0) continue;
    if (j.w->type == DType::I8) {
      matmul(*j.w, j.x, j.n_tokens, j.y, pool);
      continue;
    }
    Prepared p{&j, &dot_kernels(j.w->type), j.w->packed != nullptr ? packed_kernels_best(j.w->type) : nullptr,
               row_bytes(vec_dot_type(j.w->type), j.w->cols), SIZE_MAX, false, rows};
    if (vec_dot_type(j.w->type) != DType::F32) {
      for (const Prepared& q : prep)
        if (q.job->x == j.x && q.job->n_tokens == j.n_tokens && q.job->w->cols == j.w->cols &&
            vec_dot_type(q.job->w->type) == vec_dot_type(j.w->type) && q.x_offset != SIZE_MAX) {
          p.x_offset = q.x_offset;
          break;
        }
      if (p.x_offset == SIZE_MAX) {
        p.x_offset = xq_bytes;
        p.convert = true;
        xq_bytes += p.xrow * static_cast<size_t>(j.n_tokens);
        convert_floats += j.n_tokens * j.w->cols;
      }
    }
    // Each job's rows start on a grain (and so on a panel): a work range never splits one.
    rows += (j.w->rows + kRowGrain - 1) / kRowGrain * kRowGrain;
    prep.push_back(p);
  }
  if (prep.empty()) return;
  static_assert(kRowGrain % kPanelRows == 0);
  t_jobs_xq.resize(xq_bytes);
  uint8_t* xq = t_jobs_xq.data();
  // Conversions flattened to (job, token) items.
  std::vector<std::pair<int32_t, int32_t>> items;
  for (size_t i = 0; i < prep.size(); ++i)
    if (prep[i].convert)
      for (int64_t t = 0; t < prep[i].job->n_tokens; ++t) items.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(t));
  auto convert = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const Prepared& p = prep[items[i].first];
      const int64_t t = items[i].second;
      p.k->quantize_x(p.job->x + t * p.job->w->cols, xq + p.x_offset + static_cast<size_t>(t) * p.xrow, p.job->w->cols);
    }
  };
  if (convert_floats < kMinParallelConvert) convert(0, static_cast<int64_t>(items.size()), 0);
  else pool.parallel_for(static_cast<int64_t>(items.size()), 1, convert);
  pool.parallel_for(rows, kRowGrain, [&](int64_t r0, int64_t r1, int) {
    // The range may span jobs: one call per job's share of it.
    for (const Prepared& p : prep) {
      const WeightView& w = *p.job->w;
      const int64_t a = std::max(r0, p.first_row) - p.first_row;
      const int64_t e = std::min(r1, p.first_row + w.rows) - p.first_row;
      if (a >= e) continue;
      const uint8_t* xb = p.x_offset == SIZE_MAX ? reinterpret_cast<const uint8_t*>(p.job->x) : xq + p.x_offset;
      const int64_t n = p.job->n_tokens;
      float* y = p.job->y;
      const uint8_t* panel =
          p.pk != nullptr ? w.packed + static_cast<size_t>(a / kPanelRows) * packed_panel_bytes(w.type, w.cols) : nullptr;
      if (n == 1) {
        if (p.pk != nullptr) p.pk->gemv(w.cols, panel, e - a, xb, y + a);
        else gemv_rows(*p.k, w, a, e, xb, y + a);
        continue;
      }
      for (int64_t t0 = 0; t0 < n; t0 += kTokenTile) {
        const int64_t tokens = std::min(kTokenTile, n - t0);
        const uint8_t* xt = xb + static_cast<size_t>(t0) * p.xrow;
        if (p.pk != nullptr)
          p.pk->tile(w.cols, panel, e - a, xt, p.xrow, tokens, y + t0 * w.rows + a, static_cast<size_t>(w.rows));
        else
          p.k->tile(w.cols, w.row(a), w.row_stride, e - a, xt, p.xrow, tokens, y + t0 * w.rows + a,
                    static_cast<size_t>(w.rows));
      }
    }
  });
}

void dequantize_weight_row(const WeightView& w, int64_t row, float* out) {
  if (w.type == DType::I8) {
    dequantize_row_w8a8(reinterpret_cast<const int8_t*>(w.row(row)), w.row_scales[row], out, w.cols);
    return;
  }
  dequantize_row(w.type, w.row(row), out, w.cols);
}

}  // namespace pagoda
