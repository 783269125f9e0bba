#include "chat/builtin_templates.h"

#include <string_view>

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

// Phi-3's turns, as llama.cpp's phi3 fallback writes them.
constexpr const char* kPhi3Template = R"TPL({%- for message in messages -%}
{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{ '<|assistant|>\n' }}
{%- endif -%})TPL";

}  // namespace

const char* builtin_chat_template(std::string_view name) {
  if (name == "gemma") return kGemmaTemplate;
  if (name == "phi3") return kPhi3Template;
  if (name == "chatml") return kChatMlTemplate;
  return nullptr;
}

}  // namespace pagoda
