// \file algebra_repair_test.cpp
// The acceptance cases of the algebra engine: each derives (or refuses) a repair function h for
// a fused reduction, checks its kind and shape, and checks numerically (seeded, independent of
// the engine) that h satisfies Eq. 3, Eq. 4 and the identity / -inf guards.
#include <gtest/gtest.h>

#include "AlgebraTestUtil.h"

namespace {

using namespace algtest;

RepairRequest request(Reducer r, Expr g, std::set<std::string> x,
                      std::map<std::string, std::string> facts = {}) {
  RepairRequest q;
  q.reducer = r;
  q.term = std::move(g);
  q.incomplete = std::move(x);
  q.facts = std::move(facts);
  return q;
}

Expr m_i() {
  return ld("m", {idx("i")});
}

// 1. softmax: sum_j exp(x[i, j] - m[i]) after m = max_j x.
TEST(algebra_repair, SoftmaxSumAfterMax) {
  auto q = request(Reducer::Sum, ex(sub(ld("x", {idx("i"), idx("j")}), m_i())), {"m"});
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 1);
  EXPECT_EQ(to_math(r.h_unguarded), "t * exp(m - m')");
  EXPECT_EQ(to_math(r.h), "t * select(m == m', 1, exp(m - m'))");
  EXPECT_EQ(r.method, "separable product");
  EXPECT_TRUE(r.verified_symbolic);
  ASSERT_EQ(r.values.size(), 1u);
  EXPECT_EQ(r.values[0].old_var, "m");
  EXPECT_EQ(r.values[0].new_var, "m'");
}

// 1b. A temperature or a scale applied after the maximum, exp((x - m) / T) and exp((x - m) * C)
// (params: constant along the axis): the exponent is expanded before it is split, and the
// repair's exponent is the difference scaled once, exact where m' is close to m.
TEST(algebra_repair, SoftmaxWithTheScaleAfterTheMax) {
  Expr x = ld("x", {idx("i"), idx("j")});
  auto q1 = request(Reducer::Sum, ex(div(sub(x, m_i()), param("T"))), {"m"});
  RepairResult r1 = derive_repair(q1);
  expect_derived(q1, r1, 11);
  EXPECT_EQ(r1.method, "separable product");
  EXPECT_EQ(to_math(r1.h_unguarded), "t * exp((m - m') / T)");
  auto q2 = request(Reducer::Sum, ex(mul(sub(x, m_i()), param("C"))), {"m"});
  RepairResult r2 = derive_repair(q2);
  expect_derived(q2, r2, 12);
  EXPECT_EQ(to_math(r2.h_unguarded), "t * exp(C * (m - m'))");
}

// 1c. Two score sets against one maximum, exp(a - m) + exp(c - m): a sum of separable products
// with one incomplete part is that part times the sum of the complete ones.
TEST(algebra_repair, TwoExponentialsAgainstOneMaximum) {
  Expr a = ld("a", {idx("i"), idx("j")}), c = ld("c", {idx("i"), idx("j")});
  auto q = request(Reducer::Sum, add(ex(sub(a, m_i())), ex(sub(c, m_i()))), {"m"});
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 13);
  EXPECT_EQ(r.method, "separable product");
  EXPECT_EQ(to_math(r.h_unguarded), "t * exp(m - m')");
  // Different incomplete parts do not factor: exp(a - m) + exp(c - 2 m) is refused.
  auto q2 = request(Reducer::Sum, add(ex(sub(a, m_i())), ex(sub(c, mul(lit(2), m_i())))), {"m"});
  EXPECT_EQ(derive_repair(q2).kind, RepairResult::Kind::Refused);
}

// 2. attention P.V, normalisation after the matmul, P rounded to f16.
TEST(algebra_repair, AttentionPVNormalisedAfter) {
  Expr s = ld("S", {idx("i"), idx("j")});
  Expr v = ld("V", {idx("j"), idx("d")}, DType::F16);
  auto q = request(Reducer::Sum, mul(f32(f16(ex(sub(s, m_i())))), f32(v)), {"m"});
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 2);
  EXPECT_EQ(to_math(r.h_unguarded), "t * exp(m - m')");
  EXPECT_TRUE(r.verified_symbolic);
}

