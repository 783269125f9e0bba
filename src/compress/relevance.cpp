#include "compress/relevance.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace pagoda {
std::vector<std::string> text_words(std::string_view text) {
  std::vector<std::string> out;
  std::string w;
  for (size_t i = 0; i <= text.size(); ++i) {
    const auto c = i < text.size() ? static_cast<unsigned char>(text[i]) : ' ';
    if (c >= 0x80 || std::isalnum(c)) {
      w += static_cast<char>(c < 0x80 ? std::tolower(c) : c);
      continue;
    }
    if (!w.empty()) out.push_back(std::move(w));
    w.clear();
  }
  return out;
}

std::vector<double> sentence_relevance(std::string_view context, std::span<const ByteSpan> sentences,
                                       std::string_view question) {
  std::vector<double> out(sentences.size(), 0.0);
  std::unordered_set<std::string> asked;
  for (std::string& w : text_words(question)) asked.insert(std::move(w));
  if (asked.empty() || sentences.empty()) return out;
  // Per sentence: its length in words and the counts of the question's words in it.
  std::vector<std::unordered_map<std::string, int>> tf(sentences.size());
  std::vector<int> length(sentences.size(), 0);
  std::unordered_map<std::string, int> df;
  for (size_t s = 0; s < sentences.size(); ++s) {
    const ByteSpan b = sentences[s];
    for (const std::string& w : text_words(context.substr(b.begin, b.end - b.begin))) {
      ++length[s];
      if (asked.count(w) && tf[s][w]++ == 0) ++df[w];
    }
  }
  const double n = static_cast<double>(sentences.size());
  const double avg = std::max(1.0, std::accumulate(length.begin(), length.end(), 0.0) / n);
  constexpr double k1 = 1.2, b = 0.75;
  for (size_t s = 0; s < sentences.size(); ++s)
    for (const auto& [w, f] : tf[s]) {
      const double d = df[w];
      const double idf = std::log(1.0 + (n - d + 0.5) / (d + 0.5));
      const double norm = k1 * (1.0 - b + b * length[s] / avg);
      out[s] += idf * f * (k1 + 1.0) / (f + norm);
    }
  return out;
}

std::vector<bool> pick_sentences(std::span<const double> relevance, std::span<const int32_t> sizes, int64_t budget,
                                 double min_fraction) {
  std::vector<bool> keep(relevance.size(), false);
  std::vector<size_t> order(relevance.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return relevance[a] > relevance[b]; });
  if (order.empty() || !(relevance[order[0]] > 0.0)) return keep;
  const double floor = min_fraction * relevance[order[0]];
  for (size_t s : order) {
    if (!(relevance[s] > 0.0) || relevance[s] < floor) break;
    if (sizes[s] > budget) continue;
    keep[s] = true;
    budget -= sizes[s];
  }
  return keep;
}

}  // namespace pagoda
