#include "kv/kv_layout.h"

#include <algorithm>
#include <numeric>

namespace pagoda {

KvLayout::KvLayout(int32_t n_layer)
    : group_of_(static_cast<size_t>(std::max(0, n_layer)), 0), slot_of_(static_cast<size_t>(std::max(0, n_layer))) {
  if (n_layer <= 0) return;
  windows_.push_back(0);
  std::iota(slot_of_.begin(), slot_of_.end(), 0);
  layers_per_block_ = n_layer;
}

KvLayout KvLayout::from_windows(std::span<const int32_t> windows) {
  const int32_t n = static_cast<int32_t>(windows.size());
  KvLayout out(n);
  if (n == 0) return out;
  std::vector<int32_t> kinds;  // distinct windows, in order of first appearance
  std::vector<int32_t> count;
  for (int32_t w : windows) {
    const int32_t v = std::max(0, w);
    const auto it = std::find(kinds.begin(), kinds.end(), v);
    if (it == kinds.end()) {
      kinds.push_back(v);
      count.push_back(1);
    } else {
      ++count[static_cast<size_t>(it - kinds.begin())];
    }
  }
  if (kinds.size() == 1 && kinds[0] == 0) return out;
  int32_t g = 0;
  for (int32_t c : count) g = std::gcd(g, c);
  out.layers_per_block_ = g;
  out.windows_.clear();
  // Group ids: kind by kind, each kind's layers in order, g at a time.
  int32_t first_group = 0;
  for (size_t k = 0; k < kinds.size(); ++k) {
    int32_t seen = 0;
    for (int32_t l = 0; l < n; ++l) {
      if (std::max(0, windows[l]) != kinds[k]) continue;
      out.group_of_[l] = first_group + seen / g;
      out.slot_of_[l] = seen % g;
      ++seen;
    }
    for (int32_t i = 0; i < count[k] / g; ++i) out.windows_.push_back(kinds[k]);
    first_group += count[k] / g;
  }
  return out;
}

bool KvLayout::has_windows() const {
  return std::any_of(windows_.begin(), windows_.end(), [](int32_t w) { return w > 0; });
}

int32_t KvLayout::first_live_block(int32_t g, int32_t pos, int32_t block_size) const {
  const int32_t w = windows_[g];
  if (w <= 0 || pos < w) return 0;
  return (pos - w + 1) / block_size;
}

int64_t KvLayout::max_blocks_for(int64_t len, int32_t block_size, int32_t chunk) const {
  const int64_t all = (len + block_size - 1) / block_size;
  int64_t n = 0;
  for (int32_t w : windows_) {
    // A piece of `chunk` tokens at p reads back to p - w + 1 and writes up to p + chunk - 1:
    // w - 1 + chunk positions, over at most one more block than they fill.
    n += w <= 0 ? all : std::min<int64_t>(all, (int64_t{w} - 1 + chunk + block_size - 1) / block_size + 1);
  }
  return n;
}

int64_t KvLayout::longest_fitting(int64_t blocks, int32_t block_size, int32_t chunk, int64_t cap) const {
  // max_blocks_for grows with the length: the last length that fits, by bisection.
  int64_t lo = 0, hi = cap;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (max_blocks_for(mid, block_size, chunk) <= blocks) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace pagoda
