// Keeps constrained text valid UTF-8 token by token. xgrammar's character classes match
// UTF-8 byte patterns loosely (a surrogate's encoding, ED A0..BF, passes), and byte-
// fallback or partial-character tokens can start a character the next token does not
// finish; strict JSON parsers (Python's json, nlohmann) refuse such text. The guard runs
// each candidate token's bytes through the UTF-8 automaton from the state the text is in
// and refuses those that would make it ill-formed.
//
// Cost: at a character boundary (almost always) it touches only the tokens that are
// ill-formed on their own, listed once per vocabulary; inside a character, one short
// automaton run per still-allowed token. Immutable after construction; shared.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

class Utf8Guard {
 public:
  static constexpr uint8_t kBoundary = 0;  // between characters
  static constexpr uint8_t kInvalid = 8;   // ill-formed

  // token_bytes[id]: what each token adds to the text (empty for control and stop
  // tokens, which are refused inside a character: the text would end there).
  explicit Utf8Guard(std::vector<std::string> token_bytes);

  // The automaton's state after `bytes`, from `state`.
  static uint8_t run(uint8_t state, std::string_view bytes);

  // Sets to -inf the logits of tokens that would make the text ill-formed from `state`
  // (a stop token is refused inside a character).
  void mask(uint8_t state, std::span<float> logits) const;
  uint8_t after(uint8_t state, int32_t token) const;

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> bad_at_boundary_;
};

}  // namespace pagoda
