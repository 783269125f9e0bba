#include "kv/kv_storage.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/matmul/dot_kernels.h"

namespace pagoda {

Result<KvType> parse_kv_type(const std::string& name) {
  if (name == "f16" || name == "fp16" || name == "auto") return KvType::kF16;
  if (name == "int8" || name == "i8" || name == "q8" || name == "q8_0") return KvType::kI8;
  return error("unknown KV cache type '{}' (use f16 or int8)", name);
}

const char* kv_type_name(KvType t) { return t == KvType::kF16 ? "f16" : "int8"; }

KvStorage::~KvStorage() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

size_t KvStorage::bytes_per_block(const KvShape& s) {
  if (s.n_layer <= 0 || s.block_size <= 0 || s.n_kv_heads <= 0 || s.head_dim <= 0) return 0;
  if (!s.windows.empty() && static_cast<int32_t>(s.windows.size()) != s.n_layer) return 0;
  return 2ull * static_cast<size_t>(s.layout().layers_per_block()) * static_cast<size_t>(s.block_size) *
         static_cast<size_t>(s.row_bytes());
}

int32_t KvStorage::blocks_for_bytes(const KvShape& s, size_t bytes) {
  const size_t per = bytes_per_block(s);
  if (per == 0) return 0;
  const size_t n = bytes / per;
  return n > static_cast<size_t>(INT32_MAX / 2) ? INT32_MAX / 2 : static_cast<int32_t>(n);
}

Result<std::unique_ptr<KvStorage>> KvStorage::create(const KvShape& shape, int32_t num_blocks) {
  if (shape.n_layer <= 0 || shape.n_kv_heads <= 0 || shape.head_dim <= 0 ||
      int64_t{shape.n_kv_heads} * shape.head_dim > INT32_MAX)
    return error("KV cache: bad shape ({} layers, {} heads of {})", shape.n_layer, shape.n_kv_heads, shape.head_dim);
  if (!shape.windows.empty() && static_cast<int32_t>(shape.windows.size()) != shape.n_layer)
    return error("KV cache: {} layer windows for {} layers", shape.windows.size(), shape.n_layer);
  if (shape.block_size <= 0 || (shape.block_size & (shape.block_size - 1)) != 0 || shape.block_size > 1024)
    return error("KV cache: block size {} must be a power of two between 1 and 1024", shape.block_size);
  if (num_blocks <= 0)
    return error("KV cache: the memory budget holds no block of {} tokens ({} bytes each; raise --kv-cache-memory)", shape.block_size,
                 bytes_per_block(shape));
  // A total that wraps around size_t would reserve too little and leave blocks outside the mapping.
  const KvLayout layout = shape.layout();
  size_t total = 2;
  for (const int64_t f :
       {int64_t{layout.layers_per_block()}, shape.row_bytes(), int64_t{shape.block_size}, int64_t{num_blocks}}) {
    if (total > std::numeric_limits<size_t>::max() / static_cast<size_t>(f))
      return error("KV cache: {} blocks of {} layers x {} tokens x {} bytes exceed the address space", num_blocks,
                   layout.layers_per_block(), shape.block_size, shape.row_bytes());
    total *= static_cast<size_t>(f);
  }
  std::unique_ptr<KvStorage> s(new KvStorage());
  s->shape_ = shape;
  s->layout_ = layout;
  s->num_blocks_ = num_blocks;
  while ((1 << s->block_shift_) < shape.block_size) ++s->block_shift_;
  s->block_bytes_ = static_cast<size_t>(shape.block_size) * static_cast<size_t>(shape.row_bytes());
  s->layer_bytes_ = static_cast<size_t>(num_blocks) * s->block_bytes_;
  s->bytes_ = total;
  s->f16_convert_ = dot_kernels(DType::F16).quantize_x;
  void* p = mmap(nullptr, s->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return error("KV cache: cannot reserve {:.1f} MiB ({}); lower --kv-cache-memory", s->bytes_ / 1048576.0,
                 std::strerror(errno));
  s->base_ = static_cast<uint8_t*>(p);
  return s;
}

PagedKv KvStorage::layer(int32_t l) const {
  PagedKv kv;
  const uint8_t* k = base_ + static_cast<size_t>(layout_.slot_of(l)) * 2 * layer_bytes_;
  kv.k = k;
  kv.v = k + layer_bytes_;
  kv.block_stride = static_cast<int64_t>(block_bytes_);
  kv.row_stride = shape_.row_bytes();
  kv.block_shift = block_shift_;
  kv.type = shape_.type;
  return kv;
}

void KvStorage::store_row(uint8_t* dst, const float* x) const {
  const int32_t hd = shape_.head_dim;
  if (shape_.type == KvType::kF16) {
    // The F16 weights' activation conversion of the matmul kernels, vectorized where the
    // CPU has F16C: round to nearest even as numpy's astype (a NaN keeps its payload).
    // Serial, it was a fifth of the token-wise work of a prefill.
    f16_convert_(x, dst, shape_.kv_dim());
    return;
  }
  // Per head: d = max|x| / 127, q = round(x / d), so the largest value is exact.
  for (int32_t h = 0; h < shape_.n_kv_heads; ++h, dst += 4 + hd, x += hd) {
    float amax = 0.0f;
    for (int32_t i = 0; i < hd; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    std::memcpy(dst, &d, sizeof(d));
    int8_t* q = reinterpret_cast<int8_t*>(dst + 4);
    for (int32_t i = 0; i < hd; ++i) q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
  }
}

void KvStorage::store(int32_t l, BlockId b, int32_t slot, const float* k, const float* v) {
  store_row(row(l, 0, b, slot), k);
  store_row(row(l, 1, b, slot), v);
}

void KvStorage::prefault(int32_t first, int32_t end) {
  const size_t page = 4096;
  volatile uint8_t* p = base_;
  if (end < 0) end = shape_.n_layer;
  std::vector<bool> slots(static_cast<size_t>(layout_.layers_per_block()), false);
  for (int32_t l = std::max(0, first); l < std::min(end, shape_.n_layer); ++l)
    slots[static_cast<size_t>(layout_.slot_of(l))] = true;
  // A layer slot's K and V arrays are one contiguous range.
  for (size_t s = 0; s < slots.size(); ++s) {
    if (!slots[s]) continue;
    const size_t begin = s * 2 * layer_bytes_, stop = std::min(bytes_, begin + 2 * layer_bytes_);
    for (size_t off = begin; off < stop; off += page) p[off] = 0;
  }
}

void KvStorage::copy_block(BlockId src, BlockId dst, int32_t n_rows) {
  const size_t n = static_cast<size_t>(n_rows) * static_cast<size_t>(shape_.row_bytes());
  for (int32_t l = 0; l < layout_.layers_per_block(); ++l)
    for (int kv = 0; kv < 2; ++kv) std::memcpy(slot_row(l, kv, dst, 0), slot_row(l, kv, src, 0), n);
  if (copy_listener_) copy_listener_(src, dst, n_rows);
}

void KvStorage::copy_row(BlockId src, int32_t src_slot, BlockId dst, int32_t dst_slot) {
  const auto n = static_cast<size_t>(shape_.row_bytes());
  for (int32_t l = 0; l < layout_.layers_per_block(); ++l)
    for (int kv = 0; kv < 2; ++kv) std::memmove(slot_row(l, kv, dst, dst_slot), slot_row(l, kv, src, src_slot), n);
}

}  // namespace pagoda
