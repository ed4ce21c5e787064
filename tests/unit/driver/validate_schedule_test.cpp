// Translation validation of schedules (driver/ValidateSchedule.h) and the driver's fallback
// (driver/Driver.h): every example's auto-schedule passes at its own sizes and at benchmark-like
// sizes; a schedule whose result differs is rejected and the driver says which primitive broke
// it; variants users wrote that the split-K update once miscompiled (a value derived from a
// reduction read by a later definition) validate.
#include <gtest/gtest.h>

#include <cmath>

#include "../schedule/ScheduleTestUtil.h"
#include "driver/Driver.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Visit.h"
#include "runtime/Runner.h"
#include "schedule/AutoSchedule.h"
#include "te/Lower.h"
#include "te/Program.h"

using namespace kintsugi;

namespace {

using schedtest::example;
using schedtest::lowered;

// Rows on the CPU are streamed (not computed whole) so that the fused updates are validated.
driver::Scheduled schedule_at(const ir::LoopProgram& p, const runtime::SizeMap& sizes,
                              const std::string& target = "cpu") {
  driver::ScheduleOptions o;
  o.target = driver::Target::parse(target);
  o.sizes = sizes;
  if (target == "cpu") o.whole_row_bytes = 0;
  return driver::schedule_program(p, o);
}

// Row softmax with a temperature applied to the maximum: `m` is a value derived from the
// reduction, read by `e` (fused into the chunks) and by the output (after the combine).
const char* kTemperatureSoftmax = R"(
sizes M = 8, N = 100
param TEMP: f32 = 2.0
input X: f32[M, N]
m[i]    = max[j](X[i, j]) / TEMP
e[i, j] = exp(X[i, j] / TEMP - m[i])
l[i]    = sum[j](e[i, j])
output Y[i, j]: f32 = e[i, j] / l[i]
)";

// Layer norm in two passes with the centred value named once.
const char* kNamedCentredLayerNorm = R"(
sizes M = 8, N = 100
param EPS: f32 = 1e-5
input X: f16[M, N]
mu[i]    = sum[j](f32(X[i, j])) / f32(N)
xc[i, j] = f32(X[i, j]) - mu[i]
var[i]   = sum[j](xc[i, j] * xc[i, j]) / f32(N)
output Y[i, j]: f16 = xc[i, j] * rsqrt(var[i] + EPS)
)";

}  // namespace

TEST(ValidateSchedule, ExamplesPassAtTheirSizes) {
  for (const char* e :
       {"attention/prefill_causal.te", "attention/prefill_gqa.te", "attention/prefill_alibi.te",
        "attention/prefill_windowed.te", "attention/decode_causal.te", "attention/decode_gqa.te",
        "attention/decode_softcap.te", "performer.te"}) {
    SCOPED_TRACE(e);
    ir::LoopProgram p = example(e);
    driver::Scheduled s = schedule_at(p, p.size_hints, "cuda");
    EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
    ASSERT_TRUE(s.validation.has_value());
    EXPECT_TRUE(s.validation->ran) << s.validation->failure;
    EXPECT_TRUE(s.validation->ok) << s.validation->failure;
    EXPECT_FALSE(s.primitives.empty());
  }
  // Row reductions on CUDA: computed whole where the row fits in one tile (no note turns into a
  // warning), fused in strips where it does not.
  for (const char* e : {"norm/softmax.te", "norm/rmsnorm_quant.te"}) {
    SCOPED_TRACE(e);
    ir::LoopProgram p = example(e);
    driver::Scheduled whole = schedule_at(p, p.size_hints, "cuda");
    EXPECT_TRUE(whole.warnings.empty()) << whole.warnings.front();
    EXPECT_TRUE(whole.primitives.empty());
    EXPECT_FALSE(whole.validation.has_value());
    driver::Scheduled strips = schedule_at(p, {{"M", 8}, {"N", 20000}}, "cuda");
    EXPECT_TRUE(strips.warnings.empty()) << strips.warnings.front();
    ASSERT_TRUE(strips.validation.has_value());
    EXPECT_TRUE(strips.validation->ok) << strips.validation->failure;
    EXPECT_FALSE(strips.primitives.empty());
  }
  // On the CPU by default: whole up to a row of 1 MiB, streamed beyond.
  for (const char* e : {"norm/softmax.te", "norm/layernorm.te"}) {
    SCOPED_TRACE(e);
    ir::LoopProgram p = example(e);
    driver::ScheduleOptions o;
    o.sizes = {{"M", 8}, {"N", 262144}};  // f32: 1 MiB, f16: 512 KiB
    driver::Scheduled whole = driver::schedule_program(p, o);
    EXPECT_TRUE(whole.warnings.empty()) << whole.warnings.front();
    EXPECT_TRUE(whole.primitives.empty());
    o.sizes = {{"M", 8}, {"N", 600000}};
    driver::Scheduled streamed = driver::schedule_program(p, o);
    EXPECT_TRUE(streamed.warnings.empty()) << streamed.warnings.front();
    ASSERT_TRUE(streamed.validation.has_value());
    EXPECT_TRUE(streamed.validation->ok) << streamed.validation->failure;
    EXPECT_FALSE(streamed.primitives.empty());
  }
  // Nothing to fuse (one reduction): nothing scheduled, nothing to validate; but a row too long
  // to hold whole is streamed, its lone reduction with nothing to repair.
  driver::Scheduled l2 = schedule_at(example("norm/l2norm.te"), {});
  EXPECT_TRUE(l2.primitives.empty());
  EXPECT_FALSE(l2.validation.has_value());
  for (int64_t rows : {64, 4096}) {
    driver::Scheduled l2_long =
        schedule_at(example("norm/l2norm.te"), {{"M", rows}, {"N", 131072}}, "cuda");
    EXPECT_TRUE(l2_long.warnings.empty()) << l2_long.warnings.front();
    ASSERT_TRUE(l2_long.validation.has_value());
    EXPECT_TRUE(l2_long.validation->ok) << l2_long.validation->failure;
    EXPECT_FALSE(l2_long.primitives.empty());
  }
}

