// Sampling: the usual ranges (temperature 0.7-1.0 for open-ended text, 0 for exact
// answers; top-p 0.9-0.95) and the settings outside them that make output incoherent,
// repetitive or silently greedy.
#include <fmt/format.h>

#include "doctor/checks.h"

namespace pagoda {

void check_sampling(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!f.sampling) return;
  const SamplingParams& p = f.sampling->params;
  const bool sampling = p.temperature > 0;
  const bool top_k_off = p.top_k <= 0;
  const bool truncated = !top_k_off || p.top_p < 1 || p.min_p > 0;
  if (p.temperature > 1.5f)
    add_finding(out, "sampling.temperature_high", Severity::kWarning, fmt::format("temperature {:g}", p.temperature),
        "above about 1.5 the flattened distribution gives unlikely tokens real weight: output drifts off topic and "
        "turns incoherent within a few sentences",
        "--temp 0.7 to 1.0 for open-ended text, --temp 0 for exact answers (code, extraction)",
        {{"temperature", p.temperature}});
  else if (p.temperature > 1.0f && !truncated)
    add_finding(out, "sampling.untruncated_tail", Severity::kWarning,
        fmt::format("temperature {:g} with top-k, top-p and min-p all off", p.temperature),
        "every token of the vocabulary can be drawn, and the long tail of a 100k+ vocabulary holds much of the mass "
        "once flattened",
        "--top-p 0.95 or --min-p 0.05", {{"temperature", p.temperature}});
  if (sampling && p.top_p < 0.5f)
    add_finding(out, "sampling.top_p_low", Severity::kWarning, fmt::format("top-p {:g}", p.top_p),
        "a nucleus this narrow keeps one or two tokens at most steps: output is near-greedy, repetitive and loops",
        "--top-p 0.9 to 0.95, or --temp 0 if greedy output is what you want", {{"top_p", p.top_p}});
  if (sampling && p.min_p > 0.3f)
    add_finding(out, "sampling.min_p_high", Severity::kWarning, fmt::format("min-p {:g}", p.min_p),
        "tokens below this share of the most likely one's probability are cut: above 0.3 that is nearly always all "
        "but the top one or two",
        "--min-p 0.05 to 0.1", {{"min_p", p.min_p}});
  if (sampling && p.top_k == 1)
    add_finding(out, "sampling.top_k_one", Severity::kInfo, fmt::format("top-k 1 with temperature {:g}", p.temperature),
        "one candidate is left: the output is greedy and the temperature and seed do nothing",
        "--temp 0 to say greedy, or --top-k 40 to sample", {{"top_k", p.top_k}, {"temperature", p.temperature}});
  if (p.repeat_penalty > 1.3f || p.repeat_penalty < 1.0f)
    add_finding(out, "sampling.repeat_penalty", Severity::kWarning, fmt::format("repeat penalty {:g}", p.repeat_penalty),
        p.repeat_penalty > 1.3f
            ? "the penalty divides the logits of every recent token, punctuation, spaces and code syntax included: "
              "above 1.3 the model avoids the tokens text is made of"
            : "below 1 recent tokens are favoured: output loops on itself",
        "--repeat-penalty 1.0 (off) to 1.1", {{"repeat_penalty", p.repeat_penalty}});
  if (p.presence_penalty > 1.5f || p.frequency_penalty > 1.5f || p.presence_penalty < -0.5f || p.frequency_penalty < -0.5f)
    add_finding(out, "sampling.presence_frequency_penalty", Severity::kWarning,
        fmt::format("presence penalty {:g}, frequency penalty {:g}", p.presence_penalty, p.frequency_penalty),
        "OpenAI documents -2 to 2 but values past 1.5 push the model off common words and negative ones make it repeat",
        "between 0 and 1 (0: off)", {{"presence_penalty", p.presence_penalty}, {"frequency_penalty", p.frequency_penalty}});
}

}  // namespace pagoda
