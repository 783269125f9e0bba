#include "cli/pull_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "base/human_size.h"
#include "hub/resolve.h"

namespace pagoda {

PullOptions cli_pull_options(bool quiet) {
  PullOptions opt;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  opt.pip.show_progress = tty && !quiet;
  opt.on_event = [tty, quiet](const PullEvent& ev) {
    using K = PullEvent::Kind;
    switch (ev.kind) {
      case K::kAlreadyCached:
        if (!quiet) fmt::print(stderr, "cached: {} ({})\n", ev.detail, human_size(static_cast<double>(ev.total)));
        break;
      case K::kWaitingForLock:
        fmt::print(stderr, "another pull of this model is running; waiting for it ({})\n", ev.detail);
        break;
      case K::kPartCached:
        if (!quiet) fmt::print(stderr, "[{}/{}] {}: already downloaded\n", ev.part, ev.parts, ev.package);
        break;
      case K::kPartDownload:
        if (!quiet) fmt::print(stderr, "[{}/{}] {}: downloading\n", ev.part, ev.parts, ev.package);
        break;
      case K::kPartRetry:
        fmt::print(stderr, "[{}/{}] {}: {}; retrying\n", ev.part, ev.parts, ev.package, ev.detail);
        break;
      case K::kPartDone:
        if (!quiet && !tty) fmt::print(stderr, "[{}/{}] {}: {}\n", ev.part, ev.parts, ev.package,
                                       human_size(static_cast<double>(ev.total)));
        break;
      case K::kJoinProgress:
        if (!quiet && tty) {
          const double frac = ev.total ? static_cast<double>(ev.done) / static_cast<double>(ev.total) : 1.0;
          const int width = 30;
          const int fill = static_cast<int>(frac * width);
          fmt::print(stderr, "\rjoining and checking [{}{}] {:5.1f}% of {}", std::string(fill, '#'),
                     std::string(width - fill, ' '), 100.0 * frac, human_size(static_cast<double>(ev.total)));
          if (ev.done == ev.total) fmt::print(stderr, "\n");
        }
        break;
      case K::kVerified:
        fmt::print(stderr, "verified sha256: {} ({})\n", ev.detail, human_size(static_cast<double>(ev.total)));
        break;
    }
    std::fflush(stderr);
  };
  return opt;
}

Result<std::string> resolve_model_arg(const std::string& arg) {
  ResolveOptions opt;
  opt.pull = cli_pull_options(/*quiet=*/false);
  return resolve_model(arg, opt);
}

}  // namespace pagoda
