// Prometheus metrics of the server, in the text exposition format, named in the `pagoda:`
// namespace after vLLM's (vllm:time_to_first_token_seconds -> pagoda:time_to_first_token_seconds,
// ...), so dashboards built for vLLM need only the prefix changed. Counters and histograms
// are updated by the engine thread and the HTTP handlers; render() may run concurrently.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

// A label value as the exposition format quotes it: backslash, double quote and newline
// escaped (the model name comes from a file name or a flag, so it may hold any of them).
std::string escape_label_value(std::string_view v);

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // The _bucket/_sum/_count lines of metric `name` (caller holds the lock).
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct EngineGauges {
  size_t running = 0, waiting = 0;
  double kv_usage = 0;
  int64_t preemptions = 0;
  int64_t prefix_queries = 0, prefix_hits = 0;  // tokens
  // The engine's fixed sizes, so a reader (pagoda doctor) can tell what a preemption rate means.
  int32_t kv_blocks = 0, block_size = 0, max_num_seqs = 0;
  size_t kv_bytes = 0;
  // Speculative decoding (vLLM's spec_decode counters): draft tokens verified, accepted.
  int64_t spec_drafts = 0, spec_drafted = 0, spec_accepted = 0, spec_branch_accepted = 0;
  double spec_draft_s = 0;
  // A mixture-of-experts model's statistics since start (model/moe_stats.h); experts 0:
  // dense, none rendered. Per layer only summaries, so the label count stays bounded.
  int32_t experts = 0, experts_used = 0;
  uint64_t moe_steps = 0, moe_tokens = 0;  // tokens through each MoE layer
  double moe_routing_s = 0, moe_forward_s = 0;
  std::vector<double> layer_imbalance;     // max / mean tokens per expert, one per layer
  std::vector<double> layer_active_share;  // mean share of steps an expert ran in, one per layer
};

class Metrics {
 public:
  explicit Metrics(std::string model_name);

  void observe_ttft(double s);
  void observe_inter_token(double s);
  void observe_request(double e2e_s, int64_t prompt_tokens, int64_t generation_tokens, const std::string& finish);
  void count_prompt_tokens(int64_t n);
  void count_generation_tokens(int64_t n);
  void count_http(int status);
  // A /v1/embeddings request answered: its inputs and their tokens.
  void count_embeddings(int64_t inputs, int64_t tokens);
  // A /v1/rerank request answered: its documents and the tokens of its (query, document) pairs.
  void count_rerank(int64_t documents, int64_t tokens);
  // A prompt compressed (/v1/compress or compress_prompt): scorer tokens before and after,
  // and the seconds it took.
  void count_compression(int64_t origin_tokens, int64_t compressed_tokens, double seconds);
  // Structured output: a request that carried a constraint (of `kind`, e.g. "json_schema",
  // "structural_tag" for tool calls), and the mask time of each constrained token.
  void count_constrained_request(const std::string& kind);
  void observe_mask(double s);
  void set_engine(const EngineGauges& g);

  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::string labels_;
  Histogram ttft_, itl_, e2e_, prompt_len_, gen_len_, mask_;
  std::vector<std::pair<std::string, int64_t>> constrained_requests_;  // by kind, in first-seen order
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  int64_t embedding_inputs_ = 0, embedding_tokens_ = 0;
  int64_t rerank_requests_ = 0, rerank_documents_ = 0, rerank_tokens_ = 0;
  int64_t compressions_ = 0, compress_origin_tokens_ = 0, compress_kept_tokens_ = 0;
  double compress_seconds_ = 0;
  int64_t finished_stop_ = 0, finished_length_ = 0, finished_abort_ = 0;
  int64_t http_2xx_ = 0, http_4xx_ = 0, http_5xx_ = 0;
  EngineGauges engine_;
};

}  // namespace pagoda
