// \file cpu_exp_test.cpp
// The CPU tile code's exponential (TilePrelude.h, ks_expf) at its ends and in between, through a
// compiled kernel: exactly 0 far below, inf above log(FLT_MAX), subnormal results near 2^-149,
// NaN and the infinities, and about 1 ulp against the exact exponential everywhere else. The
// kernel's loop is vectorised, so on an AVX-512 host this checks the hand-written vector variant
// (16 elements a call) and, for the loop's last elements, the scalar one.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "driver/Driver.h"
#include "runtime/Tensor.h"
#include "target/cpu/CpuBackend.h"
#include "te/Lower.h"
#include "te/Program.h"

using namespace kintsugi;

namespace {

// exp of each of `xs` by the CPU tile code.
std::vector<float> tile_exp(const std::vector<float>& xs) {
  te::Program tp = te::parse("exp.te", "input X: f32[N]\noutput Y[i]: f32 = exp(X[i])\n");
  te::check(tp);
  ir::LoopProgram p = te::lower(tp);
  const int64_t n = static_cast<int64_t>(xs.size());
  runtime::SizeMap sizes = {{"N", n}};
  driver::ScheduleOptions o;
  o.sizes = sizes;
  driver::Scheduled s = driver::schedule_program(p, o);
  driver::Built b = driver::build_kernel(s, o.target, sizes);
  runtime::Tensor x(DType::F32, {n}), y(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i) x.set(i, xs[static_cast<size_t>(i)]);
  b.cpu->run({&x, &y}, sizes, {});
  std::vector<float> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<float>(y.get(i)));
  return out;
}

}  // namespace

TEST(CpuExp, EndsAndUlps) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs = {-inf, inf, std::nanf(""), 0.0f, -0.0f, -1e30f, 1e30f, -200.0f, 200.0f};
  for (float x = -110.0f; x <= -95.0f; x += 1.0f / 64) xs.push_back(x);
  for (float x = 85.0f; x <= 92.0f; x += 1.0f / 64) xs.push_back(x);
  for (float x = -20.0f; x <= 20.0f; x += 1.0f / 256) xs.push_back(x);
  std::vector<float> ys = tile_exp(xs);
  for (size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i], y = ys[i];
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(y));
      continue;
    }
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    if (std::isinf(want)) {
      EXPECT_EQ(y, inf) << "x = " << x;
      continue;
    }
    if (want < std::numeric_limits<float>::min()) {
      // Zero and the subnormal range: the exact result's rounding, or its neighbour.
      EXPECT_LE(std::fabs(y - want), std::ldexp(1.0f, -149)) << "x = " << x;
      continue;
    }
    EXPECT_LE(std::fabs(y - want), 2 * (std::nextafter(want, inf) - want)) << "x = " << x;
  }
}
