#include "quantize/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>

#include "base/human_size.h"

namespace pagoda {

bool QuantizeProgress::stderr_is_tty() { return isatty(STDERR_FILENO) != 0; }

QuantizeProgress::QuantizeProgress(const QuantizePlan& plan, bool tty) : plan_(plan), tty_(tty) {
  winsize ws{};
  if (tty_ && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) width_ = ws.ws_col;
}

std::string QuantizeProgress::line(size_t index, size_t done_bytes) const {
  const TensorPlan& p = plan_.tensors[index];
  const size_t n = plan_.tensors.size();
  const int digits = static_cast<int>(fmt::formatted_size("{}", n));
  const double pct = plan_.in_bytes ? 100.0 * static_cast<double>(done_bytes) / static_cast<double>(plan_.in_bytes) : 100.0;
  const std::string types = p.convert ? fmt::format("{:>4} -> {:<4}", dtype_name(p.source->type), quantize_type_name(p.type))
                                      : fmt::format("{:>4} (kept)", quantize_type_name(p.type));
  // The overall percentage comes first: a narrow terminal cuts the end of the line.
  return fmt::format("[{:>{}}/{}] {:5.1f}% {:<32} {:<14} {:>10} -> {:>10}", index + 1, digits, n, pct, p.source->name,
                     types, human_size(static_cast<double>(p.source->nbytes)),
                     human_size(static_cast<double>(p.out_bytes)));
}

void QuantizeProgress::show(const std::string& text, bool final_line) {
  if (!tty_) {
    if (final_line) fmt::print(stderr, "{}\n", text);
    return;
  }
  // One line rewritten in place; longer than the terminal it would wrap and \r could not
  // return to its start.
  std::string shown = text.size() < width_ ? text : text.substr(0, width_ - 1);
  fmt::print(stderr, "\r\033[K{}", shown);
  std::fflush(stderr);
  open_line_ = true;
}

void QuantizeProgress::start(size_t index) {
  if (tty_) show(line(index, done_bytes_), false);
}

void QuantizeProgress::done(size_t index, double seconds) {
  done_bytes_ += plan_.tensors[index].source->nbytes;
  std::string text = line(index, done_bytes_);
  if (!tty_) text += fmt::format(" {:7.2f} s", seconds);
  show(text, true);
}

void QuantizeProgress::finish() {
  if (open_line_) fmt::print(stderr, "\n");
  open_line_ = false;
}

}  // namespace pagoda
