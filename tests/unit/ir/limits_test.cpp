// Limits of programs and sizes: iterative destruction of deep expressions, param ranges, the
// launch-time integer range proof, checked element and byte counts.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/IndexBounds.h"
#include "ir/Limits.h"
#include "runtime/Tensor.h"
#include "te/Lower.h"
#include "te/Program.h"

using namespace kintsugi;

namespace {
ir::LoopProgram lowered(const std::string& src) {
  te::Program p = te::parse("t.te", src);
  te::check(p);
  return te::lower(p);
}
std::string range_error(const ir::LoopProgram& lp, const runtime::SizeMap& sizes) {
  try {
    ir::check_integer_ranges(lp, sizes, {}, lp.name);
  } catch (const RuntimeArgError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// A tree far deeper than any stack: destroying it must not recurse (it used to overflow the
// stack while unwinding the depth error of a 100,000-term definition).
TEST(Limits, DeepExpressionIsDestroyedWithoutRecursion) {
  ir::Expr e = ir::make_var("x", ir::VarKind::Index, DType::Int), one = ir::make_int(1);
  for (int k = 0; k < 500000; ++k) e = ir::make_binary(ir::Op::Add, e, one);
  ir::Expr r = ir::make_reduce(ir::Reducer::Sum, {ir::Axis{"k", e, {}}}, ir::make_int(0));
  e.reset();
  r.reset();
  SUCCEED();
}

TEST(Limits, ParamValueRanges) {
  EXPECT_EQ(ir::param_value_problem(DType::I32, 2147483647.0), "");
  EXPECT_EQ(ir::param_value_problem(DType::I32, -2147483648.0), "");
  EXPECT_NE(ir::param_value_problem(DType::I32, 4294967296.0), "");
  EXPECT_NE(ir::param_value_problem(DType::I32, 1e30), "");
  EXPECT_NE(ir::param_value_problem(DType::I32, INFINITY), "");
  EXPECT_NE(ir::param_value_problem(DType::I32, 1.5), "");
  EXPECT_EQ(ir::param_value_problem(DType::I8, -128.0), "");
  EXPECT_NE(ir::param_value_problem(DType::I8, 128.0), "");
  EXPECT_EQ(ir::param_value_problem(DType::F16, 65504.0), "");
  EXPECT_NE(ir::param_value_problem(DType::F16, 70000.0), "");
  EXPECT_EQ(ir::param_value_problem(DType::F16, -INFINITY), "");
  EXPECT_EQ(ir::param_value_problem(DType::F32, 3e38), "");
  EXPECT_NE(ir::param_value_problem(DType::F32, 1e39), "");
  EXPECT_NE(ir::param_value_problem(DType::F32, NAN), "");
  EXPECT_EQ(ir::param_value_text(4294967296.0), "4294967296");
}

TEST(Limits, BuilderProgramsMeetTheLimitsInCheck) {
  te::Program p;
  p.name = "built";
  p.dims = {"N"};
  p.params.push_back(te::ParamDecl{"W", DType::I32, 4294967296.0, {}});
  p.inputs.push_back(
      te::InputDecl{"X", DType::F32, {ir::make_var("N", ir::VarKind::Dim, DType::Int)}, {}});
  EXPECT_THROW(te::check(p), CompileError);
  p.params.clear();
  ir::Expr deep = ir::make_var("N", ir::VarKind::Dim, DType::Int);
  for (int k = 0; k < 5000; ++k) deep = ir::make_binary(ir::Op::Add, deep, ir::make_int(1));
  p.inputs[0].shape = {deep};
  try {
    te::check(p);
    FAIL() << "expected an error";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1000 operations deep"), std::string::npos);
  }
}

TEST(Limits, IntegerRangesOfAKernel) {
  auto lp = lowered("input X: f32[N]\noutput Y[i: N]: f32 = X[min(i * N * N, N - 1)]\n");
  EXPECT_EQ(range_error(lp, {{"N", 1000}}), "");
  EXPECT_EQ(range_error(lp, {{"N", 2000000}}), "");  // (2e6)^3 = 8e18 < 2^63
  std::string m = range_error(lp, {{"N", 3000000}});
  EXPECT_NE(m.find("the integer expression `i * N * N` in index 0 of the load from X may leave "
                   "the 64-bit range"),
            std::string::npos)
      << m;
  // A masked tail and a bounded select stay in range.
  auto ok = lowered("input X: f32[N]\noutput Y[i]: f32 = select(i + 1 < N, X[i + 1], X[i])\n");
  EXPECT_EQ(range_error(ok, {{"N", int64_t{1} << 61}}), "");
}

// An integer reduction's accumulator is bounded by its steps: a count of positive elements (a sum
// of a select of 1 and 0) lies in [0, N], so the values derived from it are in range; the same
// count of values that are not bounded (an int input), or one whose bound passes 2^63, is not
// proven. An accumulator that other blocks also write is not bounded either.
TEST(Limits, IntegerReductionsAreBoundedByTheirSteps) {
  auto count = lowered(
      "input X: f32[M, N]\n"
      "c[i] = sum[j](select(X[i, j] > 0.0, 1, 0))\n"
      "m[i] = max[j](select(X[i, j] > 0.0, j, -1))\n"
      "output Y[i, j]: f32 = X[i, j] / f32(max(c[i], 1) * (m[i] + 2) * N)\n");
  EXPECT_EQ(range_error(count, {{"M", 8}, {"N", 100}}), "");
  EXPECT_EQ(range_error(count, {{"M", 8}, {"N", int64_t{1} << 20}}), "");  // 2^20 2^20 2^20
  EXPECT_NE(range_error(count, {{"M", 8}, {"N", int64_t{1} << 22}}).find("64-bit range"),
            std::string::npos);  // 2^22 2^22 2^22 = 2^66
  auto sum = lowered(
      "input X: i32[M, N]\n"
      "c[i] = sum[j](X[i, j])\n"
      "output Y[i]: f32 = f32(c[i] + 1)\n");
  EXPECT_EQ(range_error(sum, {{"M", 1}, {"N", int64_t{1} << 31}}), "");  // within 2^62
  EXPECT_NE(range_error(sum, {{"M", 1}, {"N", int64_t{1} << 33}}).find("64-bit range"),
            std::string::npos);
}

// The proof that lets a kernel divide in 32 bits: every division by a value other than a literal
// has a dividend in (INT32_MIN, INT32_MAX] and a divisor in 32 bits, for sizes up to the tiles'
// overrun past them and for any value of an integer param; a launch at sizes where it fails is
// refused with the reason.
TEST(Limits, DivisionsIn32Bits) {
  auto chunked =
      lowered("param C: i32 = 48\ninput X: f32[N]\noutput Y[i: N]: f32 = X[i] * f32(i / C)\n");
  EXPECT_TRUE(ir::divisions_fit_int32(chunked, {{"N", 4096}}, 128));
  EXPECT_TRUE(ir::divisions_fit_int32(chunked, {{"N", 2147483647 - 127}}, 128));
  EXPECT_FALSE(ir::divisions_fit_int32(chunked, {{"N", 2147483647 - 126}}, 128));  // i up to 2^31
  // Literal divisors are not counted (the compiler multiplies); a param in a dividend takes any
  // value of its type, and so does a difference of sizes.
  auto literal = lowered("input X: f32[N]\noutput Y[i: N]: f32 = X[i] * f32(i * N / 3)\n");
  EXPECT_TRUE(ir::divisions_fit_int32(literal, {{"N", 1 << 20}}, 128));
  auto offset =
      lowered("param O: i32 = 5\ninput X: f32[N]\noutput Y[i: N]: f32 = X[i] * f32((i + O) / N)\n");
  EXPECT_FALSE(ir::divisions_fit_int32(offset, {{"N", 4096}}, 128));
  auto by_size = lowered(
      "input X: f32[N]\ninput Z: f32[M]\noutput Y[i: N]: f32 = X[i] * f32((i - N) % M) + Z[0]\n");
  EXPECT_TRUE(ir::divisions_fit_int32(by_size, {{"N", 4096}, {"M", 7}}, 128));

  ir::ProvenRanges proven;
  proven.check(chunked, {{"N", 4096}}, {}, chunked.name, 128);
  try {
    proven.check(chunked, {{"N", int64_t{1} << 31}}, {}, chunked.name, 128);
    ADD_FAILURE() << "a launch beyond the 32-bit proof ran";
  } catch (const RuntimeArgError& e) {
    EXPECT_NE(std::string(e.what()).find("generated for 32-bit integer divisions"),
              std::string::npos)
        << e.what();
  }
  proven.check(chunked, {{"N", int64_t{1} << 31}}, {}, chunked.name);  // 64-bit: runs
}

TEST(Limits, CheckedElementAndByteCounts) {
  EXPECT_EQ(runtime::checked_numel({0, int64_t{1} << 62, 5}, "t"), 0);
  EXPECT_EQ(runtime::checked_bytes({int64_t{1} << 30, 4}, 4, "t"), int64_t{1} << 34);
  EXPECT_THROW(runtime::checked_numel({int64_t{1} << 31, int64_t{1} << 32}, "t"), RuntimeArgError);
  EXPECT_THROW(runtime::checked_bytes({int64_t{1} << 62}, 4, "t"), RuntimeArgError);
  EXPECT_THROW(runtime::checked_bytes({(int64_t{1} << 62) - 1}, 2, "t"), RuntimeArgError);
  try {
    runtime::Tensor t(DType::F32, {int64_t{1} << 62}, "input 'X'");
    FAIL() << "expected an error";
  } catch (const RuntimeArgError& e) {
    EXPECT_NE(std::string(e.what()).find("input 'X' of shape [4611686018427387904] is too large"),
              std::string::npos)
        << e.what();
  }
}
