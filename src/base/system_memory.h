// How much memory the machine can still give: MemAvailable from /proc/meminfo, the figure
// KV-cache budgets are sized against; and how much of the heap this process uses, for
// measuring what building a structure costs.
#pragma once

#include <cstddef>

namespace pagoda {

// Bytes; 0 when it cannot be read.
size_t available_memory_bytes();

// Bytes of the C heap in use (glibc's mallinfo2: allocated chunks, mmapped ones too); 0
// where the C library cannot say. Not thread-safe to compare across threads that allocate.
size_t heap_in_use_bytes();

// Anonymous resident bytes of this process (RssAnon of /proc/self/status); 0 when it
// cannot be read. Freed heap stays resident until release_free_heap(), so the growth of
// this across a build is the build's peak, where heap_in_use_bytes() gives what it keeps.
size_t anonymous_resident_bytes();

// The resident set of this process now (VmRSS of /proc/self/status); 0 when it cannot be read.
size_t resident_bytes();

// The peak resident set of this process's address space (VmHWM of /proc/self/status); 0
// when it cannot be read. Unlike getrusage's ru_maxrss, which starts from the resident set
// of the parent that forked it (a test runner's hundreds of MiB), it counts only this
// program's own memory.
size_t peak_resident_bytes();

// Gives the C heap's free pages back to the system (glibc's malloc_trim): after a build
// that allocates much more than it keeps, such as a tokenizer's, so the transient does not
// stay in the resident set for the life of the process. Costs a walk of the heap's free
// lists (milliseconds).
void release_free_heap();

}  // namespace pagoda
