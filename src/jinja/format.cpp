#include "jinja/format.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "jinja/pystr.h"
#include "text/utf8.h"

namespace pagoda::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads a run of decimal digits at fmt[i] (advancing i); nullopt when there is none.
std::optional<int> read_number(std::string_view fmt, size_t& i) {
  if (i >= fmt.size() || !is_digit(fmt[i])) return std::nullopt;
  int n = 0;
  while (i < fmt.size() && is_digit(fmt[i])) {
    n = n * 10 + (fmt[i++] - '0');
    if (n > 10000) fail("format width or precision too large");
  }
  return n;
}

// Pads `body` (already signed and prefixed) to `width` characters.
std::string pad(std::string body, int width, char align, char fill, size_t sign_len = 0) {
  size_t len = char_count(body);
  if (width <= 0 || len >= static_cast<size_t>(width)) return body;
  size_t n = static_cast<size_t>(width) - len;
  std::string fill_str;
  for (size_t i = 0; i < n; ++i) utf8::append(fill_str, static_cast<unsigned char>(fill));
  switch (align) {
    case '<': return body + fill_str;
    case '^': {
      std::string left = fill_str.substr(0, n / 2);
      return left + body + fill_str.substr(n / 2);
    }
    case '=': return body.substr(0, sign_len) + fill_str + body.substr(sign_len);
    default: return fill_str + body;
  }
}

std::string int_digits(int64_t v, int base, bool upper) {
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[u % static_cast<uint64_t>(base)]);
    u /= static_cast<uint64_t>(base);
  } while (u);
  return out;
}

std::string group_thousands(const std::string& digits, char sep) {
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += sep;
    out += digits[i];
  }
  return out;
}

// A C printf of one double: `conv` is one of f F e E g G, with flags and precision.
std::string c_format_double(double v, char conv, const std::string& flags, int precision) {
  std::string spec = "%" + flags + "." + std::to_string(precision) + conv;
  char buf[512];
  int n = snprintf(buf, sizeof(buf), spec.c_str(), v);
  if (n < 0 || n >= static_cast<int>(sizeof(buf))) fail("number too large to format");
  return std::string(buf, static_cast<size_t>(n));
}

// ---------------------------------------------------------------------------------
// printf style

struct PercentSpec {
  std::string flags;
  int width = 0;
  std::optional<int> precision;
  char type = 's';
};

std::string percent_one(const PercentSpec& spec, const Value& v) {
  const bool left = spec.flags.find('-') != std::string::npos;
  const bool zero = spec.flags.find('0') != std::string::npos && !left;
  const bool plus = spec.flags.find('+') != std::string::npos;
  const bool space = spec.flags.find(' ') != std::string::npos;
  const bool alt = spec.flags.find('#') != std::string::npos;
  switch (spec.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string s = spec.type == 's' ? to_str(v) : to_repr(v);
      if (spec.precision) {
        std::vector<std::string_view> cs = split_chars(s);
        if (cs.size() > static_cast<size_t>(*spec.precision)) {
          std::string cut;
          for (int i = 0; i < *spec.precision; ++i) cut += cs[static_cast<size_t>(i)];
          s = cut;
        }
      }
      return pad(s, spec.width, left ? '<' : '>', ' ');
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      int64_t n;
      if (v.is_integral()) {
        n = v.as_int();
      } else if (v.is_float() && (spec.type == 'd' || spec.type == 'i' || spec.type == 'u')) {
        double d = v.as_double();
        if (!std::isfinite(d) || std::fabs(d) > 9.2e18) fail("cannot convert float to integer");
        n = static_cast<int64_t>(d);
      } else {
        fail(std::string("%") + spec.type + " format: a real number is required, not " +
             type_name(v));
      }
      int base = (spec.type == 'x' || spec.type == 'X') ? 16 : spec.type == 'o' ? 8 : 10;
      std::string digits = int_digits(n, base, spec.type == 'X');
      if (spec.precision && digits.size() < static_cast<size_t>(*spec.precision))
        digits.insert(0, static_cast<size_t>(*spec.precision) - digits.size(), '0');
      std::string sign = n < 0 ? "-" : plus ? "+" : space ? " " : "";
      if (alt && base == 16) sign += spec.type == 'X' ? "0X" : "0x";
      if (alt && base == 8) sign += "0o";
      if (zero) return pad(sign + digits, spec.width, '=', '0', sign.size());
      return pad(sign + digits, spec.width, left ? '<' : '>', ' ');
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!v.is_number())
        fail(std::string("%") + spec.type + " format: a real number is required, not " +
             type_name(v));
      std::string flags;
      if (plus) flags += '+';
      if (space) flags += ' ';
      if (alt) flags += '#';
      std::string body = c_format_double(v.as_double(), spec.type, flags, spec.precision.value_or(6));
      size_t sign_len = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' '));
      if (zero && std::isfinite(v.as_double())) return pad(body, spec.width, '=', '0', sign_len);
      return pad(body, spec.width, left ? '<' : '>', ' ');
    }
    case 'c': {
      std::string s;
      if (v.is_integral()) {
        utf8::append(s, static_cast<uint32_t>(v.as_int()));
      } else if (v.is_string() && char_count(v.str()) == 1) {
        s = v.str();
      } else {
        fail("%c requires an int or a unicode character");
      }
      return pad(s, spec.width, left ? '<' : '>', ' ');
    }
    default: fail(std::string("unsupported format character '") + spec.type + "'");
  }
}

