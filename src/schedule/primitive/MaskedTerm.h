// \file MaskedTerm.h
// The value a reduction's term takes on elements a mask hides, evaluated numerically: shared by
// propagate_mask (a skipped tile must contribute its reductions' identities) and the identity
// guards of rolling_update and split_k_update (a dropped tile or chunk must have contributed
// them). The term is given with the masked values already replaced by the mask's constant.
#pragma once

#include <optional>

#include "algebra/Eval.h"
#include "ir/Expr.h"

namespace kintsugi::schedule {

// The mask a block's stored value applies, select(cond, v, K) or select(cond, K, v) with a
// constant K, or the same applied by arithmetic (v + select(cond, -inf, 0), v - select(cond, inf,
// 0), v * select(cond, 0, 1), which give K wherever v is finite): the condition under which v is
// kept (!cond for the forms that name the masked branch first, simplified) and K; nullopt for
// any other value.
struct ConstantMask {
  ir::Expr kept;
  double masked;
  ir::Expr value;           // v, the value kept
  bool arithmetic = false;  // applied by arithmetic, not by a select
};
std::optional<ConstantMask> constant_mask(const ir::Expr& value);

// Evaluates `term` (algebra::eval_ir, fp64) in 8 seeded trials, every load and variable that
// `fixed` does not supply at a random finite value (the same value for the same load within a
// trial): the first value that is not `expected` (NaN is not NaN here), or nullopt when every
// trial gives `expected`.
std::optional<double> masked_term_differs(const ir::Expr& term, double expected,
                                          const algebra::LeafFn& fixed = nullptr);

// Whether some choice of branch at each select of `term` (conditions taken as free: index
// predicates a chunk can satisfy throughout) makes every trial of masked_term_differs give
// `expected`. Up to 8 selects are chosen freely; the rest keep their conditions.
bool masked_term_can_be(const ir::Expr& term, double expected);

// The same trials: the first value of `term` that is infinite or NaN, or nullopt.
std::optional<double> masked_term_nonfinite(const ir::Expr& term);

}  // namespace kintsugi::schedule
