// `pagoda bench serve --base-url URL`: an online-serving load generator in the manner of
// vLLM's benchmark_serving, for any OpenAI-compatible server (Pagoda's, llama.cpp's
// llama-server, vLLM): N streaming /v1/completions requests with prompts of random token
// ids (exact lengths on every server that takes token-id prompts), sent at a Poisson
// rate or all at once, at most --max-concurrency in flight, greedy with ignore_eos so
// each produces its drawn length. Per request it times the first token (TTFT), the gaps
// between streamed tokens (ITL) and the whole request; it reports throughput and
// mean / p50 / p90 / p99 of TTFT, TPOT, ITL and end-to-end latency.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <semaphore>
#include <thread>

#include "base/printable.h"
#include "base/timer.h"
#include "cli/base_url.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/latency_stats.h"
#include "cli/model_loader.h"
#include "gguf/gguf_file.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

struct ServeBenchArgs {
  std::string base_url = "http://127.0.0.1:8080";
  std::string model_name;
  std::string vocab_model;  // GGUF file to take the vocabulary size from
  int32_t vocab = 32000;
  int32_t num_prompts = 100;
  int32_t input_len = 256;
  int32_t output_len = 128;
  double range_ratio = 0.0;
  double request_rate = 0;  // 0: all at once
  int32_t max_concurrency = 0;
  std::string api_key;
  uint32_t seed = 0;
  bool json_out = false;
};

struct Outcome {
  bool ok = false;
  std::string error;
  double ttft = 0, e2e = 0;
  int32_t tokens = 0;
  int32_t prompt_tokens = 0;
  std::vector<double> itl;
};

