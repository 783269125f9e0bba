#include "server/metrics.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/system_memory.h"

namespace pagoda {
namespace {

std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
// A grammar's mask of one row: cached states take microseconds, a cold one milliseconds.
std::vector<double> mask_buckets() {
  return {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1};
}
std::vector<double> length_buckets() { return {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000}; }

std::string fmt_double(double v) { return fmt::format("{}", v); }

}  // namespace

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, fmt_double(bounds_[i]), cum);
  }
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, count_);
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, fmt_double(sum_));
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

Metrics::Metrics(std::string model_name)
    : labels_(fmt::format("model_name=\"{}\"", escape_label_value(model_name))),
      ttft_(latency_buckets()),
      itl_(latency_buckets()),
      e2e_(latency_buckets()),
      prompt_len_(length_buckets()),
      gen_len_(length_buckets()),
      mask_(mask_buckets()) {}

void Metrics::count_constrained_request(const std::string& kind) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [k, n] : constrained_requests_)
    if (k == kind) {
      ++n;
      return;
    }
  constrained_requests_.emplace_back(kind, 1);
}

void Metrics::observe_mask(double s) {
  std::lock_guard<std::mutex> l(mu_);
  mask_.observe(s);
}

void Metrics::observe_ttft(double s) {
  std::lock_guard<std::mutex> l(mu_);
  ttft_.observe(s);
}

void Metrics::observe_inter_token(double s) {
  std::lock_guard<std::mutex> l(mu_);
  itl_.observe(s);
}

void Metrics::observe_request(double e2e_s, int64_t prompt_tokens, int64_t generation_tokens, const std::string& finish) {
  std::lock_guard<std::mutex> l(mu_);
  e2e_.observe(e2e_s);
  prompt_len_.observe(static_cast<double>(prompt_tokens));
  gen_len_.observe(static_cast<double>(generation_tokens));
  if (finish == "stop") ++finished_stop_;
  else if (finish == "length") ++finished_length_;
  else ++finished_abort_;
}

void Metrics::count_prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  prompt_tokens_ += n;
}

void Metrics::count_generation_tokens(int64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  generation_tokens_ += n;
}

void Metrics::count_http(int status) {
  std::lock_guard<std::mutex> l(mu_);
  if (status >= 500) ++http_5xx_;
  else if (status >= 400) ++http_4xx_;
  else ++http_2xx_;
}

void Metrics::count_embeddings(int64_t inputs, int64_t tokens) {
  std::lock_guard<std::mutex> l(mu_);
  embedding_inputs_ += inputs;
  embedding_tokens_ += tokens;
}

void Metrics::count_rerank(int64_t documents, int64_t tokens) {
  std::lock_guard<std::mutex> l(mu_);
  ++rerank_requests_;
  rerank_documents_ += documents;
  rerank_tokens_ += tokens;
}

void Metrics::count_compression(int64_t origin_tokens, int64_t compressed_tokens, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  ++compressions_;
  compress_origin_tokens_ += origin_tokens;
  compress_kept_tokens_ += compressed_tokens;
  compress_seconds_ += seconds;
}

