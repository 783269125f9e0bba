// `pagoda doctor [-m MODEL] [flags as for run/serve] [--server URL] [--json]`: gathers the
// facts of a setup (the memory plan, this machine's measured rates and load, the sampling
// flags, the chat template, a running server's /metrics) and prints what the checks of
// src/doctor/ found, each with why it matters and the fix. Exit status: 0 when nothing
// needs changing (notes only), 2 when a warning or an error was found, 1 when the doctor
// itself could not run (a bad flag, an unreadable model).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>

#include "base/cpu_load.h"
#include "base/system_memory.h"
#include "chat/chat_prompt.h"
#include "cli/base_url.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/engine_options.h"
#include "cli/model_loader.h"
#include "cli/pull_progress.h"
#include "doctor/checks.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "plan/model_probe.h"
#include "plan/hardware.h"
#include "plan/memory_plan.h"
#include "plan/speed_model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

struct DoctorArgs {
  std::string model;
  int32_t threads = 0;
  int32_t ctx = 0;
  EngineArgs engine;
  SamplingParams sampling;
  int64_t seed = -1;
  std::vector<std::string> stop;
  std::string chat_template_file;
  std::string prompt;
  bool no_bos = false;
  std::string server;
  std::string budget;
  std::string hardware = "auto";
  double load_seconds = 1.0;
  double bandwidth_seconds = 2.0;
  bool json = false;
};

double mib(size_t b) { return static_cast<double>(b) / (1 << 20); }

// What the model part of the report rests on, kept for the summary lines.
struct ModelPart {
  std::string path, arch;
  int32_t ctx = 0;
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatPrompter> prompter;
  std::optional<HardwareProfile> hw;
};

Status gather_model(const DoctorArgs& a, ThreadPool& pool, DoctorFacts& facts, ModelPart& mp) {
  auto path = resolve_model_arg(a.model);
  if (!path) return path.status();
  mp.path = *path;
  LoadMemory measured;
  const size_t heap0 = heap_in_use_bytes();
  auto file = GgufFile::open(*path);
  if (!file) return file.status();
  measured.metadata = heap_in_use_bytes() - std::min(heap0, heap_in_use_bytes());
  mp.file = std::make_unique<GgufFile>(std::move(*file));
  auto model = Model::load(*mp.file, pool, /*repack=*/false);
  if (!model) return model.status();
  mp.model = std::move(*model);
  const ModelConfig& c = mp.model->config();
  mp.arch = c.arch_name;
  mp.ctx = a.ctx > 0 ? a.ctx : c.n_ctx_train;
  auto ec = engine_config(a.engine, mp.ctx);
  if (!ec) return ec.status();
  measure_tokenizer(*mp.file, measured);

  MemoryFacts m;
  m.config = *ec;
  const size_t available = available_memory_bytes();
  m.budget = available;
  if (!a.budget.empty()) {
    auto b = parse_memory_size(a.budget);
    if (!b) return error("--memory-budget: {}", b.status().message());
    m.budget = *b;
    m.budget_given = true;
  }
  const GgufFile& f = *mp.file;
  const Model& mdl = *mp.model;
  m.replan = [&f, &mdl, available, measured](const EngineConfig& e) { return plan_memory(f, mdl, e, available, measured); };
  auto plan = m.replan(*ec);
  if (!plan) return plan.status();
  m.plan = *plan;
  for (const GgufTensor& t : f.tensors()) m.params += static_cast<double>(t.num_elements());
  m.bits_per_weight = 8.0 * static_cast<double>(plan->weights_file) / std::max(1.0, m.params);
  facts.memory = std::move(m);

  // With the file, the profile carries this model's own step timed on a copy of its shape
  // (plan/model_probe.h), and the decode facts come from that whole step, as `pagoda plan`'s
  // do: the sum of its matrices timed one call at a time varied with the moment they were
  // timed (a false decode.compute_bound on Qwen2.5-0.5B: 14 GB/s claimed, 25 decoded).
  auto hw = hardware_for_model(a.hardware, mdl, pool, /*remeasure=*/false, &f);
  if (!hw) return hw.status();
  mp.hw = *hw;
  if (mp.hw) {
    SpeedRequest r;
    r.kv_bytes_per_token_layer = 2.0 * static_cast<double>(kv_row_bytes(ec->kv_type, c.n_head_kv, c.head_dim));
    r.kv_type = ec->kv_type;
    r.model_key = model_shape_key(f);
    const SpeedPlan s = plan_speed(mdl, *mp.hw, r);
    DecodeFacts d;
    d.weight_bytes_per_step = s.weight_bytes_per_step;
    d.matrix_s = s.decode_matrix_s;
    d.stream_bytes_per_s = mp.hw->stream_bytes_per_s;
    d.bulk_format = dtype_name(s.bulk_type);
    d.threads = mp.hw->threads;
    d.cores = usable_cores();
    for (const FormatRate& fr : mp.hw->formats) d.format_rates.emplace_back(dtype_name(fr.type), fr.gemv_bytes_per_s);
    facts.decode = d;
  }

  auto tok = Tokenizer::from_gguf(f);
  if (tok) {
    mp.tokenizer = std::move(*tok);
    TemplateFacts t;
    t.tokenizer = mp.tokenizer.get();
    t.prompt = a.prompt;
    t.has_prompt = !a.prompt.empty();
    t.add_bos = !a.no_bos;
    auto src = chat_template_source(f, a.chat_template_file);
    if (!src) return src.status();
    auto p = ChatPrompter::create(*src, c.arch_name, *mp.tokenizer);
    t.origin = src->empty() ? "built-in" : (a.chat_template_file.empty() ? "model" : "file");
    if (p) {
      if (!a.chat_template_file.empty()) (*p)->set_origin("file");
      mp.prompter = std::move(*p);
      t.prompter = mp.prompter.get();
      t.origin = mp.prompter->origin();
    } else {
      t.template_error = p.status().message();
    }
    facts.chat_template = std::move(t);
  }
  return Status();
}

