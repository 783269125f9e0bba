#include "server/openai_request.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>

#include "chat/json_value.h"
#include "server/request_fields.h"

namespace pagoda {

using json = nlohmann::json;

std::string ApiError::body() const {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return json{{"error", e}}.dump();
}

namespace {

struct Fields {
  const json& j;
  std::optional<ApiError> err;

  const json* get(const char* name) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void fail(const char* name, const std::string& what) {
    if (!err) err = ApiError::bad_request(fmt::format("'{}': {}", name, what), name);
  }
  template <typename T>
  void number(const char* name, T& out, double lo, double hi) {
    const json* v = get(name);
    if (v == nullptr) return;
    if (!v->is_number() || (std::is_integral_v<T> && !v->is_number_integer())) {
      fail(name, std::is_integral_v<T> ? "must be an integer" : "must be a number");
      return;
    }
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi)) {
      fail(name, fmt::format("{} is out of range [{}, {}]", v->dump(), lo, hi));
      return;
    }
    out = v->get<T>();
  }
  void boolean(const char* name, bool& out) {
    const json* v = get(name);
    if (v == nullptr) return;
    if (!v->is_boolean()) return fail(name, "must be a boolean");
    out = v->get<bool>();
  }
};

std::optional<ApiError> parse_stop(Fields& f, ApiRequest& r) {
  const json* v = f.get("stop");
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    r.stop.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) return ApiError::bad_request("'stop': must be a string or a list of strings", "stop");
      r.stop.push_back(s.get<std::string>());
    }
  } else {
    return ApiError::bad_request("'stop': must be a string or a list of strings", "stop");
  }
  if (r.stop.size() > 16) return ApiError::bad_request("'stop': at most 16 stop strings", "stop");
  return std::nullopt;
}

