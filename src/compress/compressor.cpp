#include "compress/compressor.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "base/timer.h"
#include "compress/frequent_head.h"
#include "compress/relevance.h"
#include "compress/self_information.h"

namespace pagoda {
namespace {

int32_t count_tokens(const Tokenizer& tok, const std::string& text) {
  if (text.empty()) return 0;
  return static_cast<int32_t>(tok.encode(text, /*add_special=*/false, /*parse_special=*/false).size());
}

// The sentence each token starts in. The tokens' bytes are walked beside the text's: an
// SPM space marker ("\u2581", whole or spelled in fallback bytes) stands for one space of
// the text, and a space the text lacks (SPM's dummy prefix) stands for nothing; a token
// starts where its first byte that is not a space lands.
std::vector<int32_t> token_sentences(std::string_view text, std::span<const ByteSpan> sentences,
                                     std::span<const std::string> pieces) {
  static constexpr std::string_view kMarker = "\xE2\x96\x81";
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  std::string stream;
  std::vector<size_t> first(pieces.size() + 1);
  for (size_t i = 0; i < pieces.size(); ++i) {
    first[i] = stream.size();
    stream += pieces[i];
  }
  first[pieces.size()] = stream.size();
  std::vector<size_t> text_at(stream.size() + 1);
  size_t s = 0, t = 0;
  while (s < stream.size()) {
    const bool marker = std::string_view(stream).substr(s, 3) == kMarker;
    size_t step = 1, advance = 0;
    if (marker && t < text.size() && text.substr(t, 3) != kMarker && space(text[t])) {
      step = 3, advance = 1;
    } else if (t < text.size() && stream[s] == text[t]) {
      advance = 1;
    } else if (marker || space(stream[s])) {
      step = marker ? 3 : 1;  // a space the text does not have
    } else {
      advance = t < text.size() ? 1 : 0;  // a byte the tokenizer normalized: keep in step
    }
    for (size_t k = 0; k < step && s + k < stream.size(); ++k) text_at[s + k] = t;
    s += step;
    t += advance;
  }
  text_at[stream.size()] = t;
  std::vector<int32_t> out(pieces.size(), 0);
  size_t sentence = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    size_t k = first[i];
    while (k < first[i + 1] && (space(stream[k]) || std::string_view(stream).substr(k, 3) == kMarker))
      k += space(stream[k]) ? 1 : 3;
    const size_t at = text_at[std::min(k, stream.size())];
    while (sentence + 1 < sentences.size() && at >= sentences[sentence].end) ++sentence;
    out[i] = static_cast<int32_t>(sentence);
  }
  return out;
}

// Token ranges of the segments: runs of whole sentences of at least `size` tokens (the
// last may be shorter).
std::vector<std::pair<size_t, size_t>> segments_of(std::span<const int32_t> sentence, int32_t size) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  for (size_t i = 1; i < sentence.size(); ++i)
    if (sentence[i] != sentence[i - 1] && i - begin >= static_cast<size_t>(std::max(size, 1))) {
      out.emplace_back(begin, i);
      begin = i;
    }
  if (begin < sentence.size()) out.emplace_back(begin, sentence.size());
  return out;
}

// Lower-cased words of four letters or more, with their counts.
std::unordered_map<std::string, int> long_words(std::string_view text) {
  std::unordered_map<std::string, int> out;
  for (const std::string& w : text_words(text))
    if (w.size() >= 4) ++out[w];
  return out;
}

// The question's words that are rare in the context (at most kRareWord times): the
// context's words that repeat them point at what the question is about (LongLLMLingua's
// question awareness in its cheapest form), so they are protected as names are. Common
// ones ("what", "would") would spend the protected share all over the context.
constexpr int kRareWord = 3;
std::unordered_set<std::string> question_words(std::string_view question, std::string_view context) {
  const auto in_context = long_words(context);
  std::unordered_set<std::string> out;
  for (const auto& [w, n] : long_words(question)) {
    auto it = in_context.find(w);
    if (it != in_context.end() && it->second <= kRareWord) out.insert(w);
  }
  return out;
}

