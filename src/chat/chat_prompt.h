// A chat request's messages as prompt token ids: the model's own Jinja chat template
// (GGUF tokenizer.chat_template, or a file given with --chat-template), rendered as
// Python jinja2 renders it in transformers, then tokenized with special tokens parsed and
// no BOS added (the template writes it). A model without a template gets a built-in one
// for its family: Gemma's turn format for gemma3 and gemma2, Phi-3's for phi3, ChatML
// otherwise (as llama.cpp falls back to).
//
// A ChatPrompter is immutable after create(): it may render for many threads at once.
#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

// A conversation as a template reads it: `messages` is the list of message dicts as the
// client sent them (tool calls, tool_call_id, name, ... kept), `tools` the list of tool
// dicts or none, `kwargs` extra variables (chat_template_kwargs, e.g. enable_thinking).
struct ChatInput {
  jinja::Value messages = jinja::Value::list({});
  jinja::Value tools = jinja::Value::none();
  jinja::Dict kwargs;
  bool add_generation_prompt = true;
};

struct ChatPrompt {
  std::string text;             // the rendered template
  std::vector<int32_t> tokens;  // text tokenized, special tokens parsed
};

class ChatPrompter {
 public:
  // source: the template text; empty picks the built-in one for `arch`.
  static Result<std::unique_ptr<ChatPrompter>> create(const std::string& source, const std::string& arch,
                                                      const Tokenizer& tok);
  // The messages rendered (with the assistant's opening when add_generation_prompt) and
  // tokenized; fails with the template's error.
  Result<std::vector<int32_t>> operator()(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  Result<ChatPrompt> operator()(const ChatInput& input) const;
  // The template's Jinja source (what the tool-call syntax and reasoning tags are
  // detected from).
  const std::string& source() const { return source_; }
  // Which template is in use ("model", "file" or "built-in gemma" / "built-in chatml").
  const std::string& origin() const { return origin_; }
  void set_origin(std::string o) { origin_ = std::move(o); }

 private:
  ChatPrompter(ChatTemplate t, const Tokenizer& tok) : template_(std::move(t)), tok_(tok) {}
  ChatTemplate template_;
  const Tokenizer& tok_;
  std::string origin_;
  std::string source_;
  std::string bos_, eos_;
};

}  // namespace pagoda
