// Renders a parsed Jinja template (jinja/ast.h) the way jinja2's sandboxed
// environment does: scopes as jinja2 has them (a {% for %} iteration and a macro call
// get their own; {% if %} does not; namespace() objects cross them), jinja2's
// default Undefined (prints as "", is falsy and iterable, fails when used as a value),
// attribute lookup falling back to items and back, loop variables, macros and call
// blocks, break/continue. The filters, tests, globals and methods live in
// jinja/builtins.h.
//
// One Interpreter renders one template once; it is not thread-safe, but any number
// can render the same TemplateAst concurrently. Work is bounded: loop iterations,
// macro call depth, output size and the value walks (WorkBudget) all have limits, so
// a malicious template fails instead of hanging or exhausting memory.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace pagoda::jinja {

struct RenderLimits {
  int64_t max_iterations = 1'000'000;  // loop iterations and macro calls in one render
  int max_call_depth = 64;             // nested macro calls
  int64_t work_budget = 100'000'000;   // steps of the recursive value walks
};

class Scope;

class Interpreter {
 public:
  explicit Interpreter(RenderLimits limits = {});
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `ast` with the variables of `context` over `globals`. Fails with
  // jinja::Error, whose line is the template line being evaluated.
  std::string render(const TemplateAst& ast, const Dict& globals, const Dict& context);

  // ---- used by the builtins -------------------------------------------------------
  Value call(const Value& callee, CallArgs& args);
  // obj.name: jinja2's getattr (attribute, then item); undefined when missing.
  Value getattr(const Value& obj, const std::string& name);
  // obj[key]: jinja2's getitem (item, then attribute for string keys).
  Value getitem(const Value& obj, const Value& key);
  Value filter(std::string_view name, const Value& value, CallArgs& args);
  bool test(std::string_view name, const Value& value, CallArgs& args);
  // The items a {% for %} loop over `v` visits (dict: keys; str: characters).
  std::vector<Value> iterate(const Value& v);
  // A namespace() object; the interpreter clears them all after the render, which
  // breaks any reference cycle a template made through them.
  Value new_namespace(Dict attributes);
  // Counts one loop iteration or call against RenderLimits::max_iterations.
  void tick();

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using ScopePtr = std::shared_ptr<Scope>;

  Flow exec_body(const Body& body, const ScopePtr& scope);
  Flow exec(const Stmt& s, const ScopePtr& scope);
  void exec_for(const Stmt& s, const ScopePtr& scope);
  void exec_call_block(const Stmt& s, const ScopePtr& scope);
  std::string capture(const Body& body, const ScopePtr& scope);
  void assign(const Target& t, const Value& v, Scope& scope);
  Value make_macro(const Stmt& s, const ScopePtr& scope, const std::string& name);
  Value invoke_macro(const Stmt& s, const std::weak_ptr<Scope>& closure, const std::string& name,
                     CallArgs& args, bool uses_varargs, bool uses_kwargs, bool uses_caller);

  Value eval(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const ArgExprs& a, const ScopePtr& scope);
  Value eval_filter_chain(const Expr& chain, const Value& input, const ScopePtr& scope);
  Value eval_slice(const Value& obj, const Expr& slice, const ScopePtr& scope);
  bool eval_compare(const Expr& e, const ScopePtr& scope);

  void write(std::string_view text);

  RenderLimits limits_;
  std::string* out_ = nullptr;
  ScopePtr root_;
  std::vector<Value> namespaces_;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  int line_ = 0;
};

}  // namespace pagoda::jinja
