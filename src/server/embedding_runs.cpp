#include "server/embedding_runs.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <mutex>

#include "server/engine_loop.h"
#include "server/http_transport.h"

namespace pagoda {

std::variant<std::vector<std::vector<float>>, ApiError> run_embedding_requests(
    EngineLoop& loop, std::vector<std::vector<int32_t>> prompts, std::vector<RequestParams> params,
    const std::string& field, HttpRequest* req) {
  if (params.size() != prompts.size())
    return ApiError{500, "run_embedding_requests: prompts and parameters differ in number", "server_error", "", ""};
  // The channels in flight, for the hang-up watch (another thread) to abort.
  struct InFlight {
    std::mutex mu;
    std::vector<std::shared_ptr<OutputChannel>> channels;
    bool gone = false;
  };
  auto flight = std::make_shared<InFlight>();
  EngineLoop* lp = &loop;
  if (req != nullptr && req->on_hangup)
    req->on_hangup([flight, lp] {
      std::lock_guard<std::mutex> l(flight->mu);
      flight->gone = true;
      for (const auto& ch : flight->channels) lp->abort(ch);
    });
  auto abort_all = [&] {
    std::lock_guard<std::mutex> l(flight->mu);
    for (const auto& ch : flight->channels) loop.abort(ch);
    flight->channels.clear();
  };
  std::vector<std::vector<float>> vecs(prompts.size());
  for (size_t begin = 0; begin < prompts.size(); begin += kEmbeddingWindow) {
    const size_t end = std::min(prompts.size(), begin + kEmbeddingWindow);
    const auto b = static_cast<std::ptrdiff_t>(begin), e = static_cast<std::ptrdiff_t>(end);
    std::vector<std::vector<int32_t>> window(std::make_move_iterator(prompts.begin() + b),
                                             std::make_move_iterator(prompts.begin() + e));
    std::vector<RequestParams> window_params(std::make_move_iterator(params.begin() + b),
                                             std::make_move_iterator(params.begin() + e));
    EngineLoop::SubmittedAll sub = loop.submit_each(std::move(window), std::move(window_params));
    if (sub.channels.empty()) {
      ApiError err = ApiError::bad_request(sub.error.message());
      err.status = sub.overloaded ? 429 : 503;
      err.type = sub.overloaded ? "rate_limit_exceeded" : "service_unavailable";
      return err;
    }
    {
      std::lock_guard<std::mutex> l(flight->mu);
      flight->channels = sub.channels;
      if (flight->gone) {
        for (const auto& ch : flight->channels) loop.abort(ch);
        return ApiError{500, "the client went away", "server_error", "", ""};  // nobody reads it
      }
    }
    std::vector<StepOutput> outs;
    for (size_t i = 0; i < sub.channels.size(); ++i) {
      OutputChannel& ch = *sub.channels[i];
      if (Status st = ch.wait_admitted(); !st.is_ok()) {
        const bool internal = ch.rejected_internally();
        abort_all();
        if (internal) return ApiError{500, st.message(), "server_error", "", ""};
        return ApiError::bad_request(st.message(), field);
      }
      for (;;) {
        outs.clear();
        const bool open = ch.take(outs, std::chrono::milliseconds(200));
        for (StepOutput& o : outs)
          if (!o.embedding.empty()) vecs[begin + i] = std::move(o.embedding);
        if (!vecs[begin + i].empty()) break;
        if (!open) {
          const Status st = ch.error();
          abort_all();
          return ApiError{500, st.is_ok() ? std::string("the request ended early") : st.message(), "server_error",
                          "", ""};
        }
      }
    }
    std::lock_guard<std::mutex> l(flight->mu);
    flight->channels.clear();
  }
  return vecs;
}

}  // namespace pagoda
