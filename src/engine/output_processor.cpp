#include "engine/output_processor.h"

#include <algorithm>

namespace pagoda {

OutputProcessor::OutputProcessor(const Tokenizer* tokenizer, const RequestParams& params)
    : tokenizer_(tokenizer), params_(params) {
  // Generated text continues the prompt, so a leading space is real text.
  if (tokenizer_ != nullptr) detok_.emplace(*tokenizer_, /*at_text_start=*/false);
}

std::string OutputProcessor::release_held() {
  std::string out = std::move(held_);
  held_.clear();
  if (detok_) out += detok_->flush();
  return out;
}

OutputProcessor::Update OutputProcessor::push(int32_t token, bool at_length, bool grammar_done) {
  Update u;
  if (done_) return u;
  const bool eog = grammar_done || (!params_.ignore_eos && tokenizer_ != nullptr && tokenizer_->is_eog(token));
  const auto& ids = params_.stop_token_ids;
  if (eog || std::find(ids.begin(), ids.end(), token) != ids.end()) u.finish = FinishReason::kStop;
  // An end-of-generation token adds no text; a stop id's token is text like any other.
  if (detok_ && !eog) held_ += detok_->push(token);

  size_t cut = std::string::npos;
  for (const std::string& s : params_.stop) {
    const size_t at = held_.find(s);
    if (at < cut) {
      cut = at;
      u.stop_string = s;
    }
  }
  if (cut != std::string::npos) {
    u.text = held_.substr(0, cut);
    held_.clear();
    u.finish = FinishReason::kStop;
    done_ = true;
    return u;
  }
  if (u.finish == FinishReason::kNone && at_length) u.finish = FinishReason::kLength;
  if (u.finish != FinishReason::kNone) {
    u.text = release_held();
    done_ = true;
    return u;
  }
  // Keep the longest tail that is the start of some stop string.
  size_t keep = 0;
  for (const std::string& s : params_.stop)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  if (keep == 0) {
    u.text.swap(held_);  // nothing held back: no copy
    return u;
  }
  u.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return u;
}

}  // namespace pagoda
