// The reference interpreter: exact and typed modes, bounds and division checks.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "te/Lower.h"
#include "te/Program.h"

using namespace kintsugi;

namespace {
ir::LoopProgram lowered(const std::string& src) {
  te::Program p = te::parse("t.te", src);
  te::check(p);
  return te::lower(p);
}
}  // namespace

TEST(Interpreter, SoftmaxMatchesHandComputation) {
  auto lp = lowered(R"(
input X: f32[M, N]
m[r] = max[c](X[r, c])
e[r, c] = exp(X[r, c] - m[r])
l[r] = sum[c](e[r, c])
output Y[r, c]: f32 = e[r, c] / l[r]
)");
  runtime::Tensor x(DType::F32, {2, 3});
  double vals[] = {1, 2, 3, -1, 0, 5};
  for (int i = 0; i < 6; ++i) x.set(i, vals[i]);
  auto res = ir::interpret(lp, ir::InterpMode::Exact, {{"X", &x}}, {{"M", 2}, {"N", 3}});
  const auto& y = res.outputs.at("Y").values;
  for (int r = 0; r < 2; ++r) {
    double mx = std::max({vals[3 * r], vals[3 * r + 1], vals[3 * r + 2]}), s = 0;
    for (int c = 0; c < 3; ++c) s += std::exp(vals[3 * r + c] - mx);
    for (int c = 0; c < 3; ++c) EXPECT_DOUBLE_EQ(y[3 * r + c], std::exp(vals[3 * r + c] - mx) / s);
  }
}

TEST(Interpreter, TypedModeRoundsCastsExactModeDoesNot) {
  auto lp = lowered("input X: f32[N]\noutput Y[i]: f32 = f32(f16(X[i]))\n");
  runtime::Tensor x(DType::F32, {1});
  x.set(0, 1.0 + 1.0 / 4096);
  auto exact = ir::interpret(lp, ir::InterpMode::Exact, {{"X", &x}}, {{"N", 1}});
  auto typed = ir::interpret(lp, ir::InterpMode::Typed, {{"X", &x}}, {{"N", 1}});
  EXPECT_EQ(exact.outputs.at("Y").values[0], 1.0 + 1.0 / 4096);
  EXPECT_EQ(typed.outputs.at("Y").values[0], 1.0);
}

TEST(Interpreter, OutOfBoundsIsAnErrorNotACrash) {
  auto lp = lowered("input X: f32[N]\noutput Y[i: N]: f32 = X[i + 1]\n");
  runtime::Tensor x(DType::F32, {4});
  try {
    ir::interpret(lp, ir::InterpMode::Exact, {{"X", &x}}, {{"N", 4}});
    FAIL() << "expected an error";
  } catch (const RuntimeArgError& e) {
    EXPECT_NE(std::string(e.what()).find("index out of bounds reading X[i + 1]: dimension 0 is 4"),
              std::string::npos)
        << e.what();
  }
}

TEST(Interpreter, IndexDivisionByZeroIsAnError) {
  auto lp =
      lowered("input Q: f32[HQ]\ninput K: f32[HK]\noutput Y[h]: f32 = Q[h] * K[h / (HQ / HK)]\n");
  runtime::Tensor q(DType::F32, {2}), k(DType::F32, {4});
  EXPECT_THROW(
      ir::interpret(lp, ir::InterpMode::Exact, {{"Q", &q}, {"K", &k}}, {{"HQ", 2}, {"HK", 4}}),
      RuntimeArgError);
}

TEST(Interpreter, FullyMaskedRowGivesZeroNotNan) {
  auto lp = lowered(R"(
input X: f32[S, T]
c[i, j] = select(j <= i + T - S, X[i, j], -inf)
m[i] = max[j](c[i, j])
e[i, j] = exp(c[i, j] - m[i])
l[i] = sum[j](e[i, j])
output Y[i, j]: f32 = select(l[i] > 0, e[i, j] / l[i], 0)
)");
  runtime::Tensor x(DType::F32, {3, 1});
  auto res = ir::interpret(lp, ir::InterpMode::Exact, {{"X", &x}}, {{"S", 3}, {"T", 1}});
  const auto& y = res.outputs.at("Y").values;
  EXPECT_EQ(y[0], 0.0);  // rows 0 and 1 see no key (bottom-right alignment)
  EXPECT_EQ(y[1], 0.0);
  EXPECT_EQ(y[2], 1.0);
}

