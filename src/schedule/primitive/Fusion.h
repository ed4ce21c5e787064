// \file Fusion.h
// What rolling_update and split_k_update share.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "algebra/Repair.h"
#include "schedule/Schedule.h"

namespace kintsugi::schedule {

// True when the repair maps a contribution made while incomplete value `v` still held its
// producer's identity to zero once the producer moves on: h(1, identity, r') == 0 for finite r'
// (checked numerically at several r'). Such contributions (fully masked tiles) may then be
// replaced by the target's identity, so that a NaN computed from the identity never leaks.
bool repair_annihilates_identity(const algebra::RepairResult& repair,
                                 const algebra::IncompleteValue& v, double identity);

// For each fused block, the iteration variable that runs along the target's reduction axis: the
// target's `axis` itself, and in each producer (consumers first, `between` is producers-first)
// the variable it stores at where a fused consumer reads it with that consumer's axis variable.
std::map<std::string, std::string> axis_iterations(const ir::LoopProgram& program,
                                                   const std::string& target,
                                                   const std::string& axis,
                                                   const std::vector<std::string>& between);

}  // namespace kintsugi::schedule
