// Reasoning models (DeepSeek-R1, Qwen 3, QwQ, ...) think between <think> and </think>
// before they answer. This splits a reply as it streams into the reasoning and the
// content, as llama.cpp's --reasoning-format deepseek and vLLM's reasoning parsers do:
// a reply that opens with <think> (after whitespace), or whose prompt already opened it
// (templates that end the generation prompt with "<think>\n"), is reasoning up to
// </think>; the content follows, its leading whitespace dropped. A reply cut inside the
// thought is all reasoning.
//
// Cost: a scan of each piece. One splitter per reply, not shared between threads.
#pragma once

#include <string>
#include <string_view>

namespace pagoda {

// --reasoning-format: kAuto splits when the template writes <think> (llama.cpp's auto),
// kDeepSeek always, kNone never (the tags stay in the content).
enum class ReasoningFormat { kAuto, kDeepSeek, kNone };
// "auto", "deepseek", "none"; false for another name.
bool parse_reasoning_format(std::string_view name, ReasoningFormat& out);

// Whether a chat template's replies think (it writes or strips <think>).
bool template_has_reasoning(std::string_view template_source);
// Whether a rendered prompt ends inside an open <think> (the reply starts in thought).
bool prompt_opens_reasoning(std::string_view prompt_text);

class ReasoningSplitter {
 public:
  ReasoningSplitter(bool enabled, bool starts_inside);
  struct Piece {
    std::string reasoning;
    std::string content;
  };
  // What may be shown now; a piece of a tag is held until it is known.
  Piece feed(std::string_view text);
  Piece finish();
  // Whether any reasoning was seen.
  bool reasoned() const { return reasoned_; }

 private:
  enum class State { kStart, kInside, kAfterClose, kContent };
  void run(Piece& out, bool final);
  State state_;
  std::string pending_;
  bool reasoned_ = false;
};

}  // namespace pagoda
