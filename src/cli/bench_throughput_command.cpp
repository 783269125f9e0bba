// `pagoda bench throughput -m MODEL`: offline serving throughput, like vLLM's
// benchmark_throughput with its random dataset. N requests with prompt and output lengths
// drawn uniformly from [len * (1 - r), len * (1 + r)] (outputs optionally exponential,
// clamped to a range; prompts optionally all starting with the same prefix) are queued at once (or at --request-rate per second, Poisson) and the
// engine runs until all finish. Reports requests/s, output and total tokens/s, TTFT, TPOT
// and end-to-end latency percentiles, KV utilization and waste (allocated but unused
// slots), prefix-cache hit rate and preemptions. Outputs ignore end-of-text so every
// request generates exactly its drawn length.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <unordered_map>

#include "base/thread_pool.h"
#include "base/timer.h"
#include "base/system_memory.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/latency_stats.h"
#include "cli/engine_options.h"
#include "cli/model_loader.h"
#include "cli/parallel_options.h"

namespace pagoda {
namespace {

struct ThroughputArgs {
  std::string model;
  int32_t num_prompts = 64;
  int32_t input_len = 256;
  int32_t output_len = 128;
  double range_ratio = 0.0;
  int32_t prefix_len = 0;
  std::string output_dist = "uniform";
  int32_t output_min = 1;
  int32_t output_max = 0;  // 0: no cap but the context
  double request_rate = 0;  // 0: all at once
  int32_t ctx = 0;
  int32_t threads = 0;
  uint32_t seed = 0;
  bool json = false;
  EngineArgs engine;
  ParallelArgs parallel;
};

constexpr auto fail = report_error;

struct Item {
  std::vector<int32_t> prompt;
  int32_t max_tokens;
  double arrival;
};

struct Workload {
  std::vector<Item> items;
  int32_t truncated = 0;  // requests whose drawn output length the context cuts short
};

// Random ids from the upper half of the vocabulary (ordinary tokens).
Result<Workload> make_workload(const ThroughputArgs& a, int32_t n_vocab, int32_t max_model_len) {
  std::mt19937 rng(a.seed);
  std::uniform_int_distribution<int32_t> tokd(n_vocab / 2, n_vocab - 1);
  auto draw_len = [&](int32_t mean) {
    const int32_t lo = std::max(1, static_cast<int32_t>(std::lround(mean * (1.0 - a.range_ratio))));
    const int32_t hi = std::max(lo, static_cast<int32_t>(std::lround(mean * (1.0 + a.range_ratio))));
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  std::vector<int32_t> prefix(static_cast<size_t>(std::max(0, a.prefix_len)));
  for (int32_t& t : prefix) t = tokd(rng);
  Workload w;
  double t_arrive = 0;
  std::exponential_distribution<double> gap(a.request_rate > 0 ? a.request_rate : 1.0);
  for (int32_t i = 0; i < a.num_prompts; ++i) {
    Item it;
    it.prompt = prefix;
    const int32_t n = draw_len(a.input_len);
    for (int32_t k = 0; k < n; ++k) it.prompt.push_back(tokd(rng));
    int32_t out_len = draw_len(a.output_len);
    if (a.output_dist == "exp")
      out_len = static_cast<int32_t>(std::lround(std::exponential_distribution<double>(1.0 / a.output_len)(rng)));
    out_len = std::max(out_len, std::max(1, a.output_min));
    if (a.output_max > 0) out_len = std::min(out_len, a.output_max);
    it.max_tokens = std::min(out_len, max_model_len - static_cast<int32_t>(it.prompt.size()));
    w.truncated += it.max_tokens < out_len ? 1 : 0;
    if (it.max_tokens < 1)
      return error("a prompt of {} tokens leaves no room in the {}-token context; use a larger --ctx-size",
                   it.prompt.size(), max_model_len);
    if (a.request_rate > 0) t_arrive += gap(rng);
    it.arrival = t_arrive;
    w.items.push_back(std::move(it));
  }
  return w;
}

// What one run of the workload measured: per-request latencies in seconds, token counts,
// and KV usage and waste sampled after every step that holds blocks.
struct Measured {
  std::vector<double> ttft, tpot, e2e;
  int64_t out_tokens = 0, in_tokens = 0;
  double usage_sum = 0, usage_peak = 0, waste_sum = 0, waste_steady_sum = 0;
  int64_t samples = 0, steady_samples = 0;
  double seconds = 0;  // from the first admission check to the last step
};

// Admits each request at its arrival time (counted from the call) and steps until all
// finish.
Result<Measured> run_workload(Engine& engine, const std::vector<Item>& items) {
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.ignore_eos = true;
  Measured m;
  size_t next = 0;
  Timer clock;
  while (next < items.size() || engine.has_work()) {
    while (next < items.size() && items[next].arrival <= clock.seconds()) {
      params.max_tokens = items[next].max_tokens;
      m.in_tokens += static_cast<int64_t>(items[next].prompt.size());
      auto id = engine.add_request(items[next].prompt, params);
      if (!id) return id.status();
      ++next;
    }
    if (!engine.has_work()) continue;  // waiting for the next arrival
    auto step = engine.step();
    if (!step) return step.status();
    for (const StepOutput& o : *step) {
      if (o.token >= 0) ++m.out_tokens;
      if (o.finish == FinishReason::kNone) continue;
      m.ttft.push_back(o.first_token_time - o.arrival_time);
      m.e2e.push_back(o.finish_time - o.arrival_time);
      if (o.output_tokens > 1) m.tpot.push_back((o.finish_time - o.first_token_time) / (o.output_tokens - 1));
    }
    const EngineStats st = engine.stats();
    if (st.used_blocks == 0) continue;
    const double waste = engine.kv_waste();
    m.usage_sum += st.kv_usage();
    m.usage_peak = std::max(m.usage_peak, st.kv_usage());
    m.waste_sum += waste;
    ++m.samples;
    // Steady state: requests are queued, so the batch is as full as the limits allow.
    if (st.num_waiting > 0) {
      m.waste_steady_sum += waste;
      ++m.steady_samples;
    }
  }
  m.seconds = clock.seconds();
  return m;
}

int run_bench_throughput(const ThroughputArgs& a) {
  auto parallel = start_parallel(a.parallel);
  if (!parallel) return fail(parallel.status());
  ParallelRun* par = parallel->get();
  auto loaded = load_model_with_tokenizer(a.model, a.threads, /*require_tokenizer=*/false,
                                          par != nullptr ? par->place() : ParallelRank{});
  if (!loaded) return fail(loaded.status());
  if (auto code = attach_or_serve(par, *loaded)) return *code;
  ThreadPool& pool = ThreadPool::global();
  Model& model = *loaded->model;
  const ModelConfig& mc = model.config();
  const int32_t ctx = a.ctx > 0 ? a.ctx : mc.n_ctx_train;
  auto ec = engine_config(a.engine, ctx);
  if (!ec) return fail(ec.status());
  auto draft = load_draft_model(ec->speculative, *loaded);
  if (!draft) return fail(draft.status());
  auto engine_r = Engine::create(model, nullptr, *ec, draft->model.get());
  if (!engine_r) return fail(engine_r.status());
  Engine& engine = **engine_r;

  auto workload = make_workload(a, mc.n_vocab, engine.max_model_len());
  if (!workload) return fail(workload.status());
  engine.prefault_kv();  // like llama.cpp, which clears its KV buffers before timing
  if (workload->truncated > 0)
    fmt::print(stderr, "warning: {} of {} requests have fewer output tokens than drawn: the {}-token context is full\n",
               workload->truncated, a.num_prompts, engine.max_model_len());
  if (par != nullptr) {
    // The traffic of the timed run only (the start-up's checks and setup excluded).
    auto before = par->comm().rank_stats();
    if (!before) return fail(before.status());
  }
  auto measured = run_workload(engine, workload->items);
  if (!measured) return fail(measured.status());
  const Measured& m = *measured;
  const double secs = m.seconds;
  const EngineStats st = engine.stats();
  auto ms = [](const std::vector<double>& v) {
    const LatencyStats s = latency_stats(v);
    return nlohmann::json{{"mean", s.mean * 1e3}, {"p50", s.p50 * 1e3}, {"p90", s.p90 * 1e3}, {"p99", s.p99 * 1e3}};
  };
  const double hit_rate =
      st.prefix_query_tokens > 0 ? static_cast<double>(st.prefix_hit_tokens) / st.prefix_query_tokens : 0.0;
  nlohmann::json j = {
      {"model", a.model},
      {"threads", pool.num_threads()},
      {"scheduler", a.engine.scheduler},
      {"prefix_caching", !a.engine.no_prefix_caching},
      {"max_num_seqs", ec->scheduler.max_num_seqs},
      {"max_num_batched_tokens", ec->scheduler.max_num_batched_tokens},
      {"kv_blocks", st.num_blocks},
      {"kv_layer_groups", engine.kv_storage().layout().n_groups()},
      {"kv_bytes", engine.kv_storage().bytes()},
      {"block_size", ec->block_size},
      {"num_prompts", a.num_prompts},
      {"output_dist", a.output_dist},
      {"seconds", secs},
      {"requests_per_second", a.num_prompts / secs},
      {"output_tokens_per_second", m.out_tokens / secs},
      {"total_tokens_per_second", (m.out_tokens + m.in_tokens) / secs},
      {"input_tokens", m.in_tokens},
      {"output_tokens", m.out_tokens},
      {"ttft_ms", ms(m.ttft)},
      {"tpot_ms", ms(m.tpot)},
      {"e2e_ms", ms(m.e2e)},
      {"kv_usage_mean", m.samples ? m.usage_sum / m.samples : 0.0},
      {"kv_usage_peak", m.usage_peak},
      {"kv_waste_mean", m.samples ? m.waste_sum / m.samples : 0.0},
      {"kv_waste_steady", m.steady_samples ? m.waste_steady_sum / m.steady_samples : 0.0},
      {"prefix_cache_hit_rate", hit_rate},
      {"preemptions", st.preemptions},
      {"steps", st.steps},
      {"peak_rss_bytes", peak_resident_bytes()},
  };
  if (par != nullptr) {
    // Per rank: bytes sent and the share of the run spent waiting in transfers (waiting
    // for a slower peer counts: it is time the rank could not compute).
    auto stats = par->comm().rank_stats();
    if (!stats) return fail(stats.status());
    const int64_t tokens = m.out_tokens + m.in_tokens;
    nlohmann::json ranks = nlohmann::json::array();
    int64_t bytes = 0;
    double comm_max = 0;
    for (const MpiComm::RankStats& r : *stats) {
      ranks.push_back({{"bytes_sent", r.bytes_sent},
                       {"comm_share", secs > 0 ? r.comm_seconds / secs : 0.0},
                       {"peak_rss_bytes", r.peak_rss_bytes}});
      bytes += r.bytes_sent;
      comm_max = std::max(comm_max, r.comm_seconds);
    }
    j["parallel"] = {{"tp", a.parallel.tp},
                     {"sp", a.parallel.sp},
                     {"pp", a.parallel.pp},
                     {"bytes_sent_per_token", tokens > 0 ? static_cast<double>(bytes) / static_cast<double>(tokens) : 0.0},
                     {"bytes_sent_per_output_token", m.out_tokens > 0 ? static_cast<double>(bytes) / m.out_tokens : 0.0},
                     {"comm_share_max", secs > 0 ? comm_max / secs : 0.0},
                     {"ranks", ranks}};
  }
  if (ec->speculative.enabled()) {
    // vLLM's names (S4): drafts verified, their tokens, those accepted; and what drafting cost.
    j["speculative"] = {
        {"method", ec->speculative.method},
        {"num_drafts", st.spec_drafts},
        {"num_draft_tokens", st.spec_drafted_tokens},
        {"num_accepted_tokens", st.spec_accepted_tokens},
        {"num_branch_accepted_tokens", st.spec_branch_accepted_tokens},
        {"branches", ec->speculative.branches},
        {"acceptance_rate", st.spec_drafted_tokens > 0 ? static_cast<double>(st.spec_accepted_tokens) / st.spec_drafted_tokens : 0.0},
        {"mean_accepted_length", st.spec_drafts > 0 ? static_cast<double>(st.spec_accepted_tokens) / st.spec_drafts : 0.0},
        {"draft_seconds", st.spec_draft_seconds},
        {"draft_forwards", st.spec_draft_forwards},
    };
  }
  if (a.json) {
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  const KvLayout& layout = engine.kv_storage().layout();
  fmt::print("pagoda bench throughput: {} | {} scheduler | {} requests | max {} seqs, {} batched tokens | {} KV blocks of {}{}\n",
             a.model, a.engine.scheduler, a.num_prompts, ec->scheduler.max_num_seqs,
             ec->scheduler.max_num_batched_tokens, st.num_blocks, ec->block_size,
             layout.n_groups() > 1 ? fmt::format(" x {} layers ({} layer groups, sliding-window blocks released)",
                                                 layout.layers_per_block(), layout.n_groups())
                                   : std::string());
  fmt::print("  time {:.2f} s | {:.2f} requests/s | output {:.1f} tok/s | total {:.1f} tok/s\n", secs,
             a.num_prompts / secs, m.out_tokens / secs, (m.out_tokens + m.in_tokens) / secs);
  fmt::print("  TTFT ms  p50 {:.1f}  p90 {:.1f}  p99 {:.1f} | TPOT ms  p50 {:.2f}  p90 {:.2f}  p99 {:.2f}\n",
             j["ttft_ms"]["p50"].get<double>(), j["ttft_ms"]["p90"].get<double>(), j["ttft_ms"]["p99"].get<double>(),
             j["tpot_ms"]["p50"].get<double>(), j["tpot_ms"]["p90"].get<double>(), j["tpot_ms"]["p99"].get<double>());
  fmt::print("  KV usage mean {:.1f}% peak {:.1f}% | waste mean {:.2f}% steady {:.2f}% | prefix hits {:.1f}% | "
             "preemptions {}\n",
             100 * j["kv_usage_mean"].get<double>(), 100 * m.usage_peak, 100 * j["kv_waste_mean"].get<double>(),
             100 * j["kv_waste_steady"].get<double>(), 100 * hit_rate, st.preemptions);
  if (j.contains("parallel"))
    fmt::print("  parallel: tp {} x pp {} | {:.0f} bytes sent per token (all ranks) | communication up to {:.1f}% of "
               "the time\n",
               a.parallel.tp, a.parallel.pp, j["parallel"]["bytes_sent_per_token"].get<double>(),
               100 * j["parallel"]["comm_share_max"].get<double>());
  if (j.contains("speculative"))
    fmt::print("  speculative ({}): {} drafts, {} of {} draft tokens accepted ({:.0f}%), drafting {:.2f} s\n",
               ec->speculative.method, st.spec_drafts, st.spec_accepted_tokens, st.spec_drafted_tokens,
               100 * j["speculative"]["acceptance_rate"].get<double>(), st.spec_draft_seconds);
  return 0;
}

}  // namespace

Subcommand add_bench_throughput_command(CLI::App& bench) {
  auto args = std::make_shared<ThroughputArgs>();
  CLI::App* sub = add_subcommand(bench, "throughput", "Offline serving throughput of the engine on a generated workload");
  add_model_option(*sub, args->model);
  sub->add_option("--num-prompts", args->num_prompts, "Requests in the workload")->check(CLI::PositiveNumber);
  sub->add_option("--input-len", args->input_len, "Mean prompt length in tokens (after any shared prefix)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--output-len", args->output_len, "Mean output length in tokens")->check(CLI::PositiveNumber);
  sub->add_option("--range-ratio", args->range_ratio, "Lengths are uniform in [len*(1-r), len*(1+r)]")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--output-dist", args->output_dist,
                 "Output lengths: uniform (see --range-ratio) or exp (exponential with mean --output-len, the long "
                 "tail of chat traffic), clamped to [--output-min, --output-max]")
      ->check(CLI::IsMember({"uniform", "exp"}));
  sub->add_option("--output-min", args->output_min, "Shortest output length");
  sub->add_option("--output-max", args->output_max, "Longest output length (0: the context)");
  sub->add_option("--prefix-len", args->prefix_len, "Tokens of a prefix every prompt shares (a system prompt)");
  sub->add_option("--request-rate", args->request_rate, "Poisson arrivals per second (0: all at once)");
  add_context_option(*sub, args->ctx, "Context per sequence (0: the model's trained context)");
  add_threads_option(*sub, args->threads);
  sub->add_option("--seed", args->seed, "Workload seed");
  sub->add_flag("--json", args->json, "Print the results as one JSON object");
  add_engine_options(*sub, args->engine);
  add_parallel_options(*sub, args->parallel);
  return {"throughput", sub, [args] { return run_bench_throughput(*args); }};
}

}  // namespace pagoda
