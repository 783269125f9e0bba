// What turns one sequence's sampled tokens into what a caller sees, in one place for the
// CLI and the server: the incremental text (never half a UTF-8 character), the end of
// generation (an end-of-generation token unless ignore_eos, a stop token id, a stop
// string, the length limits), and stop strings with hold-back: text that could still
// grow into a stop string is held until it cannot, so a stream never shows part of one,
// and a match ends the sequence inside the engine, in the step that produced it.
// One per sequence, owned by the engine's thread; O(length of the held tail) per token.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class OutputProcessor {
 public:
  // tokenizer may be null: no text, no stop strings (the engine refuses those without
  // one), only token rules.
  OutputProcessor(const Tokenizer* tokenizer, const RequestParams& params);

  struct Update {
    std::string text;               // safe to emit now
    FinishReason finish = FinishReason::kNone;
    std::string stop_string;        // the stop string that matched, if one did
  };
  // A newly sampled token; at_length: the sequence reached its max_tokens or the model
  // length with it, so whatever text is held is released. grammar_done: the request's
  // constraint is complete and this token is its stop token (no text; finish "stop").
  Update push(int32_t token, bool at_length, bool grammar_done = false);

 private:
  std::string release_held();

  const Tokenizer* tokenizer_;
  const RequestParams& params_;
  std::optional<IncrementalDetokenizer> detok_;
  std::string held_;
  bool done_ = false;
};

}  // namespace pagoda
