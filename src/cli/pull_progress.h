// How the CLI shows a pull: one line per part on stderr, pip's own progress bar while a
// part downloads when stderr is a terminal, and a joining/hashing bar redrawn in place.
// Shared by `pagoda pull` and by -m NAME when the model is not cached yet.
#pragma once

#include "hub/pull.h"

namespace pagoda {

// quiet: report only retries and the final line.
PullOptions cli_pull_options(bool quiet);

// Resolves -m/--model (a path, or a catalog name that is pulled when missing).
Result<std::string> resolve_model_arg(const std::string& arg);

}  // namespace pagoda
