#include "server/completion_session.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <string_view>

#include "text/utf8.h"

namespace pagoda {

using json = nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return fmt::format("{}{:016x}{:04x}", prefix, salt ^ static_cast<uint64_t>(std::time(nullptr)), counter++ & 0xffff);
}

// `n` letters and digits (Mistral's tool-call ids), from a per-process random stream.
std::string random_alnum(int n) {
  static const char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> l(mu);
  std::string id;
  for (int i = 0; i < n; ++i) id += kChars[rng() % (sizeof(kChars) - 1)];
  return id;
}

json token_bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const utf8::Char c = utf8::decode(s, i);
    if (c.cp == utf8::kInvalid) return false;
    i += c.len;
  }
  return true;
}

// A token as a key of /v1/completions' top_logprobs: its text, or, when that is not valid
// UTF-8 (a piece of a character), "bytes:" and its bytes escaped (vLLM's and llama.cpp's
// form). JSON would turn every such piece into the same "\ufffd", and the object would
// keep one candidate of several.
std::string escaped_bytes(const std::string& s) {
  std::string k = "bytes:";
  for (unsigned char c : s) k += fmt::format("\\x{:02x}", c);
  return k;
}

std::string token_key(const std::string& s) { return valid_utf8(s) ? s : escaped_bytes(s); }

}  // namespace

CompletionSession::CompletionSession(const ServerContext& ctx, ApiRequest req) : ctx_(ctx), req_(std::move(req)) {
  id_ = random_id(req_.chat ? "chatcmpl-" : "cmpl-");
  created_ = static_cast<int64_t>(std::time(nullptr));
}

CompletionSession::~CompletionSession() { abort(); }

std::variant<std::unique_ptr<CompletionSession>, ApiError> CompletionSession::start(
    const ServerContext& ctx, ApiRequest req, std::vector<std::vector<int32_t>> prompts) {
  if (auto e = check_request_counts(req, ctx.limits)) return *e;
  if (ctx.max_tokens_limit > 0 && req.params.max_tokens > ctx.max_tokens_limit)
    return ApiError::bad_request(
        fmt::format("'max_tokens' {} exceeds this server's limit of {}", req.params.max_tokens, ctx.max_tokens_limit),
        "max_tokens");
  // The engine validates (Engine::check_request); the server only maps its answer to
  // OpenAI's shape, naming the field at fault ("messages" for a chat's prompt).
  RequestParams params = req.params;
  params.stop = req.stop;
  params.max_tokens_must_fit = req.max_tokens_given;
  if (params.max_tokens < 0 && ctx.max_tokens_limit > 0) params.max_tokens = ctx.max_tokens_limit;
  if (req.constraint) {
    const std::string& field = req.constraint_field;
    if (ctx.constraints == nullptr)
      return ApiError::bad_request(fmt::format("'{}': structured output is not available on this server", field), field);
    auto compiled = ctx.constraints->compile(*req.constraint);
    if (!compiled)
      return ApiError::bad_request(fmt::format("'{}': cannot be compiled: {}", field, compiled.status().message()), field);
    params.constraint = std::move(compiled.value());
    if (ctx.metrics != nullptr) ctx.metrics->count_constrained_request(constraint_kind_name(req.constraint->kind));
  }
  for (const auto& p : prompts)
    if (auto rejected = ctx.loop->check(p, params))
      return ApiError::bad_request(rejected->message,
                                   rejected->param == "prompt" && req.chat ? "messages" : rejected->param);
  if (auto e = check_request_tokens(req, prompts, params.max_tokens, ctx.max_model_len, ctx.limits)) return *e;
  // More sequences than the whole server holds would get 429 forever: that is the request's fault.
  const int64_t seqs = static_cast<int64_t>(prompts.size()) * req.params.n;
  if (seqs > ctx.loop->max_sequences())
    return ApiError::bad_request(fmt::format("'n': the request makes {} sequences, more than this server ever holds "
                                             "at once ({}; raise it with --max-seqs-in-flight)",
                                             seqs, ctx.loop->max_sequences()),
                                 "n");
  std::unique_ptr<CompletionSession> s(new CompletionSession(ctx, std::move(req)));
  const int32_t n = s->req_.params.n;
  for (auto& p : prompts) {
    Prompt pr;
    pr.tokens = static_cast<int32_t>(p.size());
    if (s->req_.echo) pr.echo = ctx.tokenizer->decode(p);
    s->prompts_.push_back(std::move(pr));
    s->choices_.resize(s->choices_.size() + static_cast<size_t>(n));
  }
  for (Choice& c : s->choices_) {
    if (s->req_.split_reasoning) c.think = std::make_unique<ReasoningSplitter>(true, s->req_.reasoning_open);
    if (s->req_.tool_syntax != nullptr) c.calls = std::make_unique<ToolCallExtractor>(s->req_.tool_syntax);
  }
  // All prompts or none: a request refused for the server's limits holds nothing.
  EngineLoop::SubmittedAll sub = ctx.loop->submit_all(std::move(prompts), params);
  if (sub.channels.empty()) {
    ApiError e = ApiError::bad_request(sub.error.message());
    e.status = sub.overloaded ? 429 : 503;
    e.type = sub.overloaded ? "rate_limit_exceeded" : "service_unavailable";
    return e;
  }
  for (size_t i = 0; i < sub.channels.size(); ++i) s->prompts_[i].channel = std::move(sub.channels[i]);
  for (Prompt& pr : s->prompts_) {
    Status st = pr.channel->wait_admitted();
    if (!st.is_ok()) {
      const bool internal = pr.channel->rejected_internally();
      s->abort();
      if (internal) return ApiError{500, st.message(), "server_error", "", ""};
      return ApiError::bad_request(st.message(), s->req_.chat ? "messages" : "prompt");
    }
  }
  return s;
}

