// compute_inline, reverse_compute_inline, decompose_reduction, name_term, rebase_join: equivalence
// and errors.
#include "ScheduleTestUtil.h"

using namespace kintsugi;
using schedtest::expect_equivalent;
using schedule::LoopRef;
using schedule::Schedule;
using schedule::ScheduleError;

namespace {
const std::vector<runtime::SizeMap> kNorm = {{{"M", 4}, {"N", 9}}, {{"M", 3}, {"N", 17}}};
}

TEST(ComputeInline, SoftmaxExp) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  s.compute_inline("e");
  std::string text = ir::to_string(s.program());
  EXPECT_EQ(text.find("buffer e:"), std::string::npos) << text;
  EXPECT_NE(text.find("l[i] = l[i] + exp(X[i, j] - m[i])"), std::string::npos) << text;
  EXPECT_NE(text.find("Y[i, j] = exp(X[i, j] - m[i]) / l[i]"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kNorm);
}

TEST(ComputeInline, Errors) {
  Schedule s(schedtest::example("norm/softmax.te"));
  try {
    s.compute_inline("m");
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("compute_inline: block 'm' is a reduction"),
              std::string::npos)
        << e.what();
  }
  try {
    s.compute_inline("Y");
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("writes 'Y', which is an output"), std::string::npos)
        << e.what();
  }
}

// name_term names the part of a reduction's term that reads the given buffer along the
// reduction axis (exp(x - m)), not the product with V that also varies along e.
TEST(NameTerm, NamesTheSubexpressionOverTheReadsAndTheAxis) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes M = 3, N = 7, E = 2
input X: f32[M, N]
input V: f32[N, E]
m[r]    = max[v](X[r, v])
o[r, e] = sum[v](exp(X[r, v] - m[r]) * V[v, e])
output Y[r, e]: f32 = o[r, e]
)");
  Schedule s(p);
  EXPECT_EQ(s.name_term("o", {"m"}), std::vector<std::string>{"o.term0"});
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("o.term0[r, v] = exp(X[r, v] - m[r])"), std::string::npos) << text;
  EXPECT_NE(text.find("o[r, e] = o[r, e] + o.term0[r, v] * V[v, e]"), std::string::npos) << text;
  expect_equivalent(p, s.program(),
                    {{{"M", 3}, {"N", 7}, {"E", 2}}, {{"M", 1}, {"N", 1}, {"E", 5}}});
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
  try {
    s.name_term("m", {"X"});  // max[v](X[r, v]): nothing but the load itself
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("name_term: the term of block 'm' has no subexpression"),
              std::string::npos)
        << e.what();
  }
}

TEST(ReverseComputeInline, CastIntoProducer) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes M = 4, N = 5
input X: f16[M, N]
y[i, j] = f32(X[i, j]) * 2
output z[i, j]: f16 = exp(y[i, j]) + f32(X[i, j])
)");
  Schedule s(p);
  s.reverse_compute_inline("z");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("block y(spatial i:M, spatial j:N):\n        z[i, j] = exp(f32(X[i, j]) * "
                      "2.0) + f32(X[i, j])"),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(), {{{"M", 4}, {"N", 5}}, {{"M", 1}, {"N", 7}}});
  Schedule t(schedtest::example("norm/softmax.te"));
  EXPECT_THROW(t.reverse_compute_inline("Y"),
               ScheduleError);  // reads e and l: two computed buffers
}

TEST(DecomposeReduction, InitBeforeTheReductionLoop) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  s.split(LoopRef{"l", "j"}, 4);
  std::string init = s.decompose_reduction("l", LoopRef{"l", "j0"});
  EXPECT_EQ(init, "l.init");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("block l.init(spatial i:M):\n      l[i] = 0.0\n    for j0"),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_THROW(s.decompose_reduction("l", LoopRef{"l", "j0"}), ScheduleError);  // no init left
  Schedule t(p);
  EXPECT_THROW(t.decompose_reduction("l", LoopRef{"m", "j"}), ScheduleError);
}

// rebase_join: sums over j that read the max of two reductions over j and k are computed against
// the max over j alone and repaired once the joined max is known; the elementwise block between
// is copied to read the part, and the original, read by nothing then, goes. With the rows of A
// masked whole (A = -inf where PL <= 0), the repair's guard gives the sums' identity.
TEST(RebaseJoin, ComputesEachSideAgainstItsOwnPart) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes M = 3, N = 7, K = 5, E = 2
input PL: i32[M]
input A: f32[M, N]
input B: f32[M, K]
input V: f32[N, E]
a[r, v] = select(v < PL[r], A[r, v], -inf)
m[r]    = max(max[v](a[r, v]), max[k](B[r, k]))
e[r, v] = exp(a[r, v] - m[r])
l[r]    = sum[v](e[r, v])
o[r, c] = sum[v](e[r, v] * V[v, c])
output Y[r, c]: f32 = o[r, c] / (l[r] + sum[k](exp(B[r, k] - m[r])))
)");
  Schedule s(p);
  s.rebase_join({"l", "o"}, "m.max0");
  std::string text = ir::to_string(s.program());
  EXPECT_EQ(text.find("buffer e:"), std::string::npos) << text;
  EXPECT_NE(text.find("e.rb[r, v] = exp(a[r, v] - m.max0[r])"), std::string::npos) << text;
  EXPECT_NE(text.find("l.part[r] = l.part[r] + e.rb[r, v]"), std::string::npos) << text;
  EXPECT_NE(text.find("l[r] = select(m.max0[r] == -inf && m[r] != -inf, 0.0, l.part[r] * "
                      "select(m.max0[r] == m[r], 1.0, exp(m.max0[r] - m[r])))"),
            std::string::npos)
      << text;
  // The sum over k, inline in the output, against the max over k.
  s.rebase_join({"Y.sum0"}, "m.max1");
  text = ir::to_string(s.program());
  EXPECT_NE(text.find("Y.sum0.part[r] = Y.sum0.part[r] + exp(B[r, k] - m.max1[r])"),
            std::string::npos)
      << text;
  const std::vector<runtime::SizeMap> sizes = {{{"M", 6}, {"N", 7}, {"K", 5}, {"E", 2}},
                                               {{"M", 9}, {"N", 1}, {"K", 3}, {"E", 1}}};
  expect_equivalent(p, s.program(), sizes);
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
  try {
    Schedule t(p);
    t.rebase_join({"l"}, "B");
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("rebase_join: block 'l' reads no maximum or minimum "
                                         "that joins 'B'"),
              std::string::npos)
        << e.what();
  }
}
