// The progress display of `pagoda quantize` on stderr: one line per tensor (index of
// total, overall percentage by source bytes, name, types, sizes). On a terminal it is a
// single line rewritten in place, cut to the terminal's width; otherwise (a log, a pipe)
// each tensor gets its own plain line when it is done.
#pragma once

#include <cstddef>
#include <string>

#include "quantize/plan.h"

namespace pagoda {


class QuantizeProgress {
 public:
  QuantizeProgress(const QuantizePlan& plan, bool tty);
  void start(size_t index);                 // on a terminal: shows the tensor being done
  void done(size_t index, double seconds);  // the tensor's line
  void finish();                            // ends the in-place line
  // For notes printed before the first tensor (never inside the in-place line).
  static bool stderr_is_tty();

 private:
  std::string line(size_t index, size_t done_bytes) const;
  void show(const std::string& text, bool final_line);
  const QuantizePlan& plan_;
  bool tty_;
  size_t done_bytes_ = 0;
  size_t width_ = 80;
  bool open_line_ = false;
};

}  // namespace pagoda