Outcome run_one(const ServeBenchArgs& a, const BaseUrl& url, const std::string& model,
                const std::vector<int32_t>& prompt,
                int32_t max_tokens) {
  Outcome out;
  httplib::Client cli(url.origin);
  cli.set_read_timeout(3600);
  cli.set_write_timeout(600);
  json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", true},
               {"ignore_eos", true}, {"stream_options", {{"include_usage", true}}}};
  if (!model.empty()) body["model"] = model;
  httplib::Request req;
  req.method = "POST";
  req.path = url.api_root + "/completions";
  req.headers = {{"Content-Type", "application/json"}};
  if (!a.api_key.empty()) req.headers.emplace("Authorization", "Bearer " + a.api_key);
  req.body = body.dump();
  std::string buf;
  Timer t;
  double last = 0;
  int32_t usage_tokens = -1;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    const double now = t.seconds();
    buf.append(data, len);
    size_t pos;
    while ((pos = buf.find("\n\n")) != std::string::npos) {
      std::string ev = buf.substr(0, pos);
      buf.erase(0, pos + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      ev.erase(0, 6);
      if (ev == "[DONE]") continue;
      json j = json::parse(ev, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("usage") && j["usage"].is_object()) {
        usage_tokens = j["usage"].value("completion_tokens", -1);
        out.prompt_tokens = j["usage"].value("prompt_tokens", 0);
      }
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
      const json& c = j["choices"][0];
      const std::string text = c.contains("text") && c["text"].is_string() ? c["text"].get<std::string>() : "";
      if (text.empty()) continue;
      if (out.tokens == 0) out.ttft = now;
      else out.itl.push_back(now - last);
      last = now;
      ++out.tokens;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err;
  const bool sent = cli.send(req, res, err);
  out.e2e = t.seconds();
  if (!sent) {
    out.error = httplib::to_string(err);
    return out;
  }
  if (res.status != 200) {
    out.error = fmt::format("HTTP {}: {}", res.status, buf.substr(0, 200));
    return out;
  }
  if (usage_tokens > 0) out.tokens = usage_tokens;
  out.ok = out.tokens > 0;
  if (!out.ok) out.error = "no tokens streamed";
  return out;
}

int run_bench_serve(const ServeBenchArgs& a) {
  int32_t vocab = a.vocab;
  if (!a.vocab_model.empty()) {
    auto f = GgufFile::open(a.vocab_model);
    if (!f) {
      fmt::print(stderr, "error: {}\n", f.status().message());
      return 1;
    }
    if (const GgufArray* toks = f->get_array("tokenizer.ggml.tokens")) vocab = static_cast<int32_t>(toks->values.size());
  }
  auto url = parse_base_url(a.base_url, "--base-url");
  if (!url) return report_error(url.status());
  std::string model = a.model_name;
  if (model.empty()) {
    httplib::Client cli(url->origin);
    httplib::Headers h;
    if (!a.api_key.empty()) h.emplace("Authorization", "Bearer " + a.api_key);
    auto r = cli.Get(url->api_root + "/models", h);
    if (!r || r->status != 200) {
      fmt::print(stderr, "error: cannot reach {}{}/models{}\n", url->origin, url->api_root,
                 r ? fmt::format(" (HTTP {})", r->status) : std::string(" (") + httplib::to_string(r.error()) + ")");
      return 1;
    }
    json j = json::parse(r->body, nullptr, false);
    if (!j.is_discarded() && j.contains("data") && !j["data"].empty()) model = j["data"][0].value("id", "");
  }
  std::mt19937 rng(a.seed);
  std::uniform_int_distribution<int32_t> tokd(vocab / 2, vocab - 1);
  auto draw = [&](int32_t mean) {
    const int32_t lo = std::max(1, static_cast<int32_t>(std::lround(mean * (1 - a.range_ratio))));
    const int32_t hi = std::max(lo, static_cast<int32_t>(std::lround(mean * (1 + a.range_ratio))));
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  struct Item {
    std::vector<int32_t> prompt;
    int32_t max_tokens;
    double at;
  };
  std::vector<Item> items;
  double at = 0;
  std::exponential_distribution<double> gap(a.request_rate > 0 ? a.request_rate : 1.0);
  for (int32_t i = 0; i < a.num_prompts; ++i) {
    Item it;
    it.prompt.resize(static_cast<size_t>(draw(a.input_len)));
    for (int32_t& t : it.prompt) t = tokd(rng);
    it.max_tokens = draw(a.output_len);
    if (a.request_rate > 0) at += gap(rng);
    it.at = at;
    items.push_back(std::move(it));
  }
  const int32_t conc = a.max_concurrency > 0 ? a.max_concurrency : a.num_prompts;
  std::counting_semaphore<1 << 20> slots(conc);
  std::vector<Outcome> outcomes(items.size());
  std::vector<std::thread> threads;
  Timer clock;
  for (size_t i = 0; i < items.size(); ++i) {
    const double wait = items[i].at - clock.seconds();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    slots.acquire();
    threads.emplace_back([&, i] {
      outcomes[i] = run_one(a, *url, model, items[i].prompt, items[i].max_tokens);
      slots.release();
    });
  }
  for (auto& th : threads) th.join();
  const double secs = clock.seconds();
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t out_tokens = 0, in_tokens = 0;
  int32_t ok = 0;
  std::string first_error;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    if (!o.ok) {
      if (first_error.empty()) first_error = o.error;
      continue;
    }
    ++ok;
    ttft.push_back(o.ttft * 1e3);
    e2e.push_back(o.e2e * 1e3);
    if (o.tokens > 1) tpot.push_back((o.e2e - o.ttft) / (o.tokens - 1) * 1e3);
    for (double d : o.itl) itl.push_back(d * 1e3);
    out_tokens += o.tokens;
    in_tokens += static_cast<int64_t>(items[i].prompt.size());
  }
  auto js = [](const LatencyStats& s) { return json{{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}}; };
  const LatencyStats sttft = latency_stats(ttft), stpot = latency_stats(tpot), sitl = latency_stats(itl),
                     se2e = latency_stats(e2e);
  json j = {{"base_url", a.base_url}, {"model", model}, {"num_prompts", a.num_prompts},
            {"successful", ok}, {"failed", a.num_prompts - ok}, {"first_error", first_error},
            {"request_rate", a.request_rate}, {"max_concurrency", conc}, {"seconds", secs},
            {"requests_per_second", ok / secs}, {"output_tokens_per_second", out_tokens / secs},
            {"total_tokens_per_second", (out_tokens + in_tokens) / secs}, {"input_tokens", in_tokens},
            {"output_tokens", out_tokens}, {"ttft_ms", js(sttft)}, {"tpot_ms", js(stpot)}, {"itl_ms", js(sitl)},
            {"e2e_ms", js(se2e)}};
  if (a.json_out) {
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("pagoda bench serve: {} ({}) | {} requests, {} ok | rate {} | concurrency {}\n", a.base_url, model,
               a.num_prompts, ok, a.request_rate > 0 ? fmt::format("{}/s", a.request_rate) : "inf",
               conc);
    fmt::print("  time {:.2f} s | {:.2f} req/s | output {:.1f} tok/s | total {:.1f} tok/s\n", secs, ok / secs,
               out_tokens / secs, (out_tokens + in_tokens) / secs);
    auto row = [](const char* name, const LatencyStats& s) {
      fmt::print("  {:<5} ms  mean {:8.2f}  p50 {:8.2f}  p90 {:8.2f}  p99 {:8.2f}\n", name, s.mean, s.p50, s.p90, s.p99);
    };
    row("TTFT", sttft);
    row("TPOT", stpot);
    row("ITL", sitl);
    row("E2E", se2e);
    if (!first_error.empty()) fmt::print("  first error: {}\n", first_error);
  }
  return ok == a.num_prompts ? 0 : 1;
}

}  // namespace

Subcommand add_bench_serve_command(CLI::App& bench) {
  auto args = std::make_shared<ServeBenchArgs>();
  CLI::App* sub = add_subcommand(bench, "serve", "Load-test any OpenAI-compatible server (TTFT, TPOT, ITL, latency)");
  sub->add_option("--base-url", args->base_url, "Server address");
  sub->add_option("--model", args->model_name, "Model name to send (default: the server's first)");
  sub->add_option("-m,--vocab-model", args->vocab_model, "GGUF file whose vocabulary size bounds the prompt ids");
  sub->add_option("--vocab", args->vocab, "Vocabulary size when no --vocab-model is given");
  sub->add_option("--num-prompts", args->num_prompts, "Requests")->check(CLI::PositiveNumber);
  sub->add_option("--input-len", args->input_len, "Mean prompt length (token ids)")->check(CLI::PositiveNumber);
  sub->add_option("--output-len", args->output_len, "Mean output length")->check(CLI::PositiveNumber);
  sub->add_option("--range-ratio", args->range_ratio, "Lengths uniform in [len*(1-r), len*(1+r)]")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--request-rate", args->request_rate, "Poisson arrivals per second (0: all at once)");
  sub->add_option("--max-concurrency", args->max_concurrency, "Most requests in flight (0: no limit)");
  sub->add_option("--api-key", args->api_key, "Bearer token");
  sub->add_option("--seed", args->seed, "Workload seed");
  sub->add_flag("--json", args->json_out, "Print one JSON object");
  return {"serve", sub, [args] { return run_bench_serve(*args); }};
}

}  // namespace pagoda
