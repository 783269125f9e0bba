// The `tojson` filter of Hugging Face chat templates: Python's json.dumps as
// transformers calls it (ensure_ascii=False, so non-ASCII text stays as it is; no HTML
// escaping, unlike jinja2's own tojson; key order kept unless sort_keys). Output is
// byte-identical to Python's, floats included (shortest round-trip repr).
#pragma once

#include <optional>
#include <string>

#include "jinja/value.h"

namespace pagoda::jinja {

struct JsonOptions {
  std::optional<std::string> indent;  // json.dumps indent: spaces (or the given string)
  std::optional<std::string> item_separator;  // default ", " (or "," with an indent)
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape non-ASCII characters as \uXXXX
};

// Fails (TypeError in Python) for undefined, namespaces, callables and dict keys that
// are not str, int, float, bool or None.
std::string to_json(const Value& v, const JsonOptions& options);

}  // namespace pagoda::jinja
