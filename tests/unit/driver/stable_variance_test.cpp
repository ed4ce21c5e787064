// Layer norm fused by the auto-scheduler is accurate on rows far from zero: the variance about a
// running (or a chunk's) mean is re-based about a mean extrapolated to the whole row, in a form
// that never subtracts large nearly equal powers. Checked on compiled CPU kernels against the
// exact interpreter, under the rolling update (many rows) and split-K (few rows), for
// |mean| / std from 0 to 1e4 and for constant rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "driver/Driver.h"
#include "ir/Interpreter.h"
#include "runtime/Runner.h"
#include "target/cpu/CpuBackend.h"
#include "te/Lower.h"
#include "te/Program.h"

using namespace kintsugi;

namespace {

// The example with the input type as a parameter (f16 in the example; f32 reaches 1e4).
std::string layernorm(const std::string& x_type) {
  return "param EPS: f32 = 1e-5\ninput X: " + x_type +
         "[M, N]\ninput G: f16[N]\ninput Beta: f16[N]\n"
         "mu[i]  = sum[j](f32(X[i, j])) / f32(N)\n"
         "var[i] = sum[j]((f32(X[i, j]) - mu[i]) * (f32(X[i, j]) - mu[i])) / f32(N)\n"
         "output Y[i, j]: f16 = (f32(X[i, j]) - mu[i]) * rsqrt(var[i] + EPS) * f32(G[j]) + "
         "f32(Beta[j])\n";
}

// Max |Y - reference| / max |reference| with rows X = offset(row) + N(0, 1) (or constant rows).
double max_rel_err(const std::string& source, int64_t rows, int64_t cols,
                   const std::function<double(int64_t row, double noise)>& x,
                   std::string* schedule) {
  te::Program tp = te::parse("layernorm.te", source);
  te::check(tp);
  ir::LoopProgram p = te::lower(tp);
  runtime::SizeMap sizes = {{"M", rows}, {"N", cols}};
  driver::ScheduleOptions o;
  o.sizes = sizes;
  o.whole_row_bytes = 0;  // streamed, so that the running (or chunk) means are re-based
  driver::Scheduled s = driver::schedule_program(p, o);
  for (const std::string& w : s.warnings) ADD_FAILURE() << w;
  for (const std::string& n : s.primitives) *schedule += n + " ";
  driver::Built b = driver::build_kernel(s, o.target, sizes);

  std::map<std::string, runtime::Tensor> in = runtime::random_inputs(p, sizes, 7);
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0.0, 1.0);
  runtime::Tensor& X = in.at("X");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) X.set(r * cols + c, x(r, noise(rng)));
  runtime::Tensor Y(DType::F16, {rows, cols});
  std::vector<runtime::Tensor*> args = {&in.at("X"), &in.at("G"), &in.at("Beta"), &Y};
  b.cpu->run(args, sizes, {});
  std::map<std::string, const runtime::Tensor*> ptrs;
  for (auto& [n, t] : in) ptrs[n] = &t;
  ir::InterpResult ref = ir::interpret(p, ir::InterpMode::Exact, ptrs, sizes);
  runtime::OutputCheck c = runtime::compare_output("Y", Y, ref.outputs.at("Y").values, 1e-3);
  EXPECT_TRUE(c.special_values_match);
  return c.max_rel_err;
}

}  // namespace

TEST(StableVariance, LayerNormFarFromZeroUnderRollingUpdateAndSplitK) {
  struct Case {
    const char* x_type;
    double ratio;  // |mean| / std
  };
  // f16 resolves a deviation of one up to about 2^10; f32 well beyond 1e4.
  for (Case k : {Case{"f16", 0}, Case{"f16", 100}, Case{"f16", 1000}, Case{"f32", 0},
                 Case{"f32", 1e3}, Case{"f32", 1e4}})
    for (int64_t rows : {8, 256}) {  // split-K, rolling update
      std::string schedule;
      double err = max_rel_err(
          layernorm(k.x_type), rows, 1000,
          [&](int64_t r, double z) { return k.ratio * (r % 2 ? -1.0 : 1.0) + z; }, &schedule);
      SCOPED_TRACE(schedule);
      EXPECT_LE(err, 1e-3) << k.x_type << " |mean|/std=" << k.ratio << " M=" << rows;
      EXPECT_NE(schedule.find(rows < 128 ? "split_k_update" : "rolling_update"), std::string::npos);
    }
}

TEST(StableVariance, ConstantRows) {
  for (double value : {0.0, 100.0, 1e4})
    for (int64_t rows : {8, 256}) {
      std::string schedule;
      double err = max_rel_err(
          layernorm("f32"), rows, 1000, [&](int64_t, double) { return value; }, &schedule);
      EXPECT_LE(err, 1e-3) << "rows of " << value << ", M=" << rows << " (" << schedule << ")";
    }
}
