// An output head over a subset of the vocabulary: the output matrix's rows of the given
// token ids, gathered once (and packed into panels where the full head is), so the logits
// of a forward pass's hidden states (Model::forward_hidden, then Model::head_logits with
// view()) cost ids.size() per row instead of n_vocab. Prompt compression scores a passage with it: a
// 262,144-token head is most of a small scorer's cost per token, and the tokens outside
// the most frequent few tens of thousands carry little of a row's probability (the
// scorer measures how little, compress/self_information.h). Logit scaling and soft-capping
// apply as they do to the full head.
//
// Cost: ids.size() rows of the head copied (and packed), about ids.size() / n_vocab of
// the head's bytes. Immutable once made; thread-safe to read.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "tensor/weight_view.h"

namespace pagoda {

class Model;

class OutputSubset {
 public:
  // ids: distinct token ids of the model's vocabulary, in the order the logits columns
  // will have. Fails on a model without an output head, a split model, an empty list, an
  // id outside the vocabulary or a repeated one, or no memory.
  static Result<OutputSubset> make(const Model& model, std::span<const int32_t> ids);

  std::span<const int32_t> ids() const { return ids_; }
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  // The column of token id in the subset's logits, or -1 when it is not in the subset.
  int32_t column(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < columns_.size() ? columns_[static_cast<size_t>(id)] : -1;
  }
  const WeightView& view() const { return view_; }

 private:
  std::vector<int32_t> ids_;
  std::vector<int32_t> columns_;  // per vocabulary id
  AlignedBuffer rows_, panels_;
  WeightView view_;
};

}  // namespace pagoda
