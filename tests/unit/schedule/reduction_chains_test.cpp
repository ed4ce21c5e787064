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
  const std::map<std::string, std::string> want = {
      {"M", "positive"}, {"EPS", "positive"}, {"SHIFT", ""},     {"X", ""},
      {"m", ""},         {"e", "positive"},   {"l", "positive"}, {"top", "positive"},
      {"p", "positive"}, {"d", ""},           {"c", ""},         {"q.sum0", "nonnegative"},
      {"q", "positive"}};
  for (const auto& [name, sign] : want) EXPECT_EQ(fact(facts, name), sign) << name;
}
