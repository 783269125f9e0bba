#include "cli/common_options.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

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
  sub.add_option("-t,--threads", threads, "Threads (default: all cores)")->check(CLI::Range(0, 1024));
}

void add_context_option(CLI::App& sub, int32_t& ctx, const std::string& meaning) {
  sub.add_option("-c,--ctx-size", ctx, meaning)->check(CLI::Range(0, 1 << 30));
}

void add_predict_option(CLI::App& sub, int32_t& n_predict, const std::string& meaning) {
  sub.add_option("-n,--n-predict", n_predict, meaning);
}

namespace {

// CLI::Range lets NaN through (every comparison with it is false) and accepts inf; a
// sampling value has to be a finite number in its range.
CLI::Validator finite_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
        if (!std::isfinite(v) || v < lo || v > hi)
          return fmt::format("{} is out of range: must be a finite number in [{}, {}]", text, lo, hi);
        return {};
      },
      fmt::format("FINITE in [{} - {}]", lo, hi));
}

}  // namespace

void add_generation_options(CLI::App& sub, SamplingParams& sp, int64_t& seed, std::vector<std::string>& stop) {
  sub.add_option("--temp", sp.temperature, "Temperature (0: greedy)")->check(finite_in(0, 100));
  sub.add_option("--top-k", sp.top_k, "Top-k (0: off)")->check(CLI::Range(-1, INT32_MAX));
  sub.add_option("--top-p", sp.top_p, "Top-p (1: off)")->check(finite_in(0, 1));
  sub.add_option("--min-p", sp.min_p, "Min-p (0: off)")->check(finite_in(0, 1));
  sub.add_option("--repeat-penalty", sp.repeat_penalty, "Repetition penalty (1: off)")->check(finite_in(0.01, 100));
  sub.add_option("--repeat-last-n", sp.repeat_last_n, "Tokens the penalties look back over (-1: all)")
      ->check(CLI::Range(-1, INT32_MAX));
  sub.add_option("--presence-penalty", sp.presence_penalty, "Presence penalty")->check(finite_in(-100, 100));
  sub.add_option("--frequency-penalty", sp.frequency_penalty, "Frequency penalty")->check(finite_in(-100, 100));
  sub.add_option("-s,--seed", seed, "RNG seed (-1: random)");
  sub.add_option("--stop", stop, "Stop string: generation ends where it first appears, without it (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

Result<std::string> read_text_file(const std::string& path, const std::string& flag) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return error("{}: cannot read {}: it is a directory", flag, path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return error("{}: cannot read {}", flag, path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace pagoda
