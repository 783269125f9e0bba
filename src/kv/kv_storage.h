// The memory behind the block pool: a block holds, for block_size positions, the K and V
// rows (n_kv_heads * head_dim values, FP16 or int8 with a scale per token and head;
// KvType, kernels/attention/attention.h) of the layers of one group (kv_layout.h): all layers for
// a model without sliding windows. Stored per layer slot, a K and a V array of
// num_blocks blocks each. Sized once at start-up from a
// memory budget and never grown, so running out of KV memory is a scheduling decision
// (queue or preempt), never an allocation failure mid-step. The pages are reserved with
// mmap and filled on first touch, so a generous budget costs only what is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/attention/attention.h"
#include "kv/block_pool.h"
#include "kv/kv_layout.h"

namespace pagoda {

struct KvShape {
  int32_t n_layer = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16; // positions per block, a power of two
  KvType type = KvType::kF16;
  // Per layer, its sliding window (0: full attention); empty: every layer full. Layers
  // with windows get groups of their own whose blocks are released as they leave the
  // window (KvLayout).
  std::vector<int32_t> windows;

  KvLayout layout() const { return windows.empty() ? KvLayout(n_layer) : KvLayout::from_windows(windows); }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  int64_t row_bytes() const { return kv_row_bytes(type, n_kv_heads, head_dim); }
};

// "f16" or "int8" (also "q8", "i8"), as the --kv-cache-dtype flag spells them.
Result<KvType> parse_kv_type(const std::string& name);
const char* kv_type_name(KvType t);

class KvStorage {
 public:
  ~KvStorage();
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  // Fails with a message (no crash) on a bad shape or when the memory cannot be reserved.
  static Result<std::unique_ptr<KvStorage>> create(const KvShape& shape, int32_t num_blocks);
  // Bytes one block takes (K and V of the layers of one group).
  static size_t bytes_per_block(const KvShape& shape);
  // Blocks that fit in `bytes`.
  static int32_t blocks_for_bytes(const KvShape& shape, size_t bytes);

  const KvShape& shape() const { return shape_; }
  const KvLayout& layout() const { return layout_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_shift() const { return block_shift_; }
  size_t bytes() const { return bytes_; }

  // Layer l as the attention kernel reads it.
  PagedKv layer(int32_t l) const;
  // Stores the key and value rows (kv_dim floats each) of one position: slot `slot` of
  // block b in layer l, converted to the storage type.
  void store(int32_t l, BlockId b, int32_t slot, const float* k, const float* v);
  // The raw K or V row of a slot (row_bytes() bytes), for tests and copies.
  uint8_t* k_row(int32_t l, BlockId b, int32_t slot) { return row(l, 0, b, slot); }
  uint8_t* v_row(int32_t l, BlockId b, int32_t slot) { return row(l, 1, b, slot); }
  // Touches every page now (first-touch faults otherwise land in the first steps that
  // reach them), as a server or benchmark wants before it starts timing. Only the slots of
  // layers [first, end) when given (a pipeline stage's; end -1: the last layer).
  void prefault(int32_t first = 0, int32_t end = -1);
  // Copies the first n_rows slots of block src to block dst in every layer it holds
  // (copy-on-write).
  void copy_block(BlockId src, BlockId dst, int32_t n_rows);
  // Copies one position's K and V rows (every layer the block holds) from slot src_slot
  // of block src to slot dst_slot of block dst: tree verification (engine/speculative.h)
  // moves the accepted branch's rows to the positions they were computed for. Not seen by
  // the copy listener (trees are not offered to a model split over processes).
  void copy_row(BlockId src, int32_t src_slot, BlockId dst, int32_t dst_slot);
  // Sees every copy_block: a model split over processes (src/dist) repeats rank 0's copies
  // in the other processes' storage before their next step.
  using CopyListener = std::function<void(BlockId src, BlockId dst, int32_t n_rows)>;
  void set_copy_listener(CopyListener listener) { copy_listener_ = std::move(listener); }

 private:
  KvStorage() = default;
  uint8_t* row(int32_t l, int kv, BlockId b, int32_t slot) { return slot_row(layout_.slot_of(l), kv, b, slot); }
  uint8_t* slot_row(int32_t layer_slot, int kv, BlockId b, int32_t slot) {
    return base_ + (static_cast<size_t>(layer_slot) * 2 + kv) * layer_bytes_ + static_cast<size_t>(b) * block_bytes_ +
           static_cast<size_t>(slot) * static_cast<size_t>(shape_.row_bytes());
  }
  void store_row(uint8_t* dst, const float* x) const;

  KvShape shape_;
  KvLayout layout_;
  int32_t num_blocks_ = 0;
  int32_t block_shift_ = 0;
  size_t block_bytes_ = 0;  // block_size rows
  size_t layer_bytes_ = 0;  // num_blocks blocks of one layer slot
  size_t bytes_ = 0;
  uint8_t* base_ = nullptr;
  void (*f16_convert_)(const float* src, void* dst, int64_t n) = nullptr;
  CopyListener copy_listener_;
};

}  // namespace pagoda
