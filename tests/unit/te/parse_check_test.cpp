// Parser and type checker: accepted programs, inferred extents and types, printed forms.
#include <gtest/gtest.h>

#include "ir/Printer.h"
#include "te/Lower.h"
#include "te/Program.h"

using namespace kintsugi;

namespace {
te::Program checked(const std::string& src) {
  te::Program p = te::parse("t.te", src);
  te::check(p);
  return p;
}
std::string error_of(const std::string& src) {
  try {
    checked(src);
  } catch (const CompileError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Parser, InfersExtentsAndTypes) {
  te::Program p = checked(R"(
sizes M = 4, N = 8
input X: f16[M, N]
y[m, n] = f32(X[m, n]) * 2
output s[m]: f32 = sum[n](y[m, n])
)");
  ASSERT_EQ(p.defs.size(), 2u);
  EXPECT_EQ(ir::to_string(p.defs[0].indices[1].extent), "N");
  EXPECT_EQ(p.defs[0].dtype, DType::F32);
  EXPECT_EQ(p.defs[0].body->args[1]->op, ir::Op::FloatImm);  // the literal 2 became f32
  EXPECT_EQ(p.defs[0].body->args[1]->type, DType::F32);
  EXPECT_EQ(ir::to_string(p.defs[1].body), "sum[n: N](y[m, n])");
  EXPECT_EQ(p.size_hints.at("N"), 8);
}

TEST(Parser, PrecedenceAndComments) {
  te::Program p = checked(R"(
input X: f32[N]   # a comment
output y[i]: f32 = X[i] - 1 - 2 * X[i] / (3 + X[i])
)");
  EXPECT_EQ(ir::to_string(p.defs[0].body), "X[i] - 1.0 - 2.0 * X[i] / (3.0 + X[i])");
}

TEST(Parser, MultiLineExpressionsInsideParentheses) {
  te::Program p = checked("input X: f32[N]\noutput y[i]: f32 = max(X[i],\n    0.0)\n");
  EXPECT_EQ(ir::to_string(p.defs[0].body), "max(X[i], 0.0)");
}

TEST(Parser, IndexArithmeticAndGqa) {
  te::Program p = checked(R"(
input Q: f32[HQ, S, D]
input K: f32[HK, T, D]
output s[h, i, j]: f32 = sum[d](Q[h, i, d] * K[h / (HQ / HK), j, d])
)");
  EXPECT_EQ(ir::to_string(p.defs[0].indices[2].extent), "T");
  EXPECT_EQ(p.dims.size(), 5u);
}

TEST(Parser, ExplicitExtents) {
  te::Program p = checked("input X: f32[N]\noutput y[i, k: 3]: f32 = X[i] * f32(k)\n");
  EXPECT_EQ(ir::to_string(p.defs[0].indices[1].extent), "3");
}

TEST(Checker, RejectsMixedPrecision) {
  std::string e = error_of("input X: f16[N]\ninput Y: f32[N]\noutput z[i]: f32 = X[i] + Y[i]\n");
  EXPECT_NE(e.find("t.te:3:25: error: operands of '+' have different types f16 and f32"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("\n                        ^"), std::string::npos) << e;
}

TEST(Checker, RejectsInconsistentExtents) {
  std::string e = error_of("input X: f32[N]\ninput Y: f32[M]\noutput z[i]: f32 = X[i] + Y[i]\n");
  EXPECT_NE(e.find("inconsistent extents for index 'i'"), std::string::npos) << e;
}

TEST(Checker, DeclaredExtentReadsPartOfADimension) {
  // An index given its extent reads the first K columns of a row of N; a definition's index
  // given its extent, the first L rows.
  te::Program p = checked(R"(
sizes M = 4, N = 8
param L: i32 = 2
param K: i32 = 3
input X: f32[M, N]
output y[i]: f32 = sum[k: K](X[i, k])
output z[r: L, j]: f32 = X[r, j]
)");
  EXPECT_EQ(ir::to_string(p.defs[0].body), "sum[k: K](X[i, k])");
  EXPECT_EQ(ir::to_string(p.defs[1].indices[0].extent), "L");
  EXPECT_EQ(ir::to_string(p.defs[1].indices[1].extent), "N");
  // Inferred uses still have to agree, and the error says how to read part of a dimension.
  std::string e =
      error_of("input X: f32[M, N]\ninput W: f32[K]\noutput y[i]: f32 = sum[k](X[i, k] * W[k])\n");
  EXPECT_NE(e.find("to read part of a dimension, give the index its extent explicitly (`k: N`)"),
            std::string::npos)
      << e;
}

TEST(Lower, HoistsNestedReductions) {
  te::Program p = checked(R"(
input X: f32[M, N]
output y[m, n]: f16 = exp(X[m, n] - max[k](X[m, k])) / sum[k](exp(X[m, k] - max[j](X[m, j])))
)");
  ir::LoopProgram lp = te::lower(p);
  std::string text = ir::to_string(lp);
  EXPECT_NE(text.find("buffer y.max0: f32[M] global"), std::string::npos) << text;
  EXPECT_NE(text.find("block y.max0(spatial m:M, reduce k:N):"), std::string::npos) << text;
  EXPECT_NE(text.find("y.max0[m] = -inf"), std::string::npos) << text;
  // The maximum written twice (over k, then over j inside the sum) is one reduction.
  EXPECT_EQ(text.find("y.max1"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer y.sum1: f32[M] global"), std::string::npos) << text;
  EXPECT_NE(text.find("y.sum1[m] = y.sum1[m] + exp(X[m, k] - y.max0[m])"), std::string::npos)
      << text;
}

TEST(Lower, OutputSumAccumulatesInItsOwnType) {
  te::Program p = checked("input X: f16[M, N]\noutput y[m]: f16 = sum[n](f32(X[m, n]))\n");
  std::string text = ir::to_string(te::lower(p));
  EXPECT_NE(text.find("buffer y.sum0: f32[M] global"), std::string::npos) << text;
  EXPECT_NE(text.find("y[m] = y.sum0[m]"), std::string::npos) << text;
}
