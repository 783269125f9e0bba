// `pagoda bench -m MODEL [-p 512] [-n 128] [-d 0] [-r 5]`: prompt-processing and generation
// speed measured the way llama-bench measures them, so the two tables line up, through the
// engine every user goes through: pp = one request of p random tokens, prefilled in one
// step from an empty cache; tg = n decode steps of one request (greedy sampling included,
// which llama-bench leaves out: an argmax, ~1% of a step). With a depth d (llama-bench's
// -d) the cache first holds d tokens of context, untimed: tg decodes after a d-token
// prompt, and pp's request shares its first d tokens with an earlier request, found in the
// prefix cache (d rounded down to whole KV blocks of 16: the rest is computed with the p,
// in the timed step, and pp's t/s is still p over that step's time).
// One warm-up run, then r timed repetitions; mean, median and standard deviation in tokens
// per second.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "kernels/simd/simd_target.h"
#include "cli/model_loader.h"
#include "engine/engine.h"

namespace pagoda {
namespace {

struct BenchArgs {
  std::string model;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int32_t depth = 0;
  int32_t reps = 5;
  int32_t threads = 0;
  bool json = false;
};

struct Summary {
  double mean = 0, median = 0, stdev = 0;
};

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  std::sort(v.begin(), v.end());
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  double var = 0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(var / (v.size() - 1)) : 0.0;
  return s;
}

int run_bench(const BenchArgs& a) {
  if (a.model.empty()) {
    fmt::print(stderr, "error: bench needs -m MODEL (or the throughput or serve subcommand)\n");
    return 1;
  }
  if (a.threads > 0) ThreadPool::set_default_threads(a.threads);
  ThreadPool& pool = ThreadPool::global();
  auto loaded = load_model(a.model, pool);
  if (!loaded) {
    fmt::print(stderr, "error: {}\n", loaded.status().message());
    return 1;
  }
  Model& m = *loaded->model;
  const int32_t n_vocab = m.config().n_vocab;
  const int32_t depth = a.depth;
  const int32_t ctx = depth + std::max(a.n_prompt, a.n_gen) + 2;
  EngineConfig ec;
  ec.max_model_len = ctx;
  ec.scheduler.max_num_seqs = 1;
  // One step for pp's tokens and for a depth prompt, even when the depth is not a whole
  // number of blocks (its last partial block is recomputed with the p tokens) or its
  // cached blocks were evicted.
  ec.scheduler.max_num_batched_tokens = std::max(1, depth + a.n_prompt);
  auto engine_r = Engine::create(m, nullptr, ec);
  if (!engine_r) {
    fmt::print(stderr, "error: {}\n", engine_r.status().message());
    return 1;
  }
  Engine& engine = **engine_r;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(0, n_vocab - 1);
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.ignore_eos = true;
  auto step = [&]() {
    auto r = engine.step();
    if (!r) throw std::runtime_error(r.status().message());
  };

  auto random_tokens = [&](int32_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = tok(rng);
    return ids;
  };
  auto run_to_end = [&](const std::vector<int32_t>& prompt) {
    auto id = engine.add_request(prompt, params);
    if (!id) throw std::runtime_error(id.status().message());
    while (engine.has_work()) step();
  };
  auto time_pp = [&]() -> double {
    std::vector<int32_t> ids = random_tokens(depth);
    params.max_tokens = 1;
    if (depth > 0) run_to_end(ids);  // leaves the context's blocks in the prefix cache
    const std::vector<int32_t> more = random_tokens(a.n_prompt);
    ids.insert(ids.end(), more.begin(), more.end());
    Timer t;
    run_to_end(ids);
    return a.n_prompt / t.seconds();
  };
  auto time_tg = [&]() -> double {
    params.max_tokens = a.n_gen + 1;
    auto id = engine.add_request(random_tokens(std::max(1, depth)), params);
    if (!id) throw std::runtime_error(id.status().message());
    step();  // the prompt, giving the first token
    Timer t;
    while (engine.has_work()) step();
    return a.n_gen / t.seconds();
  };
  nlohmann::json out = nlohmann::json::array();
  auto report = [&](const char* test, int32_t n, const std::function<double()>& fn) {
    if (n <= 0) return;
    fn();  // warm-up: page in the weights, size the scratch buffers
    engine.model().reset_moe_stats();  // the expert statistics of the timed runs only
    std::vector<double> runs;
    for (int32_t r = 0; r < a.reps; ++r) runs.push_back(fn());
    const Summary s = summarize(runs);
    const std::string name = depth > 0 ? fmt::format("{}{} @ d{}", test, n, depth) : fmt::format("{}{}", test, n);
    const MoeStats& moe = engine.model().moe_stats();
    if (a.json) {
      nlohmann::json j = {{"model", a.model}, {"test", name}, {"n_depth", depth}, {"threads", pool.num_threads()},
                          {"tokens_per_second_median", s.median}, {"tokens_per_second_mean", s.mean},
                          {"tokens_per_second_stdev", s.stdev}, {"runs", runs}};
      if (moe.enabled()) j["moe"] = nlohmann::json::parse(moe.to_json());
      out.push_back(std::move(j));
    } else {
      fmt::print("| {:<40} | {:>6.0f} MiB | {:>7} | {:>13} | {:>10.2f} ± {:>6.2f} | {:>10.2f} |\n",
                 m.config().arch_name, m.weight_bytes() / 1048576.0, pool.num_threads(), name, s.mean, s.stdev,
                 s.median);
      if (moe.enabled()) {
        double worst = 0, active = 0;
        for (int32_t l = 0; l < moe.n_layer(); ++l) {
          const MoeLayerSummary ls = moe.summary(l);
          worst = std::max(worst, ls.imbalance);
          active += ls.active_share / moe.n_layer();
        }
        fmt::print("|   experts: routing {:.2f}% of step time, worst layer imbalance {:.2f}, mean active share {:.0f}%\n",
                   100.0 * moe.routing_share(), worst, 100.0 * active);
      }
    }
  };
  try {
    if (!a.json) {
      fmt::print("pagoda bench: {} | simd {} | cpu {}\n", a.model, simd_target_name(best_simd_target()),
                 cpu_features_string());
      fmt::print("| {:<40} | {:>10} | {:>7} | {:>13} | {:>19} | {:>10} |\n", "model", "size", "threads", "test",
                 "t/s (mean ± sd)", "median");
    }
    report("pp", a.n_prompt, time_pp);
    report("tg", a.n_gen, time_tg);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  if (a.json) fmt::print("{}\n", out.dump(2));
  return 0;
}

}  // namespace

Subcommand add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* sub = add_subcommand(app, "bench", "Measure prompt processing (pp) and generation (tg) speed, llama-bench style");
  sub->add_option("-m,--model", args->model, "GGUF model file");
  Subcommand throughput = add_bench_throughput_command(*sub);
  Subcommand serve = add_bench_serve_command(*sub);
  sub->require_subcommand(0, 1);
  sub->add_option("-p,--n-prompt", args->n_prompt, "Prompt tokens for the pp test (0: skip)");
  sub->add_option("-n,--n-gen", args->n_gen, "Generated tokens for the tg test (0: skip)");
  sub->add_option("-d,--n-depth", args->depth, "Tokens of context already in the cache before each test (llama-bench's -d)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("-r,--repetitions", args->reps, "Timed repetitions per test")->check(CLI::PositiveNumber);
  add_threads_option(*sub, args->threads);
  sub->add_flag("--json", args->json, "Print JSON (one object per test, with every run)");
  return {"bench", sub, [args, throughput, serve] {
            if (throughput.app->parsed()) return throughput.run();
            if (serve.app->parsed()) return serve.run();
            return run_bench(*args);
          }};
}

}  // namespace pagoda
