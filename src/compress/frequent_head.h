// The scorer's output head over its most frequent tokens (model/output_subset.h), made on
// first use and kept for the compressions after it: copying and packing 32,768 rows of
// Gemma 3's head costs tens of milliseconds and tens of MiB of fresh pages, each time.
// The server holds one per scorer; a one-shot CLI run passes none and makes its own.
//
// Thread-safety: none; its holder runs one compression at a time (the scorer's mutex).
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "model/model.h"
#include "model/output_subset.h"
#include "tokenizer/vocab.h"

namespace pagoda {

class FrequentHead {
 public:
  // The head of the k most frequent tokens of `vocab` (tokenizer's frequent_tokens) for
  // `model`; made again only when the model or k changes.
  Result<std::shared_ptr<const OutputSubset>> get(const Model& model, const Vocab& vocab, int32_t k);

 private:
  const Model* model_ = nullptr;
  int32_t k_ = 0;
  std::shared_ptr<const OutputSubset> head_;
};

}  // namespace pagoda
