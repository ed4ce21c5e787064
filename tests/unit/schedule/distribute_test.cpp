// distribute: equivalence before/after on random inputs (row strips with tails, a key-tile loop
// whose bounds depend on the row, windowed masks whose start does too), structured errors, and
// trace replay.
#include "ScheduleTestUtil.h"
#include "schedule/AutoSchedule.h"

using namespace kintsugi;
using schedtest::expect_equivalent;
using schedule::LoopRef;
using schedule::Schedule;
using schedule::ScheduleError;

namespace {

const char* kRowSum = R"(
sizes M = 6, N = 10
input X: f32[M, N]
output y[i]: f32 = sum[j](X[i, j] * X[i, j])
)";

// The auto-scheduler's fusion without its row tiling and buffer compaction.
Schedule fused_rows(const ir::LoopProgram& p, const runtime::SizeMap& sizes) {
  schedule::AutoScheduleOptions o;
  o.tile = 4;
  o.row_tile = 0;
  o.sizes = sizes;
  o.split_k_below_rows = o.split_k_below_instances = 1;
  std::vector<std::string> notes;
  nlohmann::json trace = schedule::auto_schedule(p, o, &notes).trace();
  EXPECT_EQ(trace.back().at("primitive"), "compact_buffer");
  trace.erase(trace.end() - 1);  // distribute runs before buffers are compacted
  return schedule::replay(p, trace);
}

}  // namespace

TEST(Distribute, RowStripsWithTails) {
  ir::LoopProgram p = schedtest::lowered(kRowSum);
  Schedule s(p);
  auto loops = s.distribute(LoopRef{"y", "i"}, 4);
  EXPECT_EQ(loops[0].var, "i0");
  EXPECT_EQ(loops[1].var, "i1");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("for i0 in range((M + 3) / 4):"), std::string::npos) << text;
  EXPECT_NE(text.find("where i0 * 4 + i1 < M"), std::string::npos) << text;
  expect_equivalent(p, s.program(),
                    {{{"M", 6}, {"N", 10}}, {{"M", 1}, {"N", 3}}, {{"M", 9}, {"N", 1}}});
}

TEST(Distribute, CausalKeyLoopIsWidenedAndGuarded) {
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  runtime::SizeMap shape = {{"B", 1}, {"H", 1}, {"S", 7}, {"T", 11}, {"D", 3}};
  Schedule s = fused_rows(p, shape);
  s.distribute(LoopRef{"s.sum0", "i"}, 4);
  std::string text = ir::to_string(s.program());
  // The key-tile loop runs to the largest bound of the strip; each row keeps its own (at least
  // one tile: a row with no key runs a masked one, propagate_mask).
  EXPECT_NE(text.find("for j0 in range(max(min((T + 3) / 4, (i0 * 4 + T - S + 3) / 4 + 1), min(1, "
                      "(T + 3) / 4))):"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("j0 < max(min((T + 3) / 4, (i0 * 4 + i1 + T - S) / 4 + 1), min(1, (T + 3) / "
                      "4))"),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(),
                    {shape,
                     {{"B", 1}, {"H", 2}, {"S", 9}, {"T", 5}, {"D", 2}},
                     {{"B", 1}, {"H", 1}, {"S", 5}, {"T", 13}, {"D", 2}}});
  Schedule r = schedule::replay(p, s.trace());
  EXPECT_EQ(ir::to_string(r.program()), text);
}

TEST(Distribute, WindowStartDependsOnTheRow) {
  ir::LoopProgram p = schedtest::example("attention/prefill_windowed.te");
  runtime::SizeMap shape = {{"B", 1}, {"HQ", 2}, {"HK", 1}, {"S", 9}, {"T", 14}, {"D", 2}};
  Schedule s = fused_rows(p, shape);
  s.distribute(LoopRef{"s.sum0", "i"}, 4);
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("j0 >= max(0, min(max(0, (i0 * 4 + i1 + T - S - W + 1) / 4), (T + 3) / 4 - "
                      "1))"),
            std::string::npos)
      << text;
  for (double w : {2.0, 5.0}) {
    ir::LoopProgram a = p, b = s.program();
    for (auto* prog : {&a, &b})
      for (ir::Param& q : prog->params)
        if (q.name == "W") q.value = w;
    expect_equivalent(a, b,
                      {shape, {{"B", 1}, {"HQ", 1}, {"HK", 1}, {"S", 13}, {"T", 6}, {"D", 2}}});
  }
}

TEST(Distribute, Errors) {
  ir::LoopProgram p = schedtest::lowered(kRowSum);
  Schedule s(p);
  try {
    s.distribute(LoopRef{"y", "j"}, 4);
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_EQ(std::string(e.what()),
              "distribute: block 'y' reduces or scans over loop 'j' (iteration variable 'j'), so "
              "its iterations are not independent");
  }
  EXPECT_THROW(s.distribute(LoopRef{"y", "i"}, 0), ScheduleError);
  EXPECT_TRUE(s.trace().empty());  // failed primitives leave no trace
}

TEST(Distribute, GroupsOfRowsSizedByAnExpression) {
  // Rows h read row h / (H / G): a group of H / G rows shares one; H need not be a multiple.
  ir::LoopProgram p = schedtest::lowered(R"(
sizes H = 6, G = 3, N = 5
input X: f32[H, N]
input W: f32[G, N]
output y[h, j]: f32 = X[h / (H / G), j] * X[h, j] + W[0, j]
)");
  Schedule s(p);
  auto dim = [](const char* n) { return ir::make_var(n, ir::VarKind::Dim, DType::Int); };
  ir::Expr group = ir::make_binary(ir::Op::Div, dim("H"), dim("G"));
  s.distribute(LoopRef{"y", "h"}, group);
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("for h0 in range((H + H / G - 1) / (H / G)):"), std::string::npos) << text;
  EXPECT_NE(text.find("for h1 in range(H / G):"), std::string::npos) << text;
  EXPECT_NE(text.find("where h0 * (H / G) + h1 < H"), std::string::npos) << text;
  expect_equivalent(p, s.program(),
                    {{{"H", 6}, {"G", 3}, {"N", 5}},
                     {{"H", 7}, {"G", 3}, {"N", 2}},
                     {{"H", 8}, {"G", 1}, {"N", 3}},
                     {{"H", 2}, {"G", 2}, {"N", 1}}});
  EXPECT_EQ(s.trace().back().at("factor").dump(), R"({"args":[{"dim":"H"},{"dim":"G"}],"op":"/"})");
  Schedule r = schedule::replay(p, s.trace());
  EXPECT_EQ(ir::to_string(r.program()), text);
  // A trace whose factor uses an operator no factor has is refused.
  nlohmann::json bad_trace = s.trace();
  bad_trace.back()["factor"]["op"] = "^";
  try {
    schedule::replay(p, bad_trace);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "schedule trace: unknown operator '^' in a split factor");
  }
  // A factor that is not fixed for the run is refused.
  Schedule bad(p);
  try {
    bad.split(LoopRef{"y", "h"}, ir::make_var("j", ir::VarKind::Index, DType::Int));
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_EQ(std::string(e.what()),
              "split: the factor for loop 'h' must be an integer over sizes, got 'j'");
  }
}
