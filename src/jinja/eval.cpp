#include "jinja/eval.h"

#include <utility>

#include <fmt/format.h>

#include "jinja/builtins.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"

namespace pagoda::jinja {

// Variables of one scope, looked up through the enclosing ones. Scopes are few and
// small (a loop iteration binds two or three names), so a flat list beats a map.
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}

  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent_.get())
      for (const auto& [k, v] : s->vars_)
        if (k == name) return &v;
    return nullptr;
  }

  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars_) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars_.emplace_back(name, std::move(v));
  }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

namespace {

// Nested eval/exec frames allowed at once: expression nesting times macro nesting,
// bounded so that a hostile template cannot overflow the stack.
constexpr int kMaxFrames = 1500;

// Which implicit names a macro body reads: jinja2 accepts extra positional arguments
// only when the body uses `varargs`, extra keywords only with `kwargs`, and a caller
// only with `caller`.
struct MacroUses {
  bool varargs = false, kwargs = false, caller = false;
};

void scan_body(const Body& body, MacroUses& u);

void scan_expr(const Expr* e, MacroUses& u) {
  if (!e) return;
  if (e->kind == ExprKind::kName) {
    u.varargs |= e->name == "varargs";
    u.kwargs |= e->name == "kwargs";
    u.caller |= e->name == "caller";
  }
  scan_expr(e->object.get(), u);
  scan_expr(e->left.get(), u);
  scan_expr(e->right.get(), u);
  for (const ExprPtr& item : e->items) scan_expr(item.get(), u);
  for (const ExprPtr& p : e->args.positional) scan_expr(p.get(), u);
  for (const auto& kw : e->args.keyword) scan_expr(kw.second.get(), u);
  scan_expr(e->args.star_args.get(), u);
  scan_expr(e->args.star_kwargs.get(), u);
}

void scan_body(const Body& body, MacroUses& u) {
  for (const StmtPtr& s : body) {
    scan_expr(s->expr.get(), u);
    scan_expr(s->condition.get(), u);
    for (const IfBranch& b : s->branches) {
      scan_expr(b.test.get(), u);
      scan_body(b.body, u);
    }
    scan_body(s->body, u);
    scan_body(s->else_body, u);
    for (const MacroParam& p : s->params) scan_expr(p.default_value.get(), u);
    for (const auto& b : s->bindings) scan_expr(b.second.get(), u);
  }
}

// jinja2's `loop` variable for iteration i of n.
Value loop_info(const std::vector<Value>& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  Dict d;
  d.set(Value("index"), Value(k + 1));
  d.set(Value("index0"), Value(k));
  d.set(Value("revindex"), Value(n - k));
  d.set(Value("revindex0"), Value(n - k - 1));
  d.set(Value("first"), Value(k == 0));
  d.set(Value("last"), Value(k == n - 1));
  d.set(Value("length"), Value(n));
  d.set(Value("depth"), Value(1));
  d.set(Value("depth0"), Value(0));
  if (k > 0) d.set(Value("previtem"), items[i - 1]);
  if (k < n - 1) d.set(Value("nextitem"), items[i + 1]);
  d.set(Value("cycle"), Value::callable("<bound method LoopContext.cycle>",
                                        [k](Interpreter&, CallArgs& args) {
                                          if (args.positional.empty()) fail("no items for cycling given");
                                          return args.positional[static_cast<size_t>(k) %
                                                                 args.positional.size()];
                                        }));
  return Value::dict(std::move(d));
}

// Counts nested eval/exec frames.
class FrameGuard {
 public:
  explicit FrameGuard(int& depth) : depth_(depth) {
    if (++depth_ > kMaxFrames) fail("template nests too deeply while rendering");
  }
  ~FrameGuard() { --depth_; }
  FrameGuard(const FrameGuard&) = delete;
  FrameGuard& operator=(const FrameGuard&) = delete;

 private:
  int& depth_;
};

thread_local int t_frames = 0;

}  // namespace

Interpreter::Interpreter(RenderLimits limits) : limits_(limits) {}
Interpreter::~Interpreter() = default;

