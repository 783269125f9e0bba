// The chat template: that the model has its own, that the special tokens it writes are
// whole tokens of this vocabulary (a ChatML template on a model that never saw
// <|im_start|> feeds it the marker as several ordinary tokens), that BOS comes exactly
// once, that an assistant turn ends with an end-of-generation token (or replies never
// stop), and that a raw prompt for `pagoda run` does not carry a second BOS.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "chat/json_value.h"
#include "doctor/checks.h"

namespace pagoda {

namespace {

constexpr const char* kReply = "Paris is the capital of France.";

bool special_type(const Vocab& v, int32_t id) {
  const TokenType t = v.type(id);
  return t == TokenType::kControl || t == TokenType::kUserDefined;
}

bool snake(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }

// Markup the template writes that looks like a special token: <|word|> anywhere, and
// <snake_case> or </snake_case> where the vocabulary spells its own special tokens so.
std::set<std::string> markers(const std::string& text, bool angle_words) {
  std::set<std::string> out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '<') continue;
    if (i + 1 < text.size() && text[i + 1] == '|') {
      const size_t end = text.find("|>", i + 2);
      if (end != std::string::npos && end - i <= 48 && text.find_first_of("<> \n", i + 2) >= end)
        out.insert(text.substr(i, end + 2 - i));
      continue;
    }
    if (!angle_words) continue;
    size_t j = i + 1;
    if (j < text.size() && text[j] == '/') ++j;
    const size_t start = j;
    while (j < text.size() && snake(text[j])) ++j;
    if (j < text.size() && text[j] == '>' && j - start >= 3 && j - i <= 40) out.insert(text.substr(i, j + 1 - i));
  }
  return out;
}

struct Rendered {
  std::string text;
  std::vector<int32_t> tokens;
};

Result<Rendered> render(const ChatPrompter& p, bool with_system, bool generation_prompt) {
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  if (with_system) msgs.push_back({{"role", "system"}, {"content", "You are a helpful assistant."}});
  msgs.push_back({{"role", "user"}, {"content", "What is the capital of France?"}});
  if (!generation_prompt) msgs.push_back({{"role", "assistant"}, {"content", kReply}});
  ChatInput in;
  in.messages = jinja_from_json(msgs);
  in.add_generation_prompt = generation_prompt;
  auto r = p(in);
  if (!r) return r.status();
  return Rendered{r->text, r->tokens};
}

// Looks like a chat model: its vocabulary has the turn markers of a chat format.
bool chat_vocabulary(const Tokenizer& tok) {
  static const char* turn_markers[] = {"<|im_start|>", "<start_of_turn>", "<|start_header_id|>", "<|user|>",
                                       "<|assistant|>", "[INST]", "<|turn>", "<|User|>"};
  const Vocab& v = tok.vocab();
  for (const char* m : turn_markers) {
    auto ids = tok.encode(m, false, true);
    if (ids.size() == 1 && special_type(v, ids[0])) return true;
  }
  return false;
}

std::string token_text(const Tokenizer& tok, int32_t id) { return tok.token_to_bytes(id, true); }

}  // namespace

