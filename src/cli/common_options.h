// Flags several subcommands share, spelled once: every subcommand takes a flag given
// twice at its last value (as llama.cpp does, so scripts can append overrides), and
// -m/--model, -t/--threads, -c/--ctx-size, -n/--n-predict and the sampling flags read the same everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "sampling/params.h"

namespace CLI {
class App;
}

namespace pagoda {

CLI::App* add_subcommand(CLI::App& parent, const std::string& name, const std::string& description);
void add_model_option(CLI::App& sub, std::string& model);
void add_threads_option(CLI::App& sub, int32_t& threads);
// -c/--ctx-size and -n/--n-predict, with what they mean for this subcommand.
void add_context_option(CLI::App& sub, int32_t& ctx, const std::string& meaning);
void add_predict_option(CLI::App& sub, int32_t& n_predict, const std::string& meaning);
// llama.cpp's names: --temp, --top-k, --top-p, --min-p, the penalties, -s/--seed (-1:
// random), and --stop (repeatable).
void add_generation_options(CLI::App& sub, SamplingParams& sp, int64_t& seed, std::vector<std::string>& stop);

// A text file's bytes, as -f/--file reads it; a directory (which an ifstream opens and
// reads as nothing) or an unreadable path is an error naming `flag`.
Result<std::string> read_text_file(const std::string& path, const std::string& flag);

}  // namespace pagoda
