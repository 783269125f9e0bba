// Chat templates: turning a conversation into the prompt text a model was trained on,
// by rendering the model's own Jinja template (GGUF key tokenizer.chat_template, or
// chat_template in a Hugging Face tokenizer_config.json). Rendering matches what
// Hugging Face transformers produces with apply_chat_template(..., tokenize=False):
// jinja2's ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks on, the
// loop-control extension, and transformers' raise_exception, strftime_now and
// tojson (json.dumps, non-ASCII kept). The engine is Pagoda's own (src/jinja/)
// and is checked byte for byte against Python jinja2 in
// tests/chat/test_chat_template_vs_jinja2.py.
//
// A parsed ChatTemplate is immutable: render() may be called from many threads at
// once. Errors (syntax errors with their line, raise_exception() from the template,
// unknown filters, templates that run away) come back as a Status, never as an
// exception or a crash.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "jinja/eval.h"
#include "jinja/value.h"

namespace pagoda {

namespace jinja {
struct TemplateAst;
}

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ...
  std::string content;
};

struct ChatTemplateOptions {
  // transformers renders with both on; jinja2's own defaults are off.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
  jinja::RenderLimits limits;
};

class ChatTemplate {
 public:
  static Result<ChatTemplate> parse(const std::string& source,
                                    const ChatTemplateOptions& options = {});

  // The prompt for `messages`, as transformers' apply_chat_template builds it: the
  // template sees messages (a list of {role, content} dicts), add_generation_prompt,
  // bos_token, eos_token, and tools = documents = None.
  Result<std::string> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                             const std::string& bos_token, const std::string& eos_token) const;

  // Renders with arbitrary variables (messages carrying tool calls, a tools list, ...).
  // `context` must be a dict; its entries become the template's variables.
  Result<std::string> render(const jinja::Value& context) const;

 private:
  ChatTemplate(std::shared_ptr<const jinja::TemplateAst> ast, ChatTemplateOptions options)
      : ast_(std::move(ast)), options_(options) {}

  std::shared_ptr<const jinja::TemplateAst> ast_;
  ChatTemplateOptions options_;
};

// Parses and renders `source` once (tests and tools).
Result<std::string> render_template(const std::string& source, const jinja::Value& context,
                                    const ChatTemplateOptions& options = {});

}  // namespace pagoda
