#include "tokenizer/tokenizer.h"
#include "text/utf8.h"

namespace pagoda {

std::string IncrementalDetokenizer::push(int32_t id) {
  std::string bytes = tok_.token_to_bytes(id);
  if (first_ && (!bytes.empty() || tok_.strips_first_token_only())) {
    if (tok_.vocab().add_space_prefix && bytes[0] == ' ') bytes.erase(0, 1);
    first_ = false;
  }
  pending_ += bytes;
  const size_t ready = utf8::complete_prefix(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace pagoda
