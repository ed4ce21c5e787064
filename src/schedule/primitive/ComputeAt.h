// \file ComputeAt.h
// What compute_at and reverse_compute_at share: rebuilding a block's loop nest over a box of its
// iteration space.
#pragma once

#include <map>
#include <string>

#include "schedule/Analysis.h"
#include "schedule/Region.h"
#include "schedule/Schedule.h"

namespace kintsugi::schedule {

// A loop nest that runs `block` over `box` (iteration variable -> range of values) and over the
// full domain of its other iteration variables. Ranges of one value need no loop; the others get
// fresh loops. Every restricted variable is guarded by a predicate keeping it inside its domain.
ir::Stmt nest_over_box(const Schedule& s, const ir::StmtNode& block,
                       const std::map<std::string, Range>& box);

// The program with `moved` placed at the start (`at_start`) or the end of the loop at the end of
// `loop_path`, and the root-level nest `old_nest` (the block's former nest) removed.
ir::LoopProgram move_nest_into_loop(const ir::LoopProgram& program, const StmtPath& loop_path,
                                    const ir::Stmt& moved, bool at_start, size_t old_nest);

// The index of the root-level statement on a path from the root.
size_t root_index(const ir::LoopProgram& p, const StmtPath& path);

// The index of the root-level statement that holds `block`, checking that it holds nothing else.
size_t sole_nest_of(const ir::LoopProgram& p, const std::string& block,
                    const std::string& primitive);

}  // namespace kintsugi::schedule
