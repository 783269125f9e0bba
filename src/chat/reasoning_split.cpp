#include "chat/reasoning_split.h"

#include <algorithm>
#include <utility>

namespace pagoda {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The length of the longest tail of `s` that is a proper prefix of `tag`.
size_t partial_tail(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

}  // namespace

bool parse_reasoning_format(std::string_view name, ReasoningFormat& out) {
  if (name == "auto") out = ReasoningFormat::kAuto;
  else if (name == "deepseek") out = ReasoningFormat::kDeepSeek;
  else if (name == "none") out = ReasoningFormat::kNone;
  else return false;
  return true;
}

bool template_has_reasoning(std::string_view source) { return source.find(kClose) != std::string_view::npos; }

bool prompt_opens_reasoning(std::string_view prompt) {
  while (!prompt.empty() && space(prompt.back())) prompt.remove_suffix(1);
  return prompt.ends_with(kOpen);
}

ReasoningSplitter::ReasoningSplitter(bool enabled, bool starts_inside)
    : state_(!enabled ? State::kContent : starts_inside ? State::kInside : State::kStart) {
  reasoned_ = enabled && starts_inside;
}

ReasoningSplitter::Piece ReasoningSplitter::feed(std::string_view text) {
  Piece out;
  if (state_ == State::kContent) {
    out.content.assign(text);
    return out;
  }
  pending_ += text;
  run(out, false);
  return out;
}

ReasoningSplitter::Piece ReasoningSplitter::finish() {
  Piece out;
  run(out, true);
  return out;
}

void ReasoningSplitter::run(Piece& out, bool final) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        size_t i = 0;
        while (i < pending_.size() && space(pending_[i])) ++i;
        const std::string_view rest = std::string_view(pending_).substr(i);
        if (rest.starts_with(kOpen)) {
          pending_.erase(0, i + kOpen.size());
          state_ = State::kInside;
          reasoned_ = true;
          continue;
        }
        if (!final && kOpen.starts_with(rest)) return;  // empty, or a piece of <think>
        state_ = State::kContent;
        continue;
      }
      case State::kInside: {
        const size_t close = pending_.find(kClose);
        if (close != std::string::npos) {
          out.reasoning += pending_.substr(0, close);
          pending_.erase(0, close + kClose.size());
          state_ = State::kAfterClose;
          continue;
        }
        const size_t hold = final ? 0 : partial_tail(pending_, kClose);
        out.reasoning += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      case State::kAfterClose: {
        size_t i = 0;
        while (i < pending_.size() && space(pending_[i])) ++i;
        pending_.erase(0, i);
        if (pending_.empty()) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out.content += std::exchange(pending_, {});
        return;
    }
  }
}

}  // namespace pagoda
