// Verification on a sample of rows (runtime/RowSample.h): which programs are independent along a
// size, and that the program at the sampled rows computes exactly those rows of the whole
// instance.
#include <gtest/gtest.h>

#include "../schedule/ScheduleTestUtil.h"
#include "driver/Driver.h"
#include "runtime/RowSample.h"

using namespace kintsugi;
using schedtest::lowered;

namespace {

ir::LoopProgram example(const std::string& name) {
  return driver::load_file(std::string(KINTSUGI_SOURCE_DIR) + "/" + name);
}

}  // namespace

TEST(RowSample, RowWiseProgramsAreIndependentAlongTheirRows) {
  for (const char* name :
       {"examples/norm/softmax.te", "examples/norm/layernorm.te", "examples/norm/rmsnorm_quant.te",
        "examples/norm/l2norm.te", "tests/generality/cross_entropy.te"})
    EXPECT_EQ(runtime::independent_size(example(name)), "M") << name;
  // Attention: along the batch (its first size), not along the queries (K and V are shared).
  EXPECT_EQ(runtime::independent_size(example("examples/attention/prefill_causal.te")), "B");
}

TEST(RowSample, ProgramsThatMixRowsAreNot) {
  // A reduction over the rows.
  EXPECT_EQ(runtime::independent_size(lowered("sizes M = 8, N = 4\ninput X: f32[M, N]\n"
                                              "output C[j]: f32 = sum[i](X[i, j])\n")),
            "");
  // A row read at another row's index.
  EXPECT_EQ(runtime::independent_size(lowered("sizes M = 8, N = 4\ninput X: f32[M, N]\n"
                                              "input P: i32[M]\n"
                                              "output Y[i, j]: f32 = X[P[i], j]\n")),
            "");
  // The size in an expression (a mean over the rows' count).
  EXPECT_EQ(runtime::independent_size(lowered("sizes M = 8, N = 4\ninput X: f32[M, N]\n"
                                              "output Y[i, j]: f32 = X[i, j] / f32(M)\n")),
            "");
  // Rows as a second dimension: not sampled.
  EXPECT_EQ(runtime::independent_size(lowered("sizes M = 8, N = 4\ninput X: f32[N, M]\n"
                                              "output Y[j, i]: f32 = X[j, i] * 2\n")),
            "N");
}

TEST(RowSample, SampledRowsMatchTheWholeInstance) {
  ir::LoopProgram p = example("tests/generality/cross_entropy.te");
  runtime::SizeMap sizes = {{"M", 300}, {"N", 70}};
  std::map<std::string, runtime::Tensor> in = runtime::random_inputs(p, sizes, 5);
  std::map<std::string, const runtime::Tensor*> all;
  for (auto& [n, t] : in) all[n] = &t;
  std::vector<double> whole =
      ir::interpret(p, ir::InterpMode::Exact, all, sizes).outputs.at("LOSS").values;

  std::vector<int64_t> rows = runtime::sample_rows(300, 40, 9);
  ASSERT_EQ(rows.size(), 40u);
  EXPECT_EQ(rows.front(), 0);
  EXPECT_EQ(rows.back(), 299);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  std::map<std::string, runtime::Tensor> part = runtime::take_rows(p, "M", in, rows);
  std::map<std::string, const runtime::Tensor*> some;
  for (auto& [n, t] : part) some[n] = &t;
  runtime::SizeMap at = sizes;
  at["M"] = 40;
  std::vector<double> sampled =
      ir::interpret(p, ir::InterpMode::Exact, some, at).outputs.at("LOSS").values;
  for (size_t k = 0; k < rows.size(); ++k)
    EXPECT_EQ(sampled[k], whole[static_cast<size_t>(rows[k])]) << "row " << rows[k];
}

TEST(RowSample, FewRowsAreAllTaken) {
  EXPECT_EQ(runtime::sample_rows(5, 64, 1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}
