// A chat request's messages as prompt token ids: the model's own Jinja chat template
// (GGUF tokenizer.chat_template, or a file given with --chat-template), rendered as
// Python jinja2 renders it in transformers, then tokenized with special tokens parsed and
// no BOS added (the template writes it). A model without a template gets a built-in one
// for its family: Gemma's turn format for gemma3 and gemma2, Phi-3's for phi3, ChatML
// otherwise (as llama.cpp falls back to).
#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class ChatPrompter {
 public:
  // source: the template text; empty picks the built-in one for `arch`.
  static Result<std::unique_ptr<ChatPrompter>> create(const std::string& source, const std::string& arch,
                                                      const Tokenizer& tok);
  // The messages rendered (with the assistant's opening when add_generation_prompt) and
  // tokenized; fails with the template's error.
  Result<std::vector<int32_t>> operator()(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  // Which template is in use ("model", "file" or "built-in gemma" / "built-in chatml").
  const std::string& origin() const { return origin_; }
  void set_origin(std::string o) { origin_ = std::move(o); }

 private:
  ChatPrompter(ChatTemplate t, const Tokenizer& tok) : template_(std::move(t)), tok_(tok) {}
  ChatTemplate template_;
  const Tokenizer& tok_;
  std::string origin_;
  std::string bos_, eos_;
};

}  // namespace pagoda