// The structured-output fields. At most one may be given; each becomes a ConstraintSpec.
std::optional<ApiError> parse_constraint(Fields& f, ApiRequest& r) {
  auto bad = [](const std::string& field, const std::string& what) {
    return ApiError::bad_request(fmt::format("'{}': {}", field, what), field);
  };
  auto set = [&](const std::string& field, ConstraintKind kind, std::string text) -> std::optional<ApiError> {
    if (r.constraint)
      return bad(field, fmt::format("only one structured-output field may be given (also '{}')", r.constraint_field));
    ConstraintSpec s;
    s.kind = kind;
    s.text = std::move(text);
    r.constraint = std::move(s);
    r.constraint_field = field;
    return std::nullopt;
  };
  // A schema given as an object or as its JSON text.
  auto schema_text = [](const json& v) -> std::optional<std::string> {
    if (v.is_object() || v.is_boolean()) return v.dump();
    if (v.is_string()) return v.get<std::string>();
    return std::nullopt;
  };
  auto choices = [&](const std::string& field, const json& v) -> std::optional<ApiError> {
    if (!v.is_array() || v.empty()) return bad(field, "must be a non-empty list of strings");
    std::vector<std::string> list;
    for (const json& c : v) {
      if (!c.is_string() || c.get<std::string>().empty()) return bad(field, "must be a non-empty list of non-empty strings");
      list.push_back(c.get<std::string>());
    }
    if (auto e = set(field, ConstraintKind::kChoice, "")) return e;
    r.constraint->choices = std::move(list);
    return std::nullopt;
  };
  auto string_field = [&](const std::string& field, const json& v, ConstraintKind kind) -> std::optional<ApiError> {
    if (!v.is_string()) return bad(field, "must be a string");
    return set(field, kind, v.get<std::string>());
  };
  auto schema_field = [&](const std::string& field, const json& v) -> std::optional<ApiError> {
    auto text = schema_text(v);
    if (!text) return bad(field, "must be a JSON schema (an object)");
    return set(field, ConstraintKind::kJsonSchema, *text);
  };

  if (const json* rf = f.get("response_format")) {
    if (!rf->is_object()) return bad("response_format", "must be an object");
    auto t = rf->find("type");
    if (t == rf->end() || !t->is_string())
      return bad("response_format", "'type' must be one of 'text', 'json_object', 'json_schema', 'structural_tag'");
    const std::string type = t->get<std::string>();
    if (type == "json_object") {
      // llama.cpp's form: json_object with a schema.
      auto s = rf->find("schema");
      if (s != rf->end() && !s->is_null()) {
        if (auto e = schema_field("response_format.schema", *s)) return e;
      } else if (auto e = set("response_format", ConstraintKind::kJsonObject, "")) {
        return e;
      }
    } else if (type == "json_schema") {
      auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object())
        return bad("response_format.json_schema", "is required with type 'json_schema' and must be an object");
      auto s = js->find("schema");
      if (s == js->end() || s->is_null()) {
        // OpenAI's form: name + schema; a missing schema means any JSON object.
        if (auto e = set("response_format.json_schema", ConstraintKind::kJsonObject, "")) return e;
      } else if (auto e = schema_field("response_format.json_schema.schema", *s)) {
        return e;
      }
      auto strict = js->find("strict");
      if (strict != js->end() && !strict->is_null()) {
        if (!strict->is_boolean()) return bad("response_format.json_schema.strict", "must be a boolean");
        if (r.constraint->kind == ConstraintKind::kJsonSchema) r.constraint->strict = strict->get<bool>();
      }
    } else if (type == "structural_tag") {
      // xgrammar's form (vLLM and SGLang take it too): {type, format: {...}}.
      if (auto e = set("response_format", ConstraintKind::kStructuralTag, rf->dump())) return e;
    } else if (type != "text") {
      return bad("response_format", fmt::format(
                                        "unknown type '{}' (expected 'text', 'json_object', 'json_schema' or 'structural_tag')", type));
    }
  }
  if (const json* v = f.get("guided_json"))
    if (auto e = schema_field("guided_json", *v)) return e;
  if (const json* v = f.get("guided_regex"))
    if (auto e = string_field("guided_regex", *v, ConstraintKind::kRegex)) return e;
  if (const json* v = f.get("guided_choice"))
    if (auto e = choices("guided_choice", *v)) return e;
  if (const json* v = f.get("guided_grammar"))
    if (auto e = string_field("guided_grammar", *v, ConstraintKind::kGrammar)) return e;
  if (const json* so = f.get("structured_outputs")) {
    if (!so->is_object()) return bad("structured_outputs", "must be an object");
    Fields g{*so, std::nullopt};
    if (const json* v = g.get("json"))
      if (auto e = schema_field("structured_outputs.json", *v)) return e;
    if (const json* v = g.get("regex"))
      if (auto e = string_field("structured_outputs.regex", *v, ConstraintKind::kRegex)) return e;
    if (const json* v = g.get("choice"))
      if (auto e = choices("structured_outputs.choice", *v)) return e;
    if (const json* v = g.get("grammar"))
      if (auto e = string_field("structured_outputs.grammar", *v, ConstraintKind::kGrammar)) return e;
    if (const json* v = g.get("json_object")) {
      if (!v->is_boolean()) return bad("structured_outputs.json_object", "must be a boolean");
      if (v->get<bool>())
        if (auto e = set("structured_outputs.json_object", ConstraintKind::kJsonObject, "")) return e;
    }
    if (const json* v = g.get("structural_tag")) {
      auto text = schema_text(*v);
      if (!text) return bad("structured_outputs.structural_tag", "must be a structural tag (an object or its JSON text)");
      if (auto e = set("structured_outputs.structural_tag", ConstraintKind::kStructuralTag, *text)) return e;
    }
  }
  if (const json* v = f.get("grammar"))
    if (auto e = string_field("grammar", *v, ConstraintKind::kGrammar)) return e;
  if (const json* v = f.get("json_schema"))
    if (auto e = schema_field("json_schema", *v)) return e;
  return std::nullopt;
}

