#include "jinja/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "text/utf8.h"

namespace pagoda::jinja {
namespace {

void append_escaped_code_point(std::string& out, uint32_t cp) {
  char buf[16];
  if (cp >= 0x10000) {  // a surrogate pair, as Python writes it
    cp -= 0x10000;
    snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
  } else {
    snprintf(buf, sizeof(buf), "\\u%04x", cp);
  }
  out += buf;
}

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  char buf[8];
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (ensure_ascii && c >= 0x80) {
      utf8::Char ch = utf8::decode(s, i);
      if (ch.cp == utf8::kInvalid) {
        out += static_cast<char>(c);
      } else {
        append_escaped_code_point(out, ch.cp);
        i += ch.len - 1;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

// json.dumps turns non-string keys into strings: True -> "true", 1.5 -> "1.5", ...
std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString: return k.str();
    case Value::Kind::kNone: return "null";
    case Value::Kind::kBool: return k.as_bool() ? "true" : "false";
    case Value::Kind::kInt: return std::to_string(k.as_int());
    case Value::Kind::kFloat: return json_float(k.as_double());
    default: fail("keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& o)
      : indent_(o.indent),
        item_sep_(o.item_separator.value_or(o.indent ? "," : ", ")),
        key_sep_(o.key_separator.value_or(": ")),
        sort_keys_(o.sort_keys),
        ensure_ascii_(o.ensure_ascii) {}

  void write(const Value& v, int level) {
    WorkBudget::charge();
    if (out_.size() > kMaxStringBytes) fail("string result too large");
    switch (v.kind()) {
      case Value::Kind::kNone: out_ += "null"; return;
      case Value::Kind::kBool: out_ += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::kInt: out_ += std::to_string(v.as_int()); return;
      case Value::Kind::kFloat: out_ += json_float(v.as_double()); return;
      case Value::Kind::kString: append_json_string(out_, v.str(), ensure_ascii_); return;
      case Value::Kind::kList:
      case Value::Kind::kTuple: write_list(v.items(), level); return;
      case Value::Kind::kDict: write_dict(v.dict(), level); return;
      default: fail("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  // Python's encoder: "[" newline+indent item sep+newline+indent item ... newline "]".
  void open(char bracket, int level) {
    out_ += bracket;
    if (indent_) newline(level + 1);
  }
  void separator(int level) {
    out_ += item_sep_;
    if (indent_) newline(level + 1);
  }
  void close(char bracket, int level) {
    if (indent_) newline(level);
    out_ += bracket;
  }
  void newline(int level) {
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += *indent_;
  }

  void write_list(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    open('[', level);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) separator(level);
      write(items[i], level + 1);
    }
    close(']', level);
  }

  void write_dict(const Dict& d, int level) {
    if (d.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.entries()) entries.push_back(&e);
    if (sort_keys_)
      std::stable_sort(entries.begin(), entries.end(),
                       [](auto* a, auto* b) { return less(a->first, b->first); });
    open('{', level);
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) separator(level);
      append_json_string(out_, json_key(entries[i]->first), ensure_ascii_);
      out_ += key_sep_;
      write(entries[i]->second, level + 1);
    }
    close('}', level);
  }

  std::optional<std::string> indent_;
  std::string item_sep_, key_sep_;
  bool sort_keys_;
  bool ensure_ascii_;
  std::string out_;
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  JsonWriter w(options);
  w.write(v, 0);
  return w.take();
}

}  // namespace pagoda::jinja
