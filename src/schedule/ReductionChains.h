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

#include <map>
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

// The sign facts a repair request starts from (algebra::RepairRequest::facts): params by their
// values, dims positive, and every float buffer whose writers all store values of a sign the
// algebra proves (algebra::sign_fact), in program order: a reduction's sign is its term's (a sum
// or a max of positive terms over a non-empty axis is positive, as a softmax denominator is);
// a writer that reads its own buffer (a scan, a repaired write-back) is checked assuming the
// sign it is to establish; initial values (a sum's 0) are not final values and do not count.
std::map<std::string, std::string> repair_facts(const ir::LoopProgram& program);

// Every reduction block of the program with one reduction axis, in program order.
std::vector<ReductionChain> find_reduction_chains(const ir::LoopProgram& program);

// A reduction over several axes that reads the running value of an earlier reduction over axes
// of the same extents (group normalisation's variance over (c, p) after its mean). Fusion follows
// one reduced axis: such a chain is not fused (its reductions run one after another).
struct SeveralAxisChain {
  std::string target;
  std::vector<std::string> axes;       // the target's reduced axes
  std::vector<std::string> producers;  // the earlier reductions it reads, not indexed by them
};
std::vector<SeveralAxisChain> several_axis_chains(const ir::LoopProgram& program);

// Human-readable listing for `kintsugi lower --print repairs`.
std::string format_reduction_chains(const ir::LoopProgram& program,
                                    const std::vector<ReductionChain>& chains);

}  // namespace kintsugi::schedule
