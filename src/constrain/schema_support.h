// What a JSON schema may use for structured output, checked before xgrammar compiles it,
// so that a keyword the grammar cannot honour is a clear error instead of being silently
// ignored (xgrammar skips `not`, `if`/`then`/`else`, `uniqueItems`, dependencies, remote
// `$ref`s, and type-specific keywords in a schema without a `type`). Also rewrites the
// draft-4..7 tuple form (`items` as a list, `additionalItems`) into the 2020-12 form
// (`prefixItems`, `items`) that xgrammar reads.
//
// Cost: one parse and one walk of the schema. Pure function; thread-safe.
#pragma once

#include <string>

#include "base/status.h"

namespace pagoda {

// The schema to compile (possibly rewritten), or an error naming the keyword and where
// it is (a JSON pointer).
Result<std::string> prepare_json_schema(const std::string& schema_text);

}  // namespace pagoda
