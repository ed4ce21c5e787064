// move_nest: equivalence on random inputs, legality errors, trace replay.
#include <functional>

#include "ScheduleTestUtil.h"
#include "schedule/Analysis.h"

using namespace kintsugi;
using schedtest::expect_equivalent;
using schedule::Schedule;
using schedule::ScheduleError;

namespace {

const char* kTwoRowStatistics = R"(
sizes M = 4, N = 5
input X: f32[M, N]
input W: f32[M, N]
a[i] = sum[j](X[i, j])
b[i] = max[j](W[i, j])
c[i, j] = X[i, j] - a[i]
output Z[i, j]: f32 = c[i, j] * b[i]
)";

const std::vector<runtime::SizeMap> kRows = {{{"M", 4}, {"N", 5}}, {{"M", 3}, {"N", 17}}};

// Names of the blocks in program order, one per root-level nest.
std::vector<std::string> nest_order(const ir::LoopProgram& p) {
  std::vector<std::string> out;
  for (const ir::Stmt& nest : p.body->stmts) out.push_back(schedule::blocks_under(nest)[0]->name);
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return "no error";
}

const std::vector<runtime::SizeMap> kPerformer = {
    {{"B", 1}, {"H", 2}, {"S", 5}, {"T", 7}, {"D", 3}, {"R", 6}},
    {{"B", 1}, {"H", 1}, {"S", 9}, {"T", 3}, {"D", 2}, {"R", 9}},
    {{"B", 2}, {"H", 1}, {"S", 3}, {"T", 11}, {"D", 4}, {"R", 4}}};

}  // namespace

TEST(MoveNest, UpAndDownPastIndependentNests) {
  ir::LoopProgram p = schedtest::lowered(kTwoRowStatistics);
  Schedule s(p);
  s.move_nest("b", "a");  // up
  EXPECT_EQ(nest_order(s.program()), (std::vector<std::string>{"b", "a", "c", "Z"}));
  expect_equivalent(p, s.program(), kRows);
  s.move_nest("b", "Z");  // down, past a and c
  EXPECT_EQ(nest_order(s.program()), (std::vector<std::string>{"a", "c", "b", "Z"}));
  expect_equivalent(p, s.program(), kRows);
  Schedule r = schedule::replay(p, s.trace());
  EXPECT_EQ(ir::to_string(r.program()), ir::to_string(s.program()));
  EXPECT_EQ(s.trace()[0].at("before").get<std::string>(), "a");
}

TEST(MoveNest, DependencesAreKept) {
  Schedule s(schedtest::lowered(kTwoRowStatistics));
  // c reads a: a may not move past it, nor c before a.
  EXPECT_NE(error_of([&] { s.move_nest("a", "Z"); })
                .find("move_nest: the nest of block 'a' cannot move past block 'c': both access "
                      "'a' and one of them writes it"),
            std::string::npos);
  EXPECT_NE(error_of([&] { s.move_nest("c", "a"); }).find("cannot move past block 'a'"),
            std::string::npos);
  // Z reads b, written by a nest it would cross.
  EXPECT_NE(error_of([&] { s.move_nest("Z", "b"); }).find("past block 'b': both access 'b'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { s.move_nest("a", "a"); }).find("are in the same root-level nest"),
            std::string::npos);
  EXPECT_NE(error_of([&] { s.move_nest("nothing", "a"); }).find("nothing"), std::string::npos);
  EXPECT_TRUE(s.trace().empty());
}

TEST(MoveNest, PerformerQueryNormBeforeTheFeatureProjection) {
  ir::LoopProgram p = schedtest::example("performer.te");
  Schedule s(p);
  s.move_nest("nq.sum0", "pq.sum0");
  s.move_nest("nq", "pq.sum0");
  std::vector<std::string> order = nest_order(s.program());
  ASSERT_GE(order.size(), 3u);
  EXPECT_EQ(order[0], "nq.sum0");
  EXPECT_EQ(order[1], "nq");
  EXPECT_EQ(order[2], "pq.sum0");
  expect_equivalent(p, s.program(), kPerformer);
  // The two key-side sums only share what they read.
  s.move_nest("ks", "kv");
  expect_equivalent(p, s.program(), kPerformer);
  EXPECT_THROW(s.move_nest("kv", "pq.sum0"), ScheduleError);  // kv reads fk, written after pq
}
