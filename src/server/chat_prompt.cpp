#include "server/chat_prompt.h"

namespace pagoda {
namespace {

// Gemma's turn format: a system message is folded into the first user turn, the
// assistant is "model", turns must alternate.
constexpr const char* kGemmaTemplate = R"TPL({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
{%- set loop_messages = messages[1:] -%}
{%- else -%}
{%- set first_user_prefix = '' -%}
{%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
{%- endif -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}
{{- message['content'] | trim }}
{{- '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{ '<start_of_turn>model\n' }}
{%- endif -%})TPL";

constexpr const char* kChatMlTemplate = R"TPL({%- for message in messages -%}
{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{ '<|im_start|>assistant\n' }}
{%- endif -%})TPL";

}  // namespace

Result<std::unique_ptr<ChatPrompter>> ChatPrompter::create(const std::string& source, const std::string& arch,
                                                           const Tokenizer& tok) {
  std::string origin = "model";
  std::string text = source;
  if (text.empty()) {
    text = arch == "gemma3" ? kGemmaTemplate : kChatMlTemplate;
    origin = arch == "gemma3" ? "built-in gemma" : "built-in chatml";
  }
  auto t = ChatTemplate::parse(text);
  if (!t) return error("chat template ({}): {}", origin, t.status().message());
  std::unique_ptr<ChatPrompter> p(new ChatPrompter(std::move(t.value()), tok));
  p->origin_ = origin;
  const Vocab& v = tok.vocab();
  if (v.bos >= 0) p->bos_ = tok.token_to_bytes(v.bos, true);
  if (v.eos >= 0) p->eos_ = tok.token_to_bytes(v.eos, true);
  return p;
}

std::variant<std::vector<int32_t>, ApiError> ChatPrompter::operator()(const ApiRequest& r) const {
  std::vector<ChatMessage> msgs;
  for (const ChatTurn& t : r.messages) msgs.push_back(ChatMessage{t.role, t.content});
  auto text = template_.render(msgs, r.add_generation_prompt, bos_, eos_);
  if (!text) return ApiError::bad_request(text.status().message(), "messages");
  return tok_.encode(*text, /*add_special=*/false, /*parse_special=*/true);
}

}  // namespace pagoda
