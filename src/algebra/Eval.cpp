// \file Eval.cpp
// fp64 evaluation of ir::Expr (see Eval.h).
#include "algebra/Eval.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kintsugi::algebra {

double eval_ir(const ir::Expr& e, const LeafFn& leaf) {
  using ir::Op;
  double v = 0;
  if (leaf && leaf(e, &v)) return v;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto a = [&](size_t i) { return eval_ir(e->args[i], leaf); };
  switch (e->op) {
    case Op::IntImm:
    case Op::BoolImm:
      return static_cast<double>(e->int_value);
    case Op::FloatImm:
      return e->float_value;
    case Op::Var:
    case Op::Load:
    case Op::Reduce:
      return nan;
    case Op::Neg:
      return -a(0);
    case Op::Not:
      return a(0) == 0.0 ? 1.0 : 0.0;
    case Op::Add:
      return a(0) + a(1);
    case Op::Sub:
      return a(0) - a(1);
    case Op::Mul:
      return a(0) * a(1);
    case Op::Div:
      if (is_int(e->type)) return std::floor(a(0) / a(1));
      return a(0) / a(1);
    case Op::Mod: {
      double x = a(0), y = a(1);
      return is_int(e->type) ? x - y * std::floor(x / y) : std::fmod(x, y);
    }
    case Op::Lt:
      return a(0) < a(1);
    case Op::Le:
      return a(0) <= a(1);
    case Op::Gt:
      return a(0) > a(1);
    case Op::Ge:
      return a(0) >= a(1);
    case Op::Eq:
      return a(0) == a(1);
    case Op::Ne:
      return a(0) != a(1);
    case Op::And:
      return a(0) != 0.0 && a(1) != 0.0;
    case Op::Or:
      return a(0) != 0.0 || a(1) != 0.0;
    case Op::Min:
      return std::min(a(0), a(1));
    case Op::Max:
      return std::max(a(0), a(1));
    case Op::Cast:
      if (is_int(e->type)) return std::trunc(a(0));
      if (e->type == DType::Bool) return a(0) != 0.0;
      return a(0);
    case Op::Select:
      return a(0) != 0.0 ? a(1) : a(2);
    case Op::Call:
      switch (e->fn) {
        case ir::MathFn::Exp:
          return std::exp(a(0));
        case ir::MathFn::Exp2:
          return std::exp2(a(0));
        case ir::MathFn::Log:
          return std::log(a(0));
        case ir::MathFn::Log2:
          return std::log2(a(0));
        case ir::MathFn::Tanh:
          return std::tanh(a(0));
        case ir::MathFn::Sigmoid:
          return 1.0 / (1.0 + std::exp(-a(0)));
        case ir::MathFn::Erf:
          return std::erf(a(0));
        case ir::MathFn::Sqrt:
          return std::sqrt(a(0));
        case ir::MathFn::Rsqrt:
          return 1.0 / std::sqrt(a(0));
        case ir::MathFn::Abs:
          return std::fabs(a(0));
        case ir::MathFn::Pow:
          return std::pow(a(0), a(1));
        case ir::MathFn::Round:
          return std::nearbyint(a(0));
        case ir::MathFn::Clamp:
          return std::min(std::max(a(0), a(1)), a(2));
      }
      return nan;
  }
  return nan;
}

}  // namespace kintsugi::algebra
