// KvLayout against the contract in src/kv/kv_layout.h: layers without windows make one
// group holding every layer; with windows, every group holds layers of one window only,
// all groups hold the same number of layers (the gcd of the kinds' counts), every layer
// has exactly one (group, slot) place; first_live_block keeps exactly the blocks some
// token from `pos` on can still see; max_blocks_for bounds what a sequence holds.
#include "kv/kv_layout.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

namespace pagoda {
namespace {

// Gemma 3's pattern: layer l is local unless l % 6 == 5.
std::vector<int32_t> gemma_windows(int32_t n_layer, int32_t window) {
  std::vector<int32_t> w(static_cast<size_t>(n_layer));
  for (int32_t l = 0; l < n_layer; ++l) w[l] = l % 6 == 5 ? 0 : window;
  return w;
}

// Every layer in one place, every group homogeneous and of layers_per_block layers.
void expect_consistent(const KvLayout& k, const std::vector<int32_t>& windows) {
  ASSERT_EQ(k.n_layer(), static_cast<int32_t>(windows.size()));
  std::set<std::pair<int32_t, int32_t>> places;
  std::vector<int32_t> per_group(static_cast<size_t>(k.n_groups()), 0);
  for (int32_t l = 0; l < k.n_layer(); ++l) {
    const int32_t g = k.group_of(l);
    ASSERT_GE(g, 0);
    ASSERT_LT(g, k.n_groups());
    EXPECT_GE(k.slot_of(l), 0);
    EXPECT_LT(k.slot_of(l), k.layers_per_block());
    EXPECT_EQ(k.window(g), windows[l]) << "layer " << l << " in a group of another window";
    EXPECT_TRUE(places.insert({g, k.slot_of(l)}).second) << "layer " << l << " shares its place";
    ++per_group[g];
  }
  for (int32_t g = 0; g < k.n_groups(); ++g) EXPECT_EQ(per_group[g], k.layers_per_block()) << "group " << g;
}

TEST(KvLayout, LayersWithoutWindowsShareOneGroup) {
  const KvLayout k(5);
  EXPECT_EQ(k.n_groups(), 1);
  EXPECT_EQ(k.layers_per_block(), 5);
  EXPECT_FALSE(k.has_windows());
  for (int32_t l = 0; l < 5; ++l) {
    EXPECT_EQ(k.group_of(l), 0);
    EXPECT_EQ(k.slot_of(l), l);
  }
  const std::vector<int32_t> none(5, 0);
  const KvLayout f = KvLayout::from_windows(none);
  EXPECT_EQ(f.n_groups(), 1);
  EXPECT_EQ(f.layers_per_block(), 5);
}

TEST(KvLayout, Gemma3_270mMakesSixGroupsOfThree) {
  const std::vector<int32_t> w = gemma_windows(18, 512);
  const KvLayout k = KvLayout::from_windows(w);
  EXPECT_EQ(k.layers_per_block(), 3);
  EXPECT_EQ(k.n_groups(), 6);
  EXPECT_TRUE(k.has_windows());
  expect_consistent(k, w);
  // The local kind comes first (layer 0 is local): groups 0-4 local, group 5 global.
  for (int32_t g = 0; g < 5; ++g) EXPECT_EQ(k.window(g), 512);
  EXPECT_EQ(k.window(5), 0);
  EXPECT_EQ(k.group_of(5), 5);
  EXPECT_EQ(k.group_of(11), 5);
  EXPECT_EQ(k.group_of(17), 5);
}

TEST(KvLayout, Gemma3_1bMakesGroupsOfTwo) {
  const std::vector<int32_t> w = gemma_windows(26, 512);  // 22 local, 4 global
  const KvLayout k = KvLayout::from_windows(w);
  EXPECT_EQ(k.layers_per_block(), 2);
  EXPECT_EQ(k.n_groups(), 13);
  expect_consistent(k, w);
}

TEST(KvLayout, CoprimeCountsGiveALayerPerGroup) {
  const std::vector<int32_t> w = gemma_windows(7, 8);  // 6 local, 1 global
  const KvLayout k = KvLayout::from_windows(w);
  EXPECT_EQ(k.layers_per_block(), 1);
  EXPECT_EQ(k.n_groups(), 7);
  expect_consistent(k, w);
}

TEST(KvLayout, AllWindowedLayersMakeOneWindowedGroup) {
  const std::vector<int32_t> w = {16, 16, 16};
  const KvLayout k = KvLayout::from_windows(w);
  EXPECT_EQ(k.n_groups(), 1);
  EXPECT_EQ(k.window(0), 16);
  expect_consistent(k, w);
}

TEST(KvLayout, TwoWindowKindsAndFullLayersEachGetGroups) {
  const std::vector<int32_t> w = {4, 0, 8, 4, 0, 8, 4, 8};  // 3 of 4, 2 full, 3 of 8: gcd 1
  const KvLayout k = KvLayout::from_windows(w);
  EXPECT_EQ(k.n_groups(), 8);
  expect_consistent(k, w);
}

TEST(KvLayout, FirstLiveBlockKeepsExactlyTheBlocksStillSeen) {
  const KvLayout k = KvLayout::from_windows(std::vector<int32_t>{0, 8});
  const int32_t g_full = k.group_of(0), g_win = k.group_of(1);
  for (int32_t bs : {1, 2, 4, 16})
    for (int32_t pos = 0; pos < 100; ++pos) {
      EXPECT_EQ(k.first_live_block(g_full, pos, bs), 0);
      const int32_t first = k.first_live_block(g_win, pos, bs);
      // The token at pos sees keys from pos - 7: every earlier block is wholly before
      // that, and the first kept one reaches it (later tokens see even less).
      const int32_t lo = std::max(0, pos - 8 + 1);
      EXPECT_LE(first * bs, lo) << "bs " << bs << " pos " << pos << ": a needed block would be released";
      EXPECT_GT((first + 1) * bs - 1, lo - 1) << "bs " << bs << " pos " << pos << ": a dead block is kept";
    }
}

TEST(KvLayout, MaxBlocksForCountsWholeLengthOnlyForFullGroups) {
  const KvLayout k = KvLayout::from_windows(std::vector<int32_t>{8, 0});
  // Full group: ceil(100 / 4) = 25; windowed: ceil((8 - 1 + 16) / 4) + 1 = 7.
  EXPECT_EQ(k.max_blocks_for(100, 4, 16), 25 + 7);
  // Short sequences hold no more in a windowed group than their length needs.
  EXPECT_EQ(k.max_blocks_for(6, 4, 16), 2 + 2);
  EXPECT_EQ(KvLayout(3).max_blocks_for(100, 4, 16), 25);
}

}  // namespace
}  // namespace pagoda
