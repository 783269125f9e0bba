// Builds the syntax tree (jinja/ast.h) from a template's tokens, with jinja2's grammar
// and operator precedence (parser.py): conditional expressions, or/and/not,
// comparisons, + -, ~, * / // %, **, unary signs, then subscripts, calls, filters and
// tests. Filter and test names are checked here, as jinja2 does when it compiles a
// template, so an unknown filter fails at parse time even in a branch never taken.
#pragma once

#include <string_view>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace pagoda::jinja {

// Fails with jinja::Error (message and line) on a syntax error.
TemplateAst parse_template(std::string_view source, const LexerOptions& options);

}  // namespace pagoda::jinja
