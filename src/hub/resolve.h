// What -m/--model names: a GGUF path, or a catalog model's name. A path that exists is
// used as it is (a file wins over a name); a name resolves to its file in the cache,
// pulled first when it is not there yet (and never touching the network once it is, so
// cached models work offline). Blocking while a pull runs; otherwise a few stat calls.
#pragma once

#include <string>

#include "base/status.h"
#include "hub/pull.h"

namespace pagoda {

struct ResolveOptions {
  bool allow_pull = true;
  PullOptions pull;
};

Result<std::string> resolve_model(const std::string& arg, const ResolveOptions& opt);

}  // namespace pagoda
