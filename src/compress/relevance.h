// Which sentences of a context a question is about: LongLLMLingua's question-aware coarse
// step (keep what the question asks about, compress the rest harder) with a lexical
// relevance, Okapi BM25 of the question's words over the context's sentences, instead of
// the scorer's p(question | sentence), which would cost a forward pass per sentence. Rare
// words the question shares with a sentence (names, the topic's nouns) weigh most; words
// found in most sentences ("the", "what") weigh nearly nothing.
//
// Pure functions on text, linear in the context (plus a sort of the sentences);
// thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compress/segments.h"

namespace pagoda {

// The words of a text as relevance sees them: runs of ASCII letters and digits,
// lower-cased, and of non-ASCII bytes (other scripts' letters), in order.
std::vector<std::string> text_words(std::string_view text);

// Each sentence's BM25 score for the question (k1 1.2, b 0.75; words as text_words gives
// them, each question word counted once). 0 for a sentence sharing no word with the question.
std::vector<double> sentence_relevance(std::string_view context, std::span<const ByteSpan> sentences,
                                       std::string_view question);

// The sentences to keep whole: the most relevant first while they fit `budget` tokens
// (sizes: each sentence's tokens), only those scoring at least min_fraction of the best
// and above zero. A sentence too long for what is left is passed over for a shorter one.
std::vector<bool> pick_sentences(std::span<const double> relevance, std::span<const int32_t> sizes, int64_t budget,
                                 double min_fraction = 0.5);

}  // namespace pagoda
