// The JSON-schema combinators xgrammar would get wrong, rewritten into forms it compiles
// faithfully (internal to src/constrain/, used by schema_support.cpp). xgrammar reads
// only the first of $ref, const, enum, anyOf, oneOf, allOf in a schema and drops the
// keywords beside it; it treats an allOf of several schemas as "any value", and a oneOf
// as an anyOf. So:
//   - allOf is merged into one schema (the intersection: types intersected, properties
//     merged, required united, bounds tightened), its local $refs resolved;
//   - keywords beside an anyOf / oneOf are distributed into each branch;
//   - enum / const values are filtered by the keywords beside them;
//   - a oneOf is kept only when its branches cannot overlap (distinct types, consts or
//     a required discriminator property), since generating it as anyOf could produce
//     a value two branches match.
// What cannot be merged exactly is an error naming where, never an approximation.
//
// Cost: a walk of the schemas involved. Pure functions; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace pagoda::schema {

using json = nlohmann::ordered_json;

// Keywords that say nothing about which values are valid.
bool is_annotation(const std::string& keyword);

// allOf of a and b as one schema. `root` resolves local $refs in either.
Result<json> merge(const json& a, const json& b, const json& root, const std::string& where);

// Rewrites s (an object) so that no constraint sits beside $ref, anyOf, oneOf, allOf,
// enum or const where xgrammar would drop it.
Status normalize_combinators(json& s, const json& root, const std::string& where);

}  // namespace pagoda::schema