// A dim divided in a shape (N / G, a scale per group of G columns) stays a multiple of the
// divisor, which the program needs to read in bounds: rounded up from two tiles and a partial
// one, down where that would pass the given size.
TEST(ValidateSchedule, ShrunkSizesKeepDividedDimsMultiples) {
  ir::LoopProgram p = schedtest::lowered(
      "sizes M = 8, N = 512\nparam G: i32 = 128\ninput X: f32[M, N]\n"
      "amax[r, g: N / G] = max[k: G](abs(X[r, g * G + k]))\n"
      "output Q[r, c]: f32 = X[r, c] / amax[r, c / G]\n");
  driver::ValidationOptions o;
  o.sizes = {{"M", 64}, {"N", 4096}};
  o.axis_tile = 1024;
  o.row_tile = 4;
  o.axis_dim = "N";
  runtime::SizeMap s = driver::shrink_sizes(p, o, 5, 7, true);
  EXPECT_EQ(s.at("N") % 128, 0) << s.at("N");
  EXPECT_GE(s.at("N"), 2 * 1024 + 1);  // a tile past the second, partial
  o.sizes["N"] = 2500;                 // groups of 1000: rounding 2500 up would pass the given size
  o.params = {{"G", 1000}};
  EXPECT_EQ(driver::shrink_sizes(p, o, 5, 7, true).at("N"), 2000);
}

TEST(ValidateSchedule, ShrunkSizesCoverTilesChunksAndRows) {
  ir::LoopProgram p = example("attention/prefill_causal.te");
  driver::ValidationOptions o;
  o.sizes = {{"B", 2}, {"H", 32}, {"S", 4096}, {"T", 8192}, {"D", 128}};
  o.axis_tile = 64;
  o.row_tile = 128;
  runtime::SizeMap s = driver::shrink_sizes(p, o, 5, 131, true);
  EXPECT_EQ(s.at("T"), 2 * 64 + 32 + 3);  // two tiles and a partial one
  EXPECT_EQ(s.at("S"), 128 + 3);          // two row tiles, the second partial
  EXPECT_EQ(s.at("D"), 4);                // scaled down by 2^5
  EXPECT_EQ(s.at("H"), 1);
  EXPECT_EQ(driver::shrink_sizes(p, o, 5, 5, false).at("S"), 5);
  EXPECT_EQ(driver::shrink_sizes(p, o, 5, 5, false, driver::AxisEnd::OneElement).at("T"),
            2 * 64 + 1);  // the last tile (chunk) holds one element
  o.chunk_tiles = 4;
  EXPECT_EQ(driver::shrink_sizes(p, o, 5, 131, true).at("T"), 2 * 256 + 32 + 3);  // two chunks
  EXPECT_EQ(driver::shrink_sizes(p, o, 5, 5, false, driver::AxisEnd::OneElement).at("T"),
            2 * 256 + 1);
  // As many rows as keys stay as many (the causal diagonal); more rows than keys stay more (rows
  // the bottom-right aligned mask leaves without a key).
  o.chunk_tiles = 1;
  o.sizes["T"] = 4096;
  EXPECT_EQ(driver::shrink_sizes(p, o, 5, 131, true).at("S"), 163);
  o.sizes["T"] = 2048;
  EXPECT_EQ(driver::shrink_sizes(p, o, 5, 131, true).at("S"), 163 + 131);
  o.sizes["T"] = 100;  // never larger than the run's own size
  EXPECT_EQ(driver::shrink_sizes(p, o, 5, 131, true).at("T"), 100);
  // Fewer rows than keys stay fewer: the keys one more than the rows where the rows' cap reaches
  // the axis (rotary attention reads its table at i + T - S, in bounds only where S <= T).
  o.sizes["S"] = 200;
  o.sizes["T"] = 300;
  runtime::SizeMap fewer = driver::shrink_sizes(p, o, 5, 131, true, driver::AxisEnd::OneElement);
  EXPECT_EQ(fewer.at("S"), 131);
  EXPECT_EQ(fewer.at("T"), 132);
}

