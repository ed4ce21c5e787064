// \file cuda_layout_test.cpp
// The tensor-core layout's maps (target/cuda/Fragments.h): the accumulator layout covers a warp's
// 16 x 8 block exactly once per slot set, the row-reduction partners derived from it are the
// lanes of one row, the shared-memory swizzle makes every 8-lane ldmatrix phase hit eight
// distinct 16-byte bank groups for the tile widths the writer stages, and the per-lane address
// offsets the writer computes once give the swizzled chunk of every block and chunk step.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "target/cuda/Fragments.h"

using namespace kintsugi::cuda;

TEST(CudaLayout, AccumulatorCoversTheBlockOnce) {
  std::set<std::pair<int, int>> seen;
  for (int lane = 0; lane < 32; ++lane)
    for (int slot = 0; slot < 4; ++slot)
      seen.insert({AccumulatorLayout::row(0, lane, slot), AccumulatorLayout::col(lane, slot)});
  EXPECT_EQ(seen.size(), 128u);
  for (auto [r, c] : seen) {
    EXPECT_LT(r, 16);
    EXPECT_LT(c, 8);
  }
  EXPECT_EQ(AccumulatorLayout::row(3, 0, 0), 48);  // warp w owns rows [16 w, 16 w + 16)
}

TEST(CudaLayout, RowPartnersAreTheQuad) {
  EXPECT_EQ(row_shuffle_masks(), (std::vector<int>{1, 2}));
  // The partners of a lane hold every column of its rows in each 8-column block.
  for (int lane = 0; lane < 32; ++lane) {
    std::set<int> cols;
    for (int m = 0; m < 4; ++m)
      for (int slot = 0; slot < 2; ++slot) cols.insert(AccumulatorLayout::col(lane ^ m, slot));
    EXPECT_EQ(cols.size(), 8u) << lane;
  }
}

// Every even number of 16-byte chunks a row that a head size up to 256 gives (2: 16 columns of
// f16; 6: 48; 12: 96; 24: 192).
const std::vector<int> kChunksPerRow = {2, 4, 6, 8, 12, 16, 24, 32};

TEST(CudaLayout, SwizzleIsConflictFreeForLdmatrixPhases) {
  for (int chunks_per_row : kChunksPerRow) {
    // One ldmatrix phase: 8 consecutive rows (aligned to 8) at one logical chunk.
    for (int row0 = 0; row0 < 64; row0 += 8)
      for (int chunk = 0; chunk < chunks_per_row; ++chunk) {
        std::set<int> groups;  // 16-byte bank group = byte address / 16 mod 8
        for (int r = row0; r < row0 + 8; ++r) {
          int physical = swizzle_chunk(r, chunk, chunks_per_row);
          ASSERT_GE(physical, 0);
          ASSERT_LT(physical, chunks_per_row);
          groups.insert((r * chunks_per_row + physical) % 8);
        }
        EXPECT_EQ(groups.size(), 8u)
            << chunks_per_row << " chunks a row, rows " << row0 << ", chunk " << chunk;
      }
    // A bijection within each row: every chunk has its own place.
    for (int r = 0; r < 16; ++r) {
      std::set<int> places;
      for (int c = 0; c < chunks_per_row; ++c) places.insert(swizzle_chunk(r, c, chunks_per_row));
      EXPECT_EQ(places.size(), static_cast<size_t>(chunks_per_row));
    }
  }
}

TEST(CudaLayout, LaneOffsetsGiveTheSwizzledChunkOfEveryBlock) {
  for (int chunks_per_row : kChunksPerRow) {
    int span = std::gcd(chunks_per_row, 8);
    for (int lane_row = 0; lane_row < 16; ++lane_row)
      for (int lane_chunk = 0; lane_chunk < 2; ++lane_chunk)
        for (int block = 0; block < 64; block += 16)
          for (int c0 = 0; c0 + 1 < chunks_per_row; c0 += 2) {
            int expected = swizzle_chunk(block + lane_row, c0 + lane_chunk, chunks_per_row);
            int got = (c0 & ~(span - 1)) +
                      swizzled_lane_chunk(lane_row, lane_chunk, c0 & (span - 1), chunks_per_row);
            EXPECT_EQ(got, expected)
                << chunks_per_row << " chunks a row, lane row " << lane_row << ", lane chunk "
                << lane_chunk << ", block " << block << ", c0 " << c0;
          }
  }
}
