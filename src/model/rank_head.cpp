// Rank pooling's classification head, as Hugging Face's BertForSequenceClassification
// computes it from the [CLS] state h: pooled = tanh(cls . h + cls_b) (BertPooler), then
// scores = cls.output . pooled + cls.output_b (the classifier; dropout is the identity at
// inference). A file without cls.weight goes straight to the classifier, as llama.cpp
// runs such heads. All of a piece's rows go through each matrix at once.
#include <algorithm>
#include <cmath>

#include "kernels/elementwise/elementwise.h"
#include "kernels/matmul/matmul.h"
#include "model/model.h"

namespace pagoda {

void Model::rank_head() {
  const ModelWeights& w = weights_;
  const int64_t E = config_.n_embd;
  const int64_t n = static_cast<int64_t>(rank_rows_.size());
  const int64_t n_out = w.cls_out.rows;
  rank_in_.resize(static_cast<size_t>(n * E));
  for (int64_t i = 0; i < n; ++i) std::copy_n(rank_rows_[i], E, &rank_in_[i * E]);
  const float* x = rank_in_.data();
  if (!w.cls.empty()) {
    rank_mid_.resize(static_cast<size_t>(n * E));
    matmul(w.cls, x, n, rank_mid_.data(), *pool_);
    for (int64_t i = 0; i < n; ++i) {
      float* row = &rank_mid_[i * E];
      if (w.cls_b != nullptr) add_inplace(row, w.cls_b, E);
      for (int64_t j = 0; j < E; ++j) row[j] = std::tanh(row[j]);
    }
    x = rank_mid_.data();
  }
  rank_out_.resize(static_cast<size_t>(n * n_out));
  matmul(w.cls_out, x, n, rank_out_.data(), *pool_);
  for (int64_t i = 0; i < n; ++i) {
    float* scores = &rank_out_[i * n_out];
    if (w.cls_out_b != nullptr) add_inplace(scores, w.cls_out_b, n_out);
    std::fill_n(rank_rows_[i], E, 0.0f);
    std::copy_n(scores, n_out, rank_rows_[i]);
  }
}

}  // namespace pagoda
