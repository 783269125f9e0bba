// The largest configuration that fits a memory budget, found through the memory plan
// itself (memory_plan.h) so that `pagoda plan`'s "fits" line and `pagoda doctor`'s fixes
// are the configurations the engine would really hold in that memory.
//
// Cost: largest_batch is arithmetic on one plan; longest_context bisects, about 20 plans.
// Thread-safety: pure functions (the planner given is called on the caller's thread).
#pragma once

#include <cstdint>
#include <functional>

#include "base/status.h"
#include "engine/engine.h"
#include "plan/memory_plan.h"

namespace pagoda {

// A memory plan for another configuration of the same model and file.
using MemoryPlanner = std::function<Result<MemoryPlan>(const EngineConfig&)>;

// The most sequences of the plan's context whose KV, with everything else, fits in
// `budget` (the plan was made for max_num_seqs sequences); 0 when not even the weights do.
int32_t largest_batch(const MemoryPlan& m, int32_t max_num_seqs, size_t budget);

// The longest context `batch` sequences may each have within `budget`, at most `cap`
// (KV sized for them, not by --kv-cache-memory); 0 when none does.
int64_t longest_context(const MemoryPlanner& plan, EngineConfig ec, int32_t batch, size_t budget, int64_t cap);

}  // namespace pagoda
