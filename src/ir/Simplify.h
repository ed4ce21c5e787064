// \file Simplify.h
// The integer simplifier: folds constants and removes identities in index arithmetic, so that
// printed IR stays readable after loop transformations (j0 * 64 + j1 instead of
// (j0 * 64 + j1) * 1 + 0), and writes a negated comparison of integers as the complementary
// comparison (!(j > i) as j <= i), the form the mask analyses read. It never changes the value of
// an expression: floor division and modulo are folded with floor semantics and never by a zero
// divisor.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "ir/Expr.h"

namespace kintsugi::ir {

Expr simplify(const Expr& e);
// The value of an integer expression made of literals only.
std::optional<int64_t> as_const_int(const Expr& e);
// True when a and b are provably equal integers.
bool provably_equal(const Expr& a, const Expr& b);
// True when `divisor` provably divides `e` (both constants, or e = divisor * k).
bool provably_divides(const Expr& divisor, const Expr& e);
// simplify, knowing that each variable of `extents` lies in [0, its extent): a floor division or
// modulo by that extent of q * extent + v folds to q or v (the group index and the member of a
// split by a size: (h0 * (HQ / HK) + h1) / (HQ / HK) = h0).
Expr simplify_in_ranges(const Expr& e, const std::map<std::string, Expr>& extents);

}  // namespace kintsugi::ir
