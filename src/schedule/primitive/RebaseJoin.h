// \file RebaseJoin.h
// What rebase_join (RebaseJoin.cpp) and the scheduler that chooses it share: recognising a join.
#pragma once

#include <optional>
#include <string>

#include "ir/Stmt.h"

namespace kintsugi::schedule {

// A join's operand that rebase_join can re-base onto: `join` (the join's buffer) is written by an
// elementwise block whose value is a tree of max (or min) over operands, one of which is a load
// of the reduction `part_load` reads, a reduction by the same max (or min).
struct JoinPart {
  std::string join;
  ir::Expr part_load;  // in the join's iteration variables
  ir::Reducer reducer;
};
// The join of `part` that block `join` computes, if it is one.
std::optional<JoinPart> join_part(const ir::LoopProgram& p, const ir::StmtNode& join,
                                  const std::string& part);

}  // namespace kintsugi::schedule
