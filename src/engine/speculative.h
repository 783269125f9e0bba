// Speculative decoding inside the engine's step (vLLM's `--speculative-config`): a
// sequence in decode proposes up to num_speculative_tokens draft tokens, the step computes
// them with its last token in one batched forward (a logits row for each), and the
// sequence keeps the longest prefix its own sampler accepts plus one more token from the
// first row that rejects, so the output is that of plain decoding (greedy: the same
// tokens; sampled: the same distribution). The
// KV of rejected drafts is rolled back (the positions are simply not counted as computed;
// the next step overwrites them, and the prefix cache only ever hashes verified blocks).
// Drafting is prompt lookup (vLLM's "ngram" method): the tokens that followed the most
// recent earlier occurrence of the sequence's last n tokens, for n from prompt_lookup_max
// down to prompt_lookup_min; or a draft model (engine/draft_model.h). Sampled requests verify by modified
// rejection sampling (Sampler::sample_draft), so their tokens keep the target's
// distribution. Pure functions and plain data; thread-compatible.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace pagoda {

struct SpeculativeConfig {
  std::string method;                  // "" (off), "ngram" or "draft_model"
  int32_t num_speculative_tokens = 0;  // the most drafts per step and sequence
  int32_t prompt_lookup_max = 4;       // the longest suffix looked up (tokens)
  int32_t prompt_lookup_min = 1;       // the shortest
  // The most alternative continuations verified together as a tree (S3; 1: one chain).
  // ngram: the continuations of that many earlier occurrences, each up to
  // num_speculative_tokens long, shared beginnings verified once. draft_model: the chain
  // plus, at each position where the draft is unsure, up to branches - 1 of its next-best
  // tokens (those it gives at least 0.1) as one-token branches.
  int32_t branches = 1;
  std::string model;                   // draft_model: its GGUF path or catalog name
  int32_t draft_min = 0;               // fewer drafts than this are not verified (llama.cpp's --draft-min)
  float draft_p_min = 0.0f;            // draft_model: stop drafting below this top probability
  // draft_model: draft only where the expected speedup (draft_speedup) from this
  // sequence's acceptance and the measured cost of a draft token reaches the engine's
  // floor (0.9, paying_draft_length). Off only in tests that need every step to draft.
  bool cost_gate = true;
  // > 0: a draft token's cost as a share of a target step, instead of measuring it (tests,
  // whose tiny models time nothing alike from run to run). Not a --speculative-config key.
  double fixed_draft_cost = 0;
  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
};

// vLLM's JSON: {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
// "prompt_lookup_min": 1} or {"model": "draft.gguf", "num_speculative_tokens": 4} (method
// "draft_model" implied), plus llama.cpp's draft_min and draft_p_min; unknown keys and
// methods are errors that name them.
Result<SpeculativeConfig> parse_speculative_config(const std::string& json);

// Up to k tokens to follow `tokens`: after the most recent earlier occurrence of its
// longest suffix of n tokens, min_n <= n <= max_n (none found: empty). O(len * max_n).
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k);

// A tree of drafts (S3): several continuations of a sequence verified in one forward. The
// nodes are listed parents first; parent[i] is the index of node i's parent, or -1 when it
// follows the sequence's last token directly. A chain is the tree with parent[i] = i - 1.
struct DraftTree {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parent;
  size_t size() const { return tokens.size(); }
  // The node after `from` (-1: the root) whose token is t, or -1.
  int32_t child(int32_t from, int32_t t) const;
  // Adds the path `path` below `from` (shared nodes reused), at most `budget` nodes in all.
  void add_path(std::span<const int32_t> path, size_t budget);
  int32_t depth() const;  // of the deepest node (a chain's length)
};

// The depth of the deepest node of a tree given by parent indices (parent[i] < i, or -1
// for a node on the root): a node on the root is at depth 1.
int32_t tree_depth(std::span<const int32_t> parent);

// Prompt lookup as a tree: the continuations (up to k tokens each) after up to `branches`
// earlier occurrences of the sequence's suffix, longest suffixes first and the most recent
// occurrence first within a length, merged where they start alike; at most `budget`
// nodes. The first branch is propose_ngram's chain, so branches = 1 is exactly it.
DraftTree propose_ngram_tree(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                             int32_t branches, size_t budget);

// How a sequence's draft length adapts to what it accepts: after a step that verified
// `drafted` tokens and accepted `accepted`, the next draft length and how many steps to
// skip drafting. All accepted: one more (up to the configured most); none of several in a
// row: stop drafting for a while, longer each time, since a rejected draft costs compute
// for nothing once the step is no longer bound by reading the weights.
struct DraftState {
  int32_t length = 0;    // the next draft's length (0: the configured most, on first use)
  int32_t misses = 0;    // consecutive steps that accepted none
  int32_t skip = 0;      // steps left without drafting
  int32_t unpaid = 0;    // consecutive times the cost gate found drafting would not pay
  bool probe = false;    // the next draft is a probe the cost gate lets through
  // Per-token acceptance, a running estimate: each step adds its accepted drafts to `hits`
  // and its first rejection (if any) to `trials` with them, both decaying by 7/8 a step.
  double hits = 0, trials = 0;
  void update(int32_t drafted, int32_t accepted, int32_t most);
  // The estimate with a prior of one accepted draft in two trials, so a new sequence
  // starts at 0.5 and a few steps move it.
  double acceptance() const { return (hits + 1.0) / (trials + 2.0); }
};

// What drafting k tokens is expected to buy, as plain decoding's tokens per unit of time:
// a step yields 1 + alpha + ... + alpha^k tokens on average (alpha: the chance each draft
// is accepted, the first rejection ending the run) and costs 1 + k * cost (cost: one
// draft token's time as a share of the target's step). Above 1, drafting pays.
double draft_speedup(double alpha, double cost, int32_t k);
// The draft length in 1..most with the best draft_speedup, or 0 when even the best is
// below `floor`. A floor under 1 keeps drafting through the noise of a few steps'
// acceptance: switching off a draft that pays (measured: the 0.5B drafting for the 1.5B
// on an open-ended prompt, 60% accepted, fell from 1.10x to 0.95x with a floor of 1)
// costs more than drafting a little past break-even.
int32_t paying_draft_length(double alpha, double cost, int32_t most, double floor = 1.0);

}  // namespace pagoda
