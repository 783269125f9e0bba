// Constrained decoding: which tokens a sequence may produce next so that its text stays
// inside a JSON schema, any JSON object, a regular expression, a list of choices or a
// grammar (llama.cpp's GBNF / xgrammar's EBNF), applied to the logits just before
// sampling. Built on xgrammar: its compiler walks the grammar against a trie of the
// vocabulary once per grammar and stores, per parser state, which tokens are always
// allowed, always refused, or must be checked at run time, so the per-token work is a
// bitmask fill (usually a few microseconds to tens of them on a 262k vocabulary) plus one
// pass that sets the refused logits to -inf.
//
// Cost: ConstraintCompiler::create sorts and indexes the vocabulary (tens of ms at 262k
// tokens). compile() costs from under a millisecond (a choice list) to a second for a
// large schema; compiled grammars are cached by the compiler (same spec, same object).
// Thread-safety: a ConstraintCompiler may compile from any number of threads at once; a
// Constraint is immutable and shared by every sequence that uses it; a ConstraintMatcher
// belongs to one sequence (one thread at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace pagoda {

class Tokenizer;

// Whitespace a schema allows between JSON tokens, at most this many characters per gap
// (llama.cpp's JSON grammars allow a newline and 20 indentation characters): pretty
// printing stays possible, and a model cannot spend its whole budget on spaces. Grammars
// built elsewhere (tool calls' structural tags) use the same cap.
inline constexpr int kMaxJsonWhitespace = 20;

enum class ConstraintKind {
  kJsonSchema,  // text: the schema (JSON)
  kJsonObject,  // any JSON value whose top level is an object
  kRegex,       // text: the pattern (ECMAScript-like, as xgrammar reads it)
  kChoice,      // choices: the text is exactly one of them
  kGrammar,     // text: GBNF / EBNF with a `root` rule
  kStructuralTag,  // text: xgrammar's structural tag JSON (tool calls, tagged regions)
};
const char* constraint_kind_name(ConstraintKind k);

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;
  // JSON schema only: false lets properties not in the schema through where the schema
  // does not say additionalProperties (OpenAI's non-strict mode).
  bool strict = true;
};

// A compiled grammar over one vocabulary. Opaque; shared read-only.
class Constraint;

class ConstraintMatcher {
 public:
  explicit ConstraintMatcher(std::shared_ptr<const Constraint> constraint);
  ~ConstraintMatcher();
  ConstraintMatcher(const ConstraintMatcher&) = delete;
  ConstraintMatcher& operator=(const ConstraintMatcher&) = delete;

  // Sets to -inf every logit the grammar does not allow next. `logits` may be wider than
  // the vocabulary the constraint was compiled for (the extra ids are refused).
  void mask(std::span<float> logits);
  // Advances past `token`; false (state unchanged) when the grammar does not allow it.
  bool accept(int32_t token);
  // The grammar accepted one of its stop tokens: nothing may follow.
  bool terminated() const;
  // Tokens the grammar forces from here whatever the model says (may be empty): the
  // forced text as `tokenizer` encodes a continuation (special tokens parsed, so
  // "<tool_call>" is its own token as the model writes it, where a byte-wise longest match
  // would spell it out and mislead the model), without the last token, which could merge
  // with what follows.
  // Empty when the encoding does not spell the text byte for byte.
  std::vector<int32_t> forced_tokens(const Tokenizer& tokenizer) const;
  // An independent copy in the same state (n > 1 forks).
  std::unique_ptr<ConstraintMatcher> fork() const;

 private:
  struct Impl;
  explicit ConstraintMatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class ConstraintCompiler {
 public:
  // `logits_width`: the model's output row size (>= the tokenizer's vocabulary). The
  // tokenizer's end-of-generation ids end a constrained text; control tokens never
  // appear in one. `threads`: xgrammar's compile threads.
  static Result<std::unique_ptr<ConstraintCompiler>> create(const Tokenizer& tokenizer, int32_t logits_width,
                                                            int threads);
  ~ConstraintCompiler();

  // A spec that cannot be compiled (invalid JSON, an unsupported schema keyword, a
  // grammar syntax error, an empty choice list) is an error saying why.
  Result<std::shared_ptr<const Constraint>> compile(const ConstraintSpec& spec) const;

 private:
  struct Impl;
  explicit ConstraintCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda
