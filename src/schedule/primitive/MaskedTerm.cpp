// \file MaskedTerm.cpp
// The value of a reduction's term on masked elements (see MaskedTerm.h).
#include "schedule/primitive/MaskedTerm.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"

namespace kintsugi::schedule {

namespace {

// The first trial value of `term` for which `stop` holds.
std::optional<double> first_trial(const ir::Expr& term, const algebra::LeafFn& fixed,
                                  const std::function<bool(double)>& stop) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> dist(-4.0, 4.0);
  // Sizes are positive: a term that scales by sqrt(f32(D)) is not NaN at any of them.
  std::uniform_int_distribution<int> size(1, 64);
  for (int trial = 0; trial < 8; ++trial) {
    std::map<std::string, double> values;
    double v = algebra::eval_ir(term, [&](const ir::Expr& n, double* out) {
      if (fixed && fixed(n, out)) return true;
      if (n->op != ir::Op::Load && n->op != ir::Op::Var) return false;
      std::string key = ir::to_string(n);
      const bool dim = n->op == ir::Op::Var && n->var_kind == ir::VarKind::Dim;
      if (!values.count(key)) values[key] = dim ? size(rng) : dist(rng);
      *out = values[key];
      return true;
    });
    if (stop(v)) return v;
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> masked_term_differs(const ir::Expr& term, double expected,
                                          const algebra::LeafFn& fixed) {
  return first_trial(term, fixed, [&](double v) { return !(v == expected); });
}

bool masked_term_can_be(const ir::Expr& term, double expected) {
  int selects = 0;
  ir::visit(term, [&](const ir::Expr& n) {
    selects += n->op == ir::Op::Select;
    return true;
  });
  const int free = std::min(selects, 8);
  for (unsigned choice = 0; choice < (1u << free); ++choice) {
    int index = 0;  // selects in the post-order mutate visits them, the same for every choice
    ir::Expr branch = ir::mutate(term, [&](const ir::Expr& n) {
      if (n->op != ir::Op::Select) return n;
      int i = index++;
      if (i >= free) return n;
      return (choice >> i) & 1u ? n->args[2] : n->args[1];
    });
    if (!masked_term_differs(branch, expected)) return true;
  }
  return false;
}

std::optional<double> masked_term_nonfinite(const ir::Expr& term) {
  return first_trial(term, nullptr, [](double v) { return !std::isfinite(v); });
}

namespace {

// select(c, a, b) with constant a and b where one of them is `neutral`: the mask whose kept
// elements take `neutral` (the other branch is the masked constant).
std::optional<ConstantMask> neutral_select(const ir::Expr& sel, double neutral) {
  if (sel->op != ir::Op::Select || sel->args[1]->op != ir::Op::FloatImm ||
      sel->args[2]->op != ir::Op::FloatImm)
    return std::nullopt;
  if (sel->args[2]->float_value == neutral)
    return ConstantMask{ir::simplify(ir::make_unary(ir::Op::Not, sel->args[0])),
                        sel->args[1]->float_value, nullptr, true};
  if (sel->args[1]->float_value == neutral)
    return ConstantMask{sel->args[0], sel->args[2]->float_value, nullptr, true};
  return std::nullopt;
}

}  // namespace

std::optional<ConstantMask> constant_mask(const ir::Expr& value) {
  if (!value) return std::nullopt;
  if (value->op == ir::Op::Select) {
    if (value->args[2]->op == ir::Op::FloatImm)
      return ConstantMask{value->args[0], value->args[2]->float_value, value->args[1]};
    if (value->args[1]->op == ir::Op::FloatImm)
      return ConstantMask{ir::simplify(ir::make_unary(ir::Op::Not, value->args[0])),
                          value->args[1]->float_value, value->args[2]};
    return std::nullopt;
  }
  // A mask applied by arithmetic: v + select(c, -inf, 0) (an additive mask, as PyTorch's
  // attn_mask), v - select(c, inf, 0), v * select(c, 0, 1). On a finite v the masked elements
  // are the absorbing constant whatever v is, and the kept ones are v.
  const bool additive = value->op == ir::Op::Add || value->op == ir::Op::Sub;
  if (!additive && value->op != ir::Op::Mul) return std::nullopt;
  const double neutral = additive ? 0.0 : 1.0;
  for (int side : {1, 0}) {
    if (side == 0 && value->op == ir::Op::Sub) continue;  // -inf - v is not a mask of v
    std::optional<ConstantMask> m = neutral_select(value->args[static_cast<size_t>(side)], neutral);
    if (!m) continue;
    if (additive ? !std::isinf(m->masked) : m->masked != 0.0) return std::nullopt;
    if (value->op == ir::Op::Sub) m->masked = -m->masked;
    m->value = value->args[static_cast<size_t>(1 - side)];
    return m;
  }
  return std::nullopt;
}

}  // namespace kintsugi::schedule
