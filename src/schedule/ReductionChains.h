// \file ReductionChains.h
// Finds the chains of reductions that fusion must repair, and asks the algebra engine for each
// repair function.
//
// A *target* is a reduction block with one reduction axis. Its *producers* are earlier reduction
// blocks over an axis of the same extent whose result the target reads (directly or through
// elementwise blocks) without indexing it by the target's axis: fused under the shared axis, the
// target would see their running values. Elementwise blocks whose inputs reach a producer are
// inlined into the target's term; the others stay opaque loads (complete values), as in Neptune
// (masks, ALiBi, soft-capping). Nothing here knows which operator it is looking at.
#pragma once

#include <string>
#include <vector>

#include "algebra/Repair.h"
#include "ir/Stmt.h"

namespace kintsugi::schedule {

struct ReductionChain {
  std::string target;                  // the target block (= buffer) name
  ir::Reducer reducer;                 // its reducer
  std::string axis;                    // its reduction axis
  ir::Expr extent;                     // the axis extent
  ir::Expr term;                       // g after inlining the producers' elementwise consumers
  std::vector<std::string> producers;  // incomplete producer buffers (empty: nothing to repair)
  algebra::RepairResult repair;        // Identity when there is no producer
};

// Every reduction block of the program with one reduction axis, in program order.
std::vector<ReductionChain> find_reduction_chains(const ir::LoopProgram& program);

// Human-readable listing for `kintsugi lower --print repairs`.
std::string format_reduction_chains(const ir::LoopProgram& program,
                                    const std::vector<ReductionChain>& chains);

}  // namespace kintsugi::schedule
