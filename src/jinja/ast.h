// The syntax tree of a parsed Jinja template (jinja/parser.h builds it, the
// interpreter in jinja/eval.h walks it). Nodes mirror jinja2's (nodes.py) for the
// subset chat templates use. One generic node type per family, with the fields each
// kind uses listed next to the kind, keeps the tree small and the walker readable.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace pagoda::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Arguments as written at a call, filter or test: f(a, b, k=v, *rest, **more).
struct ArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;
  ExprPtr star_kwargs;
};

enum class ExprKind {
  kConst,         // constant
  kName,          // name
  kNamespaceRef,  // name.attr as an assignment target (only inside Target)
  kList,          // items
  kTuple,         // items
  kDict,          // items: key0, value0, key1, value1, ...
  kGetAttr,       // object.attr
  kGetItem,       // object[left]
  kSlice,         // items: start, stop, step (each may be null); only as a GetItem index
  kCall,          // object(args)
  kFilter,        // object | name(args); object is null in {% filter %} / {% set %} blocks
  kTest,          // object is name(args)
  kNeg,           // -object
  kPos,           // +object
  kNot,           // not object
  kBinary,        // left <name> right, name one of + - * / // % **
  kAnd,           // left and right
  kOr,            // left or right
  kCompare,       // items[0] ops[0] items[1] ops[1] items[2] ...
  kCondExpr,      // left if object else right (right may be null)
  kConcat,        // items joined with ~
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value constant;
  std::string name;
  std::string attr;
  ExprPtr object, left, right;
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;  // compare operators: == != < <= > >= in notin
  ArgExprs args;
};

// Where {% set %} and {% for %} store values: a name, a tuple to unpack, or an
// attribute of a namespace (ns.attr).
struct Target {
  enum class Kind { kName, kTuple, kNamespaceAttr };
  Kind kind = Kind::kName;
  std::string name;
  std::string attr;
  std::vector<Target> items;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null when the parameter has none
};

struct IfBranch {
  ExprPtr test;
  Body body;
};

enum class StmtKind {
  kText,         // text
  kPrint,        // {{ expr }}
  kIf,           // branches (if, elif...), else_body
  kFor,          // target in expr [if condition]: body, else_body
  kSet,          // {% set target = expr %}
  kSetBlock,     // {% set target [| filters] %} body {% endset %}; expr = filter chain or null
  kMacro,        // {% macro name(params) %} body
  kCallBlock,    // {% call(params) expr %} body: `caller` in the callee renders body
  kFilterBlock,  // {% filter expr %} body
  kWith,         // {% with bindings %} body
  kScope,        // body in a scope of its own ({% generation %})
  kBreak,
  kContinue,
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<IfBranch> branches;
  Body body;
  Body else_body;
  Target target;
  std::string name;
  std::vector<MacroParam> params;
  std::vector<std::pair<Target, ExprPtr>> bindings;
};

struct TemplateAst {
  Body body;
};

}  // namespace pagoda::jinja