std::string Interpreter::render(const TemplateAst& ast, const Dict& globals, const Dict& context) {
  WorkBudget budget(limits_.work_budget);
  auto globals_scope = std::make_shared<Scope>(nullptr);
  for (const auto& [k, v] : globals.entries())
    if (k.is_string()) globals_scope->set(k.str(), v);
  auto context_scope = std::make_shared<Scope>(globals_scope);
  for (const auto& [k, v] : context.entries())
    if (k.is_string()) context_scope->set(k.str(), v);
  root_ = std::make_shared<Scope>(context_scope);

  // Namespaces are cleared however the render ends: a template can make them refer
  // to each other, and clearing them frees such cycles.
  struct Release {
    Interpreter& self;
    ~Release() {
      for (Value& ns : self.namespaces_) ns.namespace_dict().clear();
      self.namespaces_.clear();
      self.root_.reset();
    }
  } release{*this};

  std::string out;
  out_ = &out;
  try {
    exec_body(ast.body, root_);
  } catch (Error& e) {
    if (e.line == 0) e.line = line_;
    out_ = nullptr;
    throw;
  }
  out_ = nullptr;
  return out;
}

void Interpreter::write(std::string_view text) {
  out_->append(text);
  if (out_->size() > kMaxStringBytes) fail("rendered text too large");
}

void Interpreter::tick() {
  if (++iterations_ > limits_.max_iterations)
    fail("template exceeded " + std::to_string(limits_.max_iterations) +
         " loop iterations and macro calls");
}

Value Interpreter::new_namespace(Dict attributes) {
  Value ns = Value::make_namespace(std::move(attributes));
  namespaces_.push_back(ns);
  return ns;
}

