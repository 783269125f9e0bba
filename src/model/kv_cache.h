// The key/value cache of one sequence on its own: a KvStorage with just enough blocks
// for n_ctx positions and the block table 0, 1, 2, ... (one layer group: every layer in
// each block, nothing released early). It goes through exactly the paged path the engine
// uses, for tests, tools and anything that runs one sequence without the engine.
// Memory: 2 * n_layer * n_ctx * kv_dim * 2 bytes (rounded up to whole blocks).
#pragma once

#include <cstdint>
#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include "kv/kv_storage.h"

namespace pagoda {

class KvCache {
 public:
  static constexpr int32_t kBlockSize = 16;

  KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_kv_heads, int32_t head_dim, KvType type = KvType::kF16)
      : n_ctx_(n_ctx) {
    const int32_t blocks = (n_ctx + kBlockSize - 1) / kBlockSize;
    auto s = KvStorage::create(KvShape{n_layer, n_kv_heads, head_dim, kBlockSize, type, {}}, blocks > 0 ? blocks : 1);
    if (s) storage_ = std::move(s.value());
    tables_[0].resize(static_cast<size_t>(blocks > 0 ? blocks : 1));
    std::iota(tables_[0].begin(), tables_[0].end(), 0);
  }
  // False when the memory could not be reserved.
  bool ok() const { return storage_ != nullptr; }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t kv_dim() const { return storage_->shape().kv_dim(); }
  KvStorage& storage() { return *storage_; }
  // The block tables of its single layer group.
  std::span<const std::vector<BlockId>> tables() const { return tables_; }
  static size_t bytes_needed(int32_t n_layer, int32_t n_ctx, int32_t kv_dim) {
    return 2ull * n_layer * n_ctx * kv_dim * sizeof(uint16_t);
  }

 private:
  int32_t n_ctx_;
  std::unique_ptr<KvStorage> storage_;
  std::vector<std::vector<BlockId>> tables_ = std::vector<std::vector<BlockId>>(1);
};

}  // namespace pagoda
