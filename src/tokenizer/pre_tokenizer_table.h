// The table of pre-tokenizer names (tokenizer.ggml.pre) Pagoda reads: for each, the
// regexes that split text into words, or the hand-written matcher that gives the same
// words, and the BPE flags that go with the name. One row per name group; adding a
// pre-tokenizer is a row in pre_tokenizer_table.cpp. Internal to the tokenizer module.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace pagoda {

struct PreTokenizerSpec {
  std::vector<std::string_view> names;
  std::vector<std::string_view> regexes;  // applied in order; empty when `hand` is set
  bool ignore_merges = false;             // a word that is a token is taken whole
  std::optional<PreTokenizer> hand;
  bool raw_utf8 = false;  // BPE over UTF-8 characters with spaces as "▁", not GPT-2 bytes
};

const std::vector<PreTokenizerSpec>& pre_tokenizer_specs();

}  // namespace pagoda
