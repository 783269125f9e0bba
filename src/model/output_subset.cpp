#include "model/output_subset.h"

#include <cstring>

#include "kernels/matmul/packed_weights.h"
#include "model/model.h"

namespace pagoda {

Result<OutputSubset> OutputSubset::make(const Model& model, std::span<const int32_t> ids) {
  const WeightView& head = model.weights().output;
  if (head.empty() || !model.config().has_lm_head) return error("this model has no output head");
  if (model.split().split()) return error("an output subset needs the whole head: this model is split over processes");
  if (ids.empty()) return error("an output subset needs at least one token");
  OutputSubset s;
  s.columns_.assign(static_cast<size_t>(head.rows), -1);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= head.rows) return error("token id {} is outside the output head's {} rows", id, head.rows);
    if (s.columns_[static_cast<size_t>(id)] >= 0) return error("token id {} is in the output subset twice", id);
    s.columns_[static_cast<size_t>(id)] = static_cast<int32_t>(i);
  }
  if (head.row_scales != nullptr) return error("an output subset of a W8A8 head is not supported");
  s.ids_.assign(ids.begin(), ids.end());
  const int64_t n = s.size();
  s.rows_ = AlignedBuffer(static_cast<size_t>(n) * head.row_stride);
  if (s.rows_.data() == nullptr) return error("no memory for an output subset of {} rows", n);
  ThreadPool& pool = model.pool();
  pool.parallel_for(n, 256, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r)
      std::memcpy(s.rows_.data() + static_cast<size_t>(r) * head.row_stride, head.row(s.ids_[static_cast<size_t>(r)]),
                  head.row_stride);
  });
  s.view_ = head;
  s.view_.rows = n;
  s.view_.data = s.rows_.data();
  s.view_.packed = nullptr;
  // Packed like the full head, so the subset runs on the same tile kernels.
  if (head.packed != nullptr) {
    s.panels_ = AlignedBuffer(packed_bytes(head.type, n, head.cols));
    if (s.panels_.data() != nullptr) {
      const int64_t panels = (n + kPanelRows - 1) / kPanelRows;
      pool.parallel_for(panels, 1, [&](int64_t a, int64_t b, int) {
        pack_panels(head.type, s.rows_.data(), head.row_stride, n, head.cols, a, b, s.panels_.data());
      });
      s.view_.packed = s.panels_.data();
    }
  }
  return s;
}

}  // namespace pagoda
