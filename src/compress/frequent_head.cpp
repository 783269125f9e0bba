#include "compress/frequent_head.h"

namespace pagoda {

Result<std::shared_ptr<const OutputSubset>> FrequentHead::get(const Model& model, const Vocab& vocab, int32_t k) {
  if (head_ && model_ == &model && k_ == k) return head_;
  auto s = OutputSubset::make(model, frequent_tokens(vocab, k));
  if (!s) return s.status();
  head_ = std::make_shared<const OutputSubset>(std::move(*s));
  model_ = &model;
  k_ = k;
  return head_;
}

}  // namespace pagoda
