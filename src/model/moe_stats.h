// Expert statistics of a mixture-of-experts model (SPEC M2), kept by the forward pass on
// every step at the cost of a few counter increments per routed token: per layer and
// expert the tokens routed to it and the steps in which it ran, and the time spent
// routing (router matmul, softmax, top-k, grouping) against the whole forward. Owned by
// the Model; read between steps on the engine's thread (not thread-safe).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda {

struct MoeLayerSummary {
  uint64_t tokens = 0;         // tokens through the layer (each counted once)
  double imbalance = 0.0;      // max / mean tokens per expert (1: perfectly even)
  double active_share = 0.0;   // mean over experts of the share of steps it ran in
  double used_share = 0.0;     // experts that ran at least once / all experts
  int32_t busiest = -1;        // the expert with the most tokens
};

class MoeStats {
 public:
  void reset(int32_t n_layer, int32_t n_expert, int32_t n_expert_used);
  bool enabled() const { return n_expert_ > 0; }
  int32_t n_layer() const { return n_layer_; }
  int32_t n_expert() const { return n_expert_; }
  int32_t n_expert_used() const { return n_expert_used_; }

  // A step begins (Model::forward): experts are counted active once per step.
  void begin_step() { ++steps_; }
  void count(int32_t layer, int32_t expert, uint64_t tokens) {
    const size_t i = static_cast<size_t>(layer) * static_cast<size_t>(n_expert_) + static_cast<size_t>(expert);
    tokens_[i] += tokens;
    if (last_step_[i] != steps_) {
      last_step_[i] = steps_;
      ++active_steps_[i];
    }
  }
  void add_routing_seconds(double s) { routing_seconds_ += s; }
  void add_forward_seconds(double s) { forward_seconds_ += s; }

  uint64_t steps() const { return steps_; }
  uint64_t tokens(int32_t layer, int32_t expert) const { return tokens_[index(layer, expert)]; }
  uint64_t active_steps(int32_t layer, int32_t expert) const { return active_steps_[index(layer, expert)]; }
  double routing_seconds() const { return routing_seconds_; }
  double forward_seconds() const { return forward_seconds_; }
  // routing / forward time (0 before any step).
  double routing_share() const { return forward_seconds_ > 0 ? routing_seconds_ / forward_seconds_ : 0.0; }
  MoeLayerSummary summary(int32_t layer) const;
  // The whole table as JSON: {"layers": [{"tokens": [...], "active_steps": [...], ...}], ...}.
  std::string to_json() const;
  // A table for people: one line per layer (tokens, imbalance, active and used shares,
  // busiest expert) and the totals.
  std::string to_text() const;

 private:
  size_t index(int32_t layer, int32_t expert) const {
    return static_cast<size_t>(layer) * static_cast<size_t>(n_expert_) + static_cast<size_t>(expert);
  }
  int32_t n_layer_ = 0, n_expert_ = 0, n_expert_used_ = 0;
  uint64_t steps_ = 0;
  std::vector<uint64_t> tokens_, active_steps_, last_step_;
  double routing_seconds_ = 0.0, forward_seconds_ = 0.0;
};

}  // namespace pagoda
