// A JSON schema's string `pattern` as a pattern over the JSON text of the string. The
// schema's pattern speaks of the decoded value, but xgrammar matches it against the
// characters between the quotes as generated, so a pattern that admits a quote, a
// backslash or a control character let it write them raw: "a\b" (a backspace) for
// ^a\\b$, a bare quote that ends the string early, a raw tab JSON forbids. Rewritten, each
// such character is matched by its escape (\" \\ \n \t \u001b ...), and character classes
// and `.` that would admit one admit its escape instead.
//
// ECMA-262 regexes as JSON Schema uses them: literals and escapes, `.`, classes with
// ranges and \d \w \s, groups, alternation, quantifiers and anchors are rewritten or kept;
// \D, \W or \S inside a class is an error (the complement of a complement has no short
// rewrite). Cost: linear in the pattern. Thread-safety: pure.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace pagoda {

Result<std::string> pattern_over_json_text(std::string_view pattern);

}  // namespace pagoda