Status gather_server(const std::string& url_text, DoctorFacts& facts, std::string& model_name) {
  auto url = parse_base_url(url_text, "--server");
  if (!url) return url.status();
  httplib::Client cli(url->origin);
  cli.set_connection_timeout(5);
  cli.set_read_timeout(10);
  auto res = cli.Get("/metrics");
  if (!res) return error("--server {}: cannot reach {}/metrics ({})", url_text, url->origin, httplib::to_string(res.error()));
  if (res->status != 200) return error("--server {}: /metrics answered {}", url_text, res->status);
  ServerFacts s;
  s.url = url->origin;
  s.metrics = MetricSamples::parse(res->body);
  if (!s.metrics.sum("pagoda:num_preemptions_total"))
    return error("--server {}: its /metrics has no pagoda:num_preemptions (not a Pagoda server?)", url_text);
  if (auto models = cli.Get(url->api_root + "/models"); models && models->status == 200) {
    try {
      model_name = json::parse(models->body).at("data").at(0).at("id").get<std::string>();
    } catch (const json::exception&) {
    }
  }
  facts.server = std::move(s);
  return Status();
}

int run_doctor_command(const DoctorArgs& a) {
  if (a.threads > 0) ThreadPool::set_default_threads(a.threads);
  DoctorFacts facts;
  // The machine first, while this process is idle.
  CpuFacts cpu;
  cpu.load = sample_cpu_load(a.load_seconds);
  cpu.threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (a.bandwidth_seconds > 0) {
    cpu.stream_window_s = 0.1;
    cpu.stream_samples = sample_stream(ThreadPool::global(), a.bandwidth_seconds, cpu.stream_window_s);
  }
  facts.cpu = cpu;
  SamplingFacts sf;
  sf.params = a.sampling;
  facts.sampling = sf;

  ModelPart mp;
  if (!a.model.empty())
    if (Status st = gather_model(a, ThreadPool::global(), facts, mp); !st.is_ok()) return report_error(st);
  std::string served;
  if (!a.server.empty())
    if (Status st = gather_server(a.server, facts, served); !st.is_ok()) return report_error(st);

  const std::vector<Finding> findings = run_doctor(facts);
  const bool needs_change = std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.severity != Severity::kInfo; });

  // The summary: where things stand, whatever was found.
  json summary = json::object();
  const CpuLoad& l = facts.cpu->load;
  summary["cpu"] = {{"cores", l.cores}, {"machine_cores", l.machine_cores}, {"threads", facts.cpu->threads},
                    {"other_cores", l.other_cores}, {"busy_cores", l.busy_cores}, {"steal_share", l.steal_share},
                    {"loadavg_1m", l.loadavg_1m}, {"window_s", l.window_s}};
  if (!facts.cpu->stream_samples.empty()) {
    const RateSpread r = rate_spread(facts.cpu->stream_samples);
    summary["cpu"]["bandwidth"] = {{"samples", facts.cpu->stream_samples.size()},
                                   {"window_s", facts.cpu->stream_window_s}, {"min_bytes_per_s", r.min},
                                   {"p10_bytes_per_s", r.p10}, {"median_bytes_per_s", r.median},
                                   {"p90_bytes_per_s", r.p90}, {"max_bytes_per_s", r.max}};
  }
  if (facts.memory) {
    const MemoryFacts& m = *facts.memory;
    summary["memory"] = memory_plan_json(m.plan);
    summary["memory"]["budget_bytes"] = m.budget;
    summary["memory"]["budget_given"] = m.budget_given;
  }
  double decode_share = 0;
  if (facts.decode && facts.decode->matrix_s > 0 && facts.decode->stream_bytes_per_s > 0) {
    const DecodeFacts& d = *facts.decode;
    const double achieved = d.weight_bytes_per_step / d.matrix_s;
    decode_share = achieved / d.stream_bytes_per_s;
    summary["decode"] = {{"weight_bytes_per_step", d.weight_bytes_per_step}, {"matrix_s", d.matrix_s},
                         {"achieved_bytes_per_s", achieved}, {"stream_bytes_per_s", d.stream_bytes_per_s},
                         {"share", decode_share}, {"bound", decode_share >= kComputeBoundShare ? "memory" : "compute"},
                         {"format", d.bulk_format}, {"hardware", mp.hw->name}};
  }
  double hit_rate = -1, preemptions = 0, requests = 0;
  if (facts.server) {
    const MetricSamples& m = facts.server->metrics;
    const double q = m.sum("pagoda:prefix_cache_queries_total").value_or(0);
    hit_rate = q > 0 ? m.sum("pagoda:prefix_cache_hits_total").value_or(0) / q : -1;
    preemptions = m.sum("pagoda:num_preemptions_total").value_or(0);
    requests = m.sum("pagoda:request_success_total").value_or(0);
    summary["server"] = {{"url", facts.server->url}, {"model", served}, {"requests", requests},
                         {"preemptions", preemptions}, {"prefix_cache_query_tokens", q},
                         {"prefix_cache_hit_rate", hit_rate < 0 ? json(nullptr) : json(hit_rate)},
                         {"kv_cache_usage", m.sum("pagoda:kv_cache_usage_perc").value_or(0)},
                         {"resident_bytes", m.sum("pagoda:process_resident_bytes").value_or(0)}};
  }
  if (facts.chat_template) summary["template"] = facts.chat_template->origin;

  if (a.json) {
    json checks = json::array();
    for (const DoctorCheck& c : doctor_checks()) checks.push_back(c.name);
    json fs = json::array();
    for (const Finding& f : findings) fs.push_back(finding_json(f));
    json j = {{"model", mp.path.empty() ? json(nullptr) : json(mp.path)},
              {"checks", checks},
              {"summary", summary},
              {"findings", fs},
              {"needs_change", needs_change}};
    fmt::print("{}\n", j.dump(2, ' ', false, json::error_handler_t::replace));
    return needs_change ? 2 : 0;
  }

  fmt::print("pagoda doctor\n");
  fmt::print("  cpu       {} thread{} on {} usable core{} ({} in the machine); other load {:.2f} cores over {:.1f} s, "
             "load average {:.2f}\n",
             facts.cpu->threads, facts.cpu->threads == 1 ? "" : "s", l.cores, l.cores == 1 ? "" : "s",
             l.machine_cores, l.other_cores, l.window_s, l.loadavg_1m);
  if (summary["cpu"].contains("bandwidth")) {
    const json& b = summary["cpu"]["bandwidth"];
    fmt::print("  bandwidth memory reads at {:.1f} GB/s (median of {} samples; 10th-90th percentile {:.1f}-{:.1f})\n",
               b["median_bytes_per_s"].get<double>() / 1e9, b["samples"].get<size_t>(),
               b["p10_bytes_per_s"].get<double>() / 1e9, b["p90_bytes_per_s"].get<double>() / 1e9);
  }
  if (facts.memory) {
    const MemoryPlan& p = facts.memory->plan;
    fmt::print("  model     {} | {} | ctx {} | max-num-seqs {} | KV {}\n", mp.path, mp.arch, mp.ctx,
               facts.memory->config.scheduler.max_num_seqs, kv_type_name(facts.memory->config.kv_type));
    fmt::print("  memory    {:.0f} MiB of {:.0f} MiB {}: weights {:.0f}, KV {:.0f} ({} blocks), metadata and tokenizer "
               "{:.0f}, scratch {:.0f}, runtime {:.0f}\n",
               mib(p.total()), mib(facts.memory->budget), facts.memory->budget_given ? "budget" : "available",
               mib(p.weights_resident), mib(p.kv.bytes), p.kv.blocks, mib(p.metadata + p.tokenizer),
               mib(p.model_scratch + p.engine_scratch), mib(p.runtime));
  }
  if (summary.contains("decode")) {
    const json& d = summary["decode"];
    fmt::print("  decode    {}-bound: the weights stream at {:.1f} GB/s, {:.0f}% of the {:.1f} GB/s a plain read "
               "reaches here ({})\n",
               d["bound"].get<std::string>(), d["achieved_bytes_per_s"].get<double>() / 1e9, 100 * decode_share,
               d["stream_bytes_per_s"].get<double>() / 1e9, mp.hw->name);
  }
  if (facts.chat_template) fmt::print("  template  {}\n", facts.chat_template->origin);
  if (facts.server)
    fmt::print("  server    {}{}: {:.0f} finished requests, {:.0f} preemptions, prefix cache {}\n", facts.server->url,
               served.empty() ? "" : " (" + served + ")", requests, preemptions,
               hit_rate < 0 ? std::string("not queried") : fmt::format("hit rate {:.1f}%", 100 * hit_rate));
  if (findings.empty()) {
    fmt::print("no findings: nothing to change\n");
    return 0;
  }
  fmt::print("{} finding{}\n", findings.size(), findings.size() == 1 ? "" : "s");
  for (const Finding& f : findings) {
    fmt::print("  [{}] {}: {}\n", severity_name(f.severity), f.id, f.what);
    fmt::print("      why: {}\n", f.why);
    fmt::print("      fix: {}\n", f.fix);
  }
  return needs_change ? 2 : 0;
}

}  // namespace

