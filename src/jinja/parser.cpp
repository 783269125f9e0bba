#include "jinja/parser.h"

#include <initializer_list>

namespace pagoda::jinja {
namespace {

// Deeper nesting than this is a malicious template, not a chat template; refusing it
// keeps the recursive parser and the tree walker within the stack.
constexpr int kMaxNesting = 128;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  TemplateAst parse() {
    TemplateAst ast;
    ast.body = subparse({});
    return ast;
  }

 private:
  // ---- token stream -------------------------------------------------------------
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool at(TokenType type) const { return cur().type == type; }
  bool at_op(std::string_view op) const { return at(TokenType::kOperator) && cur().value == op; }
  bool at_name(std::string_view name) const { return at(TokenType::kName) && cur().value == name; }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(const std::string& message, int line = 0) const {
    throw Error{message, line ? line : cur().line};
  }

  void expect_fail(const std::string& what) const {
    if (at(TokenType::kEof)) fail("unexpected end of template, expected '" + what + "'.");
    fail("expected token '" + what + "', got '" + describe(cur()) + "'");
  }
  const Token& expect(TokenType type, const char* what) {
    if (!at(type)) expect_fail(what);
    return next();
  }
  void expect_op(std::string_view op) {
    if (!at_op(op)) expect_fail(std::string(op));
    next();
  }
  void expect_name(std::string_view name) {
    if (!at_name(name)) expect_fail(std::string(name));
    next();
  }

  // Counts nesting for the duration of one recursive parse step.
  struct Nest {
    explicit Nest(Parser& p) : p(p) {
      if (++p.depth_ > kMaxNesting) p.fail("template nests too deeply");
    }
    ~Nest() { --p.depth_; }
    Parser& p;
  };

  ExprPtr node(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ---------------------------------------------------------------
  using EndTags = std::initializer_list<std::string_view>;

  bool at_end_tag(EndTags end_tags) const {
    for (std::string_view tag : end_tags)
      if (at_name(tag)) return true;
    return false;
  }

  // Parses template data and tags until one of `end_tags` opens a tag; the current
  // token is then that tag's name.
  Body subparse(EndTags end_tags) {
    Nest nest(*this);
    Body body;
    while (!at(TokenType::kEof)) {
      if (at(TokenType::kData)) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = cur().line;
        s->text = next().value;
        body.push_back(std::move(s));
      } else if (at(TokenType::kVariableBegin)) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kPrint;
        s->line = next().line;
        s->expr = parse_tuple(false, true, {});
        expect(TokenType::kVariableEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (at(TokenType::kBlockBegin)) {
        next();
        if (end_tags.size() && at_end_tag(end_tags)) return body;
        body.push_back(parse_statement());
        expect(TokenType::kBlockEnd, "end of statement block");
      } else {
        fail("internal parsing error");
      }
    }
    if (end_tags.size()) {
      std::string looking;
      for (std::string_view tag : end_tags) looking += (looking.empty() ? "'" : " or '") + std::string(tag) + "'";
      fail("Unexpected end of template. Jinja was looking for the following tags: " + looking +
           (tag_stack_.empty() ? std::string(".")
                               : ". The innermost block that needs to be closed is '" +
                                     tag_stack_.back() + "'."));
    }
    return body;
  }

  // The body of a block tag: `:`? %} ... up to an end tag (consumed if drop_end).
  Body parse_statements(EndTags end_tags, bool drop_end) {
    skip_op(":");
    expect(TokenType::kBlockEnd, "end of statement block");
    Body body = subparse(end_tags);
    if (drop_end) next();
    return body;
  }

  StmtPtr parse_statement() {
    if (!at(TokenType::kName)) fail("tag name expected");
    const std::string tag = cur().value;
    tag_stack_.push_back(tag);
    StmtPtr s;
    if (tag == "for") s = parse_for();
    else if (tag == "if") s = parse_if();
    else if (tag == "set") s = parse_set();
    else if (tag == "macro") s = parse_macro();
    else if (tag == "call") s = parse_call_block();
    else if (tag == "filter") s = parse_filter_block();
    else if (tag == "with") s = parse_with();
    else if (tag == "generation") s = parse_generation();
    else if (tag == "print") s = parse_print();
    else if (tag == "break" || tag == "continue") s = parse_loop_control();
    else if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" ||
             tag == "from" || tag == "autoescape")
      fail("the '" + tag + "' tag is not supported in chat templates");
    else
      fail("Encountered unknown tag '" + tag + "'.");
    tag_stack_.pop_back();
    return s;
  }

  StmtPtr make_stmt(StmtKind kind) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = next().line;  // the tag name
    return s;
  }