// ---------------------------------------------------------------------------------
// Statements

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope) {
  FrameGuard guard(t_frames);
  for (const StmtPtr& s : body) {
    Flow f = exec(*s, scope);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const ScopePtr& scope) {
  line_ = s.line;
  switch (s.kind) {
    case StmtKind::kText: write(s.text); break;
    case StmtKind::kPrint: {
      Value v = eval(*s.expr, scope);
      if (v.is_string()) {
        write(v.str());
      } else {
        write(to_str(v));
      }
      break;
    }
    case StmtKind::kIf:
      for (const IfBranch& b : s.branches)
        if (truthy(eval(*b.test, scope))) return exec_body(b.body, scope);
      return exec_body(s.else_body, scope);
    case StmtKind::kFor: exec_for(s, scope); break;
    case StmtKind::kSet: assign(s.target, eval(*s.expr, scope), *scope); break;
    case StmtKind::kSetBlock: {
      Value v(capture(s.body, std::make_shared<Scope>(scope)));
      if (s.expr) v = eval_filter_chain(*s.expr, v, scope);
      assign(s.target, v, *scope);
      break;
    }
    case StmtKind::kMacro: scope->set(s.name, make_macro(s, scope, s.name)); break;
    case StmtKind::kCallBlock: exec_call_block(s, scope); break;
    case StmtKind::kFilterBlock: {
      Value text(capture(s.body, std::make_shared<Scope>(scope)));
      write(to_str(eval_filter_chain(*s.expr, text, scope)));
      break;
    }
    case StmtKind::kWith: {
      auto inner = std::make_shared<Scope>(scope);
      for (const auto& [target, expr] : s.bindings) assign(target, eval(*expr, scope), *inner);
      return exec_body(s.body, inner);
    }
    case StmtKind::kScope: exec_body(s.body, std::make_shared<Scope>(scope)); break;
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
  }
  return Flow::kNormal;
}

// Each iteration runs in a fresh scope, so {% set %} inside a loop body does not
// survive the iteration (jinja2's scoping; namespace() is the way out).
void Interpreter::exec_for(const Stmt& s, const ScopePtr& scope) {
  std::vector<Value> items = iterate(eval(*s.expr, scope));
  if (s.condition) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      tick();
      auto probe = std::make_shared<Scope>(scope);
      assign(s.target, item, *probe);
      if (truthy(eval(*s.condition, probe))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(s.else_body, std::make_shared<Scope>(scope));
    return;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    tick();
    auto iteration = std::make_shared<Scope>(scope);
    assign(s.target, items[i], *iteration);
    iteration->set("loop", loop_info(items, i));
    if (exec_body(s.body, iteration) == Flow::kBreak) break;
  }
}

void Interpreter::assign(const Target& t, const Value& v, Scope& scope) {
  switch (t.kind) {
    case Target::Kind::kName: scope.set(t.name, v); return;
    case Target::Kind::kTuple: {
      std::vector<Value> values = iterate(v);
      if (values.size() < t.items.size())
        fail("not enough values to unpack (expected " + std::to_string(t.items.size()) +
             ", got " + std::to_string(values.size()) + ")");
      if (values.size() > t.items.size())
        fail("too many values to unpack (expected " + std::to_string(t.items.size()) + ")");
      for (size_t i = 0; i < values.size(); ++i) assign(t.items[i], values[i], scope);
      return;
    }
    case Target::Kind::kNamespaceAttr: {
      const Value* ns = scope.find(t.name);
      if (!ns || !ns->is_namespace()) fail("cannot assign attribute on non-namespace object");
      ns->namespace_dict().set(Value(t.attr), v);
      return;
    }
  }
}

std::string Interpreter::capture(const Body& body, const ScopePtr& scope) {
  std::string text;
  std::string* saved = out_;
  out_ = &text;
  struct Restore {
    std::string*& out;
    std::string* saved;
    ~Restore() { out = saved; }
  } restore{out_, saved};
  exec_body(body, scope);
  return text;
}

Value Interpreter::make_macro(const Stmt& s, const ScopePtr& scope, const std::string& name) {
  MacroUses uses;
  scan_body(s.body, uses);
  std::weak_ptr<Scope> closure = scope;  // weak: the scope holds the macro
  const Stmt* stmt = &s;
  return Value::callable("<Macro '" + name + "'>",
                         [stmt, closure, name, uses](Interpreter& in, CallArgs& args) {
                           return in.invoke_macro(*stmt, closure, name, args, uses.varargs,
                                                  uses.kwargs, uses.caller);
                         });
}

Value Interpreter::invoke_macro(const Stmt& s, const std::weak_ptr<Scope>& closure,
                                const std::string& name, CallArgs& args, bool uses_varargs,
                                bool uses_kwargs, bool uses_caller) {
  tick();
  if (call_depth_ >= limits_.max_call_depth) fail("macro calls nest too deeply");
  ++call_depth_;
  struct Depth {
    int& d;
    ~Depth() { --d; }
  } depth{call_depth_};

  ScopePtr parent = closure.lock();
  if (!parent) parent = root_;
  auto scope = std::make_shared<Scope>(parent);
  const std::vector<MacroParam>& params = s.params;
  std::vector<bool> bound(params.size(), false);
  std::vector<Value> extra;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < params.size()) {
      scope->set(params[i].name, args.positional[i]);
      bound[i] = true;
    } else {
      extra.push_back(args.positional[i]);
    }
  }
  if (!extra.empty() && !uses_varargs)
    fail("macro '" + name + "' takes not more than " + std::to_string(params.size()) +
         " argument(s)");
  Dict extra_kwargs;
  Value caller = Value::undefined("No caller defined");
  for (auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && params[i].name != key) ++i;
    if (i < params.size()) {
      if (bound[i]) fail("macro '" + name + "' got multiple values for argument '" + key + "'");
      scope->set(key, value);
      bound[i] = true;
    } else if (key == "caller" && uses_caller) {
      caller = value;
    } else if (uses_kwargs) {
      extra_kwargs.set(Value(key), value);
    } else {
      fail("macro '" + name + "' takes no keyword argument '" + key + "'");
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i]) continue;
    scope->set(params[i].name,
               params[i].default_value
                   ? eval(*params[i].default_value, scope)
                   : Value::undefined("parameter '" + params[i].name + "' was not provided"));
  }
  if (uses_varargs) scope->set("varargs", Value::tuple(std::move(extra)));
  if (uses_kwargs) scope->set("kwargs", Value::dict(std::move(extra_kwargs)));
  if (uses_caller) scope->set("caller", caller);
  return Value(capture(s.body, scope));
}