// 3. attention normalised before the matmul (FA-1): exp(s - m) / l * V, m and l incomplete.
TEST(algebra_repair, AttentionNormalisedBefore) {
  Expr s = ld("S", {idx("i"), idx("j")});
  Expr g = mul(div(ex(sub(s, m_i())), ld("l", {idx("i")})), ld("V", {idx("j"), idx("d")}));
  auto q = request(Reducer::Sum, g, {"m", "l"});
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 3);
  EXPECT_EQ(to_math(r.h_unguarded), "t * l * exp(m - m') / l'");
  EXPECT_EQ(r.values.size(), 2u);
  EXPECT_TRUE(r.verified_symbolic);
}

// 4. softcap / ALiBi / masked scores: the score is complete (an opaque buffer, or a select that
// holds no incomplete value).
TEST(algebra_repair, MaskedSoftcapAlibiScores) {
  auto q1 = request(Reducer::Sum, ex(sub(ld("T_score_mod", {idx("i"), idx("j")}), m_i())), {"m"});
  RepairResult r1 = derive_repair(q1);
  expect_derived(q1, r1, 41);
  EXPECT_EQ(to_math(r1.h_unguarded), "t * exp(m - m')");

  Expr score =
      add(mul(lit(50.0), call(MathFn::Tanh, div(ld("P", {idx("i"), idx("j")}), lit(50.0)))),
          mul(ld("slope", {idx("h")}), f32(sub(idx("j"), idx("i")))));
  Expr mask = make_binary(Op::Ge, idx("i"), idx("j"));
  Expr masked = make_select(mask, score, lit(-std::numeric_limits<double>::infinity()));
  auto q2 = request(Reducer::Sum, ex(sub(masked, m_i())), {"m"});
  RepairResult r2 = derive_repair(q2);
  expect_derived(q2, r2, 42);
  EXPECT_EQ(to_math(r2.h_unguarded), "t * exp(m - m')");
}

// 4b. A mask applied after the exponential, select(j <= i, exp(s - m), 0) (and its mirror with
// the zero first): the zeroed product separates as select(c, exp(s), 0) exp(-m), so the repair
// is the unmasked one. A mask that keeps a non-zero constant does not separate.
TEST(algebra_repair, MaskAroundTheExponential) {
  Expr s = ld("S", {idx("i"), idx("j")});
  Expr mask = make_binary(Op::Le, idx("j"), idx("i"));
  auto q1 = request(Reducer::Sum, make_select(mask, ex(sub(s, m_i())), lit(0.0)), {"m"});
  RepairResult r1 = derive_repair(q1);
  expect_derived(q1, r1, 43);
  EXPECT_EQ(r1.method, "separable product");
  EXPECT_EQ(to_math(r1.h_unguarded), "t * exp(m - m')");
  Expr v = ld("V", {idx("j"), idx("d")}, DType::F16);
  auto q2 = request(Reducer::Sum,
                    mul(f32(f16(make_select(mask, lit(0.0), ex(sub(s, m_i()))))), f32(v)), {"m"});
  RepairResult r2 = derive_repair(q2);
  expect_derived(q2, r2, 44);
  EXPECT_EQ(to_math(r2.h_unguarded), "t * exp(m - m')");
  auto q3 = request(Reducer::Sum, make_select(mask, ex(sub(s, m_i())), lit(1.0)), {"m"});
  EXPECT_EQ(derive_repair(q3).kind, RepairResult::Kind::Refused);
}

