// \file Fragments.h
// The tensor-core layout of the CUDA back end (FragmentCodegen.cpp) and the maps it is built on
// (Fragments.cpp).
//
// A kernel whose dots all have R rows (the grid instance's row tile) runs on R / 16 warps of one
// m16 block, warp w owning rows [16 w, 16 w + 16), or, for R = 128, on four warps of two m16
// blocks, warp w owning rows [32 w, 32 w + 32) (its blocks take turns in every accumulator: a
// B fragment feeds two mma). A data tile [R, N] lives in the m16n8 accumulator layout of
// mma.sync (AccumulatorLayout below) in every operation on it: dots accumulate into it,
// elementwise work and row reductions run on it in place, and an f16-valued one is the A operand
// of the next dot without leaving registers. A row vector [R] holds the two rows a lane owns. The
// dots' other operands are tiles loaded from memory into shared memory by cp.async, stored with
// the XOR swizzle below and read with ldmatrix; loads that walk a pipelined loop (the K/V stream)
// are double-buffered. Values computable from indices alone (aranges, masks, constants) are never
// stored: each use spells them at the element's coordinates.
//
// The layouts are explicit maps from (warp, lane, slot) to tile coordinates; the lanes a row
// reduction shuffles with are derived from the map (row_shuffle_masks), and the swizzle is checked
// against the ldmatrix access pattern by tests (no two lanes of one 8-lane phase share a bank).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "target/cuda/KernelWriter.h"

namespace kintsugi::cuda {

// mma.sync m16n8k16's accumulator: slot s of lane l in warp w holds element
// (row(w, l, s), col(l, s)) of the warp's 16 x N strip (of each of its m-blocks' strips); a tile of
// N columns has N / 2 slots (N / 8 column blocks of 4 slots).
struct AccumulatorLayout {
  static constexpr int kRowsPerWarp = 16;
  static int row(int warp, int lane, int slot) {
    return kRowsPerWarp * warp + (lane >> 2) + 8 * ((slot >> 1) & 1);
  }
  static int col(int lane, int slot) { return 8 * (slot >> 2) + 2 * (lane & 3) + (slot & 1); }
};

// The lane xor distances that connect the lanes holding one row of an accumulator tile (the
// partners of a row reduction), derived from AccumulatorLayout.
std::vector<int> row_shuffle_masks();

// An integer expression spelled as C++ (each operator's result in parentheses): the swizzle maps
// below are defined once, as templates, and evaluated on int (their values, which the tests
// check against the ldmatrix access pattern) or on Code (the expressions the writer puts into a
// kernel), so that the emitted arithmetic is the map itself, not a second copy of its formula.
struct Code {
  std::string text;
  explicit Code(std::string t) : text(std::move(t)) {}
  explicit Code(int v) : text(std::to_string(v)) {}
};
inline Code operator^(const Code& a, const Code& b) {
  return Code("(" + a.text + " ^ " + b.text + ")");
}
inline Code operator&(const Code& a, const Code& b) {
  return Code("(" + a.text + " & " + b.text + ")");
}
inline Code operator|(const Code& a, const Code& b) {
  return Code("(" + a.text + " | " + b.text + ")");
}
inline Code operator>>(const Code& a, const Code& b) {
  return Code("(" + a.text + " >> " + b.text + ")");
}
inline Code operator~(const Code& a) {
  return Code("~" + a.text);
}

// The swizzle XORs a row's chunks with swizzle_term: (row >> swizzle_shift) & (swizzle_span - 1),
// swizzle_span(c) = gcd(c, 8) for c chunks a row, and 2^swizzle_shift = 8 / swizzle_span.
int swizzle_span(int chunks_per_row);
int swizzle_shift(int chunks_per_row);
template <class T>
T swizzle_term(const T& row, int shift, int span) {
  return (row >> T(shift)) & T(span - 1);
}
inline int swizzle_term(int row, int chunks_per_row) {
  return swizzle_term(row, swizzle_shift(chunks_per_row), swizzle_span(chunks_per_row));
}

// The 16-byte chunk where logical chunk `chunk` of row `row` of a shared-memory tile with
// `chunks_per_row` chunks a row is stored: XOR-swizzled (by the row's term) so that the eight
// rows one ldmatrix phase reads at the same logical chunk fall in eight distinct 16-byte bank
// groups.
template <class T>
T swizzled_chunk(const T& chunk, const T& term) {
  return chunk ^ term;
}
inline int swizzle_chunk(int row, int chunk, int chunks_per_row) {
  return swizzled_chunk(chunk, swizzle_term(row, chunks_per_row));
}

// The per-lane part of a swizzled ldmatrix address: a lane reading row `lane_row` (its row within
// a 16-row block, which starts at a multiple of 16) at chunk `c0 + lane_chunk` (c0 even) reads
// physical chunk (c0 & ~(span - 1)) + swizzled_lane_chunk(lane_row, lane_chunk, c0 & (span - 1)),
// span = gcd(chunks_per_row, 8): the XOR term `x` depends on the lane only, so the writer computes
// these once per lane and even residue (FragmentStaging.cpp, define_lane_offsets).
template <class T>
T lane_chunk_of(const T& residue, const T& chunk, const T& x) {
  return (residue ^ (x & ~T(1))) | ((chunk ^ x) & T(1));
}
inline int swizzled_lane_chunk(int lane_row, int lane_chunk, int residue, int chunks_per_row) {
  return lane_chunk_of(residue, lane_chunk, swizzle_term(lane_row, chunks_per_row));
}

// A writer for kernel `k` in the tensor-core layout, or null when the kernel has no dot of f16 or
// bf16 values or uses a value in a way the layout does not cover (the element-cyclic writer then
// takes it); then launch.not_tensor_cores says what the layout does not cover (empty without such
// a dot: a dot of f32 values stays in f32, as written). launch.not_warpgroup_mma says why a
// kernel for sm_90a runs its dots as mma.sync (FragmentWriter.h).
std::unique_ptr<KernelWriter> fragment_writer(const tile::TileProgram& p, const tile::Kernel& k,
                                              const CudaTarget& target,
                                              std::vector<std::string>& sites,
                                              KernelLaunch& launch);

}  // namespace kintsugi::cuda
