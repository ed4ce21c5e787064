// split, reorder, fuse, bind: equivalence before/after on random inputs, structured errors, and
// trace replay.
#include "ScheduleTestUtil.h"

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
const std::vector<runtime::SizeMap> kShapes = {
    {{"M", 6}, {"N", 10}}, {{"M", 7}, {"N", 13}}, {{"M", 1}, {"N", 1}}};
}  // namespace

TEST(Split, DivisibleAndTail) {
  ir::LoopProgram p = schedtest::lowered(kRowSum);
  Schedule s(p);
  auto loops = s.split(LoopRef{"y", "j"}, 4);
  EXPECT_EQ(loops[0].var, "j0");
  EXPECT_EQ(loops[1].var, "j1");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("for j0 in range((N + 3) / 4):"), std::string::npos) << text;
  EXPECT_NE(text.find("reduce j:N = j0 * 4 + j1) where j0 * 4 + j1 < N:"), std::string::npos)
      << text;
  expect_equivalent(p, s.program(), kShapes);
  Schedule d(p);
  d.split(LoopRef{"y", "i"}, 1);  // 1 divides everything: no predicate
  EXPECT_EQ(ir::to_string(d.program()).find("where"), std::string::npos);
  expect_equivalent(p, d.program(), kShapes);
}

TEST(Split, Errors) {
  Schedule s(schedtest::lowered(kRowSum));
  EXPECT_THROW(s.split(LoopRef{"y", "j"}, 0), ScheduleError);
  try {
    s.split(LoopRef{"y", "k"}, 4);
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_EQ(std::string(e.what()), "split: block 'y' is not inside a loop 'k' (its loops: i, j)");
  }
  try {
    s.split(LoopRef{"z", "j"}, 4);
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_EQ(std::string(e.what()), "split: there is no block named 'z' (blocks: y)");
  }
  EXPECT_TRUE(s.trace().empty());  // failed primitives leave no trace
}

TEST(Reorder, TiledLoops) {
  ir::LoopProgram p = schedtest::lowered(kRowSum);
  Schedule s(p);
  s.split(LoopRef{"y", "i"}, 4);
  s.split(LoopRef{"y", "j"}, 4);
  s.reorder("y", {"i0", "j0", "i1", "j1"});
  std::string text = ir::to_string(s.program());
  EXPECT_LT(text.find("for j0"), text.find("for i1")) << text;
  expect_equivalent(p, s.program(), kShapes);
  EXPECT_THROW(s.reorder("y", {"i0", "i0"}), ScheduleError);
  EXPECT_THROW(s.reorder("y", {"i0", "i1"}), ScheduleError);  // not adjacent: j0 lies between
}

TEST(Fuse, TwoLoops) {
  ir::LoopProgram p = schedtest::lowered(
      "sizes B = 2, H = 3, N = 5\ninput X: f32[B, H, N]\noutput y[b, h]: f32 = max[n](X[b, h, "
      "n])\n");
  Schedule s(p);
  LoopRef f = s.fuse(LoopRef{"y", "b"}, "h");
  EXPECT_EQ(f.var, "b_h");
  EXPECT_NE(ir::to_string(s.program()).find("spatial b:B = b_h / H, spatial h:H = b_h % H"),
            std::string::npos)
      << ir::to_string(s.program());
  expect_equivalent(p, s.program(),
                    {{{"B", 2}, {"H", 3}, {"N", 5}}, {{"B", 3}, {"H", 1}, {"N", 2}}});
  EXPECT_THROW(s.fuse(LoopRef{"y", "b_h"}, "x"), ScheduleError);
}

TEST(Bind, DataParallelOnly) {
  ir::LoopProgram p = schedtest::lowered(kRowSum);
  Schedule s(p);
  s.bind(LoopRef{"y", "i"}, "grid.x");
  EXPECT_NE(ir::to_string(s.program()).find("parallel for i in range(M) bind(grid.x):"),
            std::string::npos);
  expect_equivalent(p, s.program(), kShapes);
  try {
    s.bind(LoopRef{"y", "j"}, "grid.y");
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("loop 'j' drives the reduction variable 'j' of block 'y'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(s.bind(LoopRef{"y", "i"}, "warp"), ScheduleError);
}

TEST(Trace, ReplayReproducesTheProgram) {
  ir::LoopProgram p = schedtest::lowered(kRowSum);
  Schedule s(p);
  s.split(LoopRef{"y", "j"}, 4);
  s.split(LoopRef{"y", "i"}, 2);
  s.reorder("y", {"i0", "j0", "i1", "j1"});
  s.bind(LoopRef{"y", "i0"}, "grid.x");
  nlohmann::json trace = nlohmann::json::parse(s.trace().dump());
  Schedule r = schedule::replay(p, trace);
  EXPECT_EQ(ir::to_string(r.program()), ir::to_string(s.program()));
  EXPECT_EQ(r.primitive_names(), (std::vector<std::string>{"split", "split", "reorder", "bind"}));
  EXPECT_THROW(schedule::replay(p, nlohmann::json::parse(R"([{"primitive": "shuffle"}])")),
               ScheduleError);
  EXPECT_THROW(
      schedule::replay(p, nlohmann::json::parse(R"([{"primitive": "split", "block": "y"}])")),
      ScheduleError);
}