void check_chat_template(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!f.chat_template || f.chat_template->tokenizer == nullptr) return;
  const TemplateFacts& t = *f.chat_template;
  const Tokenizer& tok = *t.tokenizer;
  const Vocab& v = tok.vocab();

  if (t.has_prompt && t.add_bos && v.add_bos && v.bos >= 0) {
    const std::string bos = token_text(tok, v.bos);
    if (!bos.empty() && t.prompt.rfind(bos, 0) == 0)
      add_finding(out, "prompt.double_bos", Severity::kError, fmt::format("the prompt starts with {} and BOS is added too", bos),
          "the vocabulary asks for BOS at the start (tokenizer.ggml.add_bos_token), so `pagoda run` adds one and the "
          "prompt's own makes two: models trained with one see a sequence they never saw, and answer worse",
          fmt::format("drop {} from the prompt, or pass --no-bos", bos), {{"bos", bos}});
  }

  if (t.prompter == nullptr) {
    add_finding(out, "template.parse_error", Severity::kError, fmt::format("the chat template ({}) does not parse", t.origin),
        t.template_error, "--chat-template FILE with the model's template (tokenizer_config.json's chat_template)");
    return;
  }
  const ChatPrompter& p = *t.prompter;
  // A base model (no template, no turn tokens) is not for chat: the built-in fallback is
  // all a chat request can get, and `pagoda run` does not use it.
  const bool builtin = t.origin.rfind("built-in", 0) == 0;
  if (builtin && !chat_vocabulary(tok)) return;
  auto gen = render(p, true, true);
  bool with_system = true;
  if (!gen) {
    with_system = false;  // some templates refuse a system message
    gen = render(p, false, true);
  }
  if (!gen) {
    add_finding(out, "template.render_error", Severity::kError, "the chat template fails on a plain user message",
        gen.status().message(), "--chat-template FILE with a template that renders user and assistant turns");
    return;
  }

  bool angle_words = false;
  for (int32_t id = 0; id < tok.vocab_size() && !angle_words; ++id) {
    if (!special_type(v, id)) continue;
    const std::string& s = v.pieces[static_cast<size_t>(id)];
    angle_words = s.size() >= 5 && s.front() == '<' && s.back() == '>' && snake(s[1]);
  }
  std::vector<std::string> split;
  nlohmann::json split_json = nlohmann::json::array();
  for (const std::string& m : markers(gen->text, angle_words)) {
    const auto ids = tok.encode(m, false, true);
    if (ids.size() > 1) {
      split.push_back(m);
      split_json.push_back({{"marker", m}, {"tokens", ids.size()}});
    }
  }
  if (!split.empty()) {
    std::string list;
    for (const std::string& m : split) list += (list.empty() ? "" : ", ") + m;
    // Without a template of its own the model gets its family's built-in one (ChatML for
    // most): fine where the family's format is the model's, the fault here is the missing
    // template.
    if (builtin)
      add_finding(out, "template.missing", Severity::kError,
          fmt::format("the GGUF has no chat template, and the {} one pagoda falls back to writes {}, which this "
                      "vocabulary has no token for",
                      t.origin, list),
          "the model has a chat format of its own (its vocabulary has turn tokens) that the built-in guess is not; "
          "each marker becomes several ordinary tokens, so roles blur and replies do not end where they should",
          "--chat-template FILE with the model's own template (the chat_template of its tokenizer_config.json)",
          {{"markers", split_json}, {"template", t.origin}});
    else
      add_finding(out, "template.split_special", Severity::kError,
          fmt::format("the template writes {} that this vocabulary has no token for", list),
          "each becomes several ordinary tokens the model never saw as a turn marker: it cannot tell the roles apart "
          "and its replies do not end where they should",
          "--chat-template FILE with this model's own template (the marker spelling of its vocabulary)",
          {{"markers", split_json}, {"template", t.origin}});
  }

  const std::vector<int32_t>& ids = gen->tokens;
  if (v.bos >= 0 && ids.size() >= 2 && ids[0] == v.bos && ids[1] == v.bos)
    add_finding(out, "template.double_bos", Severity::kError, "the rendered chat prompt starts with BOS twice",
        "the template writes BOS and its text carries another (bos_token and a literal one): the model sees a "
        "sequence it was never trained on",
        "--chat-template FILE that writes {{ bos_token }} once", {{"bos", token_text(tok, v.bos)}});
  else if (v.add_bos && v.bos >= 0 && (ids.empty() || ids[0] != v.bos))
    add_finding(out, "template.no_bos", Severity::kWarning,
        fmt::format("the vocabulary asks for {} at the start but the template does not write it",
                    token_text(tok, v.bos)),
        "chat prompts are tokenized as the template renders them (it is the template's job to write BOS, as in "
        "transformers); without it models trained with one drift and degrade",
        "--chat-template FILE that starts with {{ bos_token }}", {{"bos", token_text(tok, v.bos)}});

  // The end of an assistant turn: the first special token after the reply's text.
  auto done = render(p, with_system, false);
  if (done) {
    const size_t at = done->text.rfind(kReply);
    if (at != std::string::npos) {
      const std::string after = done->text.substr(at + std::string(kReply).size());
      const auto tail = tok.encode(after, false, true);
      int32_t end = -1;
      for (int32_t id : tail)
        if (special_type(v, id)) {
          end = id;
          break;
        }
      if (end < 0)
        add_finding(out, "template.turn_end_missing", Severity::kError,
            "the template ends an assistant turn with no special token",
            "generation stops at an end-of-generation token; a turn that ends in plain text gives the model nothing "
            "to stop with, so replies run on into made-up turns until max tokens",
            "--chat-template FILE that ends assistant turns with the model's end-of-turn token",
            {{"after_reply", after}});
      else if (!tok.is_eog(end))
        add_finding(out, "template.turn_end_not_eog", Severity::kError,
            fmt::format("assistant turns end with {}, which does not end generation", token_text(tok, end)),
            "the engine stops at the vocabulary's end-of-generation tokens (eos, eot and end-of-turn markers); the "
            "model will write this one and carry on into a new turn",
            fmt::format("a GGUF whose tokenizer.ggml.eos_token_id (or eot) is {}, or --stop '{}'", token_text(tok, end),
                        token_text(tok, end)),
            {{"token", token_text(tok, end)}, {"id", end}});
    }
  }
}

}  // namespace pagoda
