// \file Fragments.cpp
// The maps of Fragments.h: the row-reduction shuffle partners derived from the accumulator
// layout, and the XOR swizzle of shared-memory tiles and its per-lane part.
//
// Invariant established: each function computes the map Fragments.h documents for it.
#include <numeric>

#include "target/cuda/Fragments.h"

namespace kintsugi::cuda {

std::vector<int> row_shuffle_masks() {
  // A lane bit belongs to the row reduction when flipping it keeps every slot's row and moves its
  // column.
  std::vector<int> masks;
  for (int bit = 1; bit < 32; bit <<= 1) {
    bool same_row = true, other_col = true;
    for (int lane = 0; lane < 32; ++lane)
      for (int slot = 0; slot < 4; ++slot) {
        same_row = same_row && AccumulatorLayout::row(0, lane, slot) ==
                                   AccumulatorLayout::row(0, lane ^ bit, slot);
        other_col = other_col &&
                    AccumulatorLayout::col(lane, slot) != AccumulatorLayout::col(lane ^ bit, slot);
      }
    if (same_row && other_col) masks.push_back(bit);
  }
  return masks;
}

// What a row's chunks are XORed with: (row >> shift) & (span - 1), span = gcd(chunks a row, 8)
// and 2^shift = 8 / span. Consecutive rows start 16-byte bank groups apart by chunks a row
// (mod 8), which visits 8 / span distinct starts before it repeats; XORing the low chunk bits with
// the repetition count makes 8 consecutive rows at one logical chunk cover the 8 bank groups.
// (Rows shorter than 128 bytes: the term is the index of the 128-byte line a row is in; a head
// size of 96, 12 chunks: rows alternate between two starts, and pairs of rows get the XOR terms
// 0-3.)
int swizzle_span(int chunks_per_row) {
  return std::gcd(chunks_per_row, 8);
}
int swizzle_shift(int chunks_per_row) {
  int shift = 0;
  while ((swizzle_span(chunks_per_row) << shift) < 8) ++shift;
  return shift;
}

}  // namespace kintsugi::cuda
