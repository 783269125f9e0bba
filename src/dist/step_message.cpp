#include "dist/step_message.h"

#include <cstring>

namespace pagoda {
namespace {

class Writer {
 public:
  void i64(int64_t v) { put(&v, sizeof v); }
  void i32s(std::span<const int32_t> v) {
    i64(static_cast<int64_t>(v.size()));
    put(v.data(), v.size_bytes());
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  void put(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, p, n);
  }
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool i64(int64_t& v) { return get(&v, sizeof v); }
  bool i32(int32_t& v) {
    int64_t w = 0;
    if (!i64(w) || w < INT32_MIN || w > INT32_MAX) return false;
    v = static_cast<int32_t>(w);
    return true;
  }
  bool i32s(std::vector<int32_t>& v) {
    int64_t n = 0;
    if (!i64(n) || n < 0 || static_cast<uint64_t>(n) > (b_.size() - at_) / sizeof(int32_t)) return false;
    v.resize(static_cast<size_t>(n));
    return get(v.data(), v.size() * sizeof(int32_t));
  }
  bool done() const { return at_ == b_.size(); }

 private:
  bool get(void* p, size_t n) {
    if (n > b_.size() - at_) return false;
    if (n > 0) std::memcpy(p, b_.data() + at_, n);
    at_ += n;
    return true;
  }
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

Status truncated(const char* what) { return error("a {} message from rank 0 is malformed or truncated", what); }

}  // namespace

std::vector<uint8_t> encode_setup(const KvShape& shape, int32_t num_blocks) {
  Writer w;
  for (int64_t v : {int64_t{shape.n_layer}, int64_t{shape.n_kv_heads}, int64_t{shape.head_dim},
                    int64_t{shape.block_size}, static_cast<int64_t>(shape.type), int64_t{num_blocks}})
    w.i64(v);
  w.i32s(shape.windows);
  return w.take();
}

Status decode_setup(std::span<const uint8_t> bytes, KvShape& shape, int32_t& num_blocks) {
  Reader r(bytes);
  int32_t type = 0;
  if (!r.i32(shape.n_layer) || !r.i32(shape.n_kv_heads) || !r.i32(shape.head_dim) || !r.i32(shape.block_size) ||
      !r.i32(type) || !r.i32(num_blocks) || !r.i32s(shape.windows) || !r.done())
    return truncated("setup");
  if (type != static_cast<int32_t>(KvType::kF16) && type != static_cast<int32_t>(KvType::kI8))
    return error("rank 0 asked for KV type {}, which this build does not know", type);
  shape.type = static_cast<KvType>(type);
  return Status::ok();
}

std::vector<uint8_t> encode_step(std::span<const KvCopy> copies, const Batch& batch) {
  Writer w;
  w.i64(static_cast<int64_t>(copies.size()));
  for (const KvCopy& c : copies) {
    w.i64(c.src);
    w.i64(c.dst);
    w.i64(c.rows);
  }
  w.i32s(batch.tokens);
  w.i64(batch.top_candidates);
  w.i64(static_cast<int64_t>(batch.seqs.size()));
  for (const BatchSeq& s : batch.seqs) {
    for (int64_t v : {int64_t{s.n_tokens}, int64_t{s.pos0}, int64_t{s.logits}, int64_t{s.logit_rows},
                      static_cast<int64_t>(s.pool), int64_t{s.segment_b}, static_cast<int64_t>(s.tables.size())})
      w.i64(v);
    // Only the blocks the step reaches: a table covers the whole sequence so far.
    for (const std::vector<BlockId>& t : s.tables) w.i32s(t);
  }
  return w.take();
}

Status decode_step(std::span<const uint8_t> bytes, StepPlan& plan) {
  Reader r(bytes);
  plan.copies.clear();
  plan.batch.clear();
  int64_t n = 0;
  if (!r.i64(n) || n < 0 || n > (int64_t{1} << 24)) return truncated("step");
  plan.copies.resize(static_cast<size_t>(n));
  for (KvCopy& c : plan.copies)
    if (!r.i32(c.src) || !r.i32(c.dst) || !r.i32(c.rows)) return truncated("step");
  if (!r.i32s(plan.batch.tokens) || !r.i32(plan.batch.top_candidates) || plan.batch.top_candidates < 0 || !r.i64(n) ||
      n < 0 || n > (int64_t{1} << 24))
    return truncated("step");
  plan.tables.assign(static_cast<size_t>(n), {});
  plan.batch.seqs.resize(static_cast<size_t>(n));
  for (size_t i = 0; i < plan.batch.seqs.size(); ++i) {
    BatchSeq& s = plan.batch.seqs[i];
    int32_t logits = 0, pool = 0, groups = 0;
    if (!r.i32(s.n_tokens) || !r.i32(s.pos0) || !r.i32(logits) || !r.i32(s.logit_rows) || !r.i32(pool) ||
        !r.i32(s.segment_b) || !r.i32(groups) || groups < 0 || groups > 64 || pool < 0 ||
        pool > static_cast<int32_t>(Pooling::kRank) || s.segment_b < 0)
      return truncated("step");
    s.logits = logits != 0;
    s.pool = static_cast<Pooling>(pool);
    plan.tables[i].resize(static_cast<size_t>(groups));
    for (auto& t : plan.tables[i])
      if (!r.i32s(t)) return truncated("step");
    s.tables = plan.tables[i];
  }
  if (!r.done()) return truncated("step");
  return Status::ok();
}

}  // namespace pagoda
