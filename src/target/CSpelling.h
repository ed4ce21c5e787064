// \file CSpelling.h
// How the C-family back ends (the CPU's C++ and CUDA C++) spell an elementwise operation, a math
// call on already-spelled operands, and a linear index into a tile. The languages agree on
// everything but the helpers for NaN-propagating min/max, floor division and modulo of integers,
// exp and tanh; a back end names those in CHelpers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/Expr.h"
#include "support/Error.h"

namespace kintsugi::target {

struct CHelpers {
  std::string fmin, fmax;  // NaN-propagating float min / max
  std::string imin, imax, iabs;
  std::string fmodf;  // float remainder with the IR's sign convention
  std::string expf;   // exp of a float
  std::string tanhf;  // tanh of a float
  // Integer floor division / modulo (with the back end's divisor check).
  std::function<std::string(ir::Op, const std::string&, const std::string&)> int_divmod;
};

inline std::string spell_call(ir::MathFn fn, const std::vector<std::string>& a, bool fl,
                              const CHelpers& h) {
  switch (fn) {
    case ir::MathFn::Exp:
      return h.expf + "(" + a[0] + ")";
    case ir::MathFn::Exp2:
      return "exp2f(" + a[0] + ")";
    case ir::MathFn::Log:
      return "logf(" + a[0] + ")";
    case ir::MathFn::Log2:
      return "log2f(" + a[0] + ")";
    case ir::MathFn::Tanh:
      return h.tanhf + "(" + a[0] + ")";
    case ir::MathFn::Sigmoid:
      return "(1.0f / (1.0f + " + h.expf + "(-" + a[0] + ")))";
    case ir::MathFn::Erf:
      return "erff(" + a[0] + ")";
    case ir::MathFn::Sqrt:
      return "sqrtf(" + a[0] + ")";
    case ir::MathFn::Rsqrt:
      return "(1.0f / sqrtf(" + a[0] + "))";
    case ir::MathFn::Abs:
      return (fl ? "fabsf(" : h.iabs + "(") + a[0] + ")";
    case ir::MathFn::Pow:
      return "powf(" + a[0] + ", " + a[1] + ")";
    case ir::MathFn::Round:
      return fl ? "rintf(" + a[0] + ")" : a[0];
    case ir::MathFn::Clamp:
      return fl ? h.fmin + "(" + h.fmax + "(" + a[0] + ", " + a[1] + "), " + a[2] + ")"
                : h.imin + "(" + h.imax + "(" + a[0] + ", " + a[1] + "), " + a[2] + ")";
  }
  return "";
}

// The row-major linear index of multi-index `ix` (C expressions) into a tile of `shape`.
inline std::string spell_linear_index(const std::vector<std::string>& ix,
                                      const std::vector<int64_t>& shape) {
  if (ix.empty()) return "0";
  std::string lin = ix[0];
  for (size_t d = 1; d < ix.size(); ++d)
    lin = "(" + lin + ") * " + std::to_string(shape[d]) + " + " + ix[d];
  return lin;
}

// `fl`: the operands are floats (comparisons included).
inline std::string spell_op(ir::Op op, const std::vector<std::string>& a, bool fl,
                            const CHelpers& h) {
  auto infix = [&](const char* o) { return "(" + a[0] + " " + o + " " + a[1] + ")"; };
  switch (op) {
    case ir::Op::Neg:
      return "(-" + a[0] + ")";
    case ir::Op::Not:
      return "(!" + a[0] + ")";
    case ir::Op::Add:
      return infix("+");
    case ir::Op::Sub:
      return infix("-");
    case ir::Op::Mul:
      return infix("*");
    case ir::Op::Div:
      return fl ? infix("/") : h.int_divmod(op, a[0], a[1]);
    case ir::Op::Mod:
      return fl ? h.fmodf + "(" + a[0] + ", " + a[1] + ")" : h.int_divmod(op, a[0], a[1]);
    case ir::Op::Lt:
      return infix("<");
    case ir::Op::Le:
      return infix("<=");
    case ir::Op::Gt:
      return infix(">");
    case ir::Op::Ge:
      return infix(">=");
    case ir::Op::Eq:
      return infix("==");
    case ir::Op::Ne:
      return infix("!=");
    case ir::Op::And:
      return infix("&&");
    case ir::Op::Or:
      return infix("||");
    case ir::Op::Min:
      return (fl ? h.fmin : h.imin) + "(" + a[0] + ", " + a[1] + ")";
    case ir::Op::Max:
      return (fl ? h.fmax : h.imax) + "(" + a[0] + ", " + a[1] + ")";
    case ir::Op::Select:
      return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
    default:
      internal_error << "C spelling: unexpected operator";
  }
  return "";
}

}  // namespace kintsugi::target