TEST(Simplify, DivisionByTheExtentOfARange) {
  auto dim = [](const char* n) { return ir::make_var(n, ir::VarKind::Dim, DType::Int); };
  auto idx = [](const char* n) { return ir::make_var(n, ir::VarKind::Index, DType::Int); };
  ir::Expr e = ir::make_binary(ir::Op::Div, dim("HQ"), dim("HK"));
  ir::Expr h = ir::make_binary(ir::Op::Add, ir::make_binary(ir::Op::Mul, idx("h0"), e), idx("h1"));
  std::map<std::string, ir::Expr> ranges = {{"h1", e}};
  EXPECT_EQ(ir::to_string(ir::simplify_in_ranges(ir::make_binary(ir::Op::Div, h, e), ranges)),
            "h0");
  EXPECT_EQ(ir::to_string(ir::simplify_in_ranges(ir::make_binary(ir::Op::Mod, h, e), ranges)),
            "h1");
  // h1 is not known to lie in [0, HQ) nor [0, 2): nothing folds.
  EXPECT_EQ(
      ir::to_string(ir::simplify_in_ranges(ir::make_binary(ir::Op::Div, h, dim("HQ")), ranges)),
      "(h0 * (HQ / HK) + h1) / HQ");
  EXPECT_EQ(ir::to_string(
                ir::simplify_in_ranges(ir::make_binary(ir::Op::Div, h, ir::make_int(2)), ranges)),
            "(h0 * (HQ / HK) + h1) / 2");
}

// A floor quotient times its divisor plus the remainder is the dividend, in any sum, for a
// symbolic divisor and a literal one; with other coefficients or divisors nothing joins.
TEST(Simplify, QuotientAndRemainderJoin) {
  auto dim = [](const char* n) { return ir::make_var(n, ir::VarKind::Dim, DType::Int); };
  auto idx = [](const char* n) { return ir::make_var(n, ir::VarKind::Index, DType::Int); };
  using ir::Op;
  auto bin = [](Op op, ir::Expr a, ir::Expr b) { return ir::make_binary(op, a, b); };
  ir::Expr r = idx("r"), W = dim("W");
  ir::Expr joined = bin(Op::Add, bin(Op::Mul, bin(Op::Div, r, W), W), bin(Op::Mod, r, W));
  EXPECT_EQ(ir::to_string(ir::simplify(joined)), "r");
  ir::Expr in_sum = bin(Op::Add, bin(Op::Mul, idx("b"), bin(Op::Mul, dim("H"), W)), joined);
  EXPECT_EQ(ir::to_string(ir::simplify(in_sum)), "b * (H * W) + r");
  ir::Expr literal = bin(Op::Add, bin(Op::Mul, bin(Op::Div, r, ir::make_int(8)), ir::make_int(8)),
                         bin(Op::Mod, r, ir::make_int(8)));
  EXPECT_EQ(ir::to_string(ir::simplify(literal)), "r");
  ir::Expr other = bin(Op::Add, bin(Op::Mul, bin(Op::Div, r, W), dim("H")), bin(Op::Mod, r, W));
  EXPECT_EQ(ir::to_string(ir::simplify(other)), "r / W * H + r % W");
  ir::Expr twice = bin(Op::Add, bin(Op::Mul, bin(Op::Div, r, ir::make_int(8)), ir::make_int(16)),
                       bin(Op::Mod, r, ir::make_int(8)));
  EXPECT_EQ(ir::to_string(ir::simplify(twice)), "r / 8 * 16 + r % 8");
}

