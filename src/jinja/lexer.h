// Splits a Jinja template into tokens the way jinja2's lexer does: template text
// (data) and the expression tokens inside {{ }}, {% %} (comments {# #} are dropped),
// with the whitespace control of jinja2: "-" in a tag strips whitespace on that side,
// "+" keeps it, trim_blocks removes the newline after a block or comment tag,
// lstrip_blocks removes the indentation before one. {% raw %}...{% endraw %} comes out
// as data. Newlines are normalised to "\n" and one trailing newline is dropped unless
// keep_trailing_newline, as jinja2 does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::jinja {

struct LexerOptions {
  bool trim_blocks = false;
  bool lstrip_blocks = false;
  bool keep_trailing_newline = false;
};

enum class TokenType {
  kData, kVariableBegin, kVariableEnd, kBlockBegin, kBlockEnd,
  kName, kString, kInteger, kFloat, kOperator, kEof,
};

struct Token {
  TokenType type;
  std::string value;  // data text, name, decoded string, or operator ("==", "(", ...)
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Fails (jinja::Error with the line) on an unterminated comment or raw block, a
// character that starts no token, unbalanced brackets or a bad string escape.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options);

// What an error message calls a token: its text for names, else a description.
std::string describe(const Token& token);

}  // namespace pagoda::jinja
