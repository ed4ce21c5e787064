// compute_at and reverse_compute_at: region inference, equivalence, errors.
#include "ScheduleTestUtil.h"
#include "schedule/Analysis.h"
#include "schedule/Region.h"

using namespace kintsugi;
using schedtest::expect_equivalent;
using schedule::LoopRef;
using schedule::Schedule;
using schedule::ScheduleError;

namespace {
const std::vector<runtime::SizeMap> kNorm = {{{"M", 4}, {"N", 9}}, {{"M", 5}, {"N", 17}}};
}

TEST(Region, TileOfASplitLoop) {
  std::map<std::string, schedule::Range> varying = {{"j1", {ir::make_int(0), ir::make_int(64)}}};
  ir::Expr e = ir::make_binary(ir::Op::Add,
                               ir::make_binary(ir::Op::Mul, schedule::var("j0"), ir::make_int(64)),
                               schedule::var("j1"));
  schedule::Interval iv = schedule::bound(e, varying);
  ASSERT_TRUE(iv.ok);
  EXPECT_EQ(ir::to_string(iv.lo), "j0 * 64");
  EXPECT_EQ(ir::to_string(iv.hi), "j0 * 64 + 63");
}

TEST(ComputeAt, SoftmaxRowByRow) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  s.compute_at("l", LoopRef{"Y", "i"});
  s.compute_at("e", LoopRef{"Y", "i"});
  s.compute_at("m", LoopRef{"Y", "i"});
  std::string text = ir::to_string(s.program());
  // One nest over rows; inside it the row's max, exponentials, sum and output.
  EXPECT_NE(text.find("body:\n  for i in range(M):\n    for j_3 in range(N):\n      block "
                      "m(spatial i:M, reduce j:N = j_3):"),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_EQ(s.primitive_names().size(), 3u);
  Schedule r = schedule::replay(p, s.trace());
  EXPECT_EQ(ir::to_string(r.program()), text);
}

TEST(ComputeAt, TiledRows) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  s.split(LoopRef{"Y", "i"}, 3);
  s.compute_at("l", LoopRef{"Y", "i0"});
  s.compute_at("e", LoopRef{"Y", "i0"});
  s.compute_at("m", LoopRef{"Y", "i0"});
  std::string text = ir::to_string(s.program());
  EXPECT_NE(
      text.find("block l(spatial i:M = i0 * 3 + i_1, reduce j:N = j_1) where i0 * 3 + i_1 < M:"),
      std::string::npos)
      << text;
  expect_equivalent(p, s.program(), kNorm);
}

TEST(ComputeAt, Errors) {
  Schedule s(schedtest::example("norm/softmax.te"));
  try {
    s.compute_at("e", LoopRef{"l", "i"});
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("block 'Y' reads 'e' outside loop 'i'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(s.compute_at("Y", LoopRef{"m", "i"}), ScheduleError);  // consumer before producer
}

TEST(ReverseComputeAt, AttentionScoresTileByTile) {
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"s.sum0", "j"}, 16);
  s.reverse_compute_at("s", j[0]);
  s.reverse_compute_at("c", j[0]);
  s.reverse_compute_at("m", j[0]);
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("block m(spatial b:B, spatial h:H, spatial i:S, reduce j:T = j0 * 16 + j_3) "
                      "where j0 * 16 + j_3 < T:"),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(),
                    {{{"B", 1}, {"H", 2}, {"S", 5}, {"T", 7}, {"D", 3}},
                     {{"B", 1}, {"H", 1}, {"S", 3}, {"T", 40}, {"D", 2}}});
  Schedule t(p);
  EXPECT_THROW(t.reverse_compute_at("l", LoopRef{"s.sum0", "j"}),
               ScheduleError);  // l reads nothing s.sum0 produces
}
