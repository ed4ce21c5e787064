// \file MergeAxes.h
// The loop rewrite that merge_reduce_axes and merge_map_axes share: iteration variables of a
// block, each bound to one of the block's innermost loops (outermost first), become one of the
// product of their extents, read back as quotients and remainders of it.
#pragma once

#include <string>
#include <vector>

#include "schedule/Schedule.h"

namespace kintsugi::schedule {

struct MergedAxes {
  ir::LoopProgram program;  // with the merged nest in place
  std::string name;         // the merged loop and iteration variable
  ir::Expr extent;          // the product of the extents
  // Each merged iteration variable as an expression of the merged one, outermost first.
  std::vector<ir::Expr> values;
};

// Merges iterations `iters` of `block` (indices into its iteration variables, in the order of its
// innermost loops, all of one kind); throws ScheduleError (naming `primitive`) when they are not
// bound to the innermost loops from 0 over their extents.
MergedAxes merge_axes(const Schedule& s, const std::string& block, const std::vector<size_t>& iters,
                      const std::string& primitive);

}  // namespace kintsugi::schedule
