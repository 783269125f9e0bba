#include "plan/memory_fit.h"

#include <algorithm>

namespace pagoda {

int32_t largest_batch(const MemoryPlan& m, int32_t max_num_seqs, size_t budget) {
  const size_t fixed = m.running() - m.kv.bytes;
  if (budget <= fixed || budget < m.loading() || max_num_seqs <= 0 || m.kv.wanted == 0) return 0;
  const size_t per_seq = m.kv.wanted / static_cast<size_t>(max_num_seqs);
  return per_seq == 0 ? 0 : static_cast<int32_t>(std::min<size_t>((budget - fixed) / per_seq, 1 << 20));
}

int64_t longest_context(const MemoryPlanner& plan, EngineConfig ec, int32_t batch, size_t budget, int64_t cap) {
  ec.scheduler.max_num_seqs = std::max(1, batch);
  ec.kv_cache_bytes = 0;
  auto fits = [&](int64_t ctx) {
    ec.max_model_len = static_cast<int32_t>(ctx);
    auto m = plan(ec);
    return m && m->total() <= budget;
  };
  int64_t lo = 0, hi = cap;
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace pagoda
