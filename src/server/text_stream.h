// The text of one generated sample as the API returns it: tokens detokenized
// incrementally (never half a UTF-8 character), cut before the first stop string, and any
// tail that could still grow into a stop string held back until it cannot, so a streamed
// reply never shows part of a stop string.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pagoda {

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stops);
  // The text that became safe to emit with this token; end-of-generation tokens add none.
  std::string push(int32_t token, bool end_of_generation);
  // At the end: whatever is still held (empty after a stop).
  std::string finish();
  // A stop string appeared: the sample is complete.
  bool stopped() const { return stopped_; }

 private:
  IncrementalDetokenizer detok_;
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace pagoda
