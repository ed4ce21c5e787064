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

// The tile of the reduction axis `axis` of block `target` that one iteration of `loop` covers,
// as a range of the axis variable: the loop runs ceil(extent / F) times and either
//   - some access under the loop spans [v * F, v * F + F) of a dimension of the axis' extent (v
//     the loop variable): the tiles partition the axis; or
//   - the target reads a buffer at `offset + axis` in some dimension (offset free of the axis:
//     a split-K chunk's partial reads its chunk's elements, j0 * C + a), and an access under the
//     loop spans [offset + v * F, offset + v * F + F) of it: the tiles partition the chunk; or,
//     where no access does, a block under the loop reduces over an axis of the same extent that
//     spans [v * F, v * F + F) (an axis no buffer has as a dimension: a flattened index read at
//     (r / W, r % W)), or is that axis' split-K partial, a chunk v of F elements.
// `of_chunk` (optional) tells which: the tiles of a chunk that the target's predicate cuts
// short (the last chunk) may hold no element at all.
bool find_axis_tile(const ir::LoopProgram& program, const ir::StmtNode& loop,
                    const ir::StmtNode& target, const ir::IterVar& axis, Range* tile,
                    bool* of_chunk = nullptr);

}  // namespace kintsugi::schedule
