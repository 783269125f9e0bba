// LLMLingua-style budget controller: which pieces of the context survive compression.
// The context's scorer tokens are grouped into units (whole words as the scorer spells
// them, or single tokens), each scored by its tokens' mean self-information (bits a token
// carries; the mean is the greedy choice for keeping the most information per token of
// budget). Units are dropped lowest score first until the target token count is reached,
// except: sentence-final punctuation and line breaks (the structure) and pinned units
// (the sentences a question is about, compress/relevance.h) always stay, and
// numbers and capitalized names (not a sentence's first word) are protected, the highest
// scored first, up to a share of the budget. A unit too long for what is left to drop is
// skipped for a shorter one, so the result lands on the target when enough one-token
// units exist. Pure functions, O(n log n) in the tokens; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pagoda {

enum class Granularity { kWord, kToken };

struct Unit {
  int32_t begin = 0, end = 0;  // tokens [begin, end)
  float score = 0;             // mean self-information of its tokens (+inf: never scored)
  bool structural = false;     // sentence-final punctuation or a line break: always kept
  bool name = false;           // a number or a capitalized name: protected within the share
  bool pinned = false;         // in a sentence kept whole (one the question is about): always kept
  int32_t size() const { return end - begin; }
};

// pieces: each token's bytes as they appear in the text; info: its self-information;
// sentence: the sentence each token starts in (a unit starting a sentence is no name).
// A word starts at a token that begins with whitespace, and punctuation ending a word
// ("end" + "." or "," + "\"") is a unit of its own so the word can go and the period
// stay; punctuation inside a word ("don" "'" "t", "U" "." "S") stays in it. Either way a
// unit never splits a UTF-8 character that byte-fallback tokens spell byte by byte.
std::vector<Unit> make_units(std::span<const std::string> pieces, std::span<const float> info,
                             std::span<const int32_t> sentence, Granularity granularity);

struct BudgetOptions {
  int32_t target_tokens = 0;   // tokens to keep
  double name_share = 0.3;     // protected names and numbers may take this share of the target
};

// keep[i] for each unit.
std::vector<bool> select_units(std::span<const Unit> units, const BudgetOptions& options);

// The tokens the kept units hold.
int32_t kept_tokens(std::span<const Unit> units, const std::vector<bool>& keep);

}  // namespace pagoda
