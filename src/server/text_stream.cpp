#include "server/text_stream.h"

#include <algorithm>

namespace pagoda {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stops)
    : detok_(tok, /*at_text_start=*/false), stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::push(int32_t token, bool end_of_generation) {
  if (stopped_) return {};
  if (!end_of_generation) held_ += detok_.push(token);
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    std::string out = held_.substr(0, cut);
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Keep the longest tail that is the start of some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string TextStream::finish() {
  if (stopped_) return {};
  std::string out = held_ + detok_.flush();
  held_.clear();
  return out;
}

}  // namespace pagoda