  StmtPtr parse_for() {
    StmtPtr s = make_stmt(StmtKind::kFor);
    s->target = parse_assign_target(true, false, {"in"}, false);
    expect_name("in");
    s->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->condition = parse_expression(true);
    skip_name("recursive");  // accepted; calling loop(...) for recursion is not supported
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().value == "else") s->else_body = parse_statements({"endfor"}, true);
    return s;
  }

  StmtPtr parse_if() {
    StmtPtr s = make_stmt(StmtKind::kIf);
    while (true) {
      IfBranch branch;
      branch.test = parse_tuple(false, false, {});
      branch.body = parse_statements({"elif", "else", "endif"}, false);
      s->branches.push_back(std::move(branch));
      const Token& t = next();
      if (t.value == "elif") continue;
      if (t.value == "else") s->else_body = parse_statements({"endif"}, true);
      break;
    }
    return s;
  }

  StmtPtr parse_set() {
    StmtPtr s = make_stmt(StmtKind::kSet);
    s->target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      s->expr = parse_tuple(false, true, {});
      return s;
    }
    s->kind = StmtKind::kSetBlock;
    s->expr = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  void parse_signature(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!at_op(")")) {
      if (!params.empty()) expect_op(",");
      MacroParam p;
      p.name = expect(TokenType::kName, "name").value;
      if (skip_op("=")) {
        p.default_value = parse_expression(true);
      } else if (!params.empty() && params.back().default_value) {
        fail("non-default argument follows default argument");
      }
      params.push_back(std::move(p));
    }
    expect_op(")");
  }

  // Macro and caller bodies run outside any loop: break/continue there is an error.
  Body parse_function_body(const char* end_tag) {
    int saved = loop_depth_;
    loop_depth_ = 0;
    Body body = parse_statements({end_tag}, true);
    loop_depth_ = saved;
    return body;
  }

  StmtPtr parse_macro() {
    StmtPtr s = make_stmt(StmtKind::kMacro);
    s->name = expect(TokenType::kName, "name").value;
    parse_signature(s->params);
    s->body = parse_function_body("endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    StmtPtr s = make_stmt(StmtKind::kCallBlock);
    if (at_op("(")) parse_signature(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::kCall) fail("expected call", s->line);
    s->body = parse_function_body("endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    StmtPtr s = make_stmt(StmtKind::kFilterBlock);
    s->expr = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  StmtPtr parse_with() {
    StmtPtr s = make_stmt(StmtKind::kWith);
    while (!at(TokenType::kBlockEnd)) {
      if (!s->bindings.empty()) expect_op(",");
      Target t = parse_assign_target(true, false, {}, false);
      expect_op("=");
      s->bindings.emplace_back(std::move(t), parse_expression(true));
    }
    s->body = parse_statements({"endwith"}, true);
    return s;
  }

  // transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its
  // body (inside a caller, so in a scope of its own).
  StmtPtr parse_generation() {
    StmtPtr s = make_stmt(StmtKind::kScope);
    s->body = parse_function_body("endgeneration");
    return s;
  }

  StmtPtr parse_print() {
    StmtPtr s = make_stmt(StmtKind::kPrint);
    auto tuple = node(ExprKind::kConcat, s->line);
    while (!at(TokenType::kBlockEnd)) {
      if (!tuple->items.empty()) expect_op(",");
      tuple->items.push_back(parse_expression(true));
    }
    s->expr = std::move(tuple);
    return s;
  }

  StmtPtr parse_loop_control() {
    const bool is_break = cur().value == "break";
    StmtPtr s = make_stmt(is_break ? StmtKind::kBreak : StmtKind::kContinue);
    if (loop_depth_ == 0)
      fail(is_break ? "'break' outside loop" : "'continue' not properly in loop", s->line);
    return s;
  }

  // ---- assignment targets -------------------------------------------------------
  Target parse_assign_target(bool with_tuple, bool name_only, EndTags extra_end,
                             bool with_namespace) {
    if (name_only) {
      Target t;
      t.name = expect(TokenType::kName, "name").value;
      return t;
    }
    const int line = cur().line;
    ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end, with_namespace)
                           : parse_primary(with_namespace);
    return to_target(*e, line);
  }

  Target to_target(const Expr& e, int line) {
    Target t;
    switch (e.kind) {
      case ExprKind::kName: t.name = e.name; return t;
      case ExprKind::kNamespaceRef:
        t.kind = Target::Kind::kNamespaceAttr;
        t.name = e.name;
        t.attr = e.attr;
        return t;
      case ExprKind::kTuple:
        t.kind = Target::Kind::kTuple;
        for (const ExprPtr& item : e.items) t.items.push_back(to_target(*item, line));
        return t;
      case ExprKind::kConst: fail("can't assign to 'const'", line);
      default: fail("can't assign to this expression", line);
    }
  }

  // ---- expressions --------------------------------------------------------------
  ExprPtr parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    Nest nest(*this);
    int line = cur().line;
    ExprPtr expr = parse_or();
    while (skip_name("if")) {
      auto cond = node(ExprKind::kCondExpr, line);
      cond->object = parse_or();
      if (skip_name("else")) cond->right = parse_condexpr();
      cond->left = std::move(expr);
      expr = std::move(cond);
      line = cur().line;
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      auto e = node(ExprKind::kOr, next().line);
      e->left = std::move(left);
      e->right = parse_and();
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      auto e = node(ExprKind::kAnd, next().line);
      e->left = std::move(left);
      e->right = parse_not();
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      Nest nest(*this);
      auto e = node(ExprKind::kNot, next().line);
      e->object = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (at(TokenType::kOperator) && (cur().value == "==" || cur().value == "!=" ||
                                       cur().value == "<" || cur().value == "<=" ||
                                       cur().value == ">" || cur().value == ">=")) {
        op = next().value;
      } else if (skip_name("in")) {
        op = "in";
      } else if (at_name("not") && peek().type == TokenType::kName && peek().value == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(ExprKind::kCompare, line);
        cmp->items.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    auto e = node(ExprKind::kBinary, line);
    e->name = op;
    e->left = std::move(left);
    e->right = std::move(right);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& t = next();
      left = binary(t.value, std::move(left), parse_concat(), t.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr first = parse_math2();
    if (!at_op("~")) return first;
    auto e = node(ExprKind::kConcat, cur().line);
    e->items.push_back(std::move(first));
    while (skip_op("~")) e->items.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& t = next();
      left = binary(t.value, std::move(left), parse_pow(), t.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (at_op("**")) {
      const Token& t = next();
      left = binary("**", std::move(left), parse_unary(true), t.line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      const Token& t = next();
      e = node(t.value == "-" ? ExprKind::kNeg : ExprKind::kPos, t.line);
      e->object = parse_unary(false);
    } else {
      e = parse_primary(false);
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary(bool with_namespace) {
    Nest nest(*this);
    const Token& t = cur();
    const int line = t.line;
    if (at(TokenType::kName)) {
      std::string name = next().value;
      if (name == "true" || name == "True" || name == "false" || name == "False") {
        auto e = node(ExprKind::kConst, line);
        e->constant = Value(name == "true" || name == "True");
        return e;
      }
      if (name == "none" || name == "None") {
        auto e = node(ExprKind::kConst, line);
        e->constant = Value::none();
        return e;
      }
      if (with_namespace && at_op(".")) {
        next();
        auto e = node(ExprKind::kNamespaceRef, line);
        e->name = name;
        e->attr = expect(TokenType::kName, "name").value;
        return e;
      }
      auto e = node(ExprKind::kName, line);
      e->name = name;
      return e;
    }
    if (at(TokenType::kString)) {
      std::string s = next().value;
      while (at(TokenType::kString)) s += next().value;  // adjacent literals join
      auto e = node(ExprKind::kConst, line);
      e->constant = Value(std::move(s));
      return e;
    }
    if (at(TokenType::kInteger) || at(TokenType::kFloat)) {
      const Token& n = next();
      auto e = node(ExprKind::kConst, line);
      e->constant = n.type == TokenType::kInteger ? Value(n.int_value) : Value(n.float_value);
      return e;
    }
    if (at_op("(")) {
      next();
      ExprPtr e = parse_tuple(false, true, {}, false, true);
      expect_op(")");
      return e;
    }
    if (at_op("[")) return parse_list();
    if (at_op("{")) return parse_dict();
    fail("unexpected '" + describe(t) + "'");
  }

  bool is_tuple_end(EndTags extra_end) const {
    if (at(TokenType::kVariableEnd) || at(TokenType::kBlockEnd) || at_op(")")) return true;
    return at_end_tag(extra_end);
  }

  // Like parse_expression, but `a, b` makes a tuple. `simplified` parses only names
  // and literals (assignment targets).
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, EndTags extra_end,
                      bool with_namespace = false, bool explicit_parens = false) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary(with_namespace) : parse_expression(with_condexpr));
      if (at_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto e = node(ExprKind::kTuple, line);
    e->items = std::move(items);
    return e;
  }

  ExprPtr parse_list() {
    auto e = node(ExprKind::kList, next().line);
    while (!at_op("]")) {
      if (!e->items.empty()) expect_op(",");
      if (at_op("]")) break;
      e->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }

  ExprPtr parse_dict() {
    auto e = node(ExprKind::kDict, next().line);
    while (!at_op("}")) {
      if (!e->items.empty()) expect_op(",");
      if (at_op("}")) break;
      e->items.push_back(parse_expression(true));
      expect_op(":");
      e->items.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (at_op(".") || at_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (at_op("|")) {
        e = parse_filter(std::move(e), false);
      } else if (at_name("is")) {
        e = parse_test(std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    Nest nest(*this);
    const Token& t = next();
    if (t.value == ".") {
      const Token& attr = next();
      if (attr.type == TokenType::kName) {
        auto e = node(ExprKind::kGetAttr, t.line);
        e->object = std::move(obj);
        e->attr = attr.value;
        return e;
      }
      if (attr.type != TokenType::kInteger) fail("expected name or number", attr.line);
      auto e = node(ExprKind::kGetItem, t.line);
      e->object = std::move(obj);
      e->left = node(ExprKind::kConst, attr.line);
      e->left->constant = Value(attr.int_value);
      return e;
    }
    // "[": one subscript, or several making a tuple index
    std::vector<ExprPtr> args;
    while (!at_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = node(ExprKind::kGetItem, t.line);
    e->object = std::move(obj);
    if (args.size() == 1) {
      e->left = std::move(args[0]);
    } else {
      e->left = node(ExprKind::kTuple, t.line);
      e->left->items = std::move(args);
    }
    return e;
  }

  // An index or a slice start:stop:step.
  ExprPtr parse_subscribed() {
    const int line = cur().line;
    std::vector<ExprPtr> parts;
    if (at_op(":")) {
      next();
      parts.push_back(nullptr);
    } else {
      ExprPtr e = parse_expression(true);
      if (!at_op(":")) return e;
      next();
      parts.push_back(std::move(e));
    }
    if (at_op(":") || at_op("]") || at_op(",")) {
      parts.push_back(nullptr);
    } else {
      parts.push_back(parse_expression(true));
    }
    if (skip_op(":")) {
      parts.push_back((at_op("]") || at_op(",")) ? nullptr : parse_expression(true));
    } else {
      parts.push_back(nullptr);
    }
    auto slice = node(ExprKind::kSlice, line);
    slice->items = std::move(parts);
    return slice;
  }

  ArgExprs parse_call_args() {
    const int line = cur().line;
    expect_op("(");
    ArgExprs args;
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) fail("invalid syntax for function call expression", line);
    };
    while (!at_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (at_op(")")) break;  // trailing comma
      }
      if (at_op("*")) {
        ensure(!args.star_args && !args.star_kwargs);
        next();
        args.star_args = parse_expression(true);
      } else if (at_op("**")) {
        ensure(!args.star_kwargs);
        next();
        args.star_kwargs = parse_expression(true);
      } else if (at(TokenType::kName) && peek().type == TokenType::kOperator && peek().value == "=") {
        ensure(!args.star_kwargs);
        std::string key = next().value;
        next();
        args.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!args.star_args && !args.star_kwargs && args.keyword.empty());
        args.positional.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr callee) {
    Nest nest(*this);
    auto e = node(ExprKind::kCall, cur().line);
    e->object = std::move(callee);
    e->args = parse_call_args();
    return e;
  }

  std::string parse_dotted_name() {
    std::string name = expect(TokenType::kName, "name").value;
    while (skip_op(".")) name += "." + expect(TokenType::kName, "name").value;
    return name;
  }

  // `| name(args)` repeatedly; with start_inline the first filter has no "|".
  ExprPtr parse_filter(ExprPtr e, bool start_inline) {
    while (at_op("|") || start_inline) {
      Nest nest(*this);
      if (!start_inline) next();
      start_inline = false;
      const int line = cur().line;
      auto f = node(ExprKind::kFilter, line);
      f->name = parse_dotted_name();
      if (at_op("(")) f->args = parse_call_args();
      f->object = std::move(e);
      e = std::move(f);
    }
    return e;
  }

  ExprPtr parse_test(ExprPtr e) {
    Nest nest(*this);
    const int line = next().line;  // "is"
    const bool negated = skip_name("not");
    auto test = node(ExprKind::kTest, line);
    test->name = parse_dotted_name();
    if (at_op("(")) {
      test->args = parse_call_args();
    } else if ((at(TokenType::kName) || at(TokenType::kString) || at(TokenType::kInteger) ||
                at(TokenType::kFloat) || at_op("(") || at_op("[") || at_op("{")) &&
               !at_name("else") && !at_name("or") && !at_name("and")) {
      // `x is divisibleby 3`: one argument without parentheses.
      if (at_name("is")) fail("You cannot chain multiple tests with is");
      test->args.positional.push_back(parse_postfix(parse_primary(false)));
    }
    test->object = std::move(e);
    if (!negated) return test;
    auto n = node(ExprKind::kNot, line);
    n->object = std::move(test);
    return n;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> tag_stack_;
};

}  // namespace

TemplateAst parse_template(std::string_view source, const LexerOptions& options) {
  return Parser(tokenize(source, options)).parse();
}

}  // namespace pagoda::jinja
