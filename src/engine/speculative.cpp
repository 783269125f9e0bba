#include "engine/speculative.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace pagoda {

Result<SpeculativeConfig> parse_speculative_config(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return error("--speculative-config: not JSON ({})", e.what());
  }
  if (!j.is_object())
    return error("--speculative-config: expected a JSON object like {{\"method\": \"ngram\", "
                 "\"num_speculative_tokens\": 4}}");
  SpeculativeConfig c;
  for (const auto& item : j.items()) {
    // Named variables, not a structured binding: clang 14 (the fuzz build) does not let
    // the lambda below capture one.
    const std::string key = item.key();
    const nlohmann::json& value = item.value();
    auto as_int = [&](int32_t lo, int32_t hi) -> Result<int32_t> {
      if (!value.is_number_integer() || value.get<int64_t>() < lo || value.get<int64_t>() > hi)
        return error("--speculative-config: {} must be an integer in {}..{}", key, lo, hi);
      return static_cast<int32_t>(value.get<int64_t>());
    };
    if (key == "method") {
      if (!value.is_string()) return error("--speculative-config: method must be a string");
      c.method = value.get<std::string>();
      if (c.method != "ngram" && c.method != "draft_model")
        return error("--speculative-config: method \"{}\" is not supported (supported: ngram, prompt lookup from the "
                     "sequence's own tokens; draft_model, a smaller model with the same vocabulary)",
                     c.method);
    } else if (key == "model") {
      if (!value.is_string() || value.get<std::string>().empty())
        return error("--speculative-config: model must be a GGUF path or a catalog name");
      c.model = value.get<std::string>();
    } else if (key == "draft_min") {
      auto v = as_int(0, 32);
      if (!v) return v.status();
      c.draft_min = *v;
    } else if (key == "draft_p_min") {
      if (!value.is_number() || !(value.get<double>() >= 0.0 && value.get<double>() < 1.0))
        return error("--speculative-config: draft_p_min must be a number in [0, 1)");
      c.draft_p_min = value.get<float>();
    } else if (key == "num_speculative_tokens") {
      auto v = as_int(1, 32);
      if (!v) return v.status();
      c.num_speculative_tokens = *v;
    } else if (key == "branches") {
      auto v = as_int(1, 8);
      if (!v) return v.status();
      c.branches = *v;
    } else if (key == "prompt_lookup_max") {
      auto v = as_int(1, 64);
      if (!v) return v.status();
      c.prompt_lookup_max = *v;
    } else if (key == "prompt_lookup_min") {
      auto v = as_int(1, 64);
      if (!v) return v.status();
      c.prompt_lookup_min = *v;
    } else {
      return error("--speculative-config: unknown key \"{}\" (method, model, num_speculative_tokens, "
                   "prompt_lookup_max, prompt_lookup_min, branches, draft_min, draft_p_min)",
                   key);
    }
  }
  // vLLM infers the method from the model given.
  if (c.method.empty() && !c.model.empty()) c.method = "draft_model";
  if (c.method.empty()) return error("--speculative-config: method is required (\"ngram\" or \"draft_model\")");
  if (c.method == "draft_model" && c.model.empty())
    return error("--speculative-config: the draft_model method needs \"model\" (a GGUF path or a catalog name)");
  if (c.method == "ngram" && !c.model.empty())
    return error("--speculative-config: \"model\" is for the draft_model method; ngram drafts from the sequence itself");
  if (c.num_speculative_tokens == 0) return error("--speculative-config: num_speculative_tokens is required");
  if (c.branches * c.num_speculative_tokens > 63)
    return error("--speculative-config: branches x num_speculative_tokens is {}; a tree holds at most 63 drafts",
                 c.branches * c.num_speculative_tokens);
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    return error("--speculative-config: prompt_lookup_min {} is more than prompt_lookup_max {}", c.prompt_lookup_min,
                 c.prompt_lookup_max);
  return c;
}

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (k <= 0) return {};
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // The most recent earlier match: its continuation is most like what comes next.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t take = std::min<int64_t>(k, len - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + take);
    }
  }
  return {};
}

int32_t DraftTree::child(int32_t from, int32_t t) const {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (parent[i] == from && tokens[i] == t) return static_cast<int32_t>(i);
  return -1;
}

void DraftTree::add_path(std::span<const int32_t> path, size_t budget) {
  int32_t at = -1;
  for (int32_t t : path) {
    const int32_t next = child(at, t);
    if (next >= 0) {
      at = next;
      continue;
    }
    if (tokens.size() >= budget) return;
    tokens.push_back(t);
    parent.push_back(at);
    at = static_cast<int32_t>(tokens.size()) - 1;
  }
}

int32_t tree_depth(std::span<const int32_t> parent) {
  // At most 64 nodes in any tree the engine verifies; a larger one is a caller's own.
  std::array<int32_t, 64> small{};
  std::vector<int32_t> large(parent.size() > small.size() ? parent.size() : 0);
  int32_t* d = large.empty() ? small.data() : large.data();
  int32_t most = 0;
  for (size_t i = 0; i < parent.size(); ++i) {
    d[i] = parent[i] >= 0 ? d[static_cast<size_t>(parent[i])] + 1 : 1;
    most = std::max(most, d[i]);
  }
  return most;
}

int32_t DraftTree::depth() const { return tree_depth(parent); }

DraftTree propose_ngram_tree(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                             int32_t branches, size_t budget) {
  DraftTree tree;
  const auto len = static_cast<int64_t>(tokens.size());
  if (k <= 0 || branches <= 0 || budget == 0) return tree;
  int32_t found = 0;
  // Occurrences already used (by where their continuation starts): a shorter suffix
  // matches wherever a longer one did, and would add the same continuation again.
  std::vector<int64_t> used;
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n && found < branches; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    for (int64_t start = len - n - 1; start >= 0 && found < branches; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      if (std::find(used.begin(), used.end(), from) != used.end()) continue;
      used.push_back(from);
      const int64_t take = std::min<int64_t>(k, len - from);
      const size_t before = tree.size();
      tree.add_path(tokens.subspan(static_cast<size_t>(from), static_cast<size_t>(take)), budget);
      // A continuation the tree already held whole is not another branch.
      if (tree.size() > before) ++found;
      if (tree.size() >= budget) return tree;
    }
  }
  return tree;
}

double draft_speedup(double alpha, double cost, int32_t k) {
  double tokens = 1, p = 1;
  for (int32_t i = 0; i < k; ++i) tokens += (p *= alpha);
  return tokens / (1.0 + k * cost);
}

int32_t paying_draft_length(double alpha, double cost, int32_t most, double floor) {
  int32_t best = 0;
  double best_speedup = 0;
  for (int32_t k = 1; k <= most; ++k) {
    const double s = draft_speedup(alpha, cost, k);
    if (s > best_speedup) best = k, best_speedup = s;
  }
  return best_speedup > floor ? best : 0;
}

void DraftState::update(int32_t drafted, int32_t accepted, int32_t most) {
  if (drafted <= 0) return;
  hits = hits * 0.875 + accepted;
  trials = trials * 0.875 + accepted + (accepted < drafted ? 1 : 0);
  if (length == 0) length = most;
  if (accepted == drafted) {
    length = std::min(most, length + 1);
    misses = 0;
    return;
  }
  length = std::max(1, accepted + 1);
  if (accepted > 0) {
    misses = 0;
    return;
  }
  ++misses;
  if (misses >= 2) skip = std::min(64, 2 << misses);
}

}  // namespace pagoda
