// \file Eval.h
// Numeric evaluation of ir::Expr in fp64 for the algebra engine's verification and its tests.
//
// Semantics: float casts are the identity (the algebra treats f16/bf16/f32 casts as value
// preserving), comparisons and logic give 0/1, select evaluates only the chosen branch (so a
// guarded repair such as select(m == m', 1, exp(m - m')) never evaluates the unsafe branch).
// Leaves (loads, variables) and any other node can be supplied by the `leaf` callback, which is
// asked first at every node: it returns true and sets *value to override the node.
#pragma once

#include <functional>

#include "ir/Expr.h"

namespace kintsugi::algebra {

using LeafFn = std::function<bool(const ir::Expr& node, double* value)>;

// Evaluates e; a Load or Var that `leaf` does not supply evaluates to NaN.
double eval_ir(const ir::Expr& e, const LeafFn& leaf);

}  // namespace kintsugi::algebra
