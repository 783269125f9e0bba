#include "constrain/constraint.h"

#include <xgrammar/xgrammar.h>

#include <exception>
#include <limits>
#include <optional>
#include <utility>

#include "constrain/schema_support.h"
#include "constrain/utf8_guard.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

const char* constraint_kind_name(ConstraintKind k) {
  switch (k) {
    case ConstraintKind::kJsonSchema: return "json_schema";
    case ConstraintKind::kJsonObject: return "json_object";
    case ConstraintKind::kRegex: return "regex";
    case ConstraintKind::kChoice: return "choice";
    case ConstraintKind::kGrammar: return "grammar";
    case ConstraintKind::kStructuralTag: return "structural_tag";
  }
  return "?";
}

class Constraint {
 public:
  Constraint(xgrammar::CompiledGrammar grammar, int32_t width, std::shared_ptr<const Utf8Guard> utf8)
      : grammar(std::move(grammar)), width(width), utf8(std::move(utf8)) {}
  xgrammar::CompiledGrammar grammar;
  int32_t width;
  std::shared_ptr<const Utf8Guard> utf8;
};

namespace {


// One literal of xgrammar's EBNF: bytes as they are, except quotes, backslashes and
// control characters, which are escaped.
std::string ebnf_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

struct ConstraintMatcher::Impl {
  std::shared_ptr<const Constraint> constraint;
  xgrammar::GrammarMatcher matcher;
  std::vector<int32_t> bitmask;
  uint8_t utf8_state = Utf8Guard::kBoundary;
  Impl(std::shared_ptr<const Constraint> c, xgrammar::GrammarMatcher m)
      : constraint(std::move(c)), matcher(std::move(m)),
        bitmask(static_cast<size_t>(xgrammar::GetBitmaskSize(constraint->width))) {}
};

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const Constraint> constraint) {
  xgrammar::GrammarMatcher m(constraint->grammar);
  impl_ = std::make_unique<Impl>(std::move(constraint), std::move(m));
}
ConstraintMatcher::ConstraintMatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConstraintMatcher::~ConstraintMatcher() = default;

void ConstraintMatcher::mask(std::span<float> logits) {
  auto& bits = impl_->bitmask;
  int64_t shape = static_cast<int64_t>(bits.size());
  DLTensor t{};
  t.data = bits.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = &shape;
  const bool restricts = impl_->matcher.FillNextTokenBitmask(&t);
  const size_t width = std::min(logits.size(), static_cast<size_t>(impl_->constraint->width));
  constexpr float kRefused = -std::numeric_limits<float>::infinity();
  if (restricts) {
    for (size_t w = 0; w * 32 < width; ++w) {
      uint32_t allowed = static_cast<uint32_t>(bits[w]);
      if (allowed == 0xFFFFFFFFu) continue;
      const size_t base = w * 32, end = std::min(width, base + 32);
      for (size_t i = base; i < end; ++i)
        if (!((allowed >> (i - base)) & 1u)) logits[i] = kRefused;
    }
  }
  for (size_t i = width; i < logits.size(); ++i) logits[i] = kRefused;
  impl_->constraint->utf8->mask(impl_->utf8_state, logits);
}

bool ConstraintMatcher::accept(int32_t token) {
  if (token < 0 || token >= impl_->constraint->width) return false;
  if (!impl_->matcher.AcceptToken(token)) return false;
  impl_->utf8_state = impl_->constraint->utf8->after(impl_->utf8_state, token);
  return true;
}

bool ConstraintMatcher::terminated() const { return impl_->matcher.IsTerminated(); }

std::vector<int32_t> ConstraintMatcher::forced_tokens(const Tokenizer& tokenizer) const {
  const std::string text = impl_->matcher.FindJumpForwardString();
  if (text.empty()) return {};
  std::vector<int32_t> ids = tokenizer.encode_continuation(text);
  if (ids.size() < 2) return {};
  ids.pop_back();
  size_t at = 0;
  for (int32_t id : ids) {
    if (id < 0 || id >= impl_->constraint->width) return {};
    const std::string piece = tokenizer.token_to_bytes(id);
    if (piece.empty() || text.compare(at, piece.size(), piece) != 0) return {};
    at += piece.size();
  }
  return ids;
}

