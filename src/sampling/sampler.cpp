#include "sampling/sampler.h"

namespace pagoda {
namespace {

uint64_t resolve_seed(uint64_t seed) {
  if (seed != kRandomSeed) return seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// Uniform in [0, 1) from the top 53 bits. std::uniform_real_distribution would do, but
// its algorithm differs between standard libraries, and a seed should give the same
// tokens wherever the engine is built.
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

Sampler::Sampler(const SamplingParams& params)
    : params_(params), seed_(resolve_seed(params.seed)), rng_(seed_) {}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  return sample(logits, history, scratch_);
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history, SamplerScratch& scratch) {
  const Survivors survivors = run_chain(logits, history, params_, scratch);
  if (survivors.decided) return *survivors.decided;
  return draw_token(survivors, logits, params_.temperature, uniform01(rng_), scratch);
}

int32_t Sampler::sample_draft(std::span<float> logits, std::span<const int32_t> history, int32_t draft,
                              SamplerScratch& scratch, bool* accepted) {
  const Survivors survivors = run_chain(logits, history, params_, scratch);
  if (survivors.decided) {
    *accepted = *survivors.decided == draft;
    return *survivors.decided;
  }
  const std::vector<std::pair<int32_t, float>> p = survivor_probabilities(survivors, logits, params_.temperature, scratch);
  double p_draft = 0;
  for (const auto& [tok, prob] : p)
    if (tok == draft) p_draft = prob;
  if (uniform01(rng_) < p_draft) {
    *accepted = true;
    return draft;
  }
  *accepted = false;
  // The residual max(0, p - q) with q one-hot at the draft: p without it.
  double rest = 0;
  for (const auto& [tok, prob] : p)
    if (tok != draft) rest += prob;
  const double u = uniform01(rng_) * rest;
  double acc = 0;
  int32_t last = -1;
  for (const auto& [tok, prob] : p) {
    if (tok == draft) continue;
    acc += prob;
    last = tok;
    if (u < acc) return tok;
  }
  return last >= 0 ? last : draft;  // rounding left u at the very end
}

std::vector<std::pair<int32_t, float>> Sampler::distribution(
    std::span<float> logits, std::span<const int32_t> history) const {
  // Own scratch: this is a diagnostic, and a const Sampler must stay untouched.
  SamplerScratch scratch;
  const Survivors survivors = run_chain(logits, history, params_, scratch);
  return survivor_probabilities(survivors, logits, params_.temperature, scratch);
}

}  // namespace pagoda