// {% call(params) f(args) %}body{% endcall %}: f gets caller=<a macro rendering body>.
void Interpreter::exec_call_block(const Stmt& s, const ScopePtr& scope) {
  const Expr& call_expr = *s.expr;
  Value callee = eval(*call_expr.object, scope);
  CallArgs args = eval_args(call_expr.args, scope);
  MacroUses uses;
  scan_body(s.body, uses);
  std::weak_ptr<Scope> closure = scope;
  const Stmt* stmt = &s;
  args.keyword.emplace_back(
      "caller", Value::callable("<Macro 'caller'>", [stmt, closure, uses](Interpreter& in, CallArgs& a) {
        return in.invoke_macro(*stmt, closure, "caller", a, uses.varargs, uses.kwargs, uses.caller);
      }));
  line_ = s.line;
  write(to_str(call(callee, args)));
}

// ---------------------------------------------------------------------------------
// Expressions

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  FrameGuard guard(t_frames);
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::kConst: return e.constant;
    case ExprKind::kName: {
      const Value* v = scope->find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const ExprPtr& item : e.items) items.push_back(eval(*item, scope));
      return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value key = eval(*e.items[i], scope);
        d.set(std::move(key), eval(*e.items[i + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetAttr: {
      Value obj = eval(*e.object, scope);
      line_ = e.line;
      return getattr(obj, e.attr);
    }
    case ExprKind::kGetItem: {
      Value obj = eval(*e.object, scope);
      if (e.left->kind == ExprKind::kSlice) return eval_slice(obj, *e.left, scope);
      Value key = eval(*e.left, scope);
      line_ = e.line;
      return getitem(obj, key);
    }
    case ExprKind::kCall: {
      Value callee = eval(*e.object, scope);
      CallArgs args = eval_args(e.args, scope);
      line_ = e.line;
      return call(callee, args);
    }
    case ExprKind::kFilter: return eval_filter_chain(e, Value(), scope);
    case ExprKind::kTest: {
      Value v = eval(*e.object, scope);
      CallArgs args = eval_args(e.args, scope);
      line_ = e.line;
      return Value(test(e.name, v, args));
    }
    case ExprKind::kNeg: return negate(eval(*e.object, scope));
    case ExprKind::kPos: return unary_plus(eval(*e.object, scope));
    case ExprKind::kNot: return Value(!truthy(eval(*e.object, scope)));
    case ExprKind::kBinary: {
      Value l = eval(*e.left, scope);
      Value r = eval(*e.right, scope);
      line_ = e.line;
      return binary_op(e.name, l, r);
    }
    case ExprKind::kAnd: {
      Value l = eval(*e.left, scope);
      return truthy(l) ? eval(*e.right, scope) : l;
    }
    case ExprKind::kOr: {
      Value l = eval(*e.left, scope);
      return truthy(l) ? l : eval(*e.right, scope);
    }
    case ExprKind::kCompare: return Value(eval_compare(e, scope));
    case ExprKind::kCondExpr:
      if (truthy(eval(*e.object, scope))) return eval(*e.left, scope);
      if (e.right) return eval(*e.right, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    case ExprKind::kConcat: {
      std::string s;
      for (const ExprPtr& item : e.items) {
        Value v = eval(*item, scope);
        s += v.is_string() ? v.str() : to_str(v);
        if (s.size() > kMaxStringBytes) fail("string result too large");
      }
      return Value(std::move(s));
    }
    case ExprKind::kNamespaceRef:
    case ExprKind::kSlice: break;
  }
  fail("unexpected expression");
}

bool Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.items[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i + 1], scope);
    line_ = e.line;
    if (!compare_op(e.ops[i], left, right)) return false;
    left = std::move(right);
  }
  return true;
}

Value Interpreter::eval_slice(const Value& obj, const Expr& s, const ScopePtr& scope) {
  Value parts[3];
  for (size_t i = 0; i < 3; ++i)
    parts[i] = s.items[i] ? eval(*s.items[i], scope) : Value::none();
  line_ = s.line;
  return slice(obj, parts[0], parts[1], parts[2]);
}

