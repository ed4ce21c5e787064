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

namespace {
// A scale per group of G columns, read by a map through c / G (and through another divisor).
const char* kGroupScale = R"(
sizes M = 3, N = 12
param G: i32 = 4
input X: f32[M, N]
amax[r, g: N / G] = max[k: G](abs(X[r, g * G + k]))
output Y[r, c]: f32 = X[r, c] / amax[r, c / G] + f32(c / (G + 1))
)";
ir::Expr param_g() {
  return ir::make_var("G", ir::VarKind::Param, DType::Int);
}
}  // namespace

TEST(SplitGroups, ReadsTheGroupAtItsOwnIndex) {
  ir::LoopProgram p = schedtest::lowered(kGroupScale);
  Schedule s(p);
  auto loops = s.split_groups(LoopRef{"Y", "c"}, param_g());
  EXPECT_EQ(loops[0].var, "c0");
  EXPECT_EQ(loops[1].var, "c1");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("block Y(spatial r:M, spatial c0:N / G, spatial c1:G):\n"
                      "          Y[r, c0 * G + c1] = X[r, c0 * G + c1] / amax[r, c0] + "
                      "f32((c0 * G + c1) / (G + 1))"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("for c_tail in range(N - N / G * G):"), std::string::npos) << text;
  EXPECT_NE(text.find("block Y.tail(spatial r:M, spatial c:N = N / G * G + c_tail):"),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(),
                    {{{"M", 3}, {"N", 12}}, {{"M", 1}, {"N", 4}}, {{"M", 2}, {"N", 40}}});
  // Columns past the last whole group read a scale past the buffer, in the program as given and
  // in its tail nest alike.
  runtime::SizeMap sizes = runtime::bind_sizes(p, {{"M", 2}, {"N", 10}});
  auto inputs = runtime::random_inputs(p, sizes, 3);
  std::map<std::string, const runtime::Tensor*> in;
  for (auto& [name, t] : inputs) in[name] = &t;
  EXPECT_THROW(ir::interpret(p, ir::InterpMode::Exact, in, sizes), UserError);
  EXPECT_THROW(ir::interpret(s.program(), ir::InterpMode::Exact, in, sizes), UserError);
  schedtest::expect_replays(p, s);
}

TEST(SplitGroups, Errors) {
  Schedule s(schedtest::lowered(kGroupScale));
  auto refused = [&](const LoopRef& loop, const ir::Expr& factor, const std::string& why) {
    schedtest::expect_refused([&] { s.split_groups(loop, factor); }, "split_groups: " + why);
  };
  refused(LoopRef{"amax", "k"}, param_g(),
          "loop 'k' (around block 'amax') holds a reduction, not a map");
  refused(LoopRef{"Y", "r"}, param_g(),
          "loop 'r' (around block 'Y') does not directly hold its block");
  refused(LoopRef{"Y", "c"}, ir::make_int(0),
          "loop 'c' (around block 'Y') cannot be cut into groups of 0");
  refused(LoopRef{"Y", "c"}, ir::make_var("r", ir::VarKind::Index, DType::Int),
          "loop 'c' (around block 'Y') can only be cut by an integer over sizes and params, not "
          "'r'");
  EXPECT_TRUE(s.trace().empty());
}

namespace {
// A mean and a variance over two axes (a group norm's (c, p)).
const char* kTwoAxisNorm = R"(
sizes B = 2, C = 3, P = 5
input X: f32[B, C, P]
mu[b] = sum[c, p](X[b, c, p]) / f32(C * P)
output V[b]: f32 = sum[c, p]((X[b, c, p] - mu[b]) * (X[b, c, p] - mu[b]))
)";
}  // namespace

