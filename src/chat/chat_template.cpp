#include "chat/chat_template.h"

#include <exception>
#include <new>

#include "jinja/ast.h"
#include "jinja/builtins.h"
#include "jinja/parser.h"

namespace pagoda {
namespace {

Status describe(const jinja::Error& e, const char* what) {
  if (e.line > 0) return error("chat template {} (line {}): {}", what, e.line, e.message);
  return error("chat template {}: {}", what, e.message);
}

const jinja::Dict& globals() {
  static const jinja::Dict g = jinja::make_globals();
  return g;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(const std::string& source,
                                         const ChatTemplateOptions& options) {
  jinja::LexerOptions lex;
  lex.trim_blocks = options.trim_blocks;
  lex.lstrip_blocks = options.lstrip_blocks;
  lex.keep_trailing_newline = options.keep_trailing_newline;
  try {
    auto ast = std::make_shared<jinja::TemplateAst>(jinja::parse_template(source, lex));
    return ChatTemplate(std::move(ast), options);
  } catch (const jinja::Error& e) {
    return describe(e, "syntax error");
  } catch (const std::bad_alloc&) {
    return error("chat template: out of memory while parsing");
  } catch (const std::exception& e) {
    return error("chat template: internal error while parsing: {}", e.what());
  }
}

Result<std::string> ChatTemplate::render(const jinja::Value& context) const {
  if (!context.is_dict()) return error("chat template context must be a dict");
  try {
    jinja::Interpreter interpreter(options_.limits);
    return interpreter.render(*ast_, globals(), context.dict());
  } catch (const jinja::Error& e) {
    return describe(e, "error");
  } catch (const std::bad_alloc&) {
    return error("chat template: out of memory while rendering");
  } catch (const std::exception& e) {
    return error("chat template: internal error while rendering: {}", e.what());
  }
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token) const {
  std::vector<jinja::Value> list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    jinja::Dict d;
    d.set(jinja::Value("role"), jinja::Value(m.role));
    d.set(jinja::Value("content"), jinja::Value(m.content));
    list.push_back(jinja::Value::dict(std::move(d)));
  }
  jinja::Dict context;
  context.set(jinja::Value("messages"), jinja::Value::list(std::move(list)));
  context.set(jinja::Value("tools"), jinja::Value::none());
  context.set(jinja::Value("documents"), jinja::Value::none());
  context.set(jinja::Value("add_generation_prompt"), jinja::Value(add_generation_prompt));
  context.set(jinja::Value("bos_token"), jinja::Value(bos_token));
  context.set(jinja::Value("eos_token"), jinja::Value(eos_token));
  return render(jinja::Value::dict(std::move(context)));
}

Result<std::string> render_template(const std::string& source, const jinja::Value& context,
                                    const ChatTemplateOptions& options) {
  Result<ChatTemplate> t = ChatTemplate::parse(source, options);
  if (!t) return t.status();
  return t->render(context);
}

}  // namespace pagoda