TEST(ValidateSchedule, RowsWithoutAKeyAtTheRunsSizesAreValidated) {
  // A log-sum-exp over a bottom-right causal mask with more queries than keys: the first S - T
  // rows see no key (the reference: -inf + log(NaN) = NaN). Validated at sizes that keep S > T,
  // a schedule that turns those rows into -inf is rejected.
  ir::LoopProgram p = lowered(R"(
input Q: f16[S, D]
input K: f16[T, D]
s[i, j] = sum[d](f32(Q[i, d]) * f32(K[j, d]))
c[i, j] = select(j <= i + T - S, s[i, j], -inf)
m[i]    = max[j](c[i, j])
e[i, j] = exp(c[i, j] - m[i])
l[i]    = sum[j](e[i, j])
output LSE[i]: f32 = m[i] + log(l[i])
)");
  driver::Scheduled s = schedule_at(p, {{"S", 4096}, {"T", 2048}, {"D", 64}});
  // Whatever schedule is handed out agrees with the program where rows have no key.
  runtime::SizeMap run = {{"S", 300}, {"T", 150}, {"D", 4}};
  std::map<std::string, runtime::Tensor> in = runtime::random_inputs(p, run, 5);
  std::map<std::string, const runtime::Tensor*> ptrs;
  for (auto& [n, t] : in) ptrs[n] = &t;
  std::vector<double> ref =
      ir::interpret(p, ir::InterpMode::Exact, ptrs, run).outputs.at("LSE").values;
  std::vector<double> got =
      ir::interpret(s.program, ir::InterpMode::Exact, ptrs, run).outputs.at("LSE").values;
  ASSERT_TRUE(std::isnan(ref[0]));
  for (size_t i = 0; i < ref.size(); ++i)
    if (std::isnan(ref[i]) != std::isnan(got[i]) ||
        (!std::isnan(ref[i]) && std::fabs(ref[i] - got[i]) > 1e-9 * (1 + std::fabs(ref[i]))))
      FAIL() << "row " << i << ": " << got[i] << " where the reference is " << ref[i] << " ("
             << (s.warnings.empty() ? "no warning" : s.warnings.front()) << ")";
}

TEST(ValidateSchedule, RejectsAChangedResult) {
  ir::LoopProgram p = example("norm/softmax.te");
  driver::Scheduled s = schedule_at(p, p.size_hints);
  ASSERT_TRUE(s.validation && s.validation->ok);
  // The same schedule with exp replaced by exp2: every step still runs, the result differs.
  ir::LoopProgram broken = s.program;
  broken.body = ir::mutate_exprs(broken.body, [](const ir::Expr& e) {
    return ir::mutate(e, [](const ir::Expr& n) -> ir::Expr {
      if (n->op == ir::Op::Call && n->fn == ir::MathFn::Exp)
        return ir::make_call(ir::MathFn::Exp2, n->args);
      return n;
    });
  });
  ASSERT_NE(ir::to_string(broken), ir::to_string(s.program));
  driver::ValidationOptions o;
  o.sizes = p.size_hints;
  driver::ValidationReport r = driver::validate_schedule(p, broken, o);
  EXPECT_TRUE(r.ran);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("output Y"), std::string::npos) << r.failure;
}