// 4c. The entropy of a softmax, sum_j p log p with p = exp(x - m) / l: after expansion the
// statistic sum_j exp(x) that the correction needs is the producer l itself (l = sum_j
// exp(x - m), given as a running sum), so h reads only t, m, m', l, l', with the old and new
// values paired so that no large value meets t first. Without the running sum, or with one whose
// summand is not that statistic, there is no repair.
TEST(algebra_repair, EntropyThroughItsNormaliser) {
  Expr x = ld("x", {idx("i"), idx("j")});
  Expr l = ld("l", {idx("i")});
  Expr p = div(ex(sub(x, m_i())), l);
  auto q = request(Reducer::Sum, mul(p, lg(p)), {"m", "l"}, {{"l", "positive"}});
  EXPECT_EQ(derive_repair(q).kind, RepairResult::Kind::Refused);
  q.running_sums = {{"l", ex(sub(x, m_i()))}};
  RepairResult r = derive_repair(q);
  ASSERT_EQ(r.kind, RepairResult::Kind::Derived) << r.reason;
  EXPECT_EQ(r.method, "running sums");
  EXPECT_TRUE(r.statistics.empty());
  EXPECT_TRUE(
      r.scale_at_most_one);  // exp(m - m') l / l' = the partial's sum of exp(x) / a superset's
  EXPECT_EQ(to_math(r.h_unguarded), "l * (m - m' + (-log(l') + log(l)) + t) * exp(m - m') / l'");
  // h on a prefix of two elements, l at its definition: the sum of p log p at the new values.
  const double x0 = 999.5, x1 = 1001.25, m0 = 1000.0, m1 = 1002.0, l1 = 3.5;
  const double l0 = std::exp(x0 - m0) + std::exp(x1 - m0);
  auto plogp = [](double xv, double mv, double lv) {
    double pv = std::exp(xv - mv) / lv;
    return pv * std::log(pv);
  };
  double t = plogp(x0, m0, l0) + plogp(x1, m0, l0);
  double want = plogp(x0, m1, l1) + plogp(x1, m1, l1);
  double got = algebra::eval_ir(r.h_unguarded, [&](const Expr& n, double* v) {
    if (n->op != Op::Var) return false;
    const std::map<std::string, double> at = {
        {"t", t}, {"m", m0}, {"m'", m1}, {"l", l0}, {"l'", l1}};
    *v = at.at(n->name);
    return true;
  });
  EXPECT_NEAR(got, want, 1e-12 * std::fabs(want));
  q.running_sums = {{"l", ex(sub(mul(lit(2.0), x), m_i()))}};
  EXPECT_EQ(derive_repair(q).kind, RepairResult::Kind::Refused);
}

// 4d. Probabilities normalised before the product with the values, o = sum_j exp(x - m) / l v:
// a separable product whose scale exp(m - m') l / l' is the partial's sum of exp(x) over a
// superset's when l is given as a running sum of nonnegative terms a(x) exp(-m), so it never
// scales a partial up (split-K may combine such partials); without such a sum nothing proves it.
TEST(algebra_repair, NormalisedProbabilitiesNeverScaleUp) {
  Expr x = ld("x", {idx("i"), idx("j")});
  Expr v = ld("V", {idx("j"), idx("d")}, DType::F16);
  Expr p = div(ex(sub(x, m_i())), ld("l", {idx("i")}));
  auto q = request(Reducer::Sum, mul(p, f32(v)), {"m", "l"}, {{"l", "positive"}});
  RepairResult bare = derive_repair(q);
  ASSERT_EQ(bare.kind, RepairResult::Kind::Derived) << bare.reason;
  EXPECT_EQ(bare.method, "separable product");
  EXPECT_FALSE(bare.scale_at_most_one);
  q.running_sums = {{"l", ex(sub(x, m_i()))}};
  RepairResult r = derive_repair(q);
  ASSERT_EQ(r.kind, RepairResult::Kind::Derived) << r.reason;
  EXPECT_EQ(r.method, "separable product");
  EXPECT_TRUE(r.scale_at_most_one);
  q.running_sums = {{"l", sub(x, m_i())}};  // a sum of terms of unknown sign
  EXPECT_FALSE(derive_repair(q).scale_at_most_one);
}

// 5. logsumexp = m + log(sum_j exp(c - m)): the sum's repair is the softmax one; the epilogue
// m + log(l) reads only complete values and needs none.
TEST(algebra_repair, LogSumExp) {
  auto q = request(Reducer::Sum, ex(sub(ld("c", {idx("i"), idx("j")}), m_i())), {"m"});
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 5);
  EXPECT_EQ(to_math(r.h_unguarded), "t * exp(m - m')");
  auto epilogue = request(Reducer::Sum, add(m_i(), lg(ld("l", {idx("i")}))), {"ss"});
  RepairResult e = derive_repair(epilogue);
  EXPECT_EQ(e.kind, RepairResult::Kind::Identity);
  EXPECT_EQ(to_math(e.h), "t");
}

// 6. L2 norm followed by a sum consumer: c / sqrt(ss).
TEST(algebra_repair, L2NormThenSum) {
  Expr g = div(ld("c", {idx("i"), idx("j")}), sq(ld("ss", {idx("i")})));
  auto q = request(Reducer::Sum, g, {"ss"});
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 6);
  EXPECT_EQ(to_math(r.h_unguarded), "t * sqrt(ss) / sqrt(ss')");
  EXPECT_TRUE(r.verified_symbolic);
}

