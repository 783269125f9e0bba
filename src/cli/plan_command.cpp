// `pagoda plan -m MODEL [-c CTX] [engine flags] [--hardware auto|NAME] [--json]`: the memory
// the engine will take for this model and configuration (the engine's own sizing
// functions, src/plan/memory_plan.h), the largest batch and context a memory budget holds,
// the decode and prefill speed a roofline of the hardware predicts (src/plan/speed_model.h),
// and what to change for each of the usual goals, with its predicted effect.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "base/human_size.h"
#include "base/system_memory.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/engine_options.h"
#include "cli/model_loader.h"
#include "cli/parallel_options.h"
#include "cli/pull_progress.h"
#include "gguf/gguf_file.h"
#include "kernels/attention/attention.h"
#include "model/model.h"
#include "model/parallel.h"
#include "plan/hardware.h"
#include "plan/memory_fit.h"
#include "plan/memory_plan.h"
#include "plan/model_probe.h"
#include "plan/speed_model.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

struct PlanArgs {
  std::string model;
  int32_t ctx = 0;
  int32_t threads = 0;
  int32_t prompt = 512;
  int32_t gen = 128;
  int32_t depth = 0;
  std::string hardware = "auto";
  std::string budget;  // bytes or a fraction of the available memory; default: all of it
  bool remeasure = false;
  bool json = false;
  EngineArgs engine;
  ParallelArgs parallel;
};

double mib(size_t b) { return static_cast<double>(b) / (1 << 20); }

// What one configuration costs and runs at.
struct Outcome {
  EngineConfig config;
  MemoryPlan memory;
  SpeedPlan speed;       // batch 1: pp and tg as llama-bench measures them
  SpeedPlan batch_speed; // max_num_seqs sequences decoding together at the same depth
};

Result<Outcome> evaluate(const GgufFile& file, const Model& model, const EngineConfig& ec,
                         const HardwareProfile* hw, const PlanArgs& a, size_t available, LoadMemory tokenizer) {
  Outcome o;
  o.config = ec;
  auto mem = plan_memory(file, model, ec, available, tokenizer);
  if (!mem) return mem.status();
  o.memory = *mem;
  if (hw != nullptr) {
    const ModelConfig& c = model.config();
    SpeedRequest r;
    r.prompt = a.prompt;
    r.gen = a.gen;
    r.depth = a.depth;
    r.kv_bytes_per_token_layer = 2.0 * static_cast<double>(kv_row_bytes(ec.kv_type, c.n_head_kv, c.head_dim));
    r.kv_type = ec.kv_type;
    r.model_key = model_shape_key(file);
    o.speed = plan_speed(model, *hw, r);
    r.batch = ec.scheduler.max_num_seqs;
    o.batch_speed = plan_speed(model, *hw, r);
  }
  return o;
}

json speed_json(const SpeedPlan& s) {
  return {{"weight_bytes_per_step", s.weight_bytes_per_step}, {"decode_tok_s", s.decode_tok_s},
          {"decode_step_s", s.decode_step_s}, {"decode_memory_bound_share", s.decode_bound_by_memory},
          {"prefill_tok_s", s.prefill_tok_s}, {"ttft_s", s.ttft_s}};
}

struct Advice {
  std::string scenario, flags, effect;
};

