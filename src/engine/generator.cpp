#include "engine/generator.h"

#include "base/timer.h"

namespace pagoda {

Result<GenerateResult> generate(Engine& engine, const std::vector<int32_t>& prompt,
                                const GenerateOptions& opts, const TokenCallback& on_token, bool keep_logits) {
  if (engine.has_work()) return error("generate: the engine is busy with other requests");
  RequestParams p;
  p.sampling = opts.sampling;
  p.max_tokens = opts.max_tokens < 0 ? -1 : opts.max_tokens;
  p.ignore_eos = opts.ignore_eos;
  p.stop = opts.stop;
  p.return_logits = keep_logits;
  p.constraint = opts.constraint;
  GenerateResult res;
  res.stats.prompt_tokens = static_cast<int32_t>(prompt.size());
  res.stats.stop_reason = "length";
  if (opts.max_tokens == 0) return res;
  Timer timer;
  auto id = engine.add_request(prompt, p);
  if (!id) return id.status();
  Timer decode_timer;
  bool running = true;
  while (running && engine.has_work()) {
    auto step = engine.step();
    if (!step) {
      engine.abort(*id);
      return step.status();
    }
    for (StepOutput& o : *step) {
      if (o.token < 0) continue;
      if (res.tokens.empty()) {
        res.stats.ttft_seconds = timer.seconds();
        res.stats.prefill_seconds = res.stats.ttft_seconds;
        decode_timer.reset();
      }
      res.tokens.push_back(o.token);
      if (keep_logits) res.logits.insert(res.logits.end(), o.logits.begin(), o.logits.end());
      if (on_token && !on_token(o.token, o.text)) {
        engine.abort(*id);
        res.stats.stop_reason = "cancelled";
        running = false;
        break;
      }
      if (o.finish == FinishReason::kStop) res.stats.stop_reason = o.stop_string.empty() ? "eos" : "stop";
      else if (o.finish == FinishReason::kLength)
        res.stats.stop_reason = opts.max_tokens > 0 && o.output_tokens >= opts.max_tokens ? "length" : "context";
    }
  }
  res.stats.generated_tokens = static_cast<int32_t>(res.tokens.size());
  res.stats.decode_seconds = res.tokens.size() > 1 ? decode_timer.seconds() : 0.0;
  return res;
}

}  // namespace pagoda
