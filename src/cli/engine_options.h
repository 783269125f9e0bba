// The engine flags every subcommand that runs the engine shares (run, bench, serve), with
// vLLM's names: KV memory budget and block size, batch limits, scheduler mode and policy,
// prefix caching, the hybrid KV cache manager (sliding-window blocks released),
// speculative decoding.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/engine.h"

namespace CLI {
class App;
}

namespace pagoda {

struct EngineArgs {
  std::string kv_cache_memory;  // "4GiB", "512M", bytes, or a fraction of available memory ("0.3")
  int32_t block_size = 16;
  std::string kv_cache_dtype = "f16";
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  std::string scheduler = "continuous";
  std::string policy = "fcfs";
  bool no_prefix_caching = false;
  bool disable_hybrid_kv = false;
  bool no_grammar_fast_forward = false;
  std::string speculative_config;  // vLLM's JSON (engine/speculative.h); "" off
  // llama.cpp's draft-model flags, the same as {"method": "draft_model", ...}.
  std::string model_draft;
  int32_t draft_max = 16;
  int32_t draft_min = 0;
  float draft_p_min = 0.75f;
};

void add_engine_options(CLI::App& app, EngineArgs& args);

// A memory size: a number with an optional K/M/G/T suffix (powers of 1024, "iB"/"B"
// optional), or a fraction in (0, 1) of the machine's available memory.
Result<size_t> parse_memory_size(const std::string& s);

// max_model_len: the context per sequence (0: the model's).
Result<EngineConfig> engine_config(const EngineArgs& args, int32_t max_model_len);

}  // namespace pagoda
