#include "server/request_fields.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace pagoda {
namespace {

constexpr bool kChat = true, kCompletions = true, kNo = false;

// By origin: OpenAI, then vLLM, then llama.cpp.
constexpr UnimplementedField kFields[] = {
    {"audio", "[]", "audio output is not supported", kChat, kNo},
    {"modalities", R"([["text"]])", "only text output is supported", kChat, kNo},
    {"prediction", "[]", "predicted outputs are not supported", kChat, kNo},
    {"web_search_options", "[]", "web search is not supported", kChat, kNo},
    {"functions", "[]", "the legacy function-calling fields are not supported: use 'tools'", kChat, kNo},
    {"function_call", "[]", "the legacy function-calling fields are not supported: use 'tool_choice'", kChat, kNo},
    {"reasoning_effort", "[]", "the reasoning effort cannot be set for these models", kChat, kNo},
    {"verbosity", "[]", "the verbosity cannot be set for these models", kChat, kNo},
    {"logit_bias", "[{}]", "logit biases are not supported", kChat, kCompletions},
    {"suffix", R"([""])", "insertion (suffix) is not supported", kNo, kCompletions},
    {"use_beam_search", "[false]", "beam search is not supported", kChat, kCompletions},
    {"length_penalty", "[1, 1.0]", "length_penalty applies to beam search, which is not supported", kChat, kCompletions},
    {"min_tokens", "[0]", "a minimum length is not supported", kChat, kCompletions},
    {"include_stop_str_in_output", "[false]", "the stop string is never part of the text", kChat, kCompletions},
    {"skip_special_tokens", "[true]", "special tokens are always left out of the text", kChat, kCompletions},
    {"spaces_between_special_tokens", "[true]", "special tokens are always left out of the text", kChat, kCompletions},
    {"prompt_logprobs", "[0]", "prompt logprobs are not supported", kChat, kCompletions},
    {"allowed_token_ids", "[]", "restricting the vocabulary is not supported: use 'guided_choice' or a grammar", kChat,
     kCompletions},
    {"bad_words", "[[]]", "bad words are not supported", kChat, kCompletions},
    {"truncate_prompt_tokens", "[]", "prompts are never truncated: a long prompt is a 400", kChat, kCompletions},
    {"guided_decoding_backend", R"(["xgrammar", "auto"])", "the backend is xgrammar", kChat, kCompletions},
    {"guided_whitespace_pattern", "[]", "the JSON whitespace cannot be set", kChat, kCompletions},
    {"continue_final_message", "[false]", "continuing the final message is not supported", kChat, kNo},
    {"documents", "[]", "documents (RAG templates) are not supported", kChat, kNo},
    {"mm_processor_kwargs", "[]", "multimodal input is not supported", kChat, kCompletions},
    {"logits_processors", "[]", "logits processors are not supported", kChat, kCompletions},
    {"return_tokens_as_token_ids", "[false]", "tokens are returned as text", kChat, kCompletions},
    {"add_special_tokens", "[false]", "the chat template writes the special tokens", kChat, kNo},
    {"typical_p", "[1, 1.0]", "typical sampling is not supported", kChat, kCompletions},
    {"mirostat", "[0]", "mirostat sampling is not supported", kChat, kCompletions},
    {"dynatemp_range", "[0, 0.0]", "dynamic temperature is not supported", kChat, kCompletions},
    {"dry_multiplier", "[0, 0.0]", "DRY sampling is not supported", kChat, kCompletions},
    {"xtc_probability", "[0, 0.0]", "XTC sampling is not supported", kChat, kCompletions},
    {"n_probs", "[0]", "use 'logprobs' (and 'top_logprobs')", kChat, kCompletions},
    {"samplers", "[]", "the sampler order cannot be set", kChat, kCompletions},
    {"n_keep", "[0]", "context shifting is not supported: a long prompt is a 400", kChat, kCompletions},
    {"t_max_predict_ms", "[]", "time limits are not supported: use 'max_tokens'", kChat, kCompletions},
    {"grammar_lazy", "[false]", "lazy grammars are not supported (tool calls are constrained from their opener)", kChat,
     kCompletions},
    {"grammar_triggers", "[[]]", "grammar triggers are not supported", kChat, kCompletions},
    {"lora", "[[]]", "LoRA adapters are not supported", kChat, kCompletions},
    {"post_sampling_probs", "[false]", "use 'logprobs'", kChat, kCompletions},
    {"response_fields", "[]", "response field selection is not supported", kChat, kCompletions},
};

}  // namespace

std::span<const UnimplementedField> unimplemented_fields() { return kFields; }

std::optional<ApiError> refuse_unimplemented_fields(const nlohmann::json& body, bool chat) {
  for (const UnimplementedField& f : kFields) {
    if (!(chat ? f.chat : f.completions)) continue;
    auto it = body.find(f.name);
    if (it == body.end() || it->is_null()) continue;
    const nlohmann::json accepted = nlohmann::json::parse(f.no_op_values);
    bool no_op = false;
    for (const auto& v : accepted) no_op = no_op || v == *it;
    if (no_op) continue;
    return ApiError::bad_request(fmt::format("'{}' is not supported by this server: {}", f.name, f.hint), f.name);
  }
  return std::nullopt;
}

}  // namespace pagoda
