#include "chat/chat_prompt.h"
#include "base/printable.h"

#include "chat/builtin_templates.h"
#include "model/arch_spec.h"

namespace pagoda {

Result<std::unique_ptr<ChatPrompter>> ChatPrompter::create(const std::string& source, const std::string& arch,
                                                           const Tokenizer& tok) {
  std::string origin = "model";
  std::string text = source;
  if (text.empty()) {
    const ArchSpec* spec = find_arch(arch);
    const std::string name = spec != nullptr ? spec->chat_template : ArchSpec{}.chat_template;
    const char* builtin = builtin_chat_template(name);
    if (builtin == nullptr) return error("architecture {} names an unknown built-in chat template {}", in_quotes(arch), in_quotes(name));
    text = builtin;
    origin = "built-in " + name;
  }
  auto t = ChatTemplate::parse(text);
  if (!t) return error("chat template ({}): {}", origin, t.status().message());
  std::unique_ptr<ChatPrompter> p(new ChatPrompter(std::move(t.value()), tok));
  p->origin_ = origin;
  p->source_ = text;
  const Vocab& v = tok.vocab();
  if (v.bos >= 0) p->bos_ = tok.token_to_bytes(v.bos, true);
  if (v.eos >= 0) p->eos_ = tok.token_to_bytes(v.eos, true);
  return p;
}

Result<std::vector<int32_t>> ChatPrompter::operator()(const std::vector<ChatMessage>& messages,
                                                      bool add_generation_prompt) const {
  auto text = template_.render(messages, add_generation_prompt, bos_, eos_);
  if (!text) return text.status();
  return tok_.encode(*text, /*add_special=*/false, /*parse_special=*/true);
}

}  // namespace pagoda

namespace pagoda {

Result<ChatPrompt> ChatPrompter::operator()(const ChatInput& input) const {
  jinja::Dict context;
  context.set(jinja::Value("messages"), input.messages);
  context.set(jinja::Value("tools"), input.tools);
  context.set(jinja::Value("documents"), jinja::Value::none());
  context.set(jinja::Value("add_generation_prompt"), jinja::Value(input.add_generation_prompt));
  context.set(jinja::Value("bos_token"), jinja::Value(bos_));
  context.set(jinja::Value("eos_token"), jinja::Value(eos_));
  // chat_template_kwargs may set any variable, as transformers' **kwargs do.
  for (const auto& [key, value] : input.kwargs.entries()) context.set(key, value);
  auto text = template_.render(jinja::Value::dict(std::move(context)));
  if (!text) return text.status();
  ChatPrompt p;
  p.tokens = tok_.encode(*text, /*add_special=*/false, /*parse_special=*/true);
  p.text = std::move(text.value());
  return p;
}

}  // namespace pagoda
