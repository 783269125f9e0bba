// The chat templates Pagoda falls back to when a model file carries none, by the name an
// architecture's spec gives (ArchSpec::chat_template): "gemma" (Gemma's turn format),
// "phi3" (Phi-3's <|user|> ... <|end|> turns) and "chatml" (what llama.cpp falls back to). Constant strings: thread-safe, free.
#pragma once

#include <string_view>

namespace pagoda {

// The template's Jinja source, or nullptr for an unknown name.
const char* builtin_chat_template(std::string_view name);

}  // namespace pagoda