void CompletionSession::abort() {
  // The transport's hang-up watch (I/O thread) and wait_json on the handler's thread
  // may both abort: once is enough, and `closed` must not be written by both at once.
  std::lock_guard<std::mutex> l(abort_mu_);
  for (Prompt& p : prompts_)
    if (!p.closed && p.channel) {
      ctx_.loop->abort(p.channel);
      p.closed = true;
    }
}

bool CompletionSession::all_done() const {
  for (const Choice& c : choices_)
    if (!c.done) return false;
  return true;
}

void CompletionSession::append_logprobs(Choice& c, const StepOutput& o, const std::string& token_text) {
  if (req_.params.logprobs < 0) return;
  if (c.logprobs == nullptr) {
    lp_store_.push_back(std::make_unique<json>());
    c.logprobs = lp_store_.back().get();
    if (req_.chat) *c.logprobs = {{"content", json::array()}};
    else *c.logprobs = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                        {"text_offset", json::array()}};
  }
  json& lp = *c.logprobs;
  const Tokenizer& tok = *ctx_.tokenizer;
  if (req_.chat) {
    json top = json::array();
    for (const auto& [id, v] : o.top_logprobs) {
      const std::string t = tok.token_to_bytes(id, true);
      top.push_back({{"token", t}, {"logprob", v}, {"bytes", token_bytes(t)}});
    }
    lp["content"].push_back(
        {{"token", token_text}, {"logprob", o.logprob}, {"bytes", token_bytes(token_text)}, {"top_logprobs", top}});
  } else {
    json top = json::object();
    // One key per candidate: two tokens with the same text (a letter and its byte-fallback
    // token) would share one, so the worse of them (they come best first) takes the
    // escaped form.
    for (const auto& [id, v] : o.top_logprobs) {
      const std::string text = tok.token_to_bytes(id, true);
      std::string key = token_key(text);
      if (top.contains(key)) key = escaped_bytes(text);
      if (!top.contains(key)) top[key] = v;
    }
    lp["text_offset"].push_back(c.content.size());
    lp["tokens"].push_back(token_text);
    lp["token_logprobs"].push_back(o.logprob);
    lp["top_logprobs"].push_back(top);
  }
}

