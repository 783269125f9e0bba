#include "cli/common_options.h"

#include <CLI/CLI.hpp>

namespace pagoda {

CLI::App* add_subcommand(CLI::App& parent, const std::string& name, const std::string& description) {
  CLI::App* sub = parent.add_subcommand(name, description);
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  return sub;
}

void add_model_option(CLI::App& sub, std::string& model) {
  sub.add_option("-m,--model", model, "GGUF model file, or a model name from `pagoda list --all` (pulled when not cached)")->required();
}

void add_threads_option(CLI::App& sub, int32_t& threads) {
  sub.add_option("-t,--threads", threads, "Threads (default: all cores)");
}

void add_context_option(CLI::App& sub, int32_t& ctx, const std::string& meaning) {
  sub.add_option("-c,--ctx-size", ctx, meaning);
}

void add_predict_option(CLI::App& sub, int32_t& n_predict, const std::string& meaning) {
  sub.add_option("-n,--n-predict", n_predict, meaning);
}

void add_generation_options(CLI::App& sub, SamplingParams& sp, int64_t& seed, std::vector<std::string>& stop) {
  sub.add_option("--temp", sp.temperature, "Temperature (0: greedy)");
  sub.add_option("--top-k", sp.top_k, "Top-k (0: off)");
  sub.add_option("--top-p", sp.top_p, "Top-p (1: off)");
  sub.add_option("--min-p", sp.min_p, "Min-p (0: off)");
  sub.add_option("--repeat-penalty", sp.repeat_penalty, "Repetition penalty (1: off)");
  sub.add_option("--repeat-last-n", sp.repeat_last_n, "Tokens the penalties look back over (-1: all)");
  sub.add_option("--presence-penalty", sp.presence_penalty, "Presence penalty");
  sub.add_option("--frequency-penalty", sp.frequency_penalty, "Frequency penalty");
  sub.add_option("-s,--seed", seed, "RNG seed (-1: random)");
  sub.add_option("--stop", stop, "Stop string: generation ends where it first appears, without it (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace pagoda
