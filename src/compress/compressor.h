// Prompt compression (LLMLingua-style token pruning): the context of a prompt is scored
// token by token with a small scorer model (compress/self_information.h), split into
// units (whole words by default, compress/budget.h) and pruned by the budget controller
// to a target share of the prompt's tokens; the instruction and the question are kept
// whole, and the result is instruction, compressed context and question joined by blank
// lines. Iterative mode scores the context segment by segment (runs of sentences of about
// segment_tokens), each conditioned on the already-compressed text before it, as
// LLMLingua's iterative token-level compression does; it costs about (1 + ratio) forward
// passes over the context instead of one. The sentences the question is most about
// (compress/relevance.h) are kept whole within a share of the budget, and other context
// words that repeat the question's are protected like names: LongLLMLingua's question
// awareness, lexically.
//
// Token counts are in the scorer's tokens (the model that will answer may count
// differently). Cost: the scorer's forward pass over the context with every row's
// logits (over its frequent tokens by default, compress/self_information.h), in pieces of
// logits_budget_bytes; nothing is scored when the ratio keeps all.
// Thread-safety: runs the scorer, so one compression per scorer Model at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "base/status.h"
#include "compress/budget.h"
#include "compress/segments.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class FrequentHead;

struct CompressOptions {
  double ratio = 0.5;  // the share of the prompt's tokens to keep, in (0, 1]
  Granularity granularity = Granularity::kWord;
  bool iterative = false;
  int32_t segment_tokens = 256;  // iterative: the size of a segment
  double name_share = 0.3;       // budget.h
  // Context words that repeat a question word (four letters or more, at most three times
  // in the context) are protected as names are, within the same share (word granularity).
  bool protect_question_words = true;
  // The context's sentences the question is most about (compress/relevance.h) are kept
  // whole, within this share of the context's target (0: none).
  double question_share = 0.25;
  size_t logits_budget_bytes = size_t{64} << 20;
  // The scorer's normalizer over its vocab_subset most frequent tokens plus the context's
  // (compress/self_information.h), kept only when they hold at least min_vocab_mass of the
  // probability of the rows checked; 0, or a vocabulary no larger: the exact normalizer.
  int32_t vocab_subset = 32768;
  double min_vocab_mass = 0.9;
};

struct CompressResult {
  std::string prompt;    // instruction, compressed context, question
  std::string context;   // the compressed context alone
  int32_t origin_tokens = 0;      // the whole prompt before, in scorer tokens
  int32_t compressed_tokens = 0;  // and after
  double seconds = 0;
  // The normalizer's vocabulary: its size (0: not scored, or exact) and the share of the
  // probability it held in the rows checked (NaN when not scored).
  int64_t vocab_tokens = 0;
  double vocab_mass = std::numeric_limits<double>::quiet_NaN();
};

// What is wrong with the caller's input, if anything: a ratio outside (0, 1], an empty
// prompt, or a context that must be scored and is longer than the scorer's context. A
// server answers these with a 400 and anything compress_prompt fails on after them with
// a 500. Costs a tokenization of the prompt.
std::optional<std::string> compress_input_error(const Model& scorer, const Tokenizer& tokenizer,
                                                const PromptParts& parts, const CompressOptions& options);

// Fails on what compress_input_error names, or a scorer failure. heads: where the
// scorer's frequent-token head is kept between compressions (compress/frequent_head.h);
// null makes one for this call.
Result<CompressResult> compress_prompt(Model& scorer, const Tokenizer& tokenizer, const PromptParts& parts,
                                       const CompressOptions& options, FrequentHead* heads = nullptr);

}  // namespace pagoda