Subcommand add_doctor_command(CLI::App& app) {
  auto args = std::make_shared<DoctorArgs>();
  CLI::App* sub = add_subcommand(app, "doctor",
                                 "Check a setup (model, flags, this machine, a running server) and say what to change");
  sub->add_option("-m,--model", args->model,
                  "GGUF model file or catalog name: check its memory, decode speed and chat template");
  add_threads_option(*sub, args->threads);
  add_context_option(*sub, args->ctx, "Context length of each sequence (default: the trained one)");
  add_engine_options(*sub, args->engine);
  add_generation_options(*sub, args->sampling, args->seed, args->stop);
  sub->add_option("--chat-template", args->chat_template_file, "Jinja chat template file to check instead of the model's");
  sub->add_option("-p,--prompt", args->prompt, "A raw prompt for `pagoda run` to check (a BOS of its own, ...)");
  sub->add_flag("--no-bos", args->no_bos, "The prompt is run with --no-bos");
  sub->add_option("--server", args->server, "A running Pagoda server (http://host:port) whose /metrics to check");
  sub->add_option("--memory-budget", args->budget,
                  "Memory the setup must fit in: bytes (K/M/G suffixes) or a fraction of the available memory "
                  "(default: all available)");
  sub->add_option("--hardware", args->hardware, "auto (measure this machine once, cached), none, or a named profile");
  sub->add_option("--load-seconds", args->load_seconds, "How long to watch the machine's other load")
      ->check(CLI::Range(0.05, 10.0));
  sub->add_option("--bandwidth-seconds", args->bandwidth_seconds,
                  "How long to sample the memory read rate for its swings (0: not sampled)")
      ->check(CLI::Range(0.0, 30.0));
  sub->add_flag("--json", args->json, "One JSON object (docs/doctor.md describes its keys)");
  return {"doctor", sub, [args] { return run_doctor_command(*args); }};
}

}  // namespace pagoda