// The sentences kept whole because the question is about them (relevance.h), within
// question_share of the context's target.
std::vector<bool> question_sentences(const PromptParts& parts, std::span<const ByteSpan> spans,
                                     std::span<const int32_t> sentence, int32_t ctx_target, const CompressOptions& o) {
  if (!(o.question_share > 0.0) || parts.question.find_first_not_of(" \t\r\n") == std::string::npos)
    return std::vector<bool>(spans.size(), false);
  std::vector<int32_t> sizes(spans.size(), 0);
  for (int32_t s : sentence) ++sizes[static_cast<size_t>(s)];
  const auto budget = static_cast<int64_t>(std::floor(o.question_share * ctx_target));
  return pick_sentences(sentence_relevance(parts.context, spans, parts.question), sizes, budget);
}

std::string unit_word(std::span<const std::string> pieces, const Unit& u) {
  std::string w;
  for (int32_t t = u.begin; t < u.end; ++t)
    for (char c : pieces[static_cast<size_t>(t)])
      if (std::isalnum(static_cast<unsigned char>(c)))
        w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return w;
}

}  // namespace

namespace {

// How much of the prompt is kept: the whole prompt's and the context's tokens, and the
// context's share of the target (below its size: the context is scored and pruned).
struct Targets {
  int32_t origin = 0;
  std::vector<int32_t> ids;  // the context's
  int32_t ctx_target = 0;
  bool scores() const { return ctx_target < static_cast<int32_t>(ids.size()); }
};

Targets targets_of(const Tokenizer& tok, const PromptParts& parts, const CompressOptions& o) {
  Targets t;
  t.origin = count_tokens(tok, join_prompt(parts));
  t.ids = tok.encode(parts.context, /*add_special=*/false, /*parse_special=*/false);
  const int32_t fixed = count_tokens(tok, parts.instruction) + count_tokens(tok, parts.question);
  const int32_t target_total = static_cast<int32_t>(std::lround(o.ratio * t.origin));
  t.ctx_target = std::clamp(target_total - fixed, 0, static_cast<int32_t>(t.ids.size()));
  return t;
}

// The scorer's positions for the context: its tokens after the BOS it is scored behind.
int32_t scored_positions(const Tokenizer& tok, const Targets& t) {
  const Vocab& v = tok.vocab();
  return static_cast<int32_t>(t.ids.size()) + (v.add_bos && v.bos >= 0 ? 1 : 0);
}

std::optional<std::string> input_error(const Model& scorer, const Tokenizer& tok, const PromptParts& parts,
                                       const CompressOptions& o, const Targets* t) {
  if (!(o.ratio > 0.0 && o.ratio <= 1.0)) return fmt::format("the ratio {} is outside (0, 1]", o.ratio);
  if (join_prompt(parts).find_first_not_of(" \t\r\n") == std::string::npos) return std::string("the prompt is empty");
  if (t == nullptr || !t->scores()) return std::nullopt;
  const int32_t positions = scored_positions(tok, *t), trained = scorer.config().n_ctx_train;
  if (trained > 0 && positions > trained)
    return fmt::format("the prompt has {} tokens, more than the scorer's context of {}", positions, trained);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> compress_input_error(const Model& scorer, const Tokenizer& tok, const PromptParts& parts,
                                                const CompressOptions& o) {
  if (auto e = input_error(scorer, tok, parts, o, nullptr)) return e;
  const Targets t = targets_of(tok, parts, o);
  return input_error(scorer, tok, parts, o, &t);
}

Result<CompressResult> compress_prompt(Model& scorer, const Tokenizer& tok, const PromptParts& parts,
                                       const CompressOptions& o, FrequentHead* heads) {
  if (auto e = input_error(scorer, tok, parts, o, nullptr)) return Status::error(*e);
  Timer timer;
  const Targets t = targets_of(tok, parts, o);
  if (auto e = input_error(scorer, tok, parts, o, &t)) return Status::error(*e);
  CompressResult r;
  r.origin_tokens = t.origin;
  const std::vector<int32_t>& ids = t.ids;
  const int32_t n_ctx = static_cast<int32_t>(ids.size());
  const int32_t ctx_target = t.ctx_target;
  r.context = parts.context;
  if (t.scores()) {
    std::vector<std::string> pieces;
    pieces.reserve(ids.size());
    for (int32_t id : ids) pieces.push_back(tok.token_to_bytes(id));
    const std::vector<ByteSpan> spans = split_sentences(parts.context);
    const std::vector<int32_t> sentence = token_sentences(parts.context, spans, pieces);
    const std::vector<bool> pinned = question_sentences(parts, spans, sentence, ctx_target, o);
    const Vocab& v = tok.vocab();
    const bool bos = v.add_bos && v.bos >= 0;
    auto session = ScorerSession::create(scorer, scored_positions(tok, t), o.logits_budget_bytes);
    if (!session) return session.status();
    if (o.vocab_subset > 0 && o.vocab_subset < scorer.config().n_vocab) {
      FrequentHead own;
      auto head = (heads != nullptr ? heads : &own)->get(scorer, v, o.vocab_subset);
      if (!head) return head.status();
      session->use_subset(*head, o.min_vocab_mass);
      // The context's own tokens from the start: every segment normalized over one set.
      PAGODA_TRY(session->cover(ids));
    }
    if (bos) {
      const int32_t b = v.bos;
      if (Status st = session->append(std::span<const int32_t>(&b, 1)); !st) return st;
    }
    const auto segments =
        o.iterative ? segments_of(sentence, o.segment_tokens) : std::vector<std::pair<size_t, size_t>>{{0, ids.size()}};
    const auto asked =
        o.protect_question_words ? question_words(parts.question, parts.context) : std::unordered_set<std::string>();
    std::vector<int32_t> kept;
    const double share = static_cast<double>(ctx_target) / n_ctx;
    for (size_t g = 0; g < segments.size(); ++g) {
      const auto [b, e] = segments[g];
      std::span<const int32_t> seg(ids.data() + b, e - b);
      const size_t before = session->size();
      auto info = session->score(seg);
      if (!info) return info.status();
      auto units = make_units(std::span<const std::string>(pieces).subspan(b, e - b), *info,
                              std::span<const int32_t>(sentence).subspan(b, e - b), o.granularity);
      for (Unit& u : units) u.pinned = pinned[static_cast<size_t>(sentence[b + static_cast<size_t>(u.begin)])];
      if (!asked.empty() && o.granularity == Granularity::kWord)
        for (Unit& u : units)
          if (!u.structural && asked.count(unit_word(std::span<const std::string>(pieces).subspan(b, e - b), u)))
            u.name = true;
      // Each segment's target carries the rounding of those before it.
      BudgetOptions bo;
      bo.target_tokens = static_cast<int32_t>(std::lround(share * static_cast<double>(e))) -
                         static_cast<int32_t>(kept.size());
      bo.name_share = o.name_share;
      const std::vector<bool> keep = select_units(units, bo);
      const size_t kept_before = kept.size();
      for (size_t u = 0; u < units.size(); ++u)
        if (keep[u]) kept.insert(kept.end(), seg.begin() + units[u].begin, seg.begin() + units[u].end);
      if (o.iterative && g + 1 < segments.size()) {
        // What follows is scored against the compressed text, not the original.
        session->truncate(before);
        if (Status st = session->append(std::span<const int32_t>(kept).subspan(kept_before)); !st) return st;
      }
    }
    r.context = tok.decode(kept);
    r.vocab_tokens = session->subset_in_use() ? session->subset_size() : 0;
    r.vocab_mass = session->subset_mass();
  }
  PromptParts out = parts;
  out.context = r.context;
  r.prompt = join_prompt(out);
  r.compressed_tokens = count_tokens(tok, r.prompt);
  r.seconds = timer.seconds();
  return r;
}

}  // namespace pagoda