// A filter applied to the value of its object, or (filter blocks, {% set %} blocks,
// whose innermost filter has no object) to `input`.
Value Interpreter::eval_filter_chain(const Expr& chain, const Value& input, const ScopePtr& scope) {
  Value v = chain.object ? (chain.object->kind == ExprKind::kFilter
                                ? eval_filter_chain(*chain.object, input, scope)
                                : eval(*chain.object, scope))
                         : input;
  CallArgs args = eval_args(chain.args, scope);
  line_ = chain.line;
  return filter(chain.name, v, args);
}

CallArgs Interpreter::eval_args(const ArgExprs& a, const ScopePtr& scope) {
  CallArgs out;
  for (const ExprPtr& p : a.positional) out.positional.push_back(eval(*p, scope));
  if (a.star_args)
    for (Value& v : iterate(eval(*a.star_args, scope))) out.positional.push_back(std::move(v));
  for (const auto& [key, expr] : a.keyword) out.keyword.emplace_back(key, eval(*expr, scope));
  if (a.star_kwargs) {
    Value d = eval(*a.star_kwargs, scope);
    if (!d.is_dict()) fail("argument after ** must be a mapping, not " + type_name(d));
    for (const auto& [k, v] : d.dict().entries()) {
      if (!k.is_string()) fail("keywords must be strings");
      out.keyword.emplace_back(k.str(), v);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------
// Lookups and calls

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) {
    Value keep = callee;  // the callable stays alive for the duration of the call
    return keep.callable().fn(*this, args);
  }
  if (callee.is_undefined()) fail_undefined(callee);
  fail(fmt::format("'{}' object is not callable", type_name(callee)));
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: fail_undefined(obj);
    case Value::Kind::kNamespace: {
      const Value* v = obj.namespace_dict().find(name);
      return v ? *v : Value::undefined("'Namespace' object has no attribute '" + name + "'");
    }
    case Value::Kind::kDict: {
      if (auto m = find_method(obj, name)) return *m;
      if (const Value* v = obj.dict().find(name)) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Kind::kNone: return Value::undefined("'None' has no attribute '" + name + "'");
    default:
      if (auto m = find_method(obj, name)) return *m;
      return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
  }
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  auto missing = [&] {
    return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), to_repr(key)));
  };
  switch (obj.kind()) {
    case Value::Kind::kUndefined: fail_undefined(obj);
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kString: {
      if (!key.is_integral()) return key.is_string() ? getattr(obj, key.str()) : missing();
      int64_t i = key.as_int();
      if (obj.is_string()) {
        std::vector<std::string_view> chars = split_chars(obj.str());
        const auto n = static_cast<int64_t>(chars.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return missing();
        return Value(std::string(chars[static_cast<size_t>(i)]));
      }
      const auto n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return missing();
      return obj.items()[static_cast<size_t>(i)];
    }
    case Value::Kind::kDict: {
      if (const Value* v = obj.dict().find(key)) return *v;
      if (key.is_string()) {
        if (auto m = find_method(obj, key.str())) return *m;
        return Value::undefined("'dict object' has no attribute '" + key.str() + "'");
      }
      return missing();
    }
    case Value::Kind::kNamespace:
      return key.is_string() ? getattr(obj, key.str()) : missing();
    default: return missing();
  }
}

Value Interpreter::filter(std::string_view name, const Value& value, CallArgs& args) {
  FilterFn f = find_filter(name);
  if (!f) fail("No filter named '" + std::string(name) + "'.");
  return f(*this, value, args);
}

bool Interpreter::test(std::string_view name, const Value& value, CallArgs& args) {
  TestFn t = find_test(name);
  if (!t) fail("No test named '" + std::string(name) + "'.");
  return t(*this, value, args);
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kTuple: return v.items();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& [k, value] : v.dict().entries()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (std::string_view c : split_chars(v.str())) chars.emplace_back(std::string(c));
      return chars;
    }
    case Value::Kind::kUndefined: return {};
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

}  // namespace pagoda::jinja
