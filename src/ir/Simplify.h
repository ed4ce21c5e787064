// \file Simplify.h
// The integer simplifier: folds constants and removes identities in index arithmetic, so that
// printed IR stays readable after loop transformations (j0 * 64 + j1 instead of
// (j0 * 64 + j1) * 1 + 0). It never changes the value of an expression: floor division and
// modulo are folded with floor semantics and never by a zero divisor.
#pragma once

#include <optional>

#include "ir/Expr.h"

namespace kintsugi::ir {

Expr simplify(const Expr& e);
// The value of an integer expression made of literals only.
std::optional<int64_t> as_const_int(const Expr& e);
// True when a and b are provably equal integers.
bool provably_equal(const Expr& a, const Expr& b);
// True when `divisor` provably divides `e` (both constants, or e = divisor * k).
bool provably_divides(const Expr& divisor, const Expr& e);

}  // namespace kintsugi::ir
