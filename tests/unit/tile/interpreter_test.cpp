// The tile interpreter (tile/Interpreter.h) and the translation validation of tile programs
// (driver::validate_tiles): every example's tile program computes what its scheduled loop program
// computes, at sizes with tails, on both targets' schedules; a tile program changed by hand (a
// store region shifted, a reducer swapped, a tail mask dropped) is caught, and the report names
// the input set and the output.
#include <gtest/gtest.h>

#include <functional>

#include "TileTestUtil.h"
#include "driver/Driver.h"
#include "ir/Interpreter.h"
#include "runtime/Runner.h"
#include "tile/Interpreter.h"
#include "tile/Passes.h"

using namespace kintsugi;
using tile::TileOp;

namespace {

driver::Scheduled schedule_at(const ir::LoopProgram& p, const runtime::SizeMap& sizes,
                              const std::string& target) {
  driver::ScheduleOptions o;
  o.target = driver::Target::parse(target);
  o.sizes = sizes;
  return driver::schedule_program(p, o);
}

tile::TileProgram optimized(const ir::LoopProgram& scheduled, const runtime::SizeMap& sizes) {
  tile::TileProgram tp = tile::translate(scheduled, sizes);
  tile::optimize(tp);
  return tp;
}

// The largest difference between the tile interpreter and the reference on the scheduled program,
// relative to the largest |reference| value (NaN when an output's NaNs or infinities differ).
double max_rel_diff(const ir::LoopProgram& scheduled, const tile::TileProgram& tp,
                    const runtime::SizeMap& sizes, ir::InterpMode mode) {
  std::map<std::string, runtime::Tensor> inputs = runtime::random_inputs(scheduled, sizes, 7);
  std::map<std::string, const runtime::Tensor*> in;
  for (auto& [name, t] : inputs) in[name] = &t;
  ir::InterpResult ref = ir::interpret(scheduled, mode, in, sizes);
  ir::InterpResult got = tile::interpret(tp, mode, in, sizes);
  double worst = 0.0;
  for (const auto& [name, r] : ref.outputs) {
    const ir::InterpBuffer& g = got.outputs.at(name);
    double scale = 1e-30, err = 0.0;
    for (size_t i = 0; i < r.values.size(); ++i) {
      if (std::isnan(r.values[i]) != std::isnan(g.values[i])) return NAN;
      if (std::isnan(r.values[i])) continue;
      scale = std::max(scale, std::fabs(r.values[i]));
      err = std::max(err, std::fabs(r.values[i] - g.values[i]));
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

struct Case {
  const char* example;
  runtime::SizeMap sizes;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> list = {
      {"norm/softmax.te", {{"M", 70}, {"N", 200}}},
      {"norm/softmax.te", {{"M", 3}, {"N", 300}}},  // split-K
      {"norm/layernorm.te", {{"M", 9}, {"N", 150}}},
      {"norm/rmsnorm_quant.te", {{"M", 5}, {"N", 131}}},
      {"attention/prefill_causal.te", {{"B", 1}, {"H", 2}, {"S", 70}, {"T", 70}, {"D", 16}}},
      {"attention/decode_gqa.te", {{"B", 1}, {"HQ", 4}, {"HK", 2}, {"S", 1}, {"T", 300}, {"D", 8}}},
  };
  return list;
}

TEST(TileInterpreter, AgreesWithTheScheduledProgram) {
  for (const std::string target : {"cpu", "cuda"})
    for (const Case& c : cases()) {
      SCOPED_TRACE(std::string(c.example) + " on " + target);
      ir::LoopProgram p = schedtest::example(c.example);
      driver::Scheduled s = schedule_at(p, c.sizes, target);
      tile::TileProgram tp = optimized(s.program, c.sizes);
      EXPECT_LE(max_rel_diff(s.program, tp, c.sizes, ir::InterpMode::Exact), 1e-9);
      EXPECT_LE(max_rel_diff(s.program, tp, c.sizes, ir::InterpMode::Typed), 2e-3);
    }
}

TEST(TileInterpreter, SpecialisedExtentsAreChecked) {
  const Case& c = cases()[4];
  ir::LoopProgram p = schedtest::example(c.example);
  driver::Scheduled s = schedule_at(p, c.sizes, "cuda");
  tile::TileProgram tp = optimized(s.program, c.sizes);
  runtime::SizeMap other = c.sizes;
  other["D"] = 32;
  std::map<std::string, runtime::Tensor> inputs = runtime::random_inputs(s.program, other, 1);
  std::map<std::string, const runtime::Tensor*> in;
  for (auto& [name, t] : inputs) in[name] = &t;
  EXPECT_THROW(tile::interpret(tp, ir::InterpMode::Exact, in, other), RuntimeArgError);
}

// validate_tiles on the scheduled softmax with the tile program that `mutate` changed.
driver::ValidationReport validate_mutated(const std::function<void(tile::TileProgram&)>& mutate) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  runtime::SizeMap sizes = {{"M", 200}, {"N", 10000}};  // fused: a row of 40 KB is not held whole
  driver::Scheduled s = schedule_at(p, sizes, "cuda");
  EXPECT_TRUE(s.validation && s.validation->ran && s.validation->ok);
  return driver::validate_tiles(s.program,
                                [&](const runtime::SizeMap& at) {
                                  tile::TileProgram tp = optimized(s.program, at);
                                  mutate(tp);
                                  return tp;
                                },
                                *s.validation, {});
}

// Calls `f` on the first operation for which `pick` holds (false if there is none).
bool first_op(tile::TileProgram& tp, const std::function<bool(const TileOp&)>& pick,
              const std::function<void(TileOp&)>& f) {
  for (tile::Kernel& k : tp.kernels) {
    bool done = false;
    tile::for_each_op(k.body, [&](TileOp& o) {
      if (done || !pick(o)) return;
      f(o);
      done = true;
    });
    if (done) return true;
  }
  return false;
}

TEST(ValidateTiles, TheCompilersTileProgramPasses) {
  driver::ValidationReport r = validate_mutated([](tile::TileProgram&) {});
  EXPECT_TRUE(r.ran) << r.failure;
  EXPECT_TRUE(r.ok) << r.failure;
}

TEST(ValidateTiles, AShiftedStoreIsCaught) {
  driver::ValidationReport r = validate_mutated([](tile::TileProgram& tp) {
    for (tile::Kernel& k : tp.kernels)
      tile::for_each_op(k.body, [&](TileOp& o) {
        if (o.kind == tile::OpKind::Store && o.buffer == "Y")
          o.starts.back() = ir::make_binary(ir::Op::Add, o.starts.back(), ir::make_int(1));
      });
  });
  EXPECT_TRUE(r.ran);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("output Y"), std::string::npos) << r.failure;
}

// The sum of the exponentials made a max. (Not the running max made a min: softmax is the same
// for any shift of its inputs, so that program is still correct.)
TEST(ValidateTiles, ASwappedReducerIsCaught) {
  driver::ValidationReport r = validate_mutated([](tile::TileProgram& tp) {
    auto sum = [](const TileOp& o) {
      return o.kind == tile::OpKind::Reduce && o.reducer == ir::Reducer::Sum;
    };
    ASSERT_TRUE(first_op(tp, sum, [](TileOp& o) { o.reducer = ir::Reducer::Max; }));
  });
  EXPECT_FALSE(r.ok);
}

TEST(ValidateTiles, ADroppedTailCheckIsCaught) {
  driver::ValidationReport r = validate_mutated([](tile::TileProgram& tp) {
    for (tile::Kernel& k : tp.kernels)
      tile::for_each_op(k.body, [&](TileOp& o) {
        if (o.kind == tile::OpKind::Load)
          for (size_t d = 0; d < o.bounds_checked.size(); ++d) o.bounds_checked[d] = false;
      });
  });
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("tile program fails"), std::string::npos) << r.failure;
}

}  // namespace