void CompletionSession::consume(size_t p, std::vector<StepOutput>& outs, std::string* events) {
  const int32_t n = req_.params.n;
  for (const StepOutput& o : outs) {
    const size_t ci = p * static_cast<size_t>(n) + static_cast<size_t>(o.index);
    if (ci >= choices_.size()) continue;
    Choice& c = choices_[ci];
    if (c.done || o.token < 0) continue;
    ++c.tokens;
    const std::string token_text = ctx_.tokenizer->token_to_bytes(o.token, true);
    // The token that completed a stop string is not part of the reply.
    const bool stopped = !o.stop_string.empty();
    std::string finish;
    if (o.finish != FinishReason::kNone) finish = o.finish == FinishReason::kLength ? "length" : "stop";
    // The reply's text, read back: reasoning split off, tool calls held until the end.
    std::string delta = o.text, reasoning;
    if (c.think) {
      ReasoningSplitter::Piece piece = c.think->feed(delta);
      if (!finish.empty()) {
        ReasoningSplitter::Piece last = c.think->finish();
        piece.reasoning += last.reasoning;
        piece.content += last.content;
      }
      reasoning = std::move(piece.reasoning);
      delta = std::move(piece.content);
    }
    json calls_delta;
    if (c.calls) {
      delta = c.calls->feed(delta);
      auto new_id = [&] {
        const int len = c.calls->syntax() != nullptr ? c.calls->syntax()->id_length : 0;
        return len > 0 ? random_alnum(len) : random_id("call_");
      };
      // Constrained calls stream as they are written; the others wait for the end, where
      // a reply that does not parse is still all content.
      if (events != nullptr && req_.tool_calls_constrained) {
        for (ToolCallExtractor::Piece& piece : c.calls->pieces()) {
          if (calls_delta.is_null()) calls_delta = json::array();
          if (piece.first) {
            c.call_ids.push_back(new_id());
            calls_delta.push_back({{"index", piece.index}, {"id", c.call_ids.back()}, {"type", "function"},
                                   {"function", {{"name", piece.name}, {"arguments", piece.arguments}}}});
          } else {
            calls_delta.push_back({{"index", piece.index}, {"function", {{"arguments", piece.arguments}}}});
          }
        }
      }
      if (!finish.empty()) {
        ToolCallExtractor::Final f = c.calls->finish();
        delta += f.content;
        c.tool_calls = std::move(f.calls);
        for (size_t k = 0; k < c.tool_calls.size(); ++k) {
          ToolCall& call = c.tool_calls[k];
          if (calls_delta.is_null()) calls_delta = json::array();
          if (k < c.call_ids.size()) {
            call.id = c.call_ids[k];
            if (!c.calls->arguments_streamed(k))
              calls_delta.push_back({{"index", k}, {"function", {{"arguments", call.arguments}}}});
            continue;
          }
          if (call.id.empty()) call.id = new_id();
          calls_delta.push_back({{"index", k}, {"id", call.id}, {"type", "function"},
                                 {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        if (calls_delta.is_array() && calls_delta.empty()) calls_delta = json();
        if (!c.tool_calls.empty() && finish == "stop") finish = "tool_calls";
      }
    }
    if (!stopped) append_logprobs(c, o, token_text);
    if (events != nullptr && (!delta.empty() || !reasoning.empty() || req_.params.logprobs >= 0)) {
      json lp_delta;
      const json* lpp = nullptr;
      if (req_.params.logprobs >= 0 && c.logprobs != nullptr && !stopped) {
        // The entry for this token only.
        if (req_.chat) lp_delta = {{"content", json::array({(*c.logprobs)["content"].back()})}};
        else
          lp_delta = {{"tokens", json::array({(*c.logprobs)["tokens"].back()})},
                      {"token_logprobs", json::array({(*c.logprobs)["token_logprobs"].back()})},
                      {"top_logprobs", json::array({(*c.logprobs)["top_logprobs"].back()})},
                      {"text_offset", json::array({(*c.logprobs)["text_offset"].back()})}};
        lpp = &lp_delta;
      }
      *events += chunk(ci, delta, nullptr, lpp, reasoning);
    }
    if (events != nullptr && !calls_delta.is_null()) *events += chunk(ci, "", nullptr, nullptr, {}, &calls_delta);
    c.content += delta;
    c.reasoning += reasoning;
    if (!finish.empty()) {
      c.done = true;
      c.finish_reason = finish;
      if (events != nullptr) *events += chunk(ci, "", &finish, nullptr);
    }
  }
  // Every sample of prompt p is complete: its channel closes (the engine has finished the
  // request already, a stop string included).
  bool prompt_done = true;
  for (int32_t i = 0; i < n; ++i) prompt_done = prompt_done && choices_[p * static_cast<size_t>(n) + static_cast<size_t>(i)].done;
  if (prompt_done) {
    std::lock_guard<std::mutex> l(abort_mu_);
    if (!prompts_[p].closed) {
      ctx_.loop->abort(prompts_[p].channel);
      prompts_[p].closed = true;
    }
  }
}

std::string CompletionSession::chunk(size_t ci, const std::string& delta, const std::string* finish, const json* lp,
                                     const std::string& reasoning, const json* tool_calls) {
  json choice = {{"index", ci}, {"logprobs", lp != nullptr ? *lp : json(nullptr)},
                 {"finish_reason", finish != nullptr ? json(*finish) : json(nullptr)}};
  Choice& c = choices_[ci];
  if (req_.chat) {
    json d = json::object();
    if (!c.role_sent) {
      d["role"] = "assistant";
      c.role_sent = true;
    }
    if (!reasoning.empty()) {
      // vLLM's newer name and the one llama.cpp and older vLLM send.
      d["reasoning_content"] = reasoning;
      d["reasoning"] = reasoning;
    }
    if (tool_calls != nullptr) d["tool_calls"] = *tool_calls;
    else if (!delta.empty() || (finish == nullptr && reasoning.empty())) d["content"] = delta;
    choice["delta"] = d;
  } else {
    std::string text = delta;
    if (req_.echo && !c.role_sent) {
      text = prompts_[ci / static_cast<size_t>(req_.params.n)].echo + text;
      c.role_sent = true;
    }
    choice["text"] = text;
  }
  json j = {{"id", id_}, {"object", req_.chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
            {"model", ctx_.model_name}, {"choices", json::array({choice})}};
  if (req_.include_usage) j["usage"] = nullptr;
  return "data: " + dump(j) + "\n\n";
}

json CompletionSession::usage() const {
  int64_t prompt = 0, completion = 0;
  for (const Prompt& p : prompts_) prompt += p.tokens;
  for (const Choice& c : choices_) completion += c.tokens;
  return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

bool CompletionSession::next_events(std::string& out, std::chrono::milliseconds wait) {
  if (finished_events_) return false;
  std::vector<StepOutput> outs;
  bool any_open = false;
  for (size_t p = 0; p < prompts_.size(); ++p) {
    Prompt& pr = prompts_[p];
    outs.clear();
    const auto slice = prompts_.size() == 1 ? wait : std::chrono::milliseconds(std::max<int64_t>(1, wait.count() / 4));
    const bool open = pr.channel->take(outs, slice);
    consume(p, outs, &out);
    if (!open) {
      const Status st = pr.channel->error();
      if (!st.is_ok() && !failure_) failure_ = ApiError{500, st.message(), "server_error", "", ""};
      // The channel ended: samples it never finished (an abort) end here.
      for (int32_t i = 0; i < req_.params.n; ++i) {
        Choice& c = choices_[p * static_cast<size_t>(req_.params.n) + static_cast<size_t>(i)];
        if (!c.done) {
          c.done = true;
          c.finish_reason = "abort";
        }
      }
    } else if (!all_done()) {
      any_open = true;
    }
  }
  if (any_open && !all_done()) return true;
  if (failure_) out += "data: " + failure_->body() + "\n\n";
  if (req_.include_usage) {
    json j = {{"id", id_}, {"object", req_.chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
              {"model", ctx_.model_name}, {"choices", json::array()}, {"usage", usage()}};
    out += "data: " + dump(j) + "\n\n";
  }
  out += "data: [DONE]\n\n";
  finished_events_ = true;
  abort();
  return false;
}

std::variant<std::string, ApiError> CompletionSession::wait_json() {
  std::vector<StepOutput> outs;
  for (size_t p = 0; p < prompts_.size(); ++p) {
    Prompt& pr = prompts_[p];
    for (;;) {
      outs.clear();
      const bool open = pr.channel->take(outs, std::chrono::milliseconds(200));
      consume(p, outs, nullptr);
      bool done = true;
      for (int32_t i = 0; i < req_.params.n; ++i)
        done = done && choices_[p * static_cast<size_t>(req_.params.n) + static_cast<size_t>(i)].done;
      if (done) break;
      if (!open) {
        const Status st = pr.channel->error();
        abort();
        return ApiError{500, st.is_ok() ? std::string("the request ended early") : st.message(), "server_error", "", ""};
      }
    }
  }
  json choices = json::array();
  for (size_t ci = 0; ci < choices_.size(); ++ci) {
    const Choice& c = choices_[ci];
    json lp = c.logprobs != nullptr ? *c.logprobs : json(nullptr);
    if (req_.chat) {
      json message = {{"role", "assistant"}, {"content", c.content}};
      if (!c.reasoning.empty() || (c.think && c.think->reasoned())) {
        message["reasoning_content"] = c.reasoning;
        message["reasoning"] = c.reasoning;
      }
      if (!c.tool_calls.empty()) {
        json calls = json::array();
        for (const ToolCall& call : c.tool_calls)
          calls.push_back({{"id", call.id}, {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        message["tool_calls"] = calls;
        if (c.content.empty()) message["content"] = nullptr;  // OpenAI's shape for a reply that is only calls
      }
      choices.push_back({{"index", ci}, {"message", message}, {"logprobs", lp}, {"finish_reason", c.finish_reason}});
    } else {
      const std::string text = req_.echo ? prompts_[ci / static_cast<size_t>(req_.params.n)].echo + c.content : c.content;
      choices.push_back({{"index", ci}, {"text", text}, {"logprobs", lp}, {"finish_reason", c.finish_reason}});
    }
  }
  json j = {{"id", id_}, {"object", req_.chat ? "chat.completion" : "text_completion"}, {"created", created_},
            {"model", ctx_.model_name}, {"choices", choices}, {"usage", usage()}};
  abort();
  return dump(j);
}

}  // namespace pagoda
