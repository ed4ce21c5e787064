// The sign facts repair requests start from (repair_facts): derived from the definitions, in
// program order, through the algebra's sign rules, never from names.
#include <gtest/gtest.h>

#include "ScheduleTestUtil.h"
#include "schedule/ReductionChains.h"

using namespace kintsugi;

namespace {

std::string fact(const std::map<std::string, std::string>& facts, const std::string& name) {
  auto it = facts.find(name);
  return it == facts.end() ? "" : it->second;
}

}  // namespace

// exp(..) is positive, and so are a sum and a max of it and a quotient of positives; a max of
// inputs, a difference and a masked value are of unknown sign; squares are nonnegative.
TEST(ReductionChains, SignFactsFollowTheDefinitions) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes M = 4, N = 8
param EPS: f32 = 1e-6
param SHIFT: f32 = -1.0
input X: f32[M, N]
m[i]    = max[j](X[i, j])
e[i, j] = exp(X[i, j] - m[i])
l[i]    = sum[j](e[i, j])
top[i]  = max[j](e[i, j])
p[i, j] = e[i, j] / l[i]
d[i, j] = X[i, j] - m[i]
c[i, j] = select(j <= i, e[i, j], -inf)
q[i]    = sum[j](d[i, j] * d[i, j]) + EPS
output Y[i, j]: f32 = p[i, j] * top[i] * q[i] + c[i, j] + SHIFT
)");
  std::map<std::string, std::string> facts = schedule::repair_facts(p);
  EXPECT_EQ(fact(facts, "M"), "positive");
  EXPECT_EQ(fact(facts, "EPS"), "positive");
  EXPECT_EQ(fact(facts, "SHIFT"), "");
  EXPECT_EQ(fact(facts, "X"), "");
  EXPECT_EQ(fact(facts, "m"), "");
  EXPECT_EQ(fact(facts, "e"), "positive");
  EXPECT_EQ(fact(facts, "l"), "positive");
  EXPECT_EQ(fact(facts, "top"), "positive");
  EXPECT_EQ(fact(facts, "p"), "positive");
  EXPECT_EQ(fact(facts, "d"), "");
  EXPECT_EQ(fact(facts, "c"), "");
  EXPECT_EQ(fact(facts, "q.sum0"), "nonnegative");
  EXPECT_EQ(fact(facts, "q"), "positive");
}
