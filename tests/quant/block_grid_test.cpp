// The grid read back from a round-to-nearest block must describe that block exactly:
// re-encoding RTN's own levels gives RTN's bytes, and every level decodes (through the
// format's dequantizer) to scale * level + offset.
#include "quant/block_grid.h"

#include <gtest/gtest.h>

#include "quant_test_util.h"

namespace pagoda {
namespace {

using testing::make_row;
using testing::Shape;

const DType kGridTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

TEST(BlockGrid, NearestLevelsOfTheSourceReencodeToTheRoundToNearestBlock) {
  for (DType t : kGridTypes) {
    ASSERT_TRUE(has_block_grid(t));
    for (Shape shape : {Shape::kGaussian, Shape::kUniform, Shape::kPositive, Shape::kOutliers}) {
      const int64_t bs = dtype_info(t).block_size;
      const std::vector<float> x = make_row(shape, bs, 17);
      BlockGrid g;
      make_block_grid(t, x.data(), g);
      ASSERT_EQ(g.n, bs);
      int levels[BlockGrid::kMaxValues];
      for (int e = 0; e < g.n; ++e) levels[e] = nearest_level(g, e, x[static_cast<size_t>(e)]);
      std::vector<uint8_t> rtn(row_bytes(t, bs)), ours(row_bytes(t, bs));
      quantize_row(t, x.data(), rtn.data(), bs);
      encode_block_levels(g, levels, ours.data());
      testing::expect_grid_rounding_matches_rtn(t, x.data(), bs, rtn, ours,
                                                std::string(dtype_name(t)) + " " + testing::shape_name(shape));
    }
  }
}

TEST(BlockGrid, EveryLevelDecodesToItsGridValue) {
  for (DType t : kGridTypes) {
    const int64_t bs = dtype_info(t).block_size;
    const std::vector<float> x = make_row(Shape::kGaussian, bs, 5);
    BlockGrid g;
    make_block_grid(t, x.data(), g);
    for (int level = g.level_min; level <= g.level_max; ++level) {
      std::vector<int> levels(static_cast<size_t>(bs), level);
      std::vector<uint8_t> block(row_bytes(t, bs));
      encode_block_levels(g, levels.data(), block.data());
      std::vector<float> y(static_cast<size_t>(bs));
      dequantize_row(t, block.data(), y.data(), bs);
      for (int e = 0; e < g.n; ++e)
        ASSERT_NEAR(y[static_cast<size_t>(e)], grid_value(g, e, level), 1e-6f * (1.0f + std::fabs(y[static_cast<size_t>(e)])))
            << dtype_name(t) << " level " << level << " value " << e;
    }
  }
}

TEST(BlockGrid, LevelsAreClampedToTheFormatsRange) {
  const std::vector<float> x = make_row(Shape::kGaussian, 256, 3);
  BlockGrid g;
  make_block_grid(DType::Q4_K, x.data(), g);
  EXPECT_EQ(nearest_level(g, 0, 1e6f), 15);
  EXPECT_EQ(nearest_level(g, 0, -1e6f), 0);
  EXPECT_FALSE(has_block_grid(DType::F16));
  EXPECT_FALSE(has_block_grid(DType::BF16));
}

}  // namespace
}  // namespace pagoda
