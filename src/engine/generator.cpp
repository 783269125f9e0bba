#include "engine/generator.h"

#include "base/timer.h"

namespace pagoda {

Result<GenerateResult> generate(Model& model, KvCache& kv, const Tokenizer* tokenizer,
                                const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                const TokenCallback& on_token, bool keep_logits) {
  const int32_t n_vocab = model.config().n_vocab;
  if (prompt.empty()) return error("the prompt is empty (no tokens to start from)");
  if (static_cast<int64_t>(prompt.size()) >= kv.n_ctx())
    return error("the prompt has {} tokens but the context holds {}; use a shorter prompt or a larger --ctx-size",
                 prompt.size(), kv.n_ctx());
  GenerateResult res;
  res.stats.prompt_tokens = static_cast<int32_t>(prompt.size());
  std::vector<float> logits(n_vocab);
  std::vector<int32_t> history = prompt;
  Sampler sampler(opts.sampling);
  std::optional<IncrementalDetokenizer> detok;
  // Generated text continues the prompt, so a leading space is real text.
  if (tokenizer != nullptr) detok.emplace(*tokenizer, /*at_text_start=*/false);

  Timer timer;
  PAGODA_TRY(model.forward(prompt, 0, kv, logits.data(), false));
  res.stats.prefill_seconds = timer.seconds();
  int32_t pos = static_cast<int32_t>(prompt.size());
  Timer decode_timer;
  res.stats.stop_reason = "length";
  for (int32_t i = 0; opts.max_tokens < 0 || i < opts.max_tokens; ++i) {
    if (i > 0) {
      if (pos > kv.n_ctx()) {
        res.stats.stop_reason = "context";
        break;
      }
      const int32_t last = history.back();
      PAGODA_TRY(model.forward(std::span<const int32_t>(&last, 1), pos - 1, kv, logits.data(), false));
    }
    if (keep_logits) res.logits.insert(res.logits.end(), logits.begin(), logits.end());
    const int32_t tok = sampler.sample(logits, history);
    if (i == 0) {
      res.stats.ttft_seconds = timer.seconds();
      decode_timer.reset();
    }
    history.push_back(tok);
    res.tokens.push_back(tok);
    ++pos;
    const bool eog = tokenizer != nullptr && tokenizer->is_eog(tok);
    std::string text;
    if (detok && !eog) text = detok->push(tok);
    if (on_token && !on_token(tok, text)) break;
    if (eog && !opts.ignore_eos) {
      res.stats.stop_reason = "eos";
      break;
    }
  }
  if (detok && on_token) {
    std::string rest = detok->flush();
    if (!rest.empty()) on_token(-1, rest);
  }
  res.stats.generated_tokens = static_cast<int32_t>(res.tokens.size());
  res.stats.decode_seconds = res.tokens.size() > 1 ? decode_timer.seconds() : 0.0;
  return res;
}

}  // namespace pagoda
