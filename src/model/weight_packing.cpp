#include "model/weight_packing.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/mapped_file.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul/packed_weights.h"
#include "model/weights.h"

namespace pagoda {

namespace {

// The matrices that may be packed, as views of w (const or not).
template <class Weights>
auto matrix_views(Weights& w) {
  using View = std::conditional_t<std::is_const_v<Weights>, const WeightView, WeightView>;
  std::vector<View*> views;
  for (auto& L : w.layers) {
    for (View* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down, &L.router, &L.gate_shexp, &L.up_shexp,
                    &L.down_shexp})
      views.push_back(v);
    for (auto* experts : {&L.gate_exps, &L.up_exps, &L.down_exps})
      for (View& v : *experts) views.push_back(&v);
  }
  views.push_back(&w.output);
  return views;
}

bool packs(const WeightView& v) { return !v.empty() && v.packed == nullptr && packed_kernels(v.type) != nullptr; }

// The tensor whose file pages can leave memory once v is packed, or null: a packed matrix
// is read only through its panels (a tied embedding table's rows are still looked up, a
// few per step, and Model::embed faults them back and lets them go again), but not one
// that is a part of a fused tensor, whose other parts are packed later.
// An expert's matrix is a slice of a 3-D tensor whose other slices are other experts',
// each packed on its own: its own bytes may go.
size_t droppable(const GgufFile& f, const WeightView& v, bool split) {
  const size_t bytes = v.row_stride * static_cast<size_t>(v.rows);
  for (const GgufTensor& t : f.tensors()) {
    if (v.data < t.data || v.data >= t.data + t.nbytes) continue;
    if (t.data == v.data && t.nbytes == bytes) return bytes;
    if (t.shape.size() == 3 && v.data + bytes <= t.data + t.nbytes) return bytes;
    // This process's rows of a matrix split over processes (model/parallel.h): nothing
    // here reads the others.
    return split && v.data + bytes <= t.data + t.nbytes ? bytes : 0;
  }
  return 0;
}

}  // namespace

PackingReport plan_packing(const GgufFile& f, const ModelWeights& w, bool split) {
  PackingReport report;
  for (const WeightView* v : matrix_views(w)) {
    if (!packs(*v)) continue;
    ++report.matrices;
    report.bytes += packed_bytes(v->type, v->rows, v->cols);
    report.dropped_file_bytes += droppable(f, *v, split);
  }
  return report;
}

size_t matrix_resident_bytes(const GgufFile& f, const ModelWeights& w, bool split) {
  size_t total = 0;
  for (const WeightView* v : matrix_views(w)) {
    if (v->empty()) continue;
    const size_t bytes = v->row_stride * static_cast<size_t>(v->rows);
    total += packs(*v) ? packed_bytes(v->type, v->rows, v->cols) + bytes - droppable(f, *v, split) : bytes;
  }
  return total;
}

PackingReport pack_model_weights(const GgufFile& f, ModelWeights& w, ThreadPool& pool, bool split) {
  PackingReport report;
  // Every matrix's panels in one arena, advised for 2 MiB huge pages from end to end. In
  // buffers of their own, every matrix under 2 MiB and the tail of every larger one sat
  // on 4 KiB pages (Qwen2.5-Coder-0.5B: 286 of its 390 MiB of panels on huge pages, now
  // 383), and a decode step streaming them walks the page tables: decode +4.6% to +9.6% on
  // the real models of bench/compare_builds.py on a 2-core Xeon VM (docs/kernels.md).
  constexpr size_t kAlign = 64;
  auto padded = [](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  size_t total = 0;
  for (const WeightView* v : matrix_views(std::as_const(w)))
    if (packs(*v)) total += padded(packed_bytes(v->type, v->rows, v->cols));
  AlignedBuffer arena(total);
  size_t arena_used = 0;
  for (WeightView* v : matrix_views(w)) {
    if (!packs(*v)) continue;
    const size_t bytes = packed_bytes(v->type, v->rows, v->cols);
    AlignedBuffer buf;
    uint8_t* out = nullptr;
    if (arena.data() != nullptr) {
      out = arena.data() + arena_used;
      arena_used += padded(bytes);
    } else {
      // No room for all of them at once: each where it fits.
      buf = AlignedBuffer(bytes);
      out = buf.data();
    }
    if (out == nullptr) {
      // The rows still work, only slower: keep them and say so.
      log_warn("{}: no memory to repack a {} x {} {} matrix ({:.1f} MiB); it stays row-major", f.path(), v->rows,
               v->cols, dtype_name(v->type), static_cast<double>(bytes) / (1 << 20));
      continue;
    }
    const int64_t panels = (v->rows + kPanelRows - 1) / kPanelRows;
    // In pieces of about 16 MiB of rows, each one's file pages let go once it is packed:
    // the load's peak stays the panels so far plus one piece, not plus the whole matrix
    // (an output head is 100-500 MiB).
    const size_t drop_bytes = droppable(f, *v, split);
    const int64_t panel_bytes = static_cast<int64_t>(v->row_stride) * kPanelRows;
    const int64_t step = std::max<int64_t>(1, (int64_t{16} << 20) / panel_bytes);
    for (int64_t p0 = 0; p0 < panels; p0 += step) {
      const int64_t p1 = std::min(panels, p0 + step);
      pool.parallel_for(p1 - p0, 1, [&](int64_t a, int64_t b, int) {
        pack_panels(v->type, v->data, v->row_stride, v->rows, v->cols, p0 + a, p0 + b, out);
      });
      if (drop_bytes > 0) {
        const int64_t r0 = p0 * kPanelRows, r1 = std::min(v->rows, p1 * kPanelRows);
        MappedFile::drop_range(v->data + r0 * v->row_stride, static_cast<size_t>((r1 - r0)) * v->row_stride);
      }
    }
    report.dropped_file_bytes += drop_bytes;
    v->packed = out;
    if (buf.data() != nullptr) w.packed.push_back(std::move(buf));
    ++report.matrices;
    report.bytes += bytes;
  }
  if (arena.data() != nullptr) w.packed.push_back(std::move(arena));
  return report;
}

}  // namespace pagoda