void Metrics::set_engine(const EngineGauges& g) {
  std::lock_guard<std::mutex> l(mu_);
  engine_ = g;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string o;
  auto gauge = [&](const char* name, const char* help, double v) {
    o += fmt::format("# HELP pagoda:{} {}\n# TYPE pagoda:{} gauge\npagoda:{}{{{}}} {}\n", name, help, name, name, labels_,
                     fmt_double(v));
  };
  auto counter = [&](const char* name, const char* help, double v, const std::string& extra = "") {
    o += fmt::format("# HELP pagoda:{} {}\n# TYPE pagoda:{} counter\npagoda:{}_total{{{}{}}} {}\n", name, help, name, name,
                     labels_, extra, fmt_double(v));
  };
  auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    o += fmt::format("# HELP pagoda:{} {}\n# TYPE pagoda:{} histogram\n", name, help, name);
    h.render(o, fmt::format("pagoda:{}", name), labels_);
  };
  gauge("num_requests_running", "Requests in the running batch.", static_cast<double>(engine_.running));
  gauge("num_requests_waiting", "Requests waiting to be scheduled.", static_cast<double>(engine_.waiting));
  gauge("kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = 100%).", engine_.kv_usage);
  gauge("kv_cache_blocks", "KV cache blocks the engine holds.", static_cast<double>(engine_.kv_blocks));
  gauge("kv_cache_block_size", "Tokens per KV cache block.", static_cast<double>(engine_.block_size));
  gauge("kv_cache_bytes", "Bytes of the KV cache.", static_cast<double>(engine_.kv_bytes));
  gauge("max_num_seqs", "Sequences the scheduler runs at once at most.", static_cast<double>(engine_.max_num_seqs));
  gauge("process_resident_bytes", "Resident memory of the server process (VmRSS).",
        static_cast<double>(resident_bytes()));
  counter("num_preemptions", "Preemptions (a sequence's KV blocks taken back to be recomputed later).",
          static_cast<double>(engine_.preemptions));
  counter("prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", static_cast<double>(engine_.prefix_queries));
  counter("prefix_cache_hits", "Prompt tokens found in the prefix cache.", static_cast<double>(engine_.prefix_hits));
  counter("embedding_requests", "Embedding inputs embedded (one per input of /v1/embeddings).",
          static_cast<double>(embedding_inputs_));
  counter("embedding_prompt_tokens", "Tokens of the embedded inputs.", static_cast<double>(embedding_tokens_));
  counter("rerank_requests", "Rerank requests answered.", static_cast<double>(rerank_requests_));
  counter("rerank_documents", "Documents scored by rerank requests.", static_cast<double>(rerank_documents_));
  counter("rerank_prompt_tokens", "Tokens of the reranked (query, document) pairs.", static_cast<double>(rerank_tokens_));
  counter("compress_requests", "Prompts compressed (/v1/compress and compress_prompt, one per text).",
          static_cast<double>(compressions_));
  counter("compress_origin_tokens", "Scorer tokens of the prompts before compression.",
          static_cast<double>(compress_origin_tokens_));
  counter("compress_kept_tokens", "Scorer tokens of the prompts after compression.",
          static_cast<double>(compress_kept_tokens_));
  counter("compress_seconds", "Seconds spent compressing prompts.", compress_seconds_);
  counter("spec_decode_num_drafts", "Speculative decoding: drafts verified (one per sequence and step).",
          static_cast<double>(engine_.spec_drafts));
  counter("spec_decode_num_draft_tokens", "Speculative decoding: draft tokens verified.",
          static_cast<double>(engine_.spec_drafted));
  counter("spec_decode_num_accepted_tokens", "Speculative decoding: draft tokens accepted.",
          static_cast<double>(engine_.spec_accepted));
  counter("spec_decode_num_branch_accepted_tokens",
          "Speculative decoding: accepted draft tokens a tree took from a branch other than its first.",
          static_cast<double>(engine_.spec_branch_accepted));
  counter("spec_decode_draft_seconds", "Speculative decoding: time spent proposing drafts (a draft model's forwards).",
          engine_.spec_draft_s);
  counter("prompt_tokens", "Prompt tokens processed.", static_cast<double>(prompt_tokens_));
  counter("generation_tokens", "Tokens generated.", static_cast<double>(generation_tokens_));
  o += "# HELP pagoda:request_success Finished requests by finish reason.\n# TYPE pagoda:request_success counter\n";
  o += fmt::format("pagoda:request_success_total{{{},finished_reason=\"stop\"}} {}\n", labels_, finished_stop_);
  o += fmt::format("pagoda:request_success_total{{{},finished_reason=\"length\"}} {}\n", labels_, finished_length_);
  o += fmt::format("pagoda:request_success_total{{{},finished_reason=\"abort\"}} {}\n", labels_, finished_abort_);
  o += "# HELP pagoda:http_responses HTTP responses by status class.\n# TYPE pagoda:http_responses counter\n";
  o += fmt::format("pagoda:http_responses_total{{{},status=\"2xx\"}} {}\n", labels_, http_2xx_);
  o += fmt::format("pagoda:http_responses_total{{{},status=\"4xx\"}} {}\n", labels_, http_4xx_);
  o += fmt::format("pagoda:http_responses_total{{{},status=\"5xx\"}} {}\n", labels_, http_5xx_);
  histogram("time_to_first_token_seconds", "Time to first token.", ttft_);
  histogram("inter_token_latency_seconds", "Time between consecutive tokens of a request.", itl_);
  histogram("e2e_request_latency_seconds", "Request latency from arrival to the last token.", e2e_);
  histogram("request_prompt_tokens", "Prompt length of finished requests.", prompt_len_);
  histogram("request_generation_tokens", "Generated length of finished requests.", gen_len_);
  o += "# HELP pagoda:structured_output_requests Requests with a constraint, by kind (structural_tag: tool calls).\n"
       "# TYPE pagoda:structured_output_requests counter\n";
  for (const auto& [kind, n] : constrained_requests_)
    o += fmt::format("pagoda:structured_output_requests_total{{{},kind=\"{}\"}} {}\n", labels_, kind, n);
  histogram("structured_output_mask_seconds", "Time to mask one constrained token's logits with its grammar.", mask_);
  if (engine_.experts > 0) {
    gauge("moe_experts", "Experts per MoE layer.", engine_.experts);
    gauge("moe_experts_used", "Experts each token runs per layer.", engine_.experts_used);
    counter("moe_steps", "Forward steps through the MoE layers.", static_cast<double>(engine_.moe_steps));
    counter("moe_routed_tokens", "Tokens routed through each MoE layer.", static_cast<double>(engine_.moe_tokens));
    counter("moe_routing_seconds", "Time spent routing (router matmul, softmax, top-k, grouping).", engine_.moe_routing_s);
    counter("moe_forward_seconds", "Time of the forward steps the routing time is part of.", engine_.moe_forward_s);
    // One observation per layer of its current state: how uneven the experts' load is.
    Histogram imbalance({1.1, 1.25, 1.5, 2, 3, 5, 10});
    double worst = 0, active = 0;
    for (double v : engine_.layer_imbalance) {
      imbalance.observe(v);
      worst = std::max(worst, v);
    }
    for (double v : engine_.layer_active_share) active += v;
    histogram("moe_layer_imbalance", "MoE layers by load imbalance (max / mean tokens per expert) since start.",
              imbalance);
    gauge("moe_max_imbalance", "The most uneven MoE layer's max / mean tokens per expert.", worst);
    gauge("moe_expert_active_share",
          "Mean over layers and experts of the share of steps an expert ran in (expert utilization).",
          engine_.layer_active_share.empty() ? 0.0 : active / static_cast<double>(engine_.layer_active_share.size()));
  }
  return o;
}

}  // namespace pagoda