Expr rms_scale() {
  return rsq(add(div(ld("ss", {idx("i")}), dim("N")), param("eps")));
}

// 7. RMSNorm followed by a matmul: c * rsqrt(ss / N + eps) * w * W2, eps > 0.
TEST(algebra_repair, RMSNormThenMatmul) {
  Expr g = mul(mul(mul(ld("c", {idx("i"), idx("j")}), rms_scale()), ld("w", {idx("j")})),
               ld("W2", {idx("j"), idx("k")}));
  auto q = request(Reducer::Sum, g, {"ss"}, {{"eps", "positive"}});
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 7);
  EXPECT_EQ(to_math(r.h_unguarded), "t * sqrt(eps + ss / N) / sqrt(eps + ss' / N)");
  EXPECT_TRUE(r.verified_symbolic);
}

// 8. RMSNorm then max-abs (dynamic quantisation): a max consumer, repaired by a positive factor.
TEST(algebra_repair, RMSNormThenMaxAbs) {
  Expr g = ab(mul(mul(ld("c", {idx("i"), idx("j")}), rms_scale()), ld("w", {idx("j")})));
  auto q = request(Reducer::Max, g, {"ss"}, {{"eps", "positive"}});
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 8);
  EXPECT_EQ(to_math(r.h_unguarded), "t * sqrt(eps + ss / N) / sqrt(eps + ss' / N)");
  EXPECT_TRUE(r.verified_symbolic);
}

// 9. Performer (appendix C): three terms, two producers r1, r2.
TEST(algebra_repair, Performer) {
  Expr c1 = ld("c1", {idx("i"), idx("j")}), c2 = ld("c2", {idx("i"), idx("j")});
  Expr c3 = ld("c3", {idx("j"), idx("d")});
  Expr r1 = ld("r1", {idx("i")}), r2 = ld("r2", {idx("i")});
  Expr alpha = param("alpha"), beta = param("beta");
  Expr e1 = ex(sub(sub(c1, r1), mul(beta, c2)));
  Expr e3 = ex(sub(sub(c1, r1), mul(mul(beta, c2), c3)));
  auto q1 = request(Reducer::Sum, mul(alpha, e1), {"r1", "r2"});
  auto q2 = request(Reducer::Sum, mul(mul(alpha, c3), e1), {"r1", "r2"});
  auto q3 = request(Reducer::Sum, div(mul(alpha, e3), r2), {"r1", "r2"});
  RepairResult h1 = derive_repair(q1), h2 = derive_repair(q2), h3 = derive_repair(q3);
  expect_derived(q1, h1, 91);
  expect_derived(q2, h2, 92);
  expect_derived(q3, h3, 93);
  EXPECT_EQ(to_math(h1.h_unguarded), "t * exp(r1 - r1')");
  EXPECT_EQ(to_math(h2.h_unguarded), "t * exp(r1 - r1')");
  EXPECT_EQ(to_math(h3.h_unguarded), "t * r2 * exp(r1 - r1') / r2'");
  EXPECT_EQ(h3.values.size(), 2u);
}

// 10. Welford: layer-norm variance sum_j (c - mean)^2 with the mean incomplete. No h(t, r, r')
// exists; the exact update needs sum_j c and the count. Refused by default with that reason,
// derived as an augmented state when allowed.
TEST(algebra_repair, WelfordVariance) {
  Expr d = sub(ld("c", {idx("i"), idx("j")}), ld("mean", {idx("i")}));
  auto q = request(Reducer::Sum, mul(d, d), {"mean"});
  RepairResult refused = derive_repair(q);
  ASSERT_EQ(refused.kind, RepairResult::Kind::Refused);
  EXPECT_NE(refused.reason.find("mixes complete value c[i, j] with incomplete mean[i]"),
            std::string::npos)
      << refused.reason;
  EXPECT_NE(refused.reason.find("the count n"), std::string::npos) << refused.reason;
  EXPECT_NE(refused.reason.find("sum of c[i, j]"), std::string::npos) << refused.reason;

  q.allow_augmented_state = true;
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 10);
  EXPECT_EQ(r.method, "augmented state (Welford)");
  ASSERT_EQ(r.statistics.size(), 2u);
  EXPECT_TRUE(r.verified_symbolic);
}

