// The key/value cache of one sequence: per layer, FP16 keys and values for positions
// [0, n_ctx), each row n_kv_heads * head_dim wide. Keys and values of past tokens are
// computed once and never again. Sized at creation; the paged, shared version is the
// engine's (src/kv/). Memory: 2 * n_layer * n_ctx * kv_dim * 2 bytes.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda {

class KvCache {
 public:
  KvCache(int32_t n_layer, int32_t n_ctx, int32_t kv_dim)
      : n_ctx_(n_ctx), kv_dim_(kv_dim),
        k_(static_cast<size_t>(n_layer)), v_(static_cast<size_t>(n_layer)) {
    for (int32_t l = 0; l < n_layer; ++l) {
      k_[l].resize(static_cast<size_t>(n_ctx) * kv_dim);
      v_[l].resize(static_cast<size_t>(n_ctx) * kv_dim);
    }
  }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t kv_dim() const { return kv_dim_; }
  uint16_t* k(int32_t layer) { return k_[layer].data(); }
  uint16_t* v(int32_t layer) { return v_[layer].data(); }
  static size_t bytes_needed(int32_t n_layer, int32_t n_ctx, int32_t kv_dim) {
    return 2ull * n_layer * n_ctx * kv_dim * sizeof(uint16_t);
  }

 private:
  int32_t n_ctx_;
  int32_t kv_dim_;
  std::vector<std::vector<uint16_t>> k_;
  std::vector<std::vector<uint16_t>> v_;
};

}  // namespace pagoda
