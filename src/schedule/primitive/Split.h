// \file Split.h
// Strip-mining shared by split and distribute: the pieces of `for v in [min, min + E)` split
// by a factor f into an outer loop of ceil(E / f) iterations around an inner one of f. The factor
// is an integer expression: a constant, or an expression over dims (a group of query heads,
// HQ / HK), whose value is positive wherever the loop runs at all.
#pragma once

#include "schedule/Schedule.h"

namespace kintsugi::schedule {

struct StripMine {
  std::string outer, inner;  // fresh loop variables
  ir::Expr outer_extent;     // ceil(E / f)
  // The loop's body with v = min + outer * f + inner substituted, its blocks predicated on
  // outer * f + inner < E when f may not divide E.
  ir::Stmt body;
};

StripMine strip_mine(const Schedule& s, const ir::StmtNode& loop, const ir::Expr& factor,
                     const std::string& primitive);

}  // namespace kintsugi::schedule
