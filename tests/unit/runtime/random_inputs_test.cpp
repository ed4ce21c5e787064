// Seeded random inputs (runtime/Runner.h): the same seed draws the same values, another seed
// others; large inputs (drawn in parallel from a counter-based stream) are N(0, 1) in their
// moments and tails, integers stay in their range and index tensors index.
#include <gtest/gtest.h>

#include <cmath>

#include "../schedule/ScheduleTestUtil.h"
#include "runtime/Runner.h"

using namespace kintsugi;
using schedtest::lowered;

namespace {

const char* kProgram =
    "sizes M = 8, N = 4\n"
    "input X: f32[M, N]\n"
    "input H: f16[M, N]\n"
    "input Q: i8[M, N]\n"
    "input T: i32[M]\n"
    "output Y[i, j]: f32 = X[i, j] + f32(H[i, j]) + f32(Q[i, j]) + X[i, T[i]]\n";

bool same(const runtime::Tensor& a, const runtime::Tensor& b) {
  return a.data == b.data;
}

}  // namespace

TEST(RandomInputs, SeededAtEverySize) {
  ir::LoopProgram p = lowered(kProgram);
  // 2^22 elements and more: the counter-based stream; fewer: the sequential generator.
  for (int64_t m : {int64_t{37}, int64_t{1} << 21}) {
    SCOPED_TRACE("M=" + std::to_string(m));
    runtime::SizeMap sizes{{"M", m}, {"N", 4}};
    auto a = runtime::random_inputs(p, sizes, 7), b = runtime::random_inputs(p, sizes, 7),
         c = runtime::random_inputs(p, sizes, 8);
    for (const char* name : {"X", "H", "Q"}) {
      EXPECT_TRUE(same(a.at(name), b.at(name))) << name;
      EXPECT_FALSE(same(a.at(name), c.at(name))) << name;
    }
    const runtime::Tensor& x = a.at("X");
    double sum = 0, squares = 0, beyond3 = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = x.get(i);
      ASSERT_TRUE(std::isfinite(v));
      sum += v, squares += v * v, beyond3 += std::fabs(v) > 3;
    }
    const double n = static_cast<double>(x.numel());
    EXPECT_NEAR(sum / n, 0.0, 5 / std::sqrt(n));
    EXPECT_NEAR(squares / n, 1.0, 10 / std::sqrt(n));
    if (m > 1000) {
      EXPECT_NEAR(beyond3 / n, 0.0027, 0.0003);  // P(|N(0, 1)| > 3)
    }
    const runtime::Tensor& q = a.at("Q");
    for (int64_t i = 0; i < q.numel(); ++i) ASSERT_TRUE(q.get(i) >= -128 && q.get(i) <= 127);
    const runtime::Tensor& t = a.at("T");
    bool all_same = true;
    for (int64_t i = 0; i < t.numel(); ++i) {
      ASSERT_TRUE(t.get(i) >= 0 && t.get(i) < 4) << "an index of X's columns";
      all_same &= t.get(i) == t.get(0);
    }
    EXPECT_FALSE(all_same);
  }
}
