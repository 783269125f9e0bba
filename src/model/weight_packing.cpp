#include "model/weight_packing.h"

#include <fmt/format.h>

#include <vector>

#include "base/log.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul/packed_weights.h"
#include "model/weights.h"

namespace pagoda {

namespace {

const GgufTensor* tensor_at(const GgufFile& f, const uint8_t* data) {
  for (const GgufTensor& t : f.tensors())
    if (t.data == data) return &t;
  return nullptr;
}

}  // namespace

PackingReport pack_model_weights(const GgufFile& f, ModelWeights& w, ThreadPool& pool) {
  std::vector<WeightView*> views;
  for (LayerWeights& L : w.layers)
    for (WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) views.push_back(v);
  views.push_back(&w.output);
  PackingReport report;
  for (WeightView* v : views) {
    if (v->empty() || v->packed != nullptr || packed_kernels(v->type) == nullptr) continue;
    const size_t bytes = packed_bytes(v->type, v->rows, v->cols);
    AlignedBuffer buf(bytes);
    if (buf.data() == nullptr) {
      // The rows still work, only slower: keep them and say so.
      log_warn("{}: no memory to repack a {} x {} {} matrix ({:.1f} MiB); it stays row-major", f.path(), v->rows,
               v->cols, dtype_name(v->type), static_cast<double>(bytes) / (1 << 20));
      continue;
    }
    const int64_t panels = (v->rows + kPanelRows - 1) / kPanelRows;
    uint8_t* out = buf.data();
    pool.parallel_for(panels, 1, [&](int64_t p0, int64_t p1, int) {
      pack_panels(v->type, v->data, v->row_stride, v->rows, v->cols, p0, p1, out);
    });
    v->packed = out;
    // The rows of a tied embedding table are still looked up; other matrices are now
    // read only through their panels, so their file pages can leave memory (not those of
    // a matrix that is a part of a fused tensor, whose other parts are packed later).
    if (v->data != w.tok_embd.data)
      if (const GgufTensor* t = tensor_at(f, v->data); t != nullptr && t->nbytes == v->row_stride * v->rows)
        f.drop_pages(*t);
    w.packed.push_back(std::move(buf));
    ++report.matrices;
    report.bytes += bytes;
  }
  return report;
}

}  // namespace pagoda