// 11. Refusals: additive g under sum; max consumer with a factor of unknown sign; prod.
TEST(algebra_repair, Refusals) {
  Expr c = ld("c", {idx("i"), idx("j")});
  RepairResult additive = derive_repair(request(Reducer::Sum, sub(c, m_i()), {"m"}));
  ASSERT_EQ(additive.kind, RepairResult::Kind::Refused);
  EXPECT_NE(additive.reason.find("reducer sum does not distribute over h = t + m - m'"),
            std::string::npos)
      << additive.reason;
  EXPECT_FALSE(additive.h);

  RepairResult sign = derive_repair(request(Reducer::Max, mul(c, ld("x", {idx("i")})), {"x"}));
  ASSERT_EQ(sign.kind, RepairResult::Kind::Refused);
  EXPECT_NE(sign.reason.find("reducer max does not distribute"), std::string::npos) << sign.reason;
  EXPECT_NE(sign.reason.find("unknown sign"), std::string::npos) << sign.reason;
  // ... and derives once the producer is known positive
  auto pos = request(Reducer::Max, mul(c, ld("x", {idx("i")})), {"x"}, {{"x", "positive"}});
  RepairResult signed_ok = derive_repair(pos);
  expect_derived(pos, signed_ok, 111);

  RepairResult prod = derive_repair(request(Reducer::Prod, ex(sub(c, m_i())), {"m"}));
  ASSERT_EQ(prod.kind, RepairResult::Kind::Refused);
  EXPECT_NE(prod.reason.find("reducer prod does not distribute"), std::string::npos) << prod.reason;

  RepairResult mixed = derive_repair(request(Reducer::Sum, ex(mul(c, m_i())), {"m"}));
  ASSERT_EQ(mixed.kind, RepairResult::Kind::Refused);
  EXPECT_NE(mixed.reason.find("mixes complete value c[i, j] with incomplete m[i]"),
            std::string::npos)
      << mixed.reason;
}

// Additive terms are fine under max (translation invariance) and the peeling inverter covers a
// term that separates in neither + nor *.
TEST(algebra_repair, AdditiveUnderMaxAndPeeledInverse) {
  Expr c = ld("c", {idx("i"), idx("j")});
  auto q = request(Reducer::Max, sub(c, m_i()), {"m"});
  RepairResult r = derive_repair(q);
  expect_derived(q, r, 12);
  EXPECT_EQ(r.method, "separable sum");
  EXPECT_EQ(to_math(r.h_unguarded), "m - m' + t");  // the difference first

  auto peel = request(Reducer::Max, lg(mul(c, ex(make_unary(Op::Neg, m_i())))), {"m"});
  RepairResult p = derive_repair(peel);
  expect_derived(peel, p, 13);
  EXPECT_EQ(p.method, "peeled inverse (Eq. 5)");
  EXPECT_EQ(to_math(p.h_unguarded), "m - m' + t");
}

// A max of the running value and a complete value constant along the axis (a learned sink logit
// joining the softmax: exp(c - max(m, SINK[h]))) is one incomplete value M = max(m, SINK[h]),
// repaired like m itself. Without the axis the engine cannot tell SINK from a per-term value and
// refuses; with SINK varying along the axis it must refuse too.
TEST(algebra_repair, MaxWithATermConstantAlongTheAxis) {
  Expr c = ld("c", {idx("i"), idx("j")});
  Expr sink = ld("SINK", {idx("h")});
  Expr both = make_binary(Op::Max, m_i(), sink);
  auto q = request(Reducer::Sum, ex(sub(c, both)), {"m"});
  EXPECT_EQ(derive_repair(q).kind, RepairResult::Kind::Refused);
  q.axis = "j";
  RepairResult r = derive_repair(q);
  ASSERT_EQ(r.kind, RepairResult::Kind::Derived) << r.reason;
  ASSERT_EQ(r.values.size(), 1u);
  EXPECT_TRUE(equal(r.values[0].load, both));
  EXPECT_TRUE(equal(incomplete_load(r.values[0].load, {"m"}), m_i()));
  EXPECT_EQ(r.method, "separable product");
  // Eq. 3 at random points, the composite's old and new values computed from m, m' and SINK.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-20, 20);
  for (int k = 0; k < 200; ++k) {
    double cv = u(rng), sv = u(rng), mo = u(rng), mn = std::max(mo, u(rng));
    auto g = [&](double m) { return std::exp(cv - std::max(m, sv)); };
    double t = g(mo);
    double h = eval_ir(r.h, [&](const Expr& e, double* v) {
      if (e->op != Op::Var) return false;
      if (e->name == "t") *v = t;
      if (e->name == r.values[0].old_var) *v = std::max(mo, sv);
      if (e->name == r.values[0].new_var) *v = std::max(mn, sv);
      return true;
    });
    EXPECT_NEAR(h, g(mn), 1e-9 * std::max(1.0, g(mn))) << "point " << k;
  }
  auto along = request(Reducer::Sum, ex(sub(c, make_binary(Op::Max, m_i(), c))), {"m"});
  along.axis = "j";
  EXPECT_EQ(derive_repair(along).kind, RepairResult::Kind::Refused);
}

