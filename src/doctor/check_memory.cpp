// Memory: the configuration's total (memory_plan.h) against the budget; when it does not
// fit, the change that costs the least and makes it fit, tried through the plan itself.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "doctor/checks.h"

namespace pagoda {

namespace {

double mib(size_t b) { return static_cast<double>(b) / (1 << 20); }

std::string parts(const MemoryPlan& m) {
  return fmt::format("weights {:.0f} MiB, KV cache {:.0f} MiB ({} blocks), metadata and tokenizer {:.0f} MiB, "
                     "scratch {:.0f} MiB, runtime {:.0f} MiB",
                     mib(m.weights_resident), mib(m.kv.bytes), m.kv.blocks, mib(m.metadata + m.tokenizer),
                     mib(m.model_scratch + m.engine_scratch), mib(m.runtime));
}

struct Fix {
  std::string flags;
  size_t total = 0;
};

// The changes in the order of what they cost the user: int8 KV (a small quality cost),
// fewer sequences at once (throughput), a shorter context (capability), 4-bit weights
// (quality), each alone and then int8 KV with the shorter context.
std::vector<Fix> fixes(const MemoryFacts& m) {
  std::vector<Fix> out;
  const EngineConfig& ec = m.config;
  auto try_config = [&](const EngineConfig& e, std::string flags) {
    auto p = m.replan(e);
    if (p && p->total() <= m.budget) out.push_back({std::move(flags), p->total()});
  };
  if (ec.kv_type != KvType::kI8) {
    EngineConfig e = ec;
    e.kv_type = KvType::kI8;
    try_config(e, "--kv-cache-dtype int8");
  }
  if (ec.kv_cache_bytes == 0 && ec.scheduler.max_num_seqs > 1) {
    const int32_t seqs = largest_batch(m.plan, ec.scheduler.max_num_seqs, m.budget);
    if (seqs >= 1 && seqs < ec.scheduler.max_num_seqs) {
      EngineConfig e = ec;
      e.scheduler.max_num_seqs = seqs;
      try_config(e, fmt::format("--max-num-seqs {}", seqs));
    }
  }
  if (ec.kv_cache_bytes > 0) {
    // An explicit KV size: the part of the budget the rest leaves.
    const size_t rest = m.plan.total() - m.plan.kv.bytes;
    if (m.budget > rest + (size_t{16} << 20)) {
      EngineConfig e = ec;
      e.kv_cache_bytes = (m.budget - rest) / (1 << 20) * (1 << 20);
      try_config(e, fmt::format("--kv-cache-memory {}MiB", e.kv_cache_bytes >> 20));
    }
  }
  std::vector<KvType> kvs = {ec.kv_type};
  if (ec.kv_type != KvType::kI8) kvs.push_back(KvType::kI8);
  for (KvType kv : kvs) {
    EngineConfig e = ec;
    e.kv_type = kv;
    const int64_t ctx = longest_context(m.replan, e, ec.scheduler.max_num_seqs, m.budget, ec.max_model_len);
    if (ctx >= 256 && ctx < ec.max_model_len) {
      // Round down to a multiple of 256 a user would type.
      const int64_t c = ctx / 256 * 256;
      e.max_model_len = static_cast<int32_t>(c);
      e.kv_cache_bytes = 0;
      try_config(e, kv != ec.kv_type ? fmt::format("--kv-cache-dtype int8 -c {}", c) : fmt::format("-c {}", c));
    }
  }
  if (m.bits_per_weight > 5.0 && m.params > 0) {
    const double q4 = m.params * 4.5 / 8;
    const double total = static_cast<double>(m.plan.total()) - static_cast<double>(m.plan.weights_resident) + q4;
    if (total <= static_cast<double>(m.budget))
      out.push_back({"pagoda quantize IN OUT --type Q4_K --method awq (then run the 4-bit file)", static_cast<size_t>(total)});
  }
  return out;
}

}  // namespace

void check_memory(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!f.memory) return;
  const MemoryFacts& m = *f.memory;
  const MemoryPlan& p = m.plan;
  const char* against = m.budget_given ? "the --memory-budget" : "the memory available now";
  if (p.total() > m.budget) {
    Finding x;
    x.id = "memory.does_not_fit";
    x.severity = Severity::kError;
    x.what = fmt::format("this configuration needs {:.0f} MiB at its peak, {} is {:.0f} MiB", mib(p.total()), against,
                         mib(m.budget));
    x.why = fmt::format("{}; the engine would fail to load or be killed by the kernel's OOM killer when it runs short", parts(p));
    const std::vector<Fix> fx = fixes(m);
    if (fx.empty()) {
      x.fix = fmt::format("a smaller model: the weights alone take {:.0f} MiB", mib(p.weights_resident));
    } else {
      x.fix = fmt::format("{} (total {:.0f} MiB)", fx.front().flags, mib(fx.front().total));
      for (size_t i = 1; i < fx.size(); ++i)
        x.fix += fmt::format("; or {} ({:.0f} MiB)", fx[i].flags, mib(fx[i].total));
    }
    nlohmann::json alts = nlohmann::json::array();
    for (const Fix& a : fx) alts.push_back({{"flags", a.flags}, {"total_bytes", a.total}});
    x.data = {{"total_bytes", p.total()}, {"budget_bytes", m.budget}, {"weights_bytes", p.weights_resident},
              {"kv_bytes", p.kv.bytes}, {"fixes", alts}};
    out.push_back(std::move(x));
  }
  if (m.config.max_model_len > 0 && p.kv.max_model_len < m.config.max_model_len) {
    Finding x;
    x.id = "memory.context_cut";
    x.severity = Severity::kWarning;
    x.what = fmt::format("the KV cache holds {} tokens, less than one sequence of the {} asked", p.kv.max_model_len,
                         m.config.max_model_len);
    x.why = p.kv.capped ? "without --kv-cache-memory the engine sizes the KV cache to at most a quarter of the memory "
                          "available, and that is not enough for one full-length sequence; longer requests are refused"
                        : "the --kv-cache-memory given is smaller than one full-length sequence's KV; longer requests "
                          "are refused";
    x.fix = fmt::format("-c {} (what fits), --kv-cache-dtype int8 (half the bytes per token), or a larger "
                        "--kv-cache-memory", p.kv.max_model_len);
    x.data = {{"kv_tokens", p.kv.max_model_len}, {"ctx", m.config.max_model_len}, {"capped", p.kv.capped}};
    out.push_back(std::move(x));
  }
}

}  // namespace pagoda