// A negated comparison of integers is the complementary comparison; of floats it stays (!(x > 0)
// holds for NaN, x <= 0 does not).
TEST(Simplify, NegatedIntegerComparison) {
  ir::Expr j = ir::make_var("j", ir::VarKind::Index, DType::Int);
  ir::Expr i = ir::make_var("i", ir::VarKind::Index, DType::Int);
  EXPECT_EQ(
      ir::to_string(ir::simplify(ir::make_unary(ir::Op::Not, ir::make_binary(ir::Op::Gt, j, i)))),
      "j <= i");
  EXPECT_EQ(
      ir::to_string(ir::simplify(ir::make_unary(ir::Op::Not, ir::make_binary(ir::Op::Eq, j, i)))),
      "j != i");
  ir::Expr x = ir::make_var("x", ir::VarKind::Index, DType::F32);
  ir::Expr negated =
      ir::make_unary(ir::Op::Not, ir::make_binary(ir::Op::Gt, x, ir::make_float(0.0, DType::F32)));
  EXPECT_EQ(ir::simplify(negated)->op, ir::Op::Not);
}

// An index that overflows int64 wraps back into [0, N) when computed in two's complement; the
// reference must refuse it rather than agree with a wrapping kernel.
TEST(Interpreter, IndexOverflowIsAnErrorNotAWrap) {
  auto lp = lowered(
      "param P: i32 = 2147483647\ninput X: f32[N]\n"
      "output Y[i: N]: f32 = X[(i * P * P * P) % N]\n");
  runtime::Tensor x(DType::F32, {8});
  try {
    ir::interpret(lp, ir::InterpMode::Exact, {{"X", &x}}, {{"N", 8}});
    FAIL() << "expected an error";
  } catch (const RuntimeArgError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("integer overflow in `i * P * P * P`"), std::string::npos) << m;
    EXPECT_NE(m.find("in index 0 reading X["), std::string::npos) << m;
  }
}

TEST(Interpreter, ShapeOverflowIsAnError) {
  auto lp = lowered("input X: f32[N * N * N]\noutput Y[i]: f32 = X[i]\n");
  runtime::Tensor x(DType::F32, {1});
  EXPECT_THROW(ir::eval_shape(lp.buffers[0].shape, {{"N", int64_t{1} << 22}}), RuntimeArgError);
}

// sigmoid and erf: exact in double in exact mode (0 and 1 at the ends, NaN through), rounded to
// the expression's type in typed mode.
TEST(Interpreter, SigmoidAndErf) {
  auto lp = lowered(R"(
input X: f32[N]
output S[i]: f32 = sigmoid(X[i])
output E[i]: f32 = erf(X[i])
output H[i]: f32 = f32(sigmoid(f16(X[i])))
)");
  const double vals[] = {0.0, 1.5, -2.25, -1e30, 1e30, NAN};
  runtime::Tensor x(DType::F32, {6});
  for (int i = 0; i < 6; ++i) x.set(i, vals[i]);
  for (ir::InterpMode mode : {ir::InterpMode::Exact, ir::InterpMode::Typed}) {
    auto res = ir::interpret(lp, mode, {{"X", &x}}, {{"N", 6}});
    for (int i = 0; i < 6; ++i) {
      double xv = x.get(i), s = 1.0 / (1.0 + std::exp(-xv)), e = std::erf(xv);
      if (mode == ir::InterpMode::Typed) {
        s = round_to_dtype(s, DType::F32);
        e = round_to_dtype(e, DType::F32);
      }
      if (std::isnan(xv)) {
        EXPECT_TRUE(std::isnan(res.outputs.at("S").values[i]));
        EXPECT_TRUE(std::isnan(res.outputs.at("E").values[i]));
        continue;
      }
      EXPECT_EQ(res.outputs.at("S").values[i], s) << i;
      EXPECT_EQ(res.outputs.at("E").values[i], e) << i;
    }
  }
  auto typed = ir::interpret(lp, ir::InterpMode::Typed, {{"X", &x}}, {{"N", 6}});
  // f16 in, f16 out: sigmoid(1.5) = 0.8175744... rounds to the f16 0.81738281.
  EXPECT_EQ(typed.outputs.at("H").values[1],
            round_to_dtype(1.0 / (1.0 + std::exp(-1.5)), DType::F16));
  EXPECT_EQ(typed.outputs.at("S").values[3], 0.0);
  EXPECT_EQ(typed.outputs.at("S").values[4], 1.0);
  EXPECT_EQ(typed.outputs.at("E").values[3], -1.0);
}