int run_plan(const PlanArgs& a) {
  if (a.threads > 0) ThreadPool::set_default_threads(a.threads);
  ThreadPool& pool = ThreadPool::global();
  auto path = resolve_model_arg(a.model);
  if (!path) return report_error(path.status());
  LoadMemory measured;
  const size_t heap0 = heap_in_use_bytes();
  auto file = GgufFile::open(*path);
  if (!file) return report_error(file.status());
  measured.metadata = heap_in_use_bytes() - std::min(heap0, heap_in_use_bytes());
  auto model_r = Model::load(*file, pool, /*repack=*/false);
  if (!model_r) return report_error(model_r.status());
  const Model& model = **model_r;
  const ModelConfig& c = model.config();
  const int32_t ctx = a.ctx > 0 ? a.ctx : c.n_ctx_train;
  auto ec = engine_config(a.engine, ctx);
  if (!ec) return report_error(ec.status());
  const size_t available = available_memory_bytes();
  size_t budget = available;
  if (!a.budget.empty()) {
    auto b = parse_memory_size(a.budget);  // a fraction is of the available memory
    if (!b) return report_error(error("--memory-budget: {}", b.status().message()));
    budget = *b;
  }

  auto hw_r = hardware_for_model(a.hardware, model, pool, a.remeasure, &*file);
  if (!hw_r) return report_error(hw_r.status());
  const std::optional<HardwareProfile>& hw = *hw_r;
  const HardwareProfile* hwp = hw ? &*hw : nullptr;
  measure_tokenizer(*file, measured);
  const LoadMemory& tok = measured;
  auto base = evaluate(*file, model, *ec, hwp, a, available, tok);
  if (!base) return report_error(base.status());
  const Outcome& o = *base;
  const MemoryPlan& m = o.memory;
  // A model split over processes (--tp/--pp/--sp): each rank's memory, from its own shard.
  struct RankPlan {
    int32_t rank;
    ParallelSplit split;
    MemoryPlan memory;
  };
  std::vector<RankPlan> ranks;
  const int32_t world = a.parallel.tp * a.parallel.pp * a.parallel.sp;
  for (int32_t r = 0; world > 1 && r < world; ++r) {
    auto shard = Model::load(*file, pool, /*repack=*/false,
                             ParallelRank{a.parallel.tp, a.parallel.pp, r, a.parallel.sp});
    if (!shard) return report_error(shard.status());
    auto rm = plan_rank_memory(*file, model, **shard, *ec, available, tok);
    if (!rm) return report_error(rm.status());
    ranks.push_back({r, (*shard)->split(), *rm});
  }
  // The fits are of the memory itself: KV sized for the sequences, not capped by what is available now.
  const MemoryPlanner unbounded = [&](const EngineConfig& e) { return plan_memory(*file, model, e, 0, tok); };
  const int32_t fit_batch = largest_batch(o.memory, ec->scheduler.max_num_seqs, budget);
  const int64_t fit_ctx =
      longest_context(unbounded, *ec, ec->scheduler.max_num_seqs, budget, std::max<int64_t>(ctx, c.n_ctx_train));

  // One change per goal, each evaluated with the same functions.
  std::vector<Advice> advice;
  if (hwp != nullptr) {
    EngineConfig e1 = *ec;
    e1.kv_type = KvType::kI8;
    auto int8 = evaluate(*file, model, e1, hwp, a, available, tok);
    // Throughput: the fewest sequences that reach 95% of what the most that fit would
    // (past the knee decode is compute-bound and more sequences only add latency).
    auto at = [&](int32_t seqs) {
      EngineConfig e = *ec;
      e.scheduler.max_num_seqs = std::max(1, seqs);
      return evaluate(*file, model, e, hwp, a, available, tok);
    };
    const int32_t most = std::max(1, std::min(fit_batch, 1024));
    auto ceiling = at(most);
    std::optional<Outcome> wide;
    if (ceiling) {
      for (int32_t seqs = 1;; seqs = std::min(most, seqs * 2)) {
        auto o2 = at(seqs);
        if (o2 && (o2->batch_speed.decode_tok_s >= 0.95 * ceiling->batch_speed.decode_tok_s || seqs == most)) {
          wide = *o2;
          break;
        }
        if (seqs == most) break;
      }
    }
    const int64_t long_ctx = longest_context(unbounded, e1, 1, budget, std::max<int64_t>(c.n_ctx_train, ctx));
    if (o.config.scheduler.max_num_seqs > 1)
      advice.push_back({"low latency", "--max-num-seqs 1 (pagoda run)",
                        fmt::format("decode {:.1f} tok/s for one sequence, TTFT {:.0f} ms for a {}-token prompt",
                                    o.speed.decode_tok_s, o.speed.ttft_s * 1e3, a.prompt)});
    else
      advice.push_back({"low latency", "as configured",
                        fmt::format("decode {:.1f} tok/s, TTFT {:.0f} ms for a {}-token prompt", o.speed.decode_tok_s,
                                    o.speed.ttft_s * 1e3, a.prompt)});
    if (wide)
      advice.push_back({"high throughput", fmt::format("--max-num-seqs {}", wide->config.scheduler.max_num_seqs),
                        fmt::format("{:.1f} tok/s decoding {} sequences together (now {:.1f} with {}; {} that fit "
                                    "at {} tokens each would give {:.1f})",
                                    wide->batch_speed.decode_tok_s, wide->config.scheduler.max_num_seqs,
                                    o.batch_speed.decode_tok_s, o.config.scheduler.max_num_seqs, most, ctx,
                                    ceiling->batch_speed.decode_tok_s)});
    if (int8 && ec->kv_type != KvType::kI8)
      advice.push_back({"long context", fmt::format("--kv-cache-dtype int8 -c {} --max-num-seqs 1", long_ctx),
                        fmt::format("KV {:.0f} MiB instead of {:.0f} MiB at this configuration; one sequence of up "
                                    "to {} tokens fits in {:.0f} MiB",
                                    mib(int8->memory.kv.bytes), mib(m.kv.bytes), long_ctx, mib(budget))});
    double params = 0;
    for (const GgufTensor& t : file->tensors()) params += static_cast<double>(t.num_elements());
    const double bpw = 8.0 * static_cast<double>(m.weights_file) / std::max(1.0, params);
    const size_t int8_kv = int8 ? int8->memory.kv.bytes : m.kv.bytes;
    if (bpw > 5.0)
      advice.push_back({"small memory", "pagoda quantize IN OUT --type Q4_K --method awq; --kv-cache-dtype int8",
                        fmt::format("weights about {:.0f} MiB at 4.5 bits per weight instead of {:.0f} MiB at {:.1f}; "
                                    "KV {:.0f} MiB instead of {:.0f} MiB",
                                    params * 4.5 / 8 / (1 << 20), mib(m.weights_file), bpw, mib(int8_kv),
                                    mib(m.kv.bytes))});
    else
      advice.push_back({"small memory", "--kv-cache-dtype int8 (the weights are already at 4-5 bits)",
                        fmt::format("KV {:.0f} MiB instead of {:.0f} MiB; total {:.0f} MiB", mib(int8_kv),
                                    mib(m.kv.bytes), mib(m.total() - m.kv.bytes + int8_kv))});
  }

  if (a.json) {
    json j = {{"model", *path},
              {"arch", c.arch_name},
              {"ctx", ctx},
              {"max_num_seqs", ec->scheduler.max_num_seqs},
              {"kv_cache_dtype", kv_type_name(ec->kv_type)},
              {"threads", pool.num_threads()},
              {"available_bytes", available},
              {"budget_bytes", budget},
              {"memory", memory_plan_json(m)},
              {"fits", {{"max_num_seqs_at_ctx", fit_batch}, {"ctx_at_max_num_seqs", fit_ctx}}}};
    if (!ranks.empty()) {
      json rs = json::array();
      for (const RankPlan& r : ranks)
        rs.push_back({{"rank", r.rank},
                      {"tp_rank", r.split.tp_rank},
                      {"pp_rank", r.split.pp_rank},
                      {"sp_rank", r.split.sp_rank},
                      {"layers", {r.split.layers.begin, r.split.layers.end}},
                      {"kv_heads", {r.split.kv_heads.begin, r.split.kv_heads.end}},
                      {"memory", memory_plan_json(r.memory)}});
      j["parallel"] = {{"tp", a.parallel.tp}, {"pp", a.parallel.pp}, {"sp", a.parallel.sp}, {"ranks", rs}};
    }
    if (hwp != nullptr) {
      j["hardware"] = hardware_json(*hwp);
      j["speed"] = speed_json(o.speed);
      j["speed"]["prompt_tokens"] = a.prompt;
      j["speed"]["gen_tokens"] = a.gen;
      j["speed"]["depth"] = a.depth;
      j["batch_speed"] = speed_json(o.batch_speed);
      json adv = json::array();
      for (const Advice& x : advice) adv.push_back({{"scenario", x.scenario}, {"flags", x.flags}, {"effect", x.effect}});
      j["recommendations"] = adv;
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("plan: {} | {} | ctx {} | max-num-seqs {} | KV {} | threads {}\n", *path, c.arch_name, ctx,
             ec->scheduler.max_num_seqs, kv_type_name(ec->kv_type), pool.num_threads());
  fmt::print("memory\n");
  fmt::print("  weights    {:8.1f} MiB resident ({:.1f} MiB in the file", mib(m.weights_resident), mib(m.weights_file));
  if (m.packed_matrices > 0)
    fmt::print("; {} matrices repacked into {:.1f} MiB of panels, {:.1f} MiB of their file pages let go",
               m.packed_matrices, mib(m.packed), mib(m.dropped));
  if (m.embedding_lookup > 0) fmt::print("; embedding table {:.1f} MiB read by row and let go", mib(m.embedding_lookup));
  fmt::print(")\n");
  fmt::print("  KV cache   {:8.1f} MiB ({} blocks of {} tokens; one sequence up to {} tokens{})\n", mib(m.kv.bytes),
             m.kv.blocks, ec->block_size, m.kv.max_model_len,
             m.kv.capped ? "; capped at a quarter of the available memory" : "");
  fmt::print("  metadata   {:8.1f} MiB (the file's, parsed: its vocabulary arrays)\n", mib(m.metadata));
  fmt::print("  tokenizer  {:8.1f} MiB ({:.1f} MiB while it is built, at the load)\n", mib(m.tokenizer),
             mib(m.tokenizer_build));
  fmt::print("  scratch    {:8.1f} MiB (activations {:.1f} MiB, logits {:.1f} MiB)\n",
             mib(m.model_scratch + m.engine_scratch), mib(m.model_scratch), mib(m.engine_scratch));
  fmt::print("  runtime    {:8.1f} MiB\n", mib(m.runtime));
  fmt::print("  total      {:8.1f} MiB of {:.1f} MiB available (peak of running {:.1f} and loading {:.1f})\n",
             mib(m.total()), mib(available), mib(m.running()), mib(m.loading()));
  fmt::print("fits in {:.1f} MiB: up to {} sequences of {} tokens; {} tokens each for {} sequences\n", mib(budget),
             fit_batch, ctx, fit_ctx, ec->scheduler.max_num_seqs);
  if (!ranks.empty()) {
    fmt::print("per rank (--tp {} --pp {} --sp {}; each process's peak, on its own machine or beside the others)\n",
               a.parallel.tp, a.parallel.pp, a.parallel.sp);
    for (const RankPlan& r : ranks)
      fmt::print("  rank {:<3d} layers {}-{}, KV heads {}-{}: weights {:.1f} MiB, KV {:.1f} MiB, total {:.1f} MiB\n",
                 r.rank, r.split.layers.begin, r.split.layers.end - 1, r.split.kv_heads.begin, r.split.kv_heads.end - 1,
                 mib(r.memory.weights_resident), mib(r.memory.kv.bytes), mib(r.memory.total()));
  }
  if (hwp != nullptr) {
    fmt::print("speed on {} ({}, {} threads; roofline per matrix)\n", hwp->name, hwp->cpu, hwp->threads);
    if (const ModelTiming* mt = hwp->model_timing(model_shape_key(*file)))
      fmt::print("  one sequence: this model's step timed on a zero-weight copy of its shape ({} of its {} layers): "
                 "decode {:.2f} ms, a {}-token prefill {:.1f} ms\n",
                 mt->layers, mt->n_layer, mt->decode_s * 1e3, mt->prefill_tokens, mt->prefill_s * 1e3);
    for (const FormatRate& r : hwp->formats)
      fmt::print("  {:6s} GEMV {:.1f} GB/s, GEMM {:.1f} GFLOP/s\n", dtype_name(r.type), r.gemv_bytes_per_s / 1e9,
                 r.gemm_flops / 1e9);
    fmt::print("  decode     {:8.1f} tok/s, one sequence, {} tokens after {} ({:.1f} MiB per step, {:.0f}% of the "
               "matrix time bandwidth-bound)\n",
               o.speed.decode_tok_s, a.gen, a.depth,
               o.speed.weight_bytes_per_step / (1 << 20), 100 * o.speed.decode_bound_by_memory);
    fmt::print("  batch      {:8.1f} tok/s, {} sequences decoding together\n", o.batch_speed.decode_tok_s,
               ec->scheduler.max_num_seqs);
    fmt::print("  prefill    {:8.1f} tok/s, a {}-token prompt after {}; time to first token {:.0f} ms\n",
               o.speed.prefill_tok_s, a.prompt, a.depth, o.speed.ttft_s * 1e3);
    fmt::print("recommendations\n");
    for (const Advice& x : advice) fmt::print("  {:16s} {}\n  {:16s}   -> {}\n", x.scenario, x.flags, "", x.effect);
  }
  return 0;
}

}  // namespace

Subcommand add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* sub = add_subcommand(app, "plan",
                                 "Predict memory and speed of a model and configuration, and what to change for "
                                 "latency, throughput, long context or small memory");
  add_model_option(*sub, args->model);
  add_threads_option(*sub, args->threads);
  add_context_option(*sub, args->ctx, "Context length of each sequence (default: the trained one)");
  add_engine_options(*sub, args->engine);
  sub->add_option("--prompt", args->prompt, "Prompt length for the prefill and time-to-first-token prediction")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--n-gen", args->gen, "Generated tokens the decode prediction averages over")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--depth", args->depth, "Tokens already in the cache before the prompt and the decode "
                                          "(llama-bench's -d)")
      ->check(CLI::Range(0, 1 << 24));
  sub->add_option("--hardware", args->hardware,
                  "auto (measure this machine once, cached), none (memory only), or a named profile");
  sub->add_flag("--remeasure", args->remeasure, "Measure this machine again instead of reading the cache");
  sub->add_option("--memory-budget", args->budget,
                  "Memory the fits are computed for: bytes (K/M/G suffixes) or a fraction of the available memory "
                  "(default: all available)");
  add_split_options(*sub, args->parallel);
  sub->add_flag("--json", args->json, "One JSON object (docs/plan.md describes its keys)");
  return {"plan", sub, [args] { return run_plan(*args); }};
}

}  // namespace pagoda
