// Each doctor check sees the fault injected into its facts, and says nothing about a
// clean setup.
#include <gtest/gtest.h>

#include <algorithm>

#include "doctor/checks.h"
#include "tokenizer/test_vocabs.h"

namespace pagoda {
namespace {

bool has(const std::vector<Finding>& fs, const std::string& id) {
  return std::any_of(fs.begin(), fs.end(), [&](const Finding& f) { return f.id == id; });
}

const Finding& get(const std::vector<Finding>& fs, const std::string& id) {
  auto it = std::find_if(fs.begin(), fs.end(), [&](const Finding& f) { return f.id == id; });
  EXPECT_NE(it, fs.end()) << id;
  return *it;
}

std::string ids(const std::vector<Finding>& fs) {
  std::string s;
  for (const Finding& f : fs) s += f.id + " ";
  return s;
}

// A model of 100 MiB of weights whose KV takes 2 KiB per token in f16 (1 in int8).
MemoryFacts memory_facts(int32_t seqs, int32_t ctx, size_t budget) {
  MemoryFacts m;
  m.config.scheduler.max_num_seqs = seqs;
  m.config.max_model_len = ctx;
  m.budget = budget;
  m.budget_given = true;
  m.params = 200e6;
  m.bits_per_weight = 4.2;
  m.replan = [](const EngineConfig& e) -> Result<MemoryPlan> {
    MemoryPlan p;
    p.weights_resident = size_t{100} << 20;
    const size_t per_token = e.kv_type == KvType::kI8 ? 1024 : 2048;
    p.kv.wanted = static_cast<size_t>(e.scheduler.max_num_seqs) * static_cast<size_t>(e.max_model_len) * per_token;
    p.kv.bytes = e.kv_cache_bytes > 0 ? e.kv_cache_bytes : p.kv.wanted;
    p.kv.max_model_len = std::min<int64_t>(e.max_model_len, static_cast<int64_t>(p.kv.bytes / per_token));
    return p;
  };
  m.plan = *m.replan(m.config);
  return m;
}

TEST(DoctorMemory, ConfigurationOverBudgetGetsTheCheapestChangeThatFits) {
  DoctorFacts f;
  // 100 + 64 (4 x 8192 x 2 KiB) + 24 runtime = 188 MiB in 150: int8 KV gives 156 (still
  // over), two sequences 156, one sequence 140.
  f.memory = memory_facts(4, 8192, size_t{150} << 20);
  const auto out = run_doctor(f);
  ASSERT_TRUE(has(out, "memory.does_not_fit")) << ids(out);
  const Finding& x = get(out, "memory.does_not_fit");
  EXPECT_EQ(x.severity, Severity::kError);
  EXPECT_EQ(x.fix.rfind("--max-num-seqs 1 ", 0), 0u) << x.fix;
  EXPECT_NE(x.fix.find("--kv-cache-dtype int8 -c"), std::string::npos) << x.fix;
  for (const auto& alt : x.data["fixes"]) EXPECT_LE(alt["total_bytes"].get<size_t>(), size_t{150} << 20);
}

TEST(DoctorMemory, InsufficientForTheWeightsSaysSo) {
  DoctorFacts f;
  f.memory = memory_facts(1, 1024, size_t{90} << 20);
  const auto out = run_doctor(f);
  ASSERT_TRUE(has(out, "memory.does_not_fit"));
  EXPECT_NE(get(out, "memory.does_not_fit").fix.find("a smaller model"), std::string::npos);
}

TEST(DoctorMemory, KvSmallerThanOneSequenceIsFound) {
  DoctorFacts f;
  f.memory = memory_facts(1, 8192, size_t{1} << 30);
  f.memory->config.kv_cache_bytes = size_t{4} << 20;  // 2048 tokens
  f.memory->plan = *f.memory->replan(f.memory->config);
  const auto out = run_doctor(f);
  ASSERT_TRUE(has(out, "memory.context_cut")) << ids(out);
  EXPECT_EQ(get(out, "memory.context_cut").data["kv_tokens"].get<int64_t>(), 2048);
}

TEST(DoctorMemory, FittingConfigurationReportsNothing) {
  DoctorFacts f;
  f.memory = memory_facts(4, 8192, size_t{1} << 30);
  EXPECT_TRUE(run_doctor(f).empty()) << ids(run_doctor(f));
}

DecodeFacts decode_facts(double share, int threads, int cores) {
  DecodeFacts d;
  d.weight_bytes_per_step = 200e6;
  d.stream_bytes_per_s = 40e9;
  d.matrix_s = d.weight_bytes_per_step / (share * d.stream_bytes_per_s);
  d.bulk_format = "Q4_K";
  d.threads = threads;
  d.cores = cores;
  d.format_rates = {{"Q4_K", share * 40e9}, {"Q4_0", 36e9}};
  return d;
}

TEST(DoctorDecode, SlowKernelsAreComputeBoundAndTheFixUsesTheCores) {
  DoctorFacts f;
  f.decode = decode_facts(0.3, 1, 2);
  auto out = run_doctor(f);
  ASSERT_TRUE(has(out, "decode.compute_bound"));
  EXPECT_EQ(get(out, "decode.compute_bound").fix.rfind("-t 2", 0), 0u);
  f.decode = decode_facts(0.3, 2, 2);
  out = run_doctor(f);
  ASSERT_TRUE(has(out, "decode.compute_bound"));
  EXPECT_NE(get(out, "decode.compute_bound").fix.find("--type Q4_0"), std::string::npos);
}

TEST(DoctorDecode, BandwidthBoundDecodeReportsNothing) {
  DoctorFacts f;
  f.decode = decode_facts(0.9, 2, 2);
  EXPECT_TRUE(run_doctor(f).empty());
}

CpuFacts cpu_facts(int threads, int cores, double other) {
  CpuFacts c;
  c.threads = threads;
  c.load.cores = cores;
  c.load.machine_cores = cores;
  c.load.window_s = 1;
  c.load.other_cores = other;
  c.load.busy_cores = other;
  if (other > 0) c.load.top.push_back({1234, "busy", other});
  return c;
}

TEST(DoctorCpu, MoreThreadsThanCoresIsFound) {
  DoctorFacts f;
  f.cpu = cpu_facts(4, 2, 0);
  const auto out = run_doctor(f);
  ASSERT_TRUE(has(out, "cpu.threads_over_cores"));
  EXPECT_EQ(get(out, "cpu.threads_over_cores").fix, "-t 2");
}

TEST(DoctorCpu, BusyCoreIsFoundWithTheProcessAndFewerThreads) {
  DoctorFacts f;
  f.cpu = cpu_facts(2, 2, 1.0);
  const auto out = run_doctor(f);
  ASSERT_TRUE(has(out, "cpu.other_load"));
  const Finding& x = get(out, "cpu.other_load");
  EXPECT_NE(x.what.find("busy (pid 1234)"), std::string::npos) << x.what;
  EXPECT_EQ(x.fix.rfind("-t 1 ", 0), 0u) << x.fix;
  // Threads that already leave the busy core alone are fine.
  f.cpu = cpu_facts(1, 2, 1.0);
  EXPECT_FALSE(has(run_doctor(f), "cpu.other_load"));
}

TEST(DoctorCpu, IdleMachineAndMatchingThreadsReportNothing) {
  DoctorFacts f;
  f.cpu = cpu_facts(2, 2, 0.1);
  EXPECT_TRUE(run_doctor(f).empty());
}

TEST(DoctorCpu, MemoryReadRateThatSwingsIsFound) {
  DoctorFacts f;
  f.cpu = cpu_facts(2, 2, 0);
  f.cpu->stream_window_s = 0.1;
  // Two states of a VM's host, as this project's Zen 5 VM moves between them.
  f.cpu->stream_samples = {47e9, 48e9, 70e9, 71e9, 46e9, 69e9, 47e9, 72e9, 48e9, 70e9};
  const auto out = run_doctor(f);
  ASSERT_TRUE(has(out, "cpu.bandwidth_swings"));
  const Finding& x = get(out, "cpu.bandwidth_swings");
  EXPECT_NE(x.what.find("between 47.0 and 71.0 GB/s"), std::string::npos) << x.what;
  EXPECT_NE(x.why.find("nothing else ran here"), std::string::npos) << x.why;
  EXPECT_NE(x.fix.find("--remeasure"), std::string::npos) << x.fix;
  EXPECT_EQ(x.data["samples"], 10);
}

TEST(DoctorCpu, SteadyOrTooFewReadRateSamplesReportNothing) {
  DoctorFacts f;
  f.cpu = cpu_facts(2, 2, 0);
  f.cpu->stream_window_s = 0.1;
  // One outlier in twenty is not a swing (percentiles, not the extremes).
  f.cpu->stream_samples = std::vector<double>(19, 50e9);
  f.cpu->stream_samples.push_back(20e9);
  EXPECT_FALSE(has(run_doctor(f), "cpu.bandwidth_swings"));
  f.cpu->stream_samples = {40e9, 80e9, 40e9, 80e9};  // fewer than kBandwidthMinSamples
  EXPECT_FALSE(has(run_doctor(f), "cpu.bandwidth_swings"));
}

TEST(DoctorSampling, OutOfRangeSettingsAreFound) {
  DoctorFacts f;
  f.sampling = SamplingFacts{};
  f.sampling->params.temperature = 3;
  EXPECT_TRUE(has(run_doctor(f), "sampling.temperature_high"));
  f.sampling->params = {};
  f.sampling->params.top_p = 0.2f;
  EXPECT_TRUE(has(run_doctor(f), "sampling.top_p_low"));
  f.sampling->params = {};
  f.sampling->params.repeat_penalty = 1.8f;
  EXPECT_TRUE(has(run_doctor(f), "sampling.repeat_penalty"));
  f.sampling->params = {};
  f.sampling->params.temperature = 1.2f;
  f.sampling->params.top_k = 0;
  f.sampling->params.top_p = 1;
  f.sampling->params.min_p = 0;
  EXPECT_TRUE(has(run_doctor(f), "sampling.untruncated_tail"));
}

TEST(DoctorSampling, DefaultsAndGreedyReportNothing) {
  DoctorFacts f;
  f.sampling = SamplingFacts{};
  EXPECT_TRUE(run_doctor(f).empty());
  f.sampling->params.temperature = 0;
  f.sampling->params.top_p = 0.1f;  // does nothing when greedy
  EXPECT_TRUE(run_doctor(f).empty());
}

TEST(PrometheusText, ReadsLabelsEscapesAndSpecialValues) {
  const auto m = MetricSamples::parse(
      "# HELP x y\n# TYPE x counter\n"
      "pagoda:request_success_total{model_name=\"a\\\"b\",finished_reason=\"stop\"} 3\n"
      "pagoda:request_success_total{model_name=\"a\\\"b\",finished_reason=\"length\"} 4 1700000000\n"
      "bucket{le=\"+Inf\"} +Inf\n"
      "plain 2.5e3\n"
      "broken{le=\"1\" 7\n");
  EXPECT_EQ(m.sum("pagoda:request_success_total"), 7.0);
  EXPECT_EQ(m.get("pagoda:request_success_total", "finished_reason", "length"), 4.0);
  EXPECT_EQ(m.get("pagoda:request_success_total", "model_name", "a\"b"), 3.0);
  EXPECT_TRUE(std::isinf(*m.sum("bucket")));
  EXPECT_EQ(m.sum("plain"), 2500.0);
  EXPECT_FALSE(m.sum("broken").has_value());
  EXPECT_FALSE(m.sum("missing").has_value());
}

ServerFacts server_facts(int preemptions, int requests, int queries, int hits) {
  ServerFacts s;
  s.url = "http://x";
  s.metrics = MetricSamples::parse(fmt::format(
      "pagoda:num_preemptions_total{{model_name=\"m\"}} {}\n"
      "pagoda:request_success_total{{model_name=\"m\",finished_reason=\"stop\"}} {}\n"
      "pagoda:prefix_cache_queries_total{{model_name=\"m\"}} {}\n"
      "pagoda:prefix_cache_hits_total{{model_name=\"m\"}} {}\n"
      "pagoda:prompt_tokens_total{{model_name=\"m\"}} {}\n"
      "pagoda:kv_cache_blocks{{model_name=\"m\"}} 8\npagoda:max_num_seqs{{model_name=\"m\"}} 16\n",
      preemptions, requests, queries, hits, std::max(queries, 5000)));
  return s;
}

TEST(DoctorServer, FrequentPreemptionIsFound) {
  DoctorFacts f;
  f.server = server_facts(20, 40, 8000, 6000);
  const auto out = run_doctor(f);
  ASSERT_TRUE(has(out, "server.preemption")) << ids(out);
  EXPECT_NE(get(out, "server.preemption").fix.find("--max-num-seqs below 16"), std::string::npos);
}

TEST(DoctorServer, LowPrefixHitRateAndCachingOffAreNoted) {
  DoctorFacts f;
  f.server = server_facts(0, 40, 8000, 100);
  EXPECT_TRUE(has(run_doctor(f), "server.prefix_cache_low_hit_rate"));
  f.server = server_facts(0, 40, 0, 0);
  EXPECT_TRUE(has(run_doctor(f), "server.prefix_cache_off"));
}

TEST(DoctorServer, HealthyServerReportsNothing) {
  DoctorFacts f;
  f.server = server_facts(1, 100, 8000, 6000);
  EXPECT_TRUE(run_doctor(f).empty()) << ids(run_doctor(f));
}

// A byte-level vocabulary with the given special tokens (control type) after its bytes.
std::unique_ptr<Tokenizer> vocab_with(const std::vector<std::string>& specials, const std::string& bos = "",
                                      const std::string& eos = "") {
  Vocab v = test::bpe_vocab({});
  for (const std::string& s : specials) {
    v.pieces.push_back(s);
    v.types.push_back(TokenType::kControl);
    if (s == bos) v.bos = static_cast<int32_t>(v.pieces.size()) - 1;
    if (s == eos) v.eos = static_cast<int32_t>(v.pieces.size()) - 1;
  }
  v.add_bos = !bos.empty();
  return test::make(std::move(v));
}

constexpr const char* kChatml =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

std::vector<Finding> template_findings(const Tokenizer& tok, const std::string& source, const std::string& prompt = "",
                                       const std::string& origin = "model") {
  auto p = ChatPrompter::create(source, "qwen2", tok);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  DoctorFacts f;
  TemplateFacts t;
  t.tokenizer = &tok;
  t.prompter = p.is_ok() ? p->get() : nullptr;
  t.origin = origin;
  t.prompt = prompt;
  t.has_prompt = !prompt.empty();
  f.chat_template = t;
  return run_doctor(f);
}

TEST(DoctorTemplate, TemplateMatchingItsVocabularyReportsNothing) {
  auto tok = vocab_with({"<|im_start|>", "<|im_end|>"}, "", "<|im_end|>");
  EXPECT_TRUE(template_findings(*tok, kChatml).empty()) << ids(template_findings(*tok, kChatml));
}

TEST(DoctorTemplate, MarkersTheVocabularyLacksAreFound) {
  auto tok = vocab_with({"<start_of_turn>", "<end_of_turn>"}, "", "<end_of_turn>");
  const auto out = template_findings(*tok, kChatml);
  ASSERT_TRUE(has(out, "template.split_special")) << ids(out);
  EXPECT_NE(get(out, "template.split_special").what.find("<|im_start|>"), std::string::npos);
}

TEST(DoctorTemplate, MissingTemplateMattersOnlyWhereTheFallbackDoesNotFit) {
  // A Gemma-style vocabulary without a template: the ChatML fallback is the fault.
  auto gemma = vocab_with({"<start_of_turn>", "<end_of_turn>"}, "", "<end_of_turn>");
  auto out = template_findings(*gemma, kChatml, "", "built-in chatml");
  ASSERT_TRUE(has(out, "template.missing")) << ids(out);
  EXPECT_FALSE(has(out, "template.split_special"));
  // A ChatML vocabulary gets the right fallback: nothing to say.
  auto chatml = vocab_with({"<|im_start|>", "<|im_end|>"}, "", "<|im_end|>");
  EXPECT_TRUE(template_findings(*chatml, kChatml, "", "built-in chatml").empty());
}

TEST(DoctorTemplate, BosTwiceAndBosMissingAreFound) {
  auto tok = vocab_with({"<s>", "<|im_start|>", "<|im_end|>"}, "<s>", "<|im_end|>");
  EXPECT_TRUE(has(template_findings(*tok, std::string("{{ bos_token }}<s>") + kChatml), "template.double_bos"));
  EXPECT_TRUE(has(template_findings(*tok, kChatml), "template.no_bos"));
  EXPECT_TRUE(template_findings(*tok, std::string("{{ bos_token }}") + kChatml).empty());
}

TEST(DoctorTemplate, TurnsThatDoNotEndGenerationAreFound) {
  auto tok = vocab_with({"<|im_start|>", "<|im_end|>", "<|im_sep|>"}, "", "<|im_end|>");
  const std::string plain = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}\n{% endfor %}";
  EXPECT_TRUE(has(template_findings(*tok, plain), "template.turn_end_missing"));
  const std::string sep = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_sep|>{% endfor %}";
  EXPECT_TRUE(has(template_findings(*tok, sep), "template.turn_end_not_eog"));
}

TEST(DoctorTemplate, RawPromptWithItsOwnBosIsFound) {
  auto tok = vocab_with({"<s>", "<|im_start|>", "<|im_end|>"}, "<s>", "<|im_end|>");
  const std::string tpl = std::string("{{ bos_token }}") + kChatml;
  EXPECT_TRUE(has(template_findings(*tok, tpl, "<s>Once upon a time"), "prompt.double_bos"));
  EXPECT_TRUE(template_findings(*tok, tpl, "Once upon a time").empty());
}

TEST(DoctorChecks, EveryCheckIsRegisteredOnce) {
  std::vector<std::string> names;
  for (const DoctorCheck& c : doctor_checks()) names.push_back(c.name);
  EXPECT_EQ(names.size(), 6u);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());
}

}  // namespace
}  // namespace pagoda
