// A running server, from its /metrics: how often the KV budget forced a sequence out to be
// recomputed later (preemption), and whether the prefix cache saves prompt work.
#include <fmt/format.h>

#include <algorithm>

#include "doctor/checks.h"

namespace pagoda {

void check_server(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!f.server) return;
  const MetricSamples& m = f.server->metrics;
  const double requests = m.sum("pagoda:request_success_total").value_or(0);
  const double preemptions = m.sum("pagoda:num_preemptions_total").value_or(0);
  const double blocks = m.sum("pagoda:kv_cache_blocks").value_or(0);
  const double kv_bytes = m.sum("pagoda:kv_cache_bytes").value_or(0);
  const double max_seqs = m.sum("pagoda:max_num_seqs").value_or(0);
  const double running = m.sum("pagoda:num_requests_running").value_or(0);
  if (preemptions >= 3 && preemptions >= kPreemptedShare * std::max(1.0, requests + running)) {
    Finding x;
    x.id = "server.preemption";
    x.severity = Severity::kWarning;
    x.what = fmt::format("{:.0f} preemptions for {:.0f} finished requests", preemptions, requests);
    x.why = fmt::format("the KV cache ({:.0f} blocks, {:.0f} MiB) runs out while sequences grow, so the last admitted "
                        "is pushed out and its whole context computed again later: latency spikes and wasted prefill",
                        blocks, kv_bytes / (1 << 20));
    x.fix = "--kv-cache-dtype int8 (twice the tokens in the same memory), a larger --kv-cache-memory";
    if (max_seqs > 1) x.fix += fmt::format(", or --max-num-seqs below {:.0f}", max_seqs);
    x.data = {{"preemptions", preemptions}, {"requests", requests}, {"kv_cache_blocks", blocks},
              {"kv_cache_bytes", kv_bytes}, {"max_num_seqs", max_seqs}};
    out.push_back(std::move(x));
  }
  const double queries = m.sum("pagoda:prefix_cache_queries_total").value_or(0);
  const double hits = m.sum("pagoda:prefix_cache_hits_total").value_or(0);
  const double prompt = m.sum("pagoda:prompt_tokens_total").value_or(0);
  if (queries == 0 && prompt >= kPrefixMinQueryTokens && requests >= 2) {
    Finding x;
    x.id = "server.prefix_cache_off";
    x.severity = Severity::kInfo;
    x.what = fmt::format("prefix caching looked up none of {:.0f} prompt tokens", prompt);
    x.why = "the server runs with --no-prefix-caching (or a static scheduler): requests that share a system prompt, "
            "tools or a conversation's history compute it again each time";
    x.fix = "drop --no-prefix-caching";
    x.data = {{"prompt_tokens", prompt}};
    out.push_back(std::move(x));
  } else if (queries >= kPrefixMinQueryTokens && hits / queries < kPrefixLowHitRate) {
    Finding x;
    x.id = "server.prefix_cache_low_hit_rate";
    x.severity = Severity::kInfo;
    x.what = fmt::format("the prefix cache found {:.1f}% of {:.0f} prompt tokens", 100 * hits / queries, queries);
    x.why = "either the prompts share no prefix (nothing to gain), or what they share is not at the very start and "
            "identical to the token (a timestamp or request id first breaks every match), or cached blocks are "
            "evicted before they are asked for again (a small KV cache under load)";
    x.fix = "put the shared part (system prompt, tools, documents) first and byte-identical; a larger "
            "--kv-cache-memory keeps more of it";
    x.data = {{"queries", queries}, {"hits", hits}, {"hit_rate", hits / queries}};
    out.push_back(std::move(x));
  }
}

}  // namespace pagoda