TEST(ValidateSchedule, DerivedValuesOfAReductionAreRecomputedAfterTheCombine) {
  // Split-K (8 rows) and rolling update (4096 rows): both validate and keep the fusion.
  for (const char* src : {kTemperatureSoftmax, kNamedCentredLayerNorm})
    for (int64_t rows : {8, 4096}) {
      SCOPED_TRACE(std::string(src) + " M=" + std::to_string(rows));
      ir::LoopProgram p = lowered(src);
      driver::Scheduled s = schedule_at(p, {{"M", rows}, {"N", 1000}});
      for (const std::string& w : s.warnings) ADD_FAILURE() << w;
      ASSERT_TRUE(s.validation.has_value());
      EXPECT_TRUE(s.validation->ok) << s.validation->failure;
      std::string fused = rows < 128 ? "split_k_update" : "rolling_update";
      EXPECT_NE(std::find(s.primitives.begin(), s.primitives.end(), fused), s.primitives.end());
    }
}

TEST(ValidateSchedule, AFailingScheduleFallsBackAndNamesThePrimitive) {
  // Without the extrapolated mean (the scheduled layer norm of the example, its mean read as a
  // running sum / N), the f32 variance cancels on rows far from zero; the validator sees it.
  ir::LoopProgram p = example("norm/layernorm.te");
  schedule::AutoScheduleOptions a;  // 64 x 64 tiles, as ValidationOptions' default
  a.sizes = p.size_hints;
  schedule::Schedule fused = schedule::auto_schedule(p, a, nullptr);
  ASSERT_FALSE(fused.trace().empty());
  driver::ValidationOptions v;
  v.sizes = p.size_hints;
  driver::ValidationReport valid = driver::validate_schedule(p, fused.program(), v);
  ASSERT_TRUE(valid.ran && valid.ok) << valid.failure;
  // Undo the extrapolation in the scheduled program: every factor N / covered becomes 1.
  ir::LoopProgram plain = fused.program();
  plain.body = ir::mutate_exprs(plain.body, [](const ir::Expr& n) -> ir::Expr {
    if (n->op == ir::Op::Mul && n->args[1]->op == ir::Op::Div &&
        n->args[1]->args[1]->op == ir::Op::Cast && n->args[1]->args[1]->args[0]->op == ir::Op::Max)
      return n->args[0];
    return n;
  });
  ASSERT_NE(ir::to_string(plain), ir::to_string(fused.program()));
  driver::ValidationReport r = driver::validate_schedule(p, plain, v);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("offset rows"), std::string::npos) << r.failure;
}

TEST(ValidateSchedule, AnOutputThatCancelsMayBeRoundedInAnotherOrder) {
  // Cross-entropy with label smoothing over rows offset by 10^4: a loss of about 8 from terms of
  // 10^4, so that the f32 sum of a row, in any order, is off by about the tolerance. Streamed on
  // CUDA (2 rows of 131072), the fused updates add the row's tiles in another order than the
  // original; the validator once took the difference for an error and fell back to the
  // unscheduled program.
  ir::LoopProgram p = lowered(R"(
sizes M = 8, N = 100
param EPS: f32 = 0.1
input X: f32[M, N]
input TGT: i32[M]
m[r]       = max[v](X[r, v])
l[r]       = sum[v](exp(X[r, v] - m[r]))
mean_x[r]  = sum[v](X[r, v]) / f32(N)
output LOSS[r]: f32 = log(l[r]) + m[r] - (1.0 - EPS) * X[r, TGT[r]] - EPS * mean_x[r]
)");
  driver::Scheduled s = schedule_at(p, {{"M", 2}, {"N", 131072}}, "cuda");
  for (const std::string& w : s.warnings) ADD_FAILURE() << w;
  ASSERT_TRUE(s.validation.has_value());
  EXPECT_TRUE(s.validation->ok) << s.validation->failure;
  EXPECT_FALSE(s.primitives.empty());
}

TEST(ValidateSchedule, UnscheduledWhenAsked) {
  ir::LoopProgram p = example("norm/softmax.te");
  driver::ScheduleOptions o;
  o.schedule = "none";
  driver::Scheduled s = driver::schedule_program(p, o);
  EXPECT_TRUE(s.primitives.empty());
  EXPECT_FALSE(s.validation.has_value());
  EXPECT_EQ(ir::to_string(s.program), ir::to_string(p));
  o.schedule = "fast";
  EXPECT_THROW(driver::schedule_program(p, o), UserError);
}

