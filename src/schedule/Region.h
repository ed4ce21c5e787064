// \file Region.h
// Region inference: which part of a buffer a subtree of the loop IR reads or writes, as a box
// whose bounds are expressions over the loops outside the subtree.
//
// Index expressions are first rewritten in loop terms (block iteration variables replaced by
// their bindings), then bounded by interval arithmetic over the loops that vary inside the
// subtree. Bounds are exact for the affine indices that tiling produces (j0 * 64 + j1 gives
// [j0 * 64, j0 * 64 + 63]); an index the arithmetic cannot bound gives the whole dimension.
// Boxes are not clipped to the buffer: primitives guard the tails with block predicates.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/Stmt.h"

namespace kintsugi::schedule {

struct Range {
  ir::Expr min;
  ir::Expr extent;
};

// Inclusive bounds [lo, hi] of an integer expression; `ok` is false when they are unknown.
struct Interval {
  ir::Expr lo, hi;
  bool ok = false;
  bool is_point() const;
};

// Bounds of e when the variables in `varying` range over their ranges and every other variable
// is fixed.
Interval bound(const ir::Expr& e, const std::map<std::string, Range>& varying);

// An index of a block access in terms of loop variables.
ir::Expr in_loop_terms(const ir::StmtNode& block, const ir::Expr& index);

// The box of `buffer` accessed by the blocks under `s` (reads when `writes` is false), with
// the loops inside `s` (and s itself, if it is a loop) varying. Dimensions that cannot be
// bounded span the buffer's whole extent. Returns false when nothing under s touches the buffer.
bool access_region(const ir::Stmt& s, const ir::LoopProgram& program, const std::string& buffer,
                   bool writes, std::vector<Range>* region);

// The tile of a reduction axis that one iteration of `loop` covers: some access under the loop
// spans [v * F, v * F + F) of a dimension of extent `axis_extent` (v the loop variable) and the
// loop runs ceil(axis_extent / F) times, so the tiles partition the axis exactly.
bool find_axis_tile(const ir::LoopProgram& program, const ir::StmtNode& loop,
                    const ir::Expr& axis_extent, Range* tile);

}  // namespace kintsugi::schedule
