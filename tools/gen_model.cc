// pagoda-gen-model: writes a random-weight GGUF model (see src/model/random_model.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/arch_spec.h"
#include "model/random_model.h"

int main(int argc, char** argv) {
  using namespace pagoda;
  RandomModelSpec s;
  std::string type = "F32", out;
  int threads = 0;
  CLI::App app{"Write a random-weight GGUF model"};
  // A flag given twice takes its last value, so scripts can append overrides to a shape.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<std::string> archs;
  for (const pagoda::ArchSpec* a : pagoda::all_archs()) archs.push_back(a->name);
  app.add_option("--arch", s.arch, "Architecture: " + pagoda::arch_names())->check(CLI::IsMember(archs));
  app.add_option("--type", type, "Format of the 2-D weights: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, ..., W8A8");
  app.add_option("-o,--output", out, "Output GGUF path")->required();
  app.add_option("--dim", s.dim, "Embedding width");
  app.add_option("--layers", s.layers, "Number of layers");
  app.add_option("--heads", s.heads, "Query heads");
  app.add_option("--kv-heads", s.kv_heads, "Key/value heads (GQA when fewer than --heads)");
  app.add_option("--head-dim", s.head_dim, "Per-head width (default dim / heads)");
  app.add_option("--rope-dims", s.rope_dims, "Rotated dimensions of a head (rope.dimension_count; default all)");
  app.add_option("--ff", s.ff, "Feed-forward width");
  app.add_option("--vocab", s.vocab, "Vocabulary size (>= 262)");
  app.add_option("--ctx", s.ctx, "Trained context length to record");
  app.add_option("--sliding-window", s.sliding_window, "Sliding window (gemma3, gemma2; olmo2 with --swa-pattern)");
  app.add_option("--swa-pattern", s.swa_pattern,
                 "olmo2: write OLMo 3's sliding-window layers, every N-th layer global (default 0: none, OLMo 2)");
  app.add_flag("--rope-freqs", s.rope_freqs, "Write a rope_freqs.weight tensor (Llama 3.1's RoPE frequency factors)");
  app.add_option("--rope-scaling", s.rope_scaling, "RoPE scaling to record: linear or yarn")->check(CLI::IsMember({"linear", "yarn"}));
  app.add_option("--rope-factor", s.rope_factor, "RoPE scaling factor (with --rope-scaling)");
  app.add_option("--rope-orig-ctx", s.rope_orig_ctx,
                 "Original context length (rope.scaling.original_context_length) for --rope-scaling yarn and --longrope");
  app.add_flag("--longrope", s.longrope,
               "Write LongRoPE's rope_factors_long/short.weight and attention factor (phi3): the long factors apply "
               "when the context exceeds --rope-orig-ctx");
  app.add_option("--experts", s.experts,
                 "Experts per layer (mixture of experts: " + pagoda::moe_arch_names() +
                     "; llama with experts is Mixtral; default 4 where the architecture requires experts)");
  app.add_option("--experts-used", s.experts_used, "Experts each token runs (default 2 with the default experts)");
  app.add_option("--expert-ff", s.expert_ff, "Each expert's FFN width (default --ff)");
  app.add_option("--shared-expert-ff", s.shared_expert_ff, "The shared expert's FFN width (qwen2moe; default --ff)");
  app.add_option("--router-skew", s.router_skew,
                 "Make the router prefer low expert ids by about this many logits (uneven expert load)");
  app.add_option("--seed", s.seed, "Seed of the weights");
  app.add_option("-t,--threads", threads, "Threads");
  CLI11_PARSE(app, argc, argv);
  // W8A8 is a pair of tensors per matrix, not a GGUF type; the spec spells it I8.
  auto t = type == "W8A8" ? std::optional<DType>(DType::I8) : dtype_from_name(type);
  if (!t) {
    fmt::print(stderr, "error: unknown --type {}\n", type);
    return 1;
  }
  s.type = *t;
  if (threads > 0) ThreadPool::set_default_threads(threads);
  Status st = write_random_model(s, out);
  if (!st) {
    fmt::print(stderr, "error: {}\n", st.message());
    return 1;
  }
  fmt::print("wrote {}\n", out);
  return 0;
}
