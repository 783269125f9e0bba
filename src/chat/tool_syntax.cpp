#include "chat/tool_syntax.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "chat/tool_call_scanner.h"
#include "chat/tool_syntax_common.h"
#include "constrain/constraint.h"
#include "constrain/schema_support.h"

namespace pagoda {

using ojson = nlohmann::ordered_json;

namespace {

// Detection order matters: a Llama 3 template mentions no <tool_call>, but a Hermes one
// may mention "parameters" (and a Mistral one "ipython"-free [TOOL_CALLS]).
const ToolSyntax* const kSyntaxes[] = {&kHermesToolSyntax, &kMistralToolSyntax, &kLlama3JsonToolSyntax};

}  // namespace

const ToolSyntax* detect_tool_syntax(std::string_view source) {
  if (source.find("tools") == std::string_view::npos) return nullptr;
  for (const ToolSyntax* s : kSyntaxes)
    if (s->detect(source)) return s;
  return nullptr;
}

const ToolSyntax* find_tool_syntax(std::string_view name) {
  for (const ToolSyntax* s : kSyntaxes)
    if (name == s->name) return s;
  return nullptr;
}

std::vector<std::string> tool_syntax_names() {
  std::vector<std::string> names;
  for (const ToolSyntax* s : kSyntaxes) names.emplace_back(s->name);
  return names;
}

std::optional<ToolCall> tool_call_from_json(std::string_view text, std::string_view args_key) {
  const ojson j = ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  auto args = j.find(std::string(args_key));
  if (args == j.end()) args = j.find("arguments");
  ToolCall call;
  call.name = name->get<std::string>();
  if (args == j.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = args->dump();
  } else if (args->is_string()) {
    const std::string& s = args->get_ref<const std::string&>();
    const ojson inner = ojson::parse(s, nullptr, false);
    if (inner.is_discarded() || !inner.is_object()) return std::nullopt;
    call.arguments = inner.dump();
  } else {
    return std::nullopt;
  }
  return call;
}

Result<std::string> tool_call_structural_tag(const ToolSyntax& syntax, const std::vector<ToolDef>& tools,
                                             ToolChoice choice, const std::string& named, bool parallel) {
  if (choice == ToolChoice::kNone || choice == ToolChoice::kAuto) {
    // A reply that may open with `{` as text cannot be told from a call by a grammar
    // that lets text through: such syntaxes are left unconstrained here.
    if (syntax.opener_at_start) return std::string();
  }
  if (choice == ToolChoice::kNone) {
    ojson tag = {{"type", "structural_tag"}, {"format", {{"type", "any_text"}, {"excludes", syntax.openers}}}};
    return tag.dump();
  }
  ojson tags = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolDef& t = tools[i];
    if (choice == ToolChoice::kNamed && t.name != named) continue;
    // OpenAI: a function without parameters takes none, so its arguments are {}.
    ojson schema = {{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}};
    if (!t.parameters.empty()) {
      auto prepared = prepare_json_schema(t.parameters);
      if (!prepared) return error("tools[{}].function.parameters: {}", i, prepared.status().message());
      schema = ojson::parse(*prepared, nullptr, false);
      if (schema.is_discarded()) return error("tools[{}].function.parameters: not valid JSON", i);
    }
    tags.push_back({{"type", "tag"},
                    {"begin", syntax.call_prefix(t.name)},
                    {"content", {{"type", "json_schema"}, {"json_schema", schema}, {"max_whitespace_cnt", kMaxJsonWhitespace}}},
                    {"end", syntax.call_suffix}});
  }
  if (tags.empty()) return error("tool_choice names the function '{}', which is not in 'tools'", named);
  ojson format;
  if (choice == ToolChoice::kAuto) {
    format = {{"type", "triggered_tags"}, {"triggers", syntax.openers}, {"tags", tags},
              {"stop_after_first", !parallel}};
  } else {
    format = {{"type", "tags_with_separator"}, {"tags", tags}, {"separator", syntax.separator},
              {"at_least_one", true}, {"stop_after_first", !parallel}};
    if (!syntax.calls_begin.empty() || !syntax.calls_end.empty())
      format = {{"type", "sequence"},
                {"elements", ojson::array({{{"type", "const_string"}, {"value", syntax.calls_begin}},
                                           format,
                                           {{"type", "const_string"}, {"value", syntax.calls_end}}})}};
  }
  return ojson{{"type", "structural_tag"}, {"format", format}}.dump();
}

std::string ToolCallExtractor::feed(std::string_view text) {
  if (in_calls_) {
    region_ += text;
    return {};
  }
  pending_ += text;
  if (syntax_ == nullptr) return std::exchange(pending_, {});
  if (syntax_->opener_at_start) {
    if (seen_text_) return std::exchange(pending_, {});
    size_t i = 0;
    while (i < pending_.size() && json_space(pending_[i])) ++i;
    if (i == pending_.size()) return {};  // only whitespace so far: a call may still follow
    const std::string_view rest = std::string_view(pending_).substr(i);
    for (const std::string& o : syntax_->openers) {
      if (rest.starts_with(o)) {
        in_calls_ = true;
        region_ = std::string(rest);
        pending_.clear();
        return {};
      }
      if (std::string_view(o).starts_with(rest)) return {};
    }
    seen_text_ = true;
    return std::exchange(pending_, {});
  }
  size_t first = std::string::npos;
  for (const std::string& o : syntax_->openers) first = std::min(first, pending_.find(o));
  if (first != std::string::npos) {
    in_calls_ = true;
    region_ = pending_.substr(first);
    pending_.resize(first);
    return std::exchange(pending_, {});
  }
  // Hold back the longest tail that could grow into an opener.
  size_t hold = 0;
  for (const std::string& o : syntax_->openers)
    for (size_t k = std::min(o.size() - 1, pending_.size()); k > hold; --k)
      if (std::string_view(pending_).substr(pending_.size() - k) == std::string_view(o).substr(0, k)) {
        hold = k;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::vector<ToolCallExtractor::Piece> ToolCallExtractor::pieces() {
  std::vector<Piece> out;
  if (!in_calls_) return out;
  const std::vector<ScannedCall> calls = scan_tool_calls(region_);
  for (size_t k = 0; k < calls.size(); ++k) {
    const ScannedCall& c = calls[k];
    if (c.name.empty()) break;  // in order: a later call waits for this one's name
    Piece p;
    p.index = k;
    if (k == sent_.size()) {
      sent_.push_back(0);
      p.first = true;
      p.name = c.name;
    }
    if (c.args_begin != std::string::npos) {
      const size_t upto = c.args_end != std::string::npos ? c.args_end : region_.size();
      const size_t from = std::max(c.args_begin, sent_[k]);
      if (upto > from) {
        p.arguments = region_.substr(from, upto - from);
        sent_[k] = upto;
      }
    }
    if (p.first || !p.arguments.empty()) out.push_back(std::move(p));
  }
  return out;
}

ToolCallExtractor::Final ToolCallExtractor::finish() {
  Final f;
  if (in_calls_) {
    auto calls = syntax_->parse(region_);
    if (calls) f.calls = std::move(*calls);
    else f.content = std::move(region_);
  } else {
    f.content = std::move(pending_);
  }
  pending_.clear();
  region_.clear();
  return f;
}

}  // namespace pagoda
