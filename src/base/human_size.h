// Byte counts as people read them ("171.74 MiB"), for the subcommands' reports.
#pragma once

#include <string>

namespace pagoda {

// Binary units (KiB, MiB, ...) with two decimals.
std::string human_size(double bytes);

}  // namespace pagoda