// 12. The index of the maximum, min_j select(x == m, j, N), with m = max_j x given as a running
// extremum: every element a partial has seen is at most m, so when m moves none of them is the
// maximum any more and the partial becomes N; where m stays it is kept. Checked here on
// sequences with ties against the definition. The same term without the extremum's element (a
// max of another tensor), a fallback that varies along j, or a sum of a nonzero fallback, has
// no such repair.
TEST(algebra_repair, IndexOfTheRunningMaximum) {
  Expr x = ld("x", {idx("i"), idx("j")});
  Expr n = dim("N");
  auto term = [&](Expr elem, Expr otherwise) {
    return make_select(make_binary(Op::Eq, elem, m_i()), idx("j"), otherwise);
  };
  auto q = request(Reducer::Min, term(x, n), {"m"});
  q.axis = "j";
  EXPECT_EQ(derive_repair(q).kind, RepairResult::Kind::Refused);  // nothing bounds x by m
  q.running_extrema = {{"m", {Reducer::Max, x}}};
  RepairResult r = derive_repair(q);
  ASSERT_EQ(r.kind, RepairResult::Kind::Derived) << r.reason;
  EXPECT_EQ(r.method, "running extremum");
  EXPECT_EQ(to_math(r.h), "select(m == m', t, N)");
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 300; ++trial) {
    // Elements from a few values, so that the maximum is reached several times.
    std::vector<double> xs(1 + rng() % 8);
    for (double& v : xs) v = static_cast<double>(rng() % 4);
    const size_t k = 1 + rng() % xs.size();
    const double mk = *std::max_element(xs.begin(), xs.begin() + static_cast<long>(k));
    const double mn = *std::max_element(xs.begin(), xs.end());
    const double nv = 100;
    double t = nv, want = nv;
    for (size_t j = 0; j < k; ++j) {
      if (xs[j] == mk) t = std::min(t, static_cast<double>(j));
      if (xs[j] == mn) want = std::min(want, static_cast<double>(j));
    }
    double got = eval_ir(r.h, [&](const Expr& e, double* v) {
      if (e->op != Op::Var) return false;
      *v = e->name == "t" ? t : e->name == "m" ? mk : e->name == "m'" ? mn : nv;
      return true;
    });
    EXPECT_EQ(got, want) << "trial " << trial;
  }
  auto other = request(Reducer::Min, term(ld("y", {idx("i"), idx("j")}), n), {"m"});
  other.axis = "j";
  other.running_extrema = q.running_extrema;
  EXPECT_EQ(derive_repair(other).kind, RepairResult::Kind::Refused);
  auto moving = request(Reducer::Min, term(x, idx("j")), {"m"});
  moving.axis = "j";
  moving.running_extrema = q.running_extrema;
  EXPECT_EQ(derive_repair(moving).kind, RepairResult::Kind::Refused);
  auto count =
      request(Reducer::Sum, make_select(make_binary(Op::Eq, x, m_i()), lit(1), lit(0)), {"m"});
  count.axis = "j";
  count.running_extrema = q.running_extrema;
  RepairResult c = derive_repair(count);
  ASSERT_EQ(c.kind, RepairResult::Kind::Derived) << c.reason;
  EXPECT_EQ(to_math(c.h), "select(m == m', t, 0)");
  count.term = make_select(make_binary(Op::Eq, x, m_i()), lit(1), lit(2));
  EXPECT_EQ(derive_repair(count).kind, RepairResult::Kind::Refused);
}

}  // namespace