std::unique_ptr<ConstraintMatcher> ConstraintMatcher::fork() const {
  auto impl = std::make_unique<Impl>(impl_->constraint, impl_->matcher.Fork());
  impl->utf8_state = impl_->utf8_state;
  return std::unique_ptr<ConstraintMatcher>(new ConstraintMatcher(std::move(impl)));
}

struct ConstraintCompiler::Impl {
  xgrammar::TokenizerInfo info;
  xgrammar::GrammarCompiler compiler;
  int32_t width;
  std::shared_ptr<const Utf8Guard> utf8;
  Impl(xgrammar::TokenizerInfo i, int threads, int32_t w, std::shared_ptr<const Utf8Guard> u)
      : info(i), compiler(info, threads), width(w), utf8(std::move(u)) {}
};

ConstraintCompiler::ConstraintCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConstraintCompiler::~ConstraintCompiler() = default;

Result<std::unique_ptr<ConstraintCompiler>> ConstraintCompiler::create(const Tokenizer& tokenizer,
                                                                       int32_t logits_width, int threads) {
  const int32_t n = tokenizer.vocab_size();
  if (logits_width < n) return error("constrained decoding: logits width {} is below the vocabulary ({})", logits_width, n);
  // Each token as the bytes it adds to the text; control tokens (empty here) are never
  // allowed inside a constrained text, the end-of-generation ids end it.
  std::vector<std::string> pieces(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) pieces[id] = tokenizer.token_to_bytes(id);
  std::vector<int32_t> stops = tokenizer.vocab().eog;
  if (stops.empty() && tokenizer.vocab().eos >= 0) stops.push_back(tokenizer.vocab().eos);
  try {
    xgrammar::TokenizerInfo info(pieces, xgrammar::VocabType::RAW, logits_width, stops, false);
    auto utf8 = std::make_shared<const Utf8Guard>(std::move(pieces));
    return std::unique_ptr<ConstraintCompiler>(new ConstraintCompiler(
        std::make_unique<Impl>(std::move(info), std::max(1, threads), logits_width, std::move(utf8))));
  } catch (const std::exception& e) {
    return error("constrained decoding: {}", e.what());
  }
}

Result<std::shared_ptr<const Constraint>> ConstraintCompiler::compile(const ConstraintSpec& spec) const {
  auto& c = impl_->compiler;
  try {
    std::optional<xgrammar::CompiledGrammar> g;
    switch (spec.kind) {
      case ConstraintKind::kJsonSchema: {
        auto schema = prepare_json_schema(spec.text);
        if (!schema) return schema.status();
        g = c.CompileJSONSchema(*schema, true, std::nullopt, std::nullopt, spec.strict, kMaxJsonWhitespace);
        break;
      }
      case ConstraintKind::kJsonObject:
        g = c.CompileJSONSchema(R"({"type": "object"})", true, std::nullopt, std::nullopt, false, kMaxJsonWhitespace);
        break;
      case ConstraintKind::kRegex:
        g = c.CompileRegex(spec.text);
        break;
      case ConstraintKind::kChoice: {
        if (spec.choices.empty()) return error("the choice list is empty");
        std::string ebnf = "root ::= ";
        for (size_t i = 0; i < spec.choices.size(); ++i) {
          if (spec.choices[i].empty()) return error("choice {} is empty", i);
          ebnf += (i ? " | " : "") + ebnf_literal(spec.choices[i]);
        }
        g = c.CompileGrammar(ebnf);
        break;
      }
      case ConstraintKind::kGrammar:
        g = c.CompileGrammar(spec.text);
        break;
      case ConstraintKind::kStructuralTag:
        g = c.CompileStructuralTag(spec.text);
        break;
    }
    return std::shared_ptr<const Constraint>(std::make_shared<Constraint>(std::move(*g), impl_->width, impl_->utf8));
  } catch (const std::exception& e) {
    std::string what = e.what();
    // xgrammar prefixes "[hh:mm:ss] /path/to/source.cc:123: ", which says nothing to a
    // client, and its messages can carry a whole grammar.
    if (what.starts_with("[")) {
      const size_t src = what.find(".cc:");
      const size_t colon = src == std::string::npos ? src : what.find(": ", src + 4);
      if (colon != std::string::npos) what.erase(0, colon + 2);
    }
    while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
    if (what.size() > 2000) what = what.substr(0, 2000) + "...";
    return error("{}", what);
  }
}

}  // namespace pagoda
