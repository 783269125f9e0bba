// `pagoda doctor`'s checks: each reads the facts gathered about a setup (the memory plan,
// this machine's measured rates and load, the sampling flags, the chat template, a running
// server's metrics) and appends a Finding for what is wrong, with the fix. A check whose
// facts are absent (no model given, no server) says nothing. The facts are gathered by the
// CLI (src/cli/doctor_command.cpp); the checks are pure, so tests inject each fault
// directly.
//
// A new check is one file, check_<name>.cpp, plus its line in the table of checks.cpp.
//
// Cost: the template check renders and tokenizes a short conversation; the memory check
// plans up to about 60 configurations (each a pass over the tensor table); the rest are
// arithmetic. Thread-safety: pure functions of their facts.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/cpu_load.h"
#include "chat/chat_prompt.h"
#include "doctor/finding.h"
#include "doctor/prometheus_text.h"
#include "engine/engine.h"
#include "plan/memory_fit.h"
#include "plan/memory_plan.h"
#include "sampling/params.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

struct MemoryFacts {
  EngineConfig config;        // as the flags give it (max_model_len set)
  MemoryPlan plan;            // of `config`
  size_t budget = 0;          // what the total must fit in
  bool budget_given = false;  // --memory-budget (else the machine's available memory)
  double params = 0;          // weights, for the size after quantizing
  double bits_per_weight = 0; // as stored
  MemoryPlanner replan;       // plans other configurations (the fixes are tried through it)
};

struct DecodeFacts {
  double weight_bytes_per_step = 0;  // every matrix of a decode step, as the engine reads them
  double matrix_s = 0;               // their predicted time for one sequence, from this machine's timings
  double stream_bytes_per_s = 0;     // a plain read of memory on the same threads
  std::string bulk_format;           // the format most of those bytes are in
  int threads = 0, cores = 0;
  // Other formats' one-token streaming rates here (name, bytes/s), for the fix.
  std::vector<std::pair<std::string, double>> format_rates;
};

struct CpuFacts {
  CpuLoad load;
  int threads = 0;  // what the engine would run (-t, else one per usable core)
  // The plain read rate of memory (bytes/s) in consecutive windows (plan/hardware.h,
  // sample_stream); empty when not sampled.
  std::vector<double> stream_samples;
  double stream_window_s = 0;
};

struct SamplingFacts {
  SamplingParams params;
};

struct TemplateFacts {
  const Tokenizer* tokenizer = nullptr;
  const ChatPrompter* prompter = nullptr;  // null: the template did not parse (template_error says why)
  std::string template_error;
  std::string origin;        // "model", "file" or "built-in <name>"
  std::string prompt;        // a raw prompt to check (-p), as `pagoda run` would tokenize it
  bool has_prompt = false;
  bool add_bos = true;       // `pagoda run` adds BOS unless --no-bos
};

struct ServerFacts {
  std::string url;
  MetricSamples metrics;  // its /metrics
};

struct DoctorFacts {
  std::optional<MemoryFacts> memory;
  std::optional<DecodeFacts> decode;
  std::optional<CpuFacts> cpu;
  std::optional<SamplingFacts> sampling;
  std::optional<TemplateFacts> chat_template;
  std::optional<ServerFacts> server;
};

// Thresholds the checks judge by, named so the docs and tests can quote them.
inline constexpr double kComputeBoundShare = 0.6;     // decode streams under 60% of the read bandwidth
inline constexpr double kBusyOtherCores = 0.5;        // other processes' load that counts as a busy core
inline constexpr double kPreemptedShare = 0.05;       // preemptions per finished request
inline constexpr int64_t kPrefixMinQueryTokens = 4096; // prompt tokens before a hit rate means anything
inline constexpr double kPrefixLowHitRate = 0.1;
inline constexpr double kBandwidthSwing = 1.25;       // 90th / 10th percentile of the read-rate samples
inline constexpr size_t kBandwidthMinSamples = 5;

// The spread of the read-rate samples (nearest-rank percentiles), as the check judges it
// and the summary reports it; `samples` must not be empty.
struct RateSpread {
  double min = 0, p10 = 0, median = 0, p90 = 0, max = 0;
};
RateSpread rate_spread(std::vector<double> samples);

void check_memory(const DoctorFacts& f, std::vector<Finding>& out);
void check_decode_bound(const DoctorFacts& f, std::vector<Finding>& out);
void check_cpu(const DoctorFacts& f, std::vector<Finding>& out);
void check_sampling(const DoctorFacts& f, std::vector<Finding>& out);
void check_chat_template(const DoctorFacts& f, std::vector<Finding>& out);
void check_server(const DoctorFacts& f, std::vector<Finding>& out);

struct DoctorCheck {
  const char* name;         // the id prefix of its findings
  const char* description;  // one line, for --list-checks and the docs
  void (*run)(const DoctorFacts&, std::vector<Finding>&);
};

// Every check, in the order the report lists them.
std::span<const DoctorCheck> doctor_checks();

// All checks over `facts`: errors first, then warnings, then notes, each in check order.
std::vector<Finding> run_doctor(const DoctorFacts& facts);

}  // namespace pagoda
