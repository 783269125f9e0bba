#include "cli/engine_options.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <cmath>

#include "base/system_memory.h"

namespace pagoda {

void add_engine_options(CLI::App& app, EngineArgs& a) {
  app.add_option("--kv-cache-memory", a.kv_cache_memory,
                 "KV cache budget: bytes with K/M/G suffix (e.g. 2GiB) or a fraction of available memory (e.g. 0.3); "
                 "default: enough for --max-num-seqs full contexts, at most a quarter of available memory");
  app.add_option("--block-size", a.block_size, "KV block size in tokens (a power of two)");
  app.add_option("--kv-cache-dtype", a.kv_cache_dtype,
                 "KV cache storage: f16 (default) or int8 (a scale per token and head; half the memory)");
  app.add_option("--max-num-seqs", a.max_num_seqs, "Most sequences running at once");
  app.add_option("--max-num-batched-tokens", a.max_num_batched_tokens,
                 "Token budget of one step (decodes plus prefill chunks)");
  app.add_option("--scheduler", a.scheduler, "continuous (default) or static (fixed batches, the baseline)")
      ->check(CLI::IsMember({"continuous", "static"}));
  app.add_option("--policy", a.policy, "fcfs (default) or priority (lower value first)")
      ->check(CLI::IsMember({"fcfs", "priority"}));
  app.add_flag("--no-prefix-caching", a.no_prefix_caching, "Do not reuse KV blocks of identical prompt prefixes");
  app.add_flag("--disable-hybrid-kv-cache-manager", a.disable_hybrid_kv,
               "Keep every layer's KV for the whole sequence, also for sliding-window layers (Gemma 3), "
               "instead of releasing blocks that left the window");
  app.add_flag("--no-grammar-fast-forward", a.no_grammar_fast_forward,
               "Sample every token of a constrained reply, also those its grammar forces (by default they are "
               "appended at once and computed together in the next step)");
  app.add_option("--speculative-config", a.speculative_config,
                 "Speculative decoding as vLLM configures it, a JSON object: {\"method\": \"ngram\", "
                 "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4, \"prompt_lookup_min\": 1} drafts by prompt "
                 "lookup and verifies the drafts in the step (greedy: the same tokens as plain decoding; sampled: the same "
                 "distribution); {\"model\": \"DRAFT.gguf\", \"num_speculative_tokens\": 4} drafts with a smaller model "
                 "of the same vocabulary (optional \"draft_p_min\", \"draft_min\" as below); \"branches\": B verifies "
                 "up to B alternatives together as a tree (prompt lookup: B earlier occurrences' continuations; a draft "
                 "model: its next-best tokens where it is unsure)");
  app.add_option("--model-draft", a.model_draft,
                 "(also -md) Draft model for speculative decoding, a GGUF path or catalog name with the model's "
                 "vocabulary (llama.cpp's flag)");
  app.add_option("--draft-max,--draft,--draft-n", a.draft_max, "With --model-draft: the most draft tokens per step")
      ->check(CLI::Range(1, 32));
  app.add_option("--draft-min", a.draft_min, "With --model-draft: fewer drafts than this are not verified")
      ->check(CLI::Range(0, 32));
  app.add_option("--draft-p-min", a.draft_p_min,
                 "With --model-draft: drafting stops where the draft's top probability is below this")
      ->check(CLI::Range(0.0, 0.999));
}

Result<size_t> parse_memory_size(const std::string& s) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    return error("'{}' is not a memory size (examples: 2GiB, 512M, 0.3)", s);
  }
  std::string unit = s.substr(pos);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (!(v > 0) || !std::isfinite(v)) return error("memory size '{}' must be positive", s);
  if (unit.empty() && v < 1.0) {
    const size_t avail = available_memory_bytes();
    if (avail == 0) return error("cannot read the available memory for '{}'; give a size in bytes", s);
    return static_cast<size_t>(v * static_cast<double>(avail));
  }
  // Past 2^62 bytes no machine has the memory, and the conversion below would overflow.
  constexpr double kMaxBytes = 4.6e18;
  double mult = 1;
  if (unit.size() >= 2 && unit.compare(unit.size() - 2, 2, "IB") == 0) unit.resize(unit.size() - 2);
  else if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  if (unit == "K") mult = 1024.0;
  else if (unit == "M") mult = 1024.0 * 1024;
  else if (unit == "G") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return error("'{}': unknown unit (use K, M, G or T)", s);
  const double bytes = v * mult;
  if (bytes > kMaxBytes) return error("memory size '{}' is larger than any machine's memory", s);
  if (bytes < 1.0) return error("memory size '{}' is less than one byte", s);
  return static_cast<size_t>(bytes);
}

Result<EngineConfig> engine_config(const EngineArgs& a, int32_t max_model_len) {
  EngineConfig c;
  if (!a.kv_cache_memory.empty()) {
    auto bytes = parse_memory_size(a.kv_cache_memory);
    if (!bytes) return error("--kv-cache-memory: {}", bytes.status().message());
    c.kv_cache_bytes = *bytes;
  }
  if (a.block_size < 1 || a.block_size > 1024 || (a.block_size & (a.block_size - 1)) != 0)
    return error("--block-size must be a power of two between 1 and 1024 (got {})", a.block_size);
  c.block_size = a.block_size;
  auto kt = parse_kv_type(a.kv_cache_dtype);
  if (!kt) return error("--kv-cache-dtype: {}", kt.status().message());
  c.kv_type = *kt;
  c.scheduler.max_num_seqs = a.max_num_seqs;
  c.scheduler.max_num_batched_tokens = a.max_num_batched_tokens;
  c.scheduler.mode = a.scheduler == "static" ? ScheduleMode::kStatic : ScheduleMode::kContinuous;
  c.scheduler.policy = a.policy == "priority" ? SchedulePolicy::kPriority : SchedulePolicy::kFcfs;
  c.scheduler.prefix_caching = !a.no_prefix_caching;
  c.window_kv_release = !a.disable_hybrid_kv;
  c.grammar_fast_forward = !a.no_grammar_fast_forward;
  if (!a.speculative_config.empty()) {
    auto sc = parse_speculative_config(a.speculative_config);
    if (!sc) return sc.status();
    if (c.scheduler.mode == ScheduleMode::kStatic)
      return error("--speculative-config needs the continuous scheduler (static batches run in lockstep)");
    c.speculative = *sc;
  }
  if (!a.model_draft.empty()) {
    if (!a.speculative_config.empty())
      return error("--model-draft and --speculative-config both configure speculative decoding: give one");
    if (c.scheduler.mode == ScheduleMode::kStatic)
      return error("--model-draft needs the continuous scheduler (static batches run in lockstep)");
    if (a.draft_min > a.draft_max)
      return error("--draft-min {} is more than --draft-max {}", a.draft_min, a.draft_max);
    c.speculative.method = "draft_model";
    c.speculative.model = a.model_draft;
    c.speculative.num_speculative_tokens = a.draft_max;
    c.speculative.draft_min = a.draft_min;
    c.speculative.draft_p_min = a.draft_p_min;
  }
  c.max_model_len = max_model_len;
  return c;
}

}  // namespace pagoda
