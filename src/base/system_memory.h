// How much memory the machine can still give: MemAvailable from /proc/meminfo, the figure
// KV-cache budgets are sized against.
#pragma once

#include <cstddef>

namespace pagoda {

// Bytes; 0 when it cannot be read.
size_t available_memory_bytes();

}  // namespace pagoda
