#include "jinja/lexer.h"

#include <cerrno>
#include <cstdlib>

#include "jinja/pystr.h"
#include "jinja/value.h"
#include "text/utf8.h"

namespace pagoda::jinja {
namespace {

[[noreturn]] void fail_at(int line, std::string message) { throw Error{std::move(message), line}; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python's \s: whitespace as str.isspace() sees it, on UTF-8 bytes. Returns the byte
// length of the whitespace character at s[i], or 0.
size_t space_at(std::string_view s, size_t i) {
  utf8::Char c = utf8::decode(s, i);
  return (c.cp != utf8::kInvalid && is_py_space(c.cp)) ? c.len : 0;
}

size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size()) {
    size_t n = space_at(s, i);
    if (!n) break;
    i += n;
  }
  return i;
}

bool all_spaces(std::string_view s) { return skip_spaces(s, 0) == s.size(); }

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Decodes the body of a string literal as Python's "unicode-escape" codec does.
std::string unescape(std::string_view raw, int line) {
  std::string out;
  auto hex = [&](size_t at, size_t digits) -> uint32_t {
    if (at + digits > raw.size()) fail_at(line, "truncated escape sequence in string");
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      char c = raw[at + k];
      int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) fail_at(line, "truncated escape sequence in string");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  };
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c != '\\' || i + 1 == raw.size()) {
      out += c;
      continue;
    }
    char e = raw[++i];
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': case '\'': case '"': out += e; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': utf8::append(out, hex(i + 1, 2)); i += 2; break;
      case 'u': utf8::append(out, hex(i + 1, 4)); i += 4; break;
      case 'U': {
        uint32_t cp = hex(i + 1, 8);
        if (cp > 0x10ffff) fail_at(line, "illegal Unicode character in string");
        utf8::append(out, cp);
        i += 8;
        break;
      }
      case 'N': fail_at(line, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = 0;
          size_t k = 0;
          for (; k < 3 && i + k < raw.size() && raw[i + k] >= '0' && raw[i + k] <= '7'; ++k)
            v = v * 8 + static_cast<uint32_t>(raw[i + k] - '0');
          utf8::append(out, v);
          i += k - 1;
        } else {
          out += '\\';  // unknown escapes stay as written
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options)
      : src_(normalize_newlines(source, options.keep_trailing_newline)), opt_(options) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit_data(src_.substr(pos_));
        break;
      }
      lex_tag(tag);
    }
    tokens_.push_back(Token{TokenType::kEof, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag_start(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  void emit(TokenType type, std::string value, int line) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  void emit_data(std::string_view text) {
    if (!text.empty()) emit(TokenType::kData, std::string(text), line_);
    line_ += count_newlines(text);
  }

  // Applies the whitespace control of the tag that follows `text` (jinja2's
  // OptionalLStrip): "-" strips all trailing whitespace; otherwise, for block and
  // comment tags under lstrip_blocks, spaces between the last newline and the tag go.
  std::string_view strip_before_tag(std::string_view text, char sign, bool is_variable) const {
    if (sign == '-') return py_strip(text, std::nullopt, false, true);
    if (sign == '+' || !opt_.lstrip_blocks || is_variable) return text;
    size_t l_pos = text.rfind('\n');
    l_pos = (l_pos == std::string_view::npos) ? 0 : l_pos + 1;
    if ((l_pos > 0 || line_starting_) && l_pos < text.size() && all_spaces(text.substr(l_pos)))
      return text.substr(0, l_pos);
    return text;
  }

  // Data text before a tag is emitted with the stripped text, but the line count
  // includes what was stripped.
  void emit_text_before(std::string_view text, char sign, bool is_variable) {
    std::string_view kept = strip_before_tag(text, sign, is_variable);
    if (!kept.empty()) emit(TokenType::kData, std::string(kept), line_);
    line_ += count_newlines(text);
  }

  void lex_tag(size_t tag) {
    const char kind = src_[tag + 1];
    size_t after = tag + 2;
    char sign = 0;
    if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
    std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);
    if (kind == '%' && try_raw(text, sign, after)) return;
    emit_text_before(text, sign, kind == '{');
    line_starting_ = false;
    pos_ = after;
    if (kind == '#') {
      lex_comment();
    } else {
      lex_expression_tag(kind == '%');
    }
  }

  // `{% raw %}...{% endraw %}`: the body is data, untouched.
  bool try_raw(std::string_view text, char sign, size_t after) {
    size_t i = skip_spaces(src_, after);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i = skip_spaces(src_, i + 3);
    size_t body;
    if (src_.compare(i, 3, "-%}") == 0) {
      body = skip_spaces(src_, i + 3);
    } else if (src_.compare(i, 2, "%}") == 0) {
      body = i + 2;
    } else {
      return false;
    }
    emit_text_before(text, sign, false);
    line_ += count_newlines(std::string_view(src_).substr(pos_ + text.size(), body - pos_ - text.size()));
    line_starting_ = src_[body - 1] == '\n';
    // The first "{%[-+]? endraw [-+]?%}" ends it.
    for (size_t at = src_.find("{%", body); at != std::string::npos; at = src_.find("{%", at + 1)) {
      size_t j = at + 2;
      char end_sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) end_sign = src_[j++];
      j = skip_spaces(src_, j);
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j = skip_spaces(src_, j + 6);
      size_t end = match_block_end(j);
      if (end == std::string::npos) continue;
      emit_text_before(std::string_view(src_).substr(body, at - body), end_sign, false);
      line_ += count_newlines(std::string_view(src_).substr(at, end - at));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return true;
    }
    fail_at(line_, "Missing end of raw directive");
  }

  // Matches "+%}", "-%}" + whitespace, or "%}" (+ one newline with trim_blocks) at i;
  // returns the position after it, or npos.
  size_t match_block_end(size_t i) const {
    if (src_.compare(i, 3, "+%}") == 0) return i + 3;
    if (src_.compare(i, 3, "-%}") == 0) return skip_spaces(src_, i + 3);
    if (src_.compare(i, 2, "%}") == 0) {
      i += 2;
      if (opt_.trim_blocks && i < src_.size() && src_[i] == '\n') ++i;
      return i;
    }
    return std::string::npos;
  }

  void lex_comment() {
    for (size_t q = src_.find("#}", pos_); q != std::string::npos;) {
      size_t end = q + 2;
      if (q > pos_ && src_[q - 1] == '-') {
        end = skip_spaces(src_, end);
      } else if (!(q > pos_ && src_[q - 1] == '+') && opt_.trim_blocks && end < src_.size() &&
                 src_[end] == '\n') {
        ++end;
      }
      line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    fail_at(line_, "Missing end of comment tag");
  }

  void lex_expression_tag(bool block) {
    emit(block ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", line_);
    std::vector<char> balance;  // closing brackets expected, innermost last
    while (pos_ < src_.size()) {
      if (balance.empty()) {
        size_t end = block ? match_block_end(pos_) : match_variable_end(pos_);
        if (end != std::string::npos) {
          emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", line_);
          line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      if (size_t sp = space_at(src_, pos_)) {
        line_ += src_[pos_] == '\n';
        pos_ += sp;
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(balance);
    }
    // End of input inside a tag: the parser reports the missing end of the tag.
  }

  size_t match_variable_end(size_t i) const {
    if (src_.compare(i, 3, "-}}") == 0) return skip_spaces(src_, i + 3);
    if (src_.compare(i, 2, "}}") == 0) return i + 2;
    return std::string::npos;
  }

  // `(\d+_)*\d+` at i: the end of the digit run, or npos.
  size_t match_digits(size_t i) const {
    if (i >= src_.size() || !is_digit(src_[i])) return std::string::npos;
    while (true) {
      while (i < src_.size() && is_digit(src_[i])) ++i;
      if (i + 1 < src_.size() && src_[i] == '_' && is_digit(src_[i + 1])) {
        ++i;
        continue;
      }
      return i;
    }
  }

  bool lex_number() {
    if (!is_digit(src_[pos_])) return false;
    // jinja2 tries its float rule first; a float may not directly follow a '.'.
    if (pos_ == 0 || src_[pos_ - 1] != '.') {
      size_t end = match_float(pos_);
      if (end != std::string::npos) {
        std::string text;
        for (size_t i = pos_; i < end; ++i)
          if (src_[i] != '_') text += src_[i];
        Token t;
        t.type = TokenType::kFloat;
        t.value = src_.substr(pos_, end - pos_);
        t.float_value = std::strtod(text.c_str(), nullptr);
        t.line = line_;
        tokens_.push_back(std::move(t));
        pos_ = end;
        return true;
      }
    }
    lex_integer();
    return true;
  }

  size_t match_float(size_t i) const {
    size_t end = match_digits(i);
    size_t frac_end = std::string::npos;
    if (end < src_.size() && src_[end] == '.') frac_end = match_digits(end + 1);
    size_t mantissa_end = frac_end != std::string::npos ? frac_end : end;
    if (mantissa_end < src_.size() && (src_[mantissa_end] == 'e' || src_[mantissa_end] == 'E')) {
      size_t j = mantissa_end + 1;
      if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
      size_t exp_end = match_digits(j);
      if (exp_end != std::string::npos) return exp_end;
    }
    return frac_end;  // npos when neither a fraction nor an exponent follows
  }

  void lex_integer() {
    int base = 10;
    size_t i = pos_;
    std::string digits;
    auto is_base_digit = [&](char c) {
      if (base == 2) return c == '0' || c == '1';
      if (base == 8) return c >= '0' && c <= '7';
      if (base == 16) return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      return is_digit(c);
    };
    char prefix = i + 1 < src_.size() ? static_cast<char>(src_[i + 1] | 0x20) : 0;
    if (src_[i] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x') && i + 2 < src_.size()) {
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      size_t j = i + 2;
      // (_?[digits])+
      while (j < src_.size()) {
        size_t k = j + (src_[j] == '_');
        if (k < src_.size() && is_base_digit(src_[k])) {
          digits += src_[k];
          j = k + 1;
        } else {
          break;
        }
      }
      if (!digits.empty()) {
        i = j;
      } else {
        base = 10;
      }
    }
    if (digits.empty()) {
      // [1-9](_?\d)* or 0(_?0)*
      const bool zero = src_[i] == '0';
      digits += src_[i++];
      while (i < src_.size()) {
        size_t k = i + (src_[i] == '_');
        if (k < src_.size() && (zero ? src_[k] == '0' : is_digit(src_[k]))) {
          digits += src_[k];
          i = k + 1;
        } else {
          break;
        }
      }
    }
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(digits.c_str(), &end, base);
    if (errno == ERANGE) fail_at(line_, "integer literal too large: " + src_.substr(pos_, i - pos_));
    Token t;
    t.type = TokenType::kInteger;
    t.value = src_.substr(pos_, i - pos_);
    t.int_value = v;
    t.line = line_;
    tokens_.push_back(std::move(t));
    pos_ = i;
  }

  bool lex_name() {
    if (!is_name_start(src_[pos_])) return false;
    size_t end = pos_;
    while (end < src_.size() && is_name_char(src_[end])) ++end;
    emit(TokenType::kName, src_.substr(pos_, end - pos_), line_);
    pos_ = end;
    return true;
  }

  bool lex_string() {
    const char quote = src_[pos_];
    if (quote != '\'' && quote != '"') return false;
    size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) i += (src_[i] == '\\') ? 2 : 1;
    if (i >= src_.size()) fail_at(line_, std::string("unexpected char '") + quote + "' (unterminated string)");
    std::string_view raw = std::string_view(src_).substr(pos_ + 1, i - pos_ - 1);
    emit(TokenType::kString, unescape(raw, line_), line_);
    line_ += count_newlines(raw);
    pos_ = i + 1;
    return true;
  }

  void lex_operator(std::vector<char>& balance) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        emit(TokenType::kOperator, op, line_);
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      size_t len = utf8::decode(src_, pos_).len;
      fail_at(line_, "unexpected char '" + src_.substr(pos_, len) + "'");
    }
    if (c == '(') balance.push_back(')');
    if (c == '[') balance.push_back(']');
    if (c == '{') balance.push_back('}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail_at(line_, std::string("unexpected '") + c + "'");
      if (balance.back() != c)
        fail_at(line_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    emit(TokenType::kOperator, std::string(1, c), line_);
    ++pos_;
  }

  std::string src_;
  LexerOptions opt_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the previous match ended with a newline
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

std::string describe(const Token& token) {
  switch (token.type) {
    case TokenType::kData: return "template data / text";
    case TokenType::kVariableBegin: return "begin of print statement";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kName: return token.value;
    case TokenType::kString: return "string";
    case TokenType::kInteger: return "integer";
    case TokenType::kFloat: return "float";
    case TokenType::kOperator: return token.value;
    case TokenType::kEof: return "end of template";
  }
  return "token";
}

}  // namespace pagoda::jinja