std::optional<ApiError> parse_prompt(const json& p, ApiRequest& r) {
  auto ids = [](const json& a, std::vector<int32_t>& out) {
    for (const json& t : a) {
      if (!t.is_number_integer()) return false;
      const int64_t v = t.get<int64_t>();
      if (v < INT32_MIN || v > INT32_MAX) return false;
      out.push_back(static_cast<int32_t>(v));
    }
    return true;
  };
  const ApiError bad = ApiError::bad_request(
      "'prompt': must be a string, a list of strings, a list of token ids or a list of lists of token ids", "prompt");
  if (p.is_string()) {
    r.prompts.emplace_back(p.get<std::string>());
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    std::vector<int32_t> v;
    if (!ids(p, v)) return bad;
    r.prompts.emplace_back(std::move(v));
  } else if (p.is_array() && !p.empty()) {
    for (const json& e : p) {
      if (e.is_string()) {
        r.prompts.emplace_back(e.get<std::string>());
      } else if (e.is_array()) {
        std::vector<int32_t> v;
        if (!ids(e, v)) return bad;
        r.prompts.emplace_back(std::move(v));
      } else {
        return bad;
      }
    }
  } else {
    return bad;
  }
  return std::nullopt;
}

using ojson = nlohmann::ordered_json;

ApiError bad_field(const std::string& field, const std::string& what) {
  return ApiError::bad_request(fmt::format("'{}': {}", field, what), field);
}