TEST(ValidateSchedule, AChunkOfOneElementIsNotFusedThroughAnExponentiatedSum) {
  // A split-K chain whose later reductions read values derived from a chunk's local partials: a
  // sum extrapolated to the whole axis, a root of a sum of squares about it, a min of exp(t0 - a1).
  // A chunk of one element extrapolates its only term N-fold; its local root is far above the
  // global one, its partial min underflows to 0 and the repair's factor exp(a1 - a1') overflows.
  // The scheduler kept a zero partial as it was and the validator, whose instance with few rows
  // ends in a chunk of one element, rejected the schedule without that guard. A repair that
  // exponentiates a value a sum produces is now refused before that (the fuzzer found such
  // chunk-local sums overflow where neither the guard nor the validator helps): the driver warns
  // and runs those reductions unfused.
  ir::LoopProgram p = lowered(R"(
param EPS: f32 = 1e-5
input X: f32[M, N]
input Bias: f32[M]
input Y: f32[M, N]
t0[i, j] = X[i, j] * Y[i, j]
a0[i] = sum[j](exp(t0[i, j])) + Bias[i]
a1[i] = sqrt(sum[j]((t0[i, j] - a0[i]) * (t0[i, j] - a0[i])) + EPS)
a2[i] = min[j](exp(t0[i, j] - a1[i]))
d2[i] = f32(f16(a2[i]))
a3[i] = sum[j](exp(t0[i, j] - d2[i]) * t0[i, j])
output Z[i, j]: bf16 = select(a3[i] > 0, t0[i, j] / a3[i], 0)
)");
  driver::ScheduleOptions o;
  o.target = driver::Target::parse("cuda");
  o.sizes = {{"M", 8}, {"N", 10000}};  // a row longer than CUDA computes whole
  o.chunk_tiles = 1;
  driver::Scheduled s = driver::schedule_program(p, o);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings.front().find("the repair exponentiates a1.sum0"), std::string::npos)
      << s.warnings.front();
}

// A chain over a param's extent that the schedule walks in tiles (the first L positions of a
// cache of TMAX) is validated at a shrunk L, a partial tile past two tiles, and the cache it
// reads kept at least that long: at L = 60000 the instances stay small.
TEST(ValidateSchedule, ParamAxesWalkedInTilesAreShrunk) {
  ir::LoopProgram p = lowered(R"(
sizes M = 4, TMAX = 128
param L: i32 = 100
input X: f32[M, TMAX]
m[i] = max[j: L](X[i, j])
l[i] = sum[j: L](exp(X[i, j] - m[i]))
output Y[i, j: L]: f32 = exp(X[i, j] - m[i]) / l[i]
)");
  driver::ScheduleOptions o;
  o.target = driver::Target::parse("cpu");
  o.sizes = {{"M", 4}, {"TMAX", 100000}};
  o.params = {{"L", 60000}};
  o.whole_row_bytes = 0;
  driver::Scheduled s = driver::schedule_program(p, o);
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
  ASSERT_TRUE(s.validation.has_value());
  EXPECT_TRUE(s.validation->ok) << s.validation->failure;
  const double shrunk = s.validation->params.at("L");
  EXPECT_LE(shrunk, 4096);              // two tiles and a partial one (of 1024 columns on the CPU)
  EXPECT_EQ(std::fmod(shrunk, 16), 0);  // 60000 is a multiple of 16: so is the instance's L
  EXPECT_GE(static_cast<double>(s.validation->shrunk.at("TMAX")), shrunk);
  EXPECT_GE(static_cast<double>(s.validation->few_rows.at("TMAX")), shrunk);
}

// A table looked up at a position computed through floats (T5's log-spaced buckets) keeps its
// size at the run; the head dimension, which nothing looks up, is still shrunk. (Shrunk with the
// rest, the table was read out of bounds at every scale but the run's, and validation
// interpreted the whole head dimension: a minute at D = 128.)
TEST(ValidateSchedule, ATableLookedUpByAComputedPositionKeepsItsSize) {
  ir::LoopProgram p = lowered(R"(
input Q: f16[H, S, D]
input K: f16[H, T, D]
input BIAS: f32[H, NB]
dist[i: S, j: T] = abs(j - i)
bucket[i, j] = select(dist[i, j] < 8, dist[i, j], min(8 + i32(log(f32(dist[i, j]) / 8.0) * 2.0), 15))
s[h, i, j] = sum[d](f32(Q[h, i, d]) * f32(K[h, j, d])) + BIAS[h, bucket[i, j]]
m[h, i] = max[j](s[h, i, j])
l[h, i] = sum[j](exp(s[h, i, j] - m[h, i]))
output LSE[h, i]: f32 = m[h, i] + log(l[h, i])
)");
  driver::Scheduled s =
      schedule_at(p, {{"H", 16}, {"S", 4096}, {"T", 4096}, {"D", 128}, {"NB", 16}});
  ASSERT_TRUE(s.validation.has_value());
  EXPECT_TRUE(s.validation->ok) << s.validation->failure;
  EXPECT_EQ(s.validation->shrunk.at("NB"), 16);
  EXPECT_LT(s.validation->shrunk.at("D"), 128);
}
