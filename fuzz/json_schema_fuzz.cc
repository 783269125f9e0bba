// The schema preparation structured output runs before xgrammar (constrain/
// schema_support.h): arbitrary text as a schema, and as a string pattern rewritten over
// the JSON text (constrain/json_string_pattern.h). Errors are expected; crashes, hangs
// and sanitizer reports are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "constrain/json_string_pattern.h"
#include "constrain/schema_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)pagoda::pattern_over_json_text(text);
  (void)pagoda::prepare_json_schema(text);
  return 0;
}