// One message's content as text: a string, null (""), or text parts joined.
std::optional<ApiError> message_text(const ojson& c, std::string& out) {
  out.clear();
  if (c.is_null()) return std::nullopt;
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad_field("messages", "'content' must be a string or a list of parts");
  for (const ojson& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return bad_field("messages", "only text content parts are supported");
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tool_calls(ojson& calls, size_t index) {
  const std::string where = fmt::format("messages[{}].tool_calls", index);
  if (!calls.is_array()) return bad_field("messages", where + " must be a list");
  for (ojson& call : calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      return bad_field("messages", where + ": each call needs a 'function' object");
    ojson& fn = call["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      return bad_field("messages", where + ": each function needs a string 'name'");
    auto args = fn.find("arguments");
    if (args == fn.end() || args->is_null()) {
      fn["arguments"] = ojson::object();
    } else if (args->is_string()) {
      ojson parsed = ojson::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded() || !parsed.is_object())
        return bad_field("messages", where + ": 'arguments' must be a JSON object (as text)");
      *args = std::move(parsed);
    } else if (!args->is_object()) {
      return bad_field("messages", where + ": 'arguments' must be a string holding a JSON object");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const ojson& m, ApiRequest& r) {
  if (!m.is_array() || m.empty()) return ApiError::bad_request("'messages': must be a non-empty list", "messages");
  std::vector<jinja::Value> list;
  list.reserve(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    ojson e = m[i];
    if (!e.is_object() || !e.contains("role") || !e["role"].is_string())
      return ApiError::bad_request("'messages': each message needs a string 'role'", "messages");
    std::string text;
    auto c = e.find("content");
    if (c != e.end())
      if (auto err = message_text(*c, text)) return err;
    e["content"] = text;
    auto calls = e.find("tool_calls");
    if (calls != e.end()) {
      if (calls->is_null()) e.erase(calls);
      else if (auto err = parse_tool_calls(*calls, i)) return err;
    }
    list.push_back(jinja_from_json(e));
  }
  r.chat_input.messages = jinja::Value::list(std::move(list));
  return std::nullopt;
}

std::optional<ApiError> parse_tools(const ojson& body, ApiRequest& r) {
  auto t = body.find("tools");
  if (t != body.end() && !t->is_null()) {
    if (!t->is_array()) return bad_field("tools", "must be a list of tools");
    for (size_t i = 0; i < t->size(); ++i) {
      const ojson& tool = (*t)[i];
      const std::string where = fmt::format("tools[{}]", i);
      if (!tool.is_object() || tool.value("type", "function") != "function")
        return bad_field("tools", where + " must be an object of type 'function'");
      auto fn = tool.find("function");
      if (fn == tool.end() || !fn->is_object()) return bad_field("tools", where + " needs a 'function' object");
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
        return bad_field("tools", where + ".function needs a non-empty string 'name'");
      ToolDef def;
      def.name = name->get<std::string>();
      for (const ToolDef& d : r.tools)
        if (d.name == def.name) return bad_field("tools", fmt::format("two tools are named '{}'", def.name));
      auto params = fn->find("parameters");
      if (params != fn->end() && !params->is_null()) {
        if (!params->is_object()) return bad_field("tools", where + ".function.parameters must be a JSON schema object");
        def.parameters = params->dump();
      }
      r.tools.push_back(std::move(def));
    }
    if (!r.tools.empty()) r.chat_input.tools = jinja_from_json(*t);
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "auto") r.tool_choice = ToolChoice::kAuto;
      else if (c == "none") r.tool_choice = ToolChoice::kNone;
      else if (c == "required") r.tool_choice = ToolChoice::kRequired;
      else return bad_field("tool_choice", fmt::format("'{}' is not one of 'none', 'auto', 'required' or a function", c));
    } else if (choice->is_object() && choice->contains("function") && (*choice)["function"].is_object() &&
               (*choice)["function"].contains("name") && (*choice)["function"]["name"].is_string()) {
      r.tool_choice = ToolChoice::kNamed;
      r.tool_choice_name = (*choice)["function"]["name"].get<std::string>();
    } else {
      return bad_field("tool_choice", "must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (r.tools.empty() && (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kNamed))
      return bad_field("tool_choice", "needs 'tools'");
    if (r.tool_choice == ToolChoice::kNamed) {
      bool found = false;
      for (const ToolDef& d : r.tools) found = found || d.name == r.tool_choice_name;
      if (!found) return bad_field("tool_choice", fmt::format("names the function '{}', which is not in 'tools'", r.tool_choice_name));
    }
  }
  auto parallel = body.find("parallel_tool_calls");
  if (parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean()) return bad_field("parallel_tool_calls", "must be a boolean");
    r.parallel_tool_calls = parallel->get<bool>();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_chat_options(const ojson& body, ApiRequest& r) {
  auto kw = body.find("chat_template_kwargs");
  if (kw != body.end() && !kw->is_null()) {
    if (!kw->is_object()) return bad_field("chat_template_kwargs", "must be an object");
    for (const auto& [key, value] : kw->items()) r.chat_input.kwargs.set(jinja::Value(key), jinja_from_json(value));
  }
  auto rf = body.find("reasoning_format");
  if (rf != body.end() && !rf->is_null()) {
    ReasoningFormat f;
    if (!rf->is_string() || !parse_reasoning_format(rf->get<std::string>(), f))
      return bad_field("reasoning_format", "must be 'auto', 'deepseek' or 'none'");
    r.reasoning_format = f;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> check_request_counts(const ApiRequest& r, const RequestLimits& limits) {
  const int64_t prompts = r.chat ? 1 : static_cast<int64_t>(r.prompts.size());
  const int64_t n = r.params.n;
  if (limits.max_prompts > 0 && prompts > limits.max_prompts)
    return ApiError::bad_request(fmt::format("'prompt': {} prompts in one request, over this server's limit of {} "
                                             "(raise it with --max-prompts-per-request, or split the batch)",
                                             prompts, limits.max_prompts),
                                 "prompt");
  if (limits.max_n > 0 && n > limits.max_n)
    return ApiError::bad_request(
        fmt::format("'n': {} is over this server's limit of {} samples per prompt (raise it with --max-n)", n,
                    limits.max_n),
        "n");
  if (limits.max_sequences > 0 && prompts * n > limits.max_sequences)
    return ApiError::bad_request(fmt::format("'n': {} prompts x n = {} makes {} sequences, over this server's limit of "
                                             "{} per request (raise it with --max-seqs-per-request)",
                                             prompts, n, prompts * n, limits.max_sequences),
                                 "n");
  return std::nullopt;
}

std::optional<ApiError> check_request_tokens(const ApiRequest& r, const std::vector<std::vector<int32_t>>& prompts,
                                             int32_t max_tokens_per_sample, int32_t max_model_len,
                                             const RequestLimits& limits) {
  if (limits.max_tokens <= 0) return std::nullopt;
  const int64_t n = r.params.n;
  int64_t total = 0;
  for (const auto& p : prompts) {
    const int64_t len = static_cast<int64_t>(p.size());
    const int64_t out = max_tokens_per_sample > 0 ? max_tokens_per_sample : std::max<int64_t>(0, max_model_len - len);
    total += (len + out) * n;
  }
  if (total <= limits.max_tokens) return std::nullopt;
  const char* param = r.max_tokens_given || !r.chat ? "max_tokens" : "n";
  return ApiError::bad_request(fmt::format("'{}': the request asks for {} tokens ((prompt tokens + max_tokens) x n over "
                                           "its prompts{}), over this server's limit of {} per request (raise it "
                                           "with --max-request-tokens, or lower max_tokens or n)",
                                           param, total, max_tokens_per_sample > 0 ? "" : ", the context when max_tokens "
                                                                                           "is not set",
                                           limits.max_tokens),
                               param);
}

std::variant<ApiRequest, ApiError> parse_api_request(const std::string& body, bool chat, const RequestLimits* limits) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ApiError::bad_request("the request body is not valid JSON");
  if (!j.is_object()) return ApiError::bad_request("the request body must be a JSON object");
  ApiRequest r;
  r.chat = chat;
  // OpenAI's defaults: temperature 1, top_p 1, no top-k/min-p filtering.
  SamplingParams& sp = r.params.sampling;
  sp.temperature = 1.0f;
  sp.top_p = 1.0f;
  sp.top_k = 0;
  sp.min_p = 0.0f;
  sp.repeat_penalty = 1.0f;
  sp.repeat_last_n = -1;
  r.params.max_tokens = chat ? -1 : 16;
  Fields f{j, std::nullopt};
  if (const json* m = f.get("model")) {
    if (!m->is_string()) return ApiError::bad_request("'model': must be a string", "model");
    r.model = m->get<std::string>();
  }
  if (chat) {
    // Parsed again keeping key order: templates print messages and tools as given.
    const ojson oj = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
    auto it = oj.find("messages");
    if (it == oj.end()) return ApiError::bad_request("'messages' is required", "messages");
    if (auto e = parse_messages(*it, r)) return *e;
    if (auto e = parse_tools(oj, r)) return *e;
    if (auto e = parse_chat_options(oj, r)) return *e;
    f.boolean("add_generation_prompt", r.chat_input.add_generation_prompt);
  } else {
    auto it = j.find("prompt");
    if (it == j.end()) return ApiError::bad_request("'prompt' is required", "prompt");
    if (auto e = parse_prompt(*it, r)) return *e;
    f.boolean("echo", r.echo);
  }
  int64_t max_tokens = r.params.max_tokens;
  if (f.get("max_tokens") != nullptr || f.get("max_completion_tokens") != nullptr) r.max_tokens_given = true;
  f.number("max_tokens", max_tokens, 1, 1e9);
  f.number("max_completion_tokens", max_tokens, 1, 1e9);
  r.params.max_tokens = static_cast<int32_t>(max_tokens);
  f.number("temperature", sp.temperature, 0.0, 2.0);
  f.number("top_p", sp.top_p, 0.0, 1.0);
  if (f.get("top_p") != nullptr && sp.top_p <= 0.0f) f.fail("top_p", "must be greater than 0");
  f.number("top_k", sp.top_k, -1, 1e9);
  f.number("min_p", sp.min_p, 0.0, 1.0);
  f.number("presence_penalty", sp.presence_penalty, -2.0, 2.0);
  f.number("frequency_penalty", sp.frequency_penalty, -2.0, 2.0);
  f.number("repetition_penalty", sp.repeat_penalty, 0.01, 10.0);
  // The ceiling is the server's (--max-n, checked with the other counts), not the parser's.
  f.number("n", r.params.n, 1, INT32_MAX);
  sp.seed = kRandomSeed;
  if (f.get("seed") != nullptr) {
    int64_t seed = 0;
    f.number("seed", seed, -9.2e18, 9.2e18);
    sp.seed = static_cast<uint64_t>(seed);
    if (sp.seed == kRandomSeed) sp.seed = kRandomSeed + 1;  // a user's seed never means "random"
  }
  f.boolean("ignore_eos", r.params.ignore_eos);
  f.boolean("stream", r.stream);
  if (const json* so = f.get("stream_options")) {
    if (!so->is_object()) return ApiError::bad_request("'stream_options': must be an object", "stream_options");
    Fields g{*so, std::nullopt};
    g.boolean("include_usage", r.include_usage);
    if (g.err) return *g.err;
  }
  if (chat) {
    bool logprobs = false;
    f.boolean("logprobs", logprobs);
    f.number("top_logprobs", r.top_logprobs, 0, 20);
    if (f.get("top_logprobs") != nullptr && !logprobs && !f.err)
      return ApiError::bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (logprobs) r.params.logprobs = r.top_logprobs;
  } else {
    int32_t lp = -1;
    f.number("logprobs", lp, 0, 20);
    r.params.logprobs = lp;
  }
  if (f.err) return *f.err;
  if (auto e = parse_stop(f, r)) return *e;
  if (auto e = parse_constraint(f, r)) return *e;
  if (const json* b = f.get("best_of")) {
    if (!b->is_number_integer() || b->get<int64_t>() != r.params.n)
      return ApiError::bad_request("'best_of' other than n is not supported", "best_of");
  }
  if (auto e = refuse_unimplemented_fields(j, chat)) return *e;
  if (const json* ids = f.get("stop_token_ids")) {
    if (!ids->is_array()) return ApiError::bad_request("'stop_token_ids': must be a list of token ids", "stop_token_ids");
    for (const json& t : *ids) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
        return ApiError::bad_request("'stop_token_ids': must be a list of token ids", "stop_token_ids");
      r.params.stop_token_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  }
  f.number("priority", r.params.priority, INT32_MIN, INT32_MAX);
  if (const json* c = f.get("compress_prompt")) {
    if (!c->is_object())
      return ApiError::bad_request("'compress_prompt': must be an object like {\"ratio\": 0.5}", "compress_prompt");
    PromptCompression pc;
    Fields g{*c, std::nullopt};
    if (const json* v = g.get("ratio")) {
      if (!v->is_number() || !(v->get<double>() > 0.0 && v->get<double>() <= 1.0))
        g.fail("ratio", "must be a number in (0, 1] (the share of the prompt's tokens to keep)");
      else pc.ratio = v->get<double>();
    }
    if (const json* s = g.get("scorer")) {
      if (!s->is_string()) g.fail("scorer", "must be a string");
      else pc.scorer = s->get<std::string>();
    }
    if (g.err) {
      g.err->param = "compress_prompt." + g.err->param;
      g.err->message = "'compress_prompt." + g.err->message.substr(1);
      return *g.err;
    }
    r.compress_prompt = pc;
  }
  if (f.err) return *f.err;
  if (limits != nullptr)
    if (auto e = check_request_counts(r, *limits)) return *e;
  return r;
}

}  // namespace pagoda
