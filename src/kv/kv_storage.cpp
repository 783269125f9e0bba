#include "kv/kv_storage.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace pagoda {

KvStorage::~KvStorage() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

size_t KvStorage::bytes_per_block(const KvShape& s) {
  return 2ull * static_cast<size_t>(s.n_layer) * static_cast<size_t>(s.block_size) * static_cast<size_t>(s.kv_dim) *
         sizeof(uint16_t);
}

int32_t KvStorage::blocks_for_bytes(const KvShape& s, size_t bytes) {
  const size_t per = bytes_per_block(s);
  if (per == 0) return 0;
  const size_t n = bytes / per;
  return n > static_cast<size_t>(INT32_MAX / 2) ? INT32_MAX / 2 : static_cast<int32_t>(n);
}

Result<std::unique_ptr<KvStorage>> KvStorage::create(const KvShape& shape, int32_t num_blocks) {
  if (shape.n_layer <= 0 || shape.kv_dim <= 0) return error("KV cache: bad shape ({} layers, width {})", shape.n_layer, shape.kv_dim);
  if (shape.block_size <= 0 || (shape.block_size & (shape.block_size - 1)) != 0 || shape.block_size > 1024)
    return error("KV cache: block size {} must be a power of two between 1 and 1024", shape.block_size);
  if (num_blocks <= 0) return error("KV cache: the memory budget holds no block of {} tokens ({} bytes each)",
                                    shape.block_size, bytes_per_block(shape));
  // A total that wraps around size_t would reserve too little and leave blocks outside the mapping.
  size_t total = 2 * sizeof(uint16_t);
  for (const int32_t f : {shape.n_layer, shape.kv_dim, shape.block_size, num_blocks}) {
    if (total > std::numeric_limits<size_t>::max() / static_cast<size_t>(f))
      return error("KV cache: {} blocks of {} layers x {} tokens x width {} exceed the address space", num_blocks,
                   shape.n_layer, shape.block_size, shape.kv_dim);
    total *= static_cast<size_t>(f);
  }
  std::unique_ptr<KvStorage> s(new KvStorage());
  s->shape_ = shape;
  s->num_blocks_ = num_blocks;
  while ((1 << s->block_shift_) < shape.block_size) ++s->block_shift_;
  s->block_elems_ = static_cast<size_t>(shape.block_size) * shape.kv_dim;
  s->layer_elems_ = static_cast<size_t>(num_blocks) * s->block_elems_;
  s->bytes_ = bytes_per_block(shape) * static_cast<size_t>(num_blocks);
  void* p = mmap(nullptr, s->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return error("KV cache: cannot reserve {:.1f} MiB ({}); lower --kv-cache-memory", s->bytes_ / 1048576.0,
                 std::strerror(errno));
  s->base_ = static_cast<uint16_t*>(p);
  return s;
}

PagedKv KvStorage::layer(int32_t l) const {
  PagedKv kv;
  kv.k = base_ + static_cast<size_t>(l) * 2 * layer_elems_;
  kv.v = kv.k + layer_elems_;
  kv.block_stride = static_cast<int64_t>(block_elems_);
  kv.row_stride = shape_.kv_dim;
  kv.block_shift = block_shift_;
  return kv;
}

void KvStorage::copy_block(BlockId src, BlockId dst, int32_t n_rows) {
  const size_t n = static_cast<size_t>(n_rows) * shape_.kv_dim * sizeof(uint16_t);
  for (int32_t l = 0; l < shape_.n_layer; ++l)
    for (int kv = 0; kv < 2; ++kv) std::memcpy(row(l, kv, dst, 0), row(l, kv, src, 0), n);
}

}  // namespace pagoda