// ---------------------------------------------------------------------------------
// str.format

struct BraceSpec {
  char fill = ' ';
  char align = 0;  // 0: the type's default
  char sign = '-';
  bool alt = false;
  int width = 0;
  char grouping = 0;
  std::optional<int> precision;
  char type = 0;
};

BraceSpec parse_brace_spec(std::string_view s) {
  BraceSpec spec;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    spec.fill = s[0];
    spec.align = s[1];
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    spec.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == '#') {
    spec.alt = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    if (!spec.align) {
      spec.fill = '0';
      spec.align = '=';
    }
    ++i;
  }
  if (auto w = read_number(s, i)) spec.width = *w;
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    spec.precision = read_number(s, i);
    if (!spec.precision) fail("Format specifier missing precision");
  }
  if (i < s.size()) spec.type = s[i++];
  if (i != s.size()) fail("Invalid format specifier '" + std::string(s) + "'");
  return spec;
}

std::string format_number(const Value& v, const BraceSpec& spec) {
  char sign = 0;  // '-', '+', ' ' or none
  std::string body;
  char type = spec.type;
  const bool integral = v.is_integral() && !(type && std::string("eEfFgG%").find(type) != std::string::npos);
  if (integral) {
    int64_t n = v.as_int();
    int base = 10;
    bool upper = false;
    std::string prefix;
    switch (type) {
      case 0:
      case 'd':
      case 'n': break;
      case 'x': base = 16; prefix = "0x"; break;
      case 'X': base = 16; upper = true; prefix = "0X"; break;
      case 'o': base = 8; prefix = "0o"; break;
      case 'b': base = 2; prefix = "0b"; break;
      case 'c': {
        std::string s;
        utf8::append(s, static_cast<uint32_t>(n));
        return pad(s, spec.width, spec.align ? spec.align : '<', spec.fill);
      }
      default: fail(std::string("Unknown format code '") + type + "' for object of type 'int'");
    }
    body = int_digits(n, base, upper);
    if (spec.grouping && base == 10) body = group_thousands(body, spec.grouping);
    if (spec.alt) body.insert(0, prefix);
    if (n < 0) sign = '-';
  } else {
    double d = v.as_double();
    if (type == 0 && !spec.precision) {
      body = float_repr(std::fabs(d));
    } else {
      char conv = type ? type : 'g';
      double shown = std::fabs(d);
      if (conv == '%') {
        shown *= 100;
        conv = 'f';
      }
      if (conv != 'f' && conv != 'F' && conv != 'e' && conv != 'E' && conv != 'g' && conv != 'G')
        fail(std::string("Unknown format code '") + conv + "' for object of type 'float'");
      body = c_format_double(shown, conv, spec.alt ? "#" : "", spec.precision.value_or(6));
      if (spec.grouping && conv != 'e' && conv != 'E') {
        size_t dot = body.find('.');
        std::string whole = body.substr(0, dot);
        if (whole.find_first_not_of("0123456789") == std::string::npos)
          body = group_thousands(whole, spec.grouping) +
                 (dot == std::string::npos ? "" : body.substr(dot));
      }
      if (type == '%') body += '%';
    }
    if (std::signbit(d) && !std::isnan(d)) sign = '-';
  }
  if (!sign && (spec.sign == '+' || spec.sign == ' ')) sign = spec.sign;
  if (sign) body.insert(body.begin(), sign);
  return pad(std::move(body), spec.width, spec.align ? spec.align : '>', spec.fill, sign ? 1 : 0);
}