TEST(MergeReduceAxes, OneAxisReadAsQuotientAndRemainder) {
  ir::LoopProgram p = schedtest::lowered(kTwoAxisNorm);
  Schedule s(p);
  EXPECT_EQ(s.merge_reduce_axes("mu.sum0"), "c_p");
  EXPECT_EQ(s.merge_reduce_axes("V"), "c_p_1");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("for c_p in range(C * P):\n"
                      "      block mu.sum0(spatial b:B, reduce c_p:C * P):"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mu.sum0[b] = mu.sum0[b] + X[b, c_p / P, c_p % P]"), std::string::npos)
      << text;
  expect_equivalent(p, s.program(),
                    {{{"B", 2}, {"C", 3}, {"P", 5}},
                     {{"B", 1}, {"C", 1}, {"P", 7}},
                     {{"B", 3}, {"C", 4}, {"P", 1}}});
  schedtest::expect_replays(p, s);
  // Three axes: the outer ones are quotients, the inner ones remainders.
  ir::LoopProgram three = schedtest::lowered(R"(
sizes A = 2, C = 3, P = 5
input X: f32[A, C, P]
output S: f32 = sum[a, c, p](X[a, c, p] * f32(a + 1))
)");
  Schedule t(three);
  t.merge_reduce_axes("S");
  EXPECT_NE(ir::to_string(t.program()).find("X[a_c_p / (C * P), a_c_p / P % C, a_c_p % P]"),
            std::string::npos)
      << ir::to_string(t.program());
  expect_equivalent(three, t.program(),
                    {{{"A", 2}, {"C", 3}, {"P", 5}}, {{"A", 3}, {"C", 1}, {"P", 2}}});
}

TEST(MergeReduceAxes, Errors) {
  Schedule s(schedtest::lowered(kTwoAxisNorm));
  auto refused = [&](const std::string& block, const std::string& why) {
    schedtest::expect_refused([&] { s.merge_reduce_axes(block); }, "merge_reduce_axes: " + why);
  };
  refused("mu", "block 'mu' does not reduce over several axes");
  s.reorder("V", {"c", "b", "p"});
  refused("V",
          "the axis 'c' of block 'V' is not bound to the loop at its place among the "
          "innermost loops, from 0 over its extent");
}

// A soft-argmax over (y, x): its exponentials, a map between its maximum and its sums, flattened.
const char* kSoftArgmax = R"(
sizes B = 2, H = 3, W = 4
input F: f32[B, H, W]
m[b] = max[y, x](F[b, y, x])
e[b, y, x] = exp(F[b, y, x] - m[b])
l[b] = sum[y, x](e[b, y, x])
output PX[b]: f32 = sum[y, x](e[b, y, x] * f32(x)) / l[b]
)";

TEST(MergeMapAxes, TheBufferFlattenedAndReadThere) {
  ir::LoopProgram p = schedtest::lowered(kSoftArgmax);
  Schedule s(p);
  s.merge_reduce_axes("l");
  EXPECT_EQ(s.merge_map_axes("e", 2), "y_x_1");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("buffer e: f32[B, H * W]"), std::string::npos) << text;
  EXPECT_NE(text.find("e[b, y_x_1] = exp(F[b, y_x_1 / W, y_x_1 % W] - m[b])"), std::string::npos)
      << text;
  EXPECT_NE(text.find("l[b] = l[b] + e[b, y_x]"), std::string::npos) << text;   // merged: joined
  EXPECT_NE(text.find("e[b, y * W + x] * f32(x)"), std::string::npos) << text;  // as written
  expect_equivalent(p, s.program(),
                    {{{"B", 2}, {"H", 3}, {"W", 4}},
                     {{"B", 1}, {"H", 1}, {"W", 5}},
                     {{"B", 3}, {"H", 6}, {"W", 1}}});
  schedtest::expect_replays(p, s);
  schedtest::expect_refused([&] { s.merge_map_axes("m", 2); },
                            "merge_map_axes: block 'm' reduces: it is not a map");
  schedtest::expect_refused([&] { s.merge_map_axes("PX", 2); },
                            "merge_map_axes: block 'PX' has no 2 axes to merge");
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
