// Perplexity of a model over a text and, given a base model (usually the unquantized
// original), the KL divergence and top-1 agreement against it: what `pagoda perplexity`
// computes, with llama-perplexity's conventions so the numbers compare with it. The text
// is tokenized once with BOS as the vocabulary asks; chunk i is tokens [i*c, (i+1)*c),
// its first token replaced by BOS when the model adds one; only the second half is
// scored (positions c/2 .. c-2 predicting the next token), so every scored token sees at
// least c/2 tokens of context; the text must hold at least 2*c tokens; PPL = e^(mean NLL)
// with error PPL * SE(mean NLL).
//
// Cost: one forward pass over n_chunks * c tokens, and as many for the base when its
// cache is missing. A chunk's first half runs without logits, the scored half in pieces
// of at most logits_budget_bytes of logits (64 positions of Gemma's 262k vocabulary at
// the default), so peak memory is the weights, the KV cache of one chunk and one piece
// (the base's weights too while it runs). The base's log-probabilities are cached
// (eval/kl_base_file.h) under cache_dir, keyed by the base file's identity, the tokens,
// c and the chunk count, and a later run reuses them.
//
// Thread-safety: a run uses the model's scratch buffers, so one run per Model at a time;
// rows are spread over the model's thread pool, and `progress` is called on the calling
// thread. Cache files are written under a temporary name and renamed, so concurrent runs
// against the same base never read a half-written file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "eval/running_stats.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

struct PerplexityOptions {
  int32_t ctx = 512;     // tokens per chunk
  int32_t chunks = -1;   // chunks to evaluate; <= 0: all the text holds
  std::string kl_base;   // base GGUF file, or a distillation dump, for KL divergence; empty: perplexity only
  std::string cache_dir; // where base caches live; empty: default_kl_base_cache_dir()
  std::string text_name; // how messages name the text (its file)
  size_t logits_budget_bytes = size_t{64} << 20;
  // Progress lines (chunk by chunk, the base cache's fate); unset: none.
  std::function<void(const std::string&)> progress;
};

struct KlResult {
  std::string cache_file;
  bool cache_reused = false;
  double base_seconds = 0;  // running the base (0 when its cache was reused)
  ValueWithError base_ppl;  // from the base's exact NLLs, not the packed rows
  double ppl_ratio = 0;     // PPL(model) / PPL(base)
  ValueWithError kld;       // mean and its standard error, nats
  double kld_median = 0, kld_p99 = 0, kld_max = 0;
  ValueWithError top1;      // fraction of positions whose argmax agrees, with its error
};

struct PerplexityResult {
  int32_t n_ctx = 0;
  int32_t n_chunks = 0;
  size_t text_tokens = 0;     // the whole text's, of which n_chunks * n_ctx are evaluated
  int64_t scored_tokens = 0;
  int threads = 0;
  ValueWithError ppl;
  double nll_mean = 0;
  std::vector<double> chunk_ppl;  // running PPL after each chunk
  double seconds = 0;             // scoring the model, without loading or the base
  std::optional<KlResult> kl;     // with options.kl_base
};

// A teacher's distillation dump (`pagoda distill-dump`): the model's top_k log-probabilities
// and the rest's mass at every position perplexity would score (same chunks, -c and
// --chunks), in the KL base file format (eval/kl_base_file.h, version 2), written to
// out_path. `pagoda perplexity --kl-base out_path` then scores a student against it
// without the teacher.
struct DistillDumpResult {
  int32_t n_ctx = 0, n_chunks = 0;
  int64_t rows = 0;
  uint64_t file_bytes = 0;
  uint64_t full_logits_bytes = 0;  // the same rows as FP32 logits
  double seconds = 0;
};
Result<DistillDumpResult> write_distill_dump(Model& model, const Tokenizer& tokenizer, std::string_view text,
                                             const std::string& teacher_path, const std::string& out_path,
                                             int32_t top_k, const PerplexityOptions& options);

// Fails on a context under 4 or over the model's, a text under two chunks, a base whose
// vocabulary differs or that does not load, a damaged cache that cannot be rewritten,
// or non-finite logits.
Result<PerplexityResult> compute_perplexity(Model& model, const Tokenizer& tokenizer, std::string_view text,
                                            const PerplexityOptions& options);

// The text file as llama.cpp's -f reads it: whole, less one trailing newline.
Result<std::string> read_perplexity_text(const std::string& path);

// $PAGODA_CACHE/kl-base, else ~/.cache/pagoda/kl-base, else .pagoda-cache/kl-base.
std::string default_kl_base_cache_dir();

}  // namespace pagoda
