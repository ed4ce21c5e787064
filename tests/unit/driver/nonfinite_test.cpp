// Non-finite inputs (docs/language.md, Semantics): a NaN in V at a key that causal attention
// masks for the early rows reaches those rows of the reference only through exp(-inf) * NaN; the
// compiled kernel skips the fully masked key tiles, so those rows stay finite. Verification
// accepts any value where the reference is NaN only when an input is non-finite, and still
// requires every finite reference value and every NaN of finite inputs; at the overflow
// boundary of the output type, its largest value and infinity agree.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "driver/Driver.h"
#include "ir/Interpreter.h"
#include "runtime/Runner.h"
#include "target/cpu/CpuBackend.h"

using namespace kintsugi;

TEST(NonFinite, NaNAtAMaskedKeyIsPoisonTheKernelMayRefine) {
  ir::LoopProgram p =
      driver::load_file(std::string(KINTSUGI_SOURCE_DIR) + "/examples/attention/prefill_causal.te");
  runtime::SizeMap sizes = {{"B", 1}, {"H", 1}, {"S", 256}, {"T", 256}, {"D", 16}};
  driver::ScheduleOptions o;
  o.sizes = sizes;
  driver::Scheduled s = driver::schedule_program(p, o);
  ASSERT_TRUE(s.warnings.empty()) << s.warnings.front();
  driver::Built b = driver::build_kernel(s, o.target, sizes);

  std::map<std::string, runtime::Tensor> in = runtime::random_inputs(p, sizes, 3);
  runtime::Tensor& V = in.at("V");
  const int64_t key = 200, D = 16;
  V.set(key * D + 5, std::numeric_limits<double>::quiet_NaN());
  runtime::Tensor O(DType::F16, {1, 1, 256, D});
  b.cpu->run({&in.at("Q"), &in.at("K"), &in.at("V"), &O}, sizes, {});
  std::map<std::string, const runtime::Tensor*> ptrs;
  for (auto& [n, t] : in) ptrs[n] = &t;
  std::vector<double> ref =
      ir::interpret(p, ir::InterpMode::Exact, ptrs, sizes).outputs.at("O").values;

  // The reference: NaN in every row (0 * NaN at the masked key); the kernel: NaN from the key
  // tile that holds key 200 on (rows 192 and up), finite before it.
  EXPECT_TRUE(std::isnan(ref[0 * D + 5]));
  EXPECT_FALSE(std::isnan(O.get(0 * D + 5)));
  EXPECT_TRUE(std::isnan(O.get(255 * D + 5)));
  double tol = runtime::tolerance_for(p, DType::F16);
  EXPECT_TRUE(runtime::compare_output("O", O, ref, tol, runtime::has_nonfinite(in)).ok);
  // Without a non-finite input the positions of NaN must match exactly.
  EXPECT_FALSE(runtime::compare_output("O", O, ref, tol, false).ok);
}

// At the overflow boundary of the output type, an error within the tolerance decides between its
// largest finite value and infinity: 65519 rounds to f16's 65504, 65521 to inf, and either side
// agrees with the other. Far from the boundary, or with the other sign, they do not.
TEST(NonFinite, LargestFiniteAndInfinityAgreeAtTheOverflowBoundary) {
  const double inf = std::numeric_limits<double>::infinity();
  auto agrees = [](double kernel, double reference) {
    runtime::Tensor out(DType::F16, {2});
    out.set(0, kernel);
    out.set(1, 1.0);
    return runtime::compare_output("Y", out, {reference, 1.0}, 1e-2).ok;
  };
  EXPECT_TRUE(agrees(inf, 65519.0));
  EXPECT_TRUE(agrees(65504.0, 65521.0));
  EXPECT_TRUE(agrees(-inf, -65400.0));
  EXPECT_FALSE(agrees(inf, 60000.0));   // beyond the tolerance of the boundary
  EXPECT_FALSE(agrees(65504.0, 1e6));   // the reference is far beyond it
  EXPECT_FALSE(agrees(-inf, 65519.0));  // the other sign
  EXPECT_FALSE(agrees(std::nan(""), 65519.0));
}