std::string format_value(const Value& v, std::string_view spec_text) {
  if (spec_text.empty()) return to_str(v);
  BraceSpec spec = parse_brace_spec(spec_text);
  if (v.is_number() && !(v.is_bool() && spec.type == 's')) return format_number(v, spec);
  if (!v.is_string())
    fail("unsupported format string passed to " + type_name(v) + ".__format__");
  if (spec.type && spec.type != 's')
    fail(std::string("Unknown format code '") + spec.type + "' for object of type 'str'");
  std::string s = v.str();
  if (spec.precision) {
    std::vector<std::string_view> cs = split_chars(s);
    if (cs.size() > static_cast<size_t>(*spec.precision)) {
      std::string cut;
      for (int i = 0; i < *spec.precision; ++i) cut += cs[static_cast<size_t>(i)];
      s = cut;
    }
  }
  return pad(s, spec.width, spec.align ? spec.align : '<', spec.fill);
}

const Value& brace_argument(std::string_view name, const CallArgs& args, size_t& auto_index,
                            bool& used_auto, bool& used_manual) {
  size_t i = 0;
  if (name.empty()) {
    if (used_manual) fail("cannot switch from manual field specification to automatic field numbering");
    used_auto = true;
    i = auto_index++;
  } else if (is_digit(name[0])) {
    if (used_auto) fail("cannot switch from automatic field numbering to manual field specification");
    used_manual = true;
    std::optional<int> n = read_number(name, i);
    if (i != name.size()) fail("invalid format field '" + std::string(name) + "'");
    i = static_cast<size_t>(*n);
  } else {
    for (const auto& [key, value] : args.keyword)
      if (key == name) return value;
    fail("KeyError: '" + std::string(name) + "'");
  }
  if (i >= args.positional.size())
    fail("Replacement index " + std::to_string(i) + " out of range for positional args tuple");
  return args.positional[i];
}

}  // namespace

std::string percent_format(std::string_view fmt, const Value& args) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.items();
  } else {
    positional.push_back(args);
    if (args.is_dict()) mapping = &args.dict();
  }
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt.size();) {
    char c = fmt[i++];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i < fmt.size() && fmt[i] == '%') {
      out += '%';
      ++i;
      continue;
    }
    const Value* value = nullptr;
    if (i < fmt.size() && fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string_view::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      std::string key(fmt.substr(i + 1, close - i - 1));
      value = mapping->find(key);
      if (!value) fail("KeyError: '" + key + "'");
      used_mapping = true;
      i = close + 1;
    }
    PercentSpec spec;
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos)
      spec.flags += fmt[i++];
    if (auto w = read_number(fmt, i)) spec.width = *w;
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      spec.precision = read_number(fmt, i).value_or(0);
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail("incomplete format");
    spec.type = fmt[i++];
    if (!value) {
      if (next >= positional.size()) fail("not enough arguments for format string");
      value = &positional[next++];
    }
    out += percent_one(spec, *value);
    if (out.size() > kMaxStringBytes) fail("string result too large");
  }
  if (!mapping && !used_mapping && next < positional.size())
    fail("not all arguments converted during string formatting");
  return out;
}

std::string brace_format(std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  for (size_t i = 0; i < fmt.size();) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) fail("Single '{' encountered in format string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos) fail("nested format fields are not supported");
    i = close + 1;
    std::string_view spec;
    if (size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    char conversion = 0;
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size()) fail("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    Value value = brace_argument(field, args, auto_index, used_auto, used_manual);
    if (conversion == 'r' || conversion == 'a') {
      value = Value(to_repr(value));
    } else if (conversion == 's') {
      value = Value(to_str(value));
    } else if (conversion) {
      fail(std::string("Unknown conversion specifier ") + conversion);
    }
    out += format_value(value, spec);
    if (out.size() > kMaxStringBytes) fail("string result too large");
  }
  return out;
}

}  // namespace pagoda::jinja
