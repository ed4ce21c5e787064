// \file MergeReduceAxes.cpp
// merge_reduce_axes(block): a reduction over several axes, each bound to one of the innermost
// loops around the block (outermost first), becomes a reduction over one axis of the product of
// their extents; the block reads the axes it had as quotients and remainders of the new one:
//
//   for h in [0, H): for d in [0, D):                 for h_d in [0, H * D):
//     block s(reduce h:H, reduce d:D):          =>      block s(reduce h_d:H * D):
//       s = s + X[b, h, d]                                s = s + X[b, h_d / D, h_d % D]
//
// A chain of reductions over the same several axes (a group norm's mean and variance over
// (c, p)) then has one reduced axis, which fusion follows; where the tiles of that axis divide the
// innermost extent, the tile passes read X a run at a time (tile::within_run).
//
// Invariant: the block runs once for each point of the axes, in the order the loops ran them (h
// outer, d inner: h_d = h * D + d), so a reduction in any order gives what it gave.
#include "schedule/Analysis.h"
#include "schedule/primitive/MergeAxes.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::string Schedule::merge_reduce_axes(const std::string& block) {
  const std::string P = "merge_reduce_axes";
  const ir::StmtNode& b = *find_block(program_.body, block, P).back();
  std::vector<size_t> axes;  // the block's reduce iterations, in the order of its loops
  for (size_t k = 0; k < b.iters.size(); ++k)
    if (b.iters[k].kind == ir::IterKind::Reduce) axes.push_back(k);
  if (axes.size() < 2)
    throw ScheduleError(P, "block '" + block + "' does not reduce over several axes");
  MergedAxes merged = merge_axes(*this, block, axes, P);
  commit(std::move(merged.program), {{"primitive", P}, {"block", block}});
  return merged.name;
}

void replay_merge_reduce_axes(Schedule& s, const nlohmann::json& j) {
  s.merge_reduce_axes(j.at("block").get<std::string>());
}

}  // namespace kintsugi::schedule
