// `pagoda inspect MODEL`: metadata, tensors and formats, parameter count, memory needed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <map>
#include <memory>

#include "gguf/gguf_file.h"
#include "engine/engine.h"
#include "kernels/matmul/packed_weights.h"
#include "kv/kv_storage.h"
#include "model/kv_cache.h"
#include "base/system_memory.h"
#include "model/model.h"
#include "plan/memory_plan.h"
#include "cli/commands.h"
#include "cli/model_loader.h"
#include "cli/pull_progress.h"
#include "cli/common_options.h"
#include "base/human_size.h"
#include "base/printable.h"
#include "quant/sparse24.h"
#include "quant/w8a8.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace pagoda {
namespace {

struct InspectArgs {
  std::string model;
  bool all_tensors = false;
  int32_t ctx = 4096;
};

std::string value_to_string(const GgufValue& v, size_t max_items) {
  // Strings come from the file: escaped and cut so that a hostile one cannot drive the
  // terminal (escape sequences, bidi overrides) or fill the screen.
  if (const auto* s = v.as_string()) return "\"" + printable(*s, 120) + "\"";
  if (const auto* a = v.as_array()) {
    std::string out = fmt::format("[{} items] [", a->values.size());
    for (size_t i = 0; i < a->values.size() && i < max_items; ++i)
      out += (i ? ", " : "") + value_to_string(a->values[i], max_items);
    if (a->values.size() > max_items) out += ", ...";
    return out + "]";
  }
  if (v.type == GgufType::BOOL) return *v.as_int() ? "true" : "false";
  if (v.type == GgufType::FLOAT32 || v.type == GgufType::FLOAT64) return fmt::format("{}", *v.as_float());
  return fmt::format("{}", *v.as_int());
}

int run_inspect(const InspectArgs& a) {
  auto path = resolve_model_arg(a.model);
  if (!path) return report_error(path.status());
  LoadMemory measured;
  const size_t heap0 = heap_in_use_bytes();
  auto file = GgufFile::open(*path);
  if (!file) {
    fmt::print(stderr, "error: {}\n", file.status().message());
    return 1;
  }
  measured.metadata = heap_in_use_bytes() - std::min(heap0, heap_in_use_bytes());
  const GgufFile& f = *file;
  fmt::print("file: {}\nGGUF version {}, {} metadata keys, {} tensors, alignment {}, size {}\n\n", f.path(),
             f.version(), f.metadata().size(), f.tensors().size(), f.alignment(), human_size(f.file_size()));
  fmt::print("metadata:\n");
  for (const auto& [k, v] : f.metadata()) fmt::print("  {:<44} {}\n", printable(k), value_to_string(v, 8));
  std::map<std::string, std::pair<int64_t, size_t>> by_type;
  int64_t params = 0;
  size_t bytes = 0;
  fmt::print("\ntensors:\n");
  size_t shown = 0;
  size_t w8a8_tensors = 0;
  size_t sparse_tensors = 0;
  for (const auto& t : f.tensors()) {
    params += t.num_elements();
    bytes += t.nbytes;
    // An I8 matrix with a companion scale tensor is W8A8 (src/quant/w8a8.h).
    const bool w8a8 = t.type == DType::I8 && f.find_tensor(t.name + std::string(kW8A8ScaleSuffix)) != nullptr;
    w8a8_tensors += w8a8 ? 1 : 0;
    sparse_tensors += is_sparse24(t.type) ? 1 : 0;
    const std::string type_name = w8a8 ? std::string(kW8A8FormatName) : std::string(dtype_name(t.type));
    auto& e = by_type[type_name];
    e.first += 1;
    e.second += t.nbytes;
    const bool layer = t.name.rfind("blk.", 0) == 0;
    if (a.all_tensors || !layer || t.name.rfind("blk.0.", 0) == 0) {
      fmt::print("  {:<36} {:<6} [{}] {}\n", printable(t.name), type_name, fmt::join(t.shape, ", "),
                 human_size(static_cast<double>(t.nbytes)));
      ++shown;
    }
  }
  if (shown < f.tensors().size())
    fmt::print("  ... {} more layer tensors (--all-tensors lists them)\n", f.tensors().size() - shown);
  fmt::print("\nformats:\n");
  for (const auto& [name, e] : by_type)
    fmt::print("  {:<6} {:>5} tensors  {}\n", name, e.first, human_size(static_cast<double>(e.second)));
  if (w8a8_tensors > 0)
    fmt::print("  {} is a Pagoda format (int8 weights with an F32 scale per row in <name>{}, int8 activations "
               "per token): llama.cpp cannot load this file\n",
               kW8A8FormatName, kW8A8ScaleSuffix);
  if (sparse_tensors > 0)
    fmt::print("  Q8_0_S24 and Q4_0_S24 are Pagoda formats (2:4 sparse: two of every four weights kept, with "
               "their positions): llama.cpp cannot load this file\n");
  fmt::print("\nparameters: {} ({:.1f}M), weights {} ({:.2f} bits/weight)\n", params, params / 1e6,
             human_size(static_cast<double>(bytes)), params ? 8.0 * bytes / params : 0.0);
  // What the loaders would refuse, one line each, before the model's own summary.
  if (auto tok = Tokenizer::from_gguf(f); !tok) {
    fmt::print("tokenizer: cannot tokenize: {}\n", tok.status().message());
  } else if (auto vocab = Vocab::from_gguf(f)) {
    fmt::print("tokenizer: {}{} | {} tokens | bos {} | eos {}{}\n", tokenizer_kind_name(vocab->kind),
               vocab->kind != TokenizerKind::kByteLevelBpe ? std::string() : fmt::format(" (pre-tokenizer {})", printable(vocab->pre)),
               vocab->pieces.size(), vocab->bos, vocab->eos, vocab->add_bos ? " | adds bos" : "");
  }
  ThreadPool pool(1);
  auto model = Model::load(f, pool, /*repack=*/false);
  if (!model) {
    fmt::print("model: cannot run: {}\n", model.status().message());
    return 1;
  }
  const ModelConfig& c = (*model)->config();
  const int32_t ctx = std::min(a.ctx, c.n_ctx_train);
  // One sequence of ctx positions in the engine's pool at its defaults: sliding-window
  // layers hold their window plus a prefill chunk (kv/kv_layout.h).
  const EngineConfig ec;
  const KvShape shape = Engine::kv_shape(c, ec);
  const bool windows = shape.layout().has_windows();
  const size_t kv_full = KvCache::bytes_needed(c.n_layer, ctx, c.kv_dim());
  fmt::print("model: {} | layers {} | embd {} | heads {} (kv {}) x {} | ffn {} | vocab {} | trained ctx {}\n",
             c.arch_name, c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab, c.n_ctx_train);
  if (c.is_moe()) {
    // A token runs n_expert_used of each layer's n_expert experts: the 3-D expert tensors
    // count that share toward the active parameters and the bytes a token reads. The
    // embedding table is gathered one row per token (read in full when tied to the output).
    int64_t expert_params = 0;
    size_t expert_bytes = 0;
    for (const auto& t : f.tensors())
      if (t.shape.size() == 3 && t.name.ends_with("_exps.weight")) {
        expert_params += t.num_elements();
        expert_bytes += t.nbytes;
      }
    const double share = static_cast<double>(c.n_expert_used) / c.n_expert;
    const double active = static_cast<double>(params - expert_params) + share * static_cast<double>(expert_params);
    const GgufTensor* embd = f.find_tensor("token_embd.weight");
    const bool tied = f.find_tensor("output.weight") == nullptr;
    const double embd_bytes = embd != nullptr && !tied ? static_cast<double>(embd->nbytes) : 0.0;
    const double per_token = static_cast<double>(bytes - expert_bytes) - embd_bytes + share * static_cast<double>(expert_bytes);
    fmt::print("experts: {} per layer, {} per token, each ffn {}{} | parameters {:.1f}M total, {:.1f}M active per "
               "token | weights read per token {} of {}\n",
               c.n_expert, c.n_expert_used, c.n_ff_exp,
               c.n_ff_shexp > 0 ? fmt::format(", plus a shared expert of ffn {}", c.n_ff_shexp) : std::string(),
               params / 1e6, active / 1e6, human_size(per_token), human_size(static_cast<double>(bytes)));
  }
  // The engine's own sizing, as `pagoda plan` prints it in full (src/plan/memory_plan.h).
  EngineConfig one = ec;
  one.max_model_len = ctx;
  one.scheduler.max_num_seqs = 1;
  measure_tokenizer(f, measured);
  auto plan = plan_memory(f, **model, one, 0, measured);
  if (!plan) {
    fmt::print("memory: {}\n", plan.status().message());
    return 0;
  }
  const MemoryPlan& m = *plan;
  auto hs = [](size_t b) { return human_size(static_cast<double>(b)); };
  fmt::print("memory at ctx {}: weights {} resident ({} in the file{}) + KV cache {} (FP16{}) + metadata {} + "
             "tokenizer {} + scratch {} + runtime {} = {} (pagoda plan: the parts, and what fits)\n",
             ctx, hs(m.weights_resident), hs(m.weights_file),
             m.packed_matrices > 0 ? fmt::format("; {} of panels", hs(m.packed)) : std::string(), hs(m.kv.bytes),
             windows ? fmt::format("; sliding-window layers keep their {}-position window and a {}-token prefill "
                                   "chunk, {} for all positions of every layer",
                                   c.sliding_window, ec.scheduler.max_num_batched_tokens, hs(kv_full))
                     : std::string(),
             hs(m.metadata), hs(m.tokenizer), hs(m.model_scratch + m.engine_scratch), hs(m.runtime), hs(m.total()));
  return 0;
}

}  // namespace

Subcommand add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = add_subcommand(app, "inspect", "Print a GGUF model's metadata, tensors, formats and memory needs");
  sub->add_option("model", args->model, "GGUF file")->required();
  sub->add_flag("--all-tensors", args->all_tensors, "List every tensor, not only the first layer's");
  add_context_option(*sub, args->ctx, "Context length for the KV memory estimate");
  return {"inspect", sub, [args] { return run_inspect(*args); }};
}

}  // namespace pagoda
