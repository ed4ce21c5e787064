// \file algebra_fuzz_test.cpp
// Seeded fuzzing of the algebra engine. Random separable terms (products and sums of random
// complete sub-expressions and random incomplete sub-expressions built from exp, sqrt, rsqrt,
// pow, abs, constants) and non-separable ones (x and u mixed inside exp, powers, logs, ...):
// every Derived h must satisfy Eq. 3, Eq. 4 and the guards under an independent numeric check;
// where an oracle is cheap, the kind is checked too (a multiplicative term under sum must
// derive; an additive one under sum must be refused; an additive one under max must derive).
// Every failure prints a repro line with the seed and the term.
#include <gtest/gtest.h>

#include <random>

#include "../unit/algebra/AlgebraTestUtil.h"

namespace {

using namespace algtest;

struct Gen {
  std::mt19937_64 rng;
  explicit Gen(uint64_t seed) : rng(seed) {}
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }
  double konst() {
    static const double ks[] = {0.5, 2.0, -1.5, 3.0, 0.25, -0.75};
    return ks[pick(6)];
  }

  Expr c(int k) { return ld("c" + std::to_string(k), {idx("i"), idx("j")}); }
  Expr m() { return ld("m", {idx("i")}); }  // incomplete, any sign
  Expr l() { return ld("l", {idx("i")}); }  // incomplete, positive (fact)

  // A random complete sub-expression (varies with j).
  Expr u(int depth = 2) {
    if (depth == 0) return pick(4) == 0 ? mul(lit(konst()), c(pick(3))) : c(pick(3));
    switch (pick(6)) {
      case 0:
        return add(u(depth - 1), u(depth - 1));
      case 1:
        return mul(u(depth - 1), u(depth - 1));
      case 2:
        return ex(mul(lit(0.5), u(depth - 1)));
      case 3:
        return ab(u(depth - 1));
      case 4:
        return sq(add(ab(u(depth - 1)), lit(1.0)));
      default:
        return u(depth - 1);
    }
  }

  // A random incomplete sub-expression (a function of m and l only).
  Expr x(int depth = 2) {
    if (depth == 0) {
      switch (pick(9)) {
        case 0:
          return ex(m());
        case 1:
          return ex(mul(lit(konst()), m()));
        case 2:
          return l();
        case 3:
          return sq(l());
        case 4:
          return rsq(l());
        case 5:
          return make_call(MathFn::Pow, {l(), lit(konst())});
        case 6:
          return ab(m());
        case 7:
          return div(lit(konst()), l());
        default:
          return m();
      }
    }
    switch (pick(4)) {
      case 0:
        return mul(x(depth - 1), x(depth - 1));
      case 1:
        return mul(lit(konst()), x(depth - 1));
      case 2:
        return ex(sub(m(), mul(lit(konst()), m())));
      default:
        return x(depth - 1);
    }
  }

  // Terms that mix u and x inside one sub-expression.
  Expr mixed() {
    switch (pick(7)) {
      case 0:
        return ex(mul(u(1), m()));
      case 1:
        return mul(add(u(1), m()), add(u(1), m()));
      case 2:
        return add(mul(u(1), m()), ex(sub(u(1), m())));
      case 3:
        return lg(mul(ab(u(1)), ex(make_unary(Op::Neg, m()))));
      case 4:
        return ex(sub(u(1), mul(m(), l())));  // separable after all
      case 5:
        return call(MathFn::Tanh, mul(u(1), l()));
      default:
        return sq(add(ab(u(1)), l()));
    }
  }
};

RepairRequest req(Reducer r, Expr g) {
  RepairRequest q;
  q.reducer = r;
  q.term = std::move(g);
  q.incomplete = {"m", "l"};
  q.facts = {{"l", "positive"}};
  return q;
}

std::string repro(uint64_t seed, const RepairRequest& q, const RepairResult& r) {
  return std::string("repro: seed=") + std::to_string(seed) +
         " reducer=" + reducer_name(q.reducer) + " g=" + to_math(q.term) + " -> " +
         (r.kind == RepairResult::Kind::Derived   ? "Derived h=" + to_math(r.h)
          : r.kind == RepairResult::Kind::Refused ? "Refused: " + r.reason
                                                  : "Identity");
}

// Every Derived result must pass the independent numeric check.
void check_sound(uint64_t seed, const RepairRequest& q, const RepairResult& r) {
  if (r.kind != RepairResult::Kind::Derived) return;
  NumericReport rep = check_numeric(q, r, seed ^ 0x9e3779b97f4a7c15ULL, 120);
  EXPECT_TRUE(rep.failure.empty()) << rep.failure << "\n" << repro(seed, q, r);
}

const Reducer kReducers[] = {Reducer::Sum, Reducer::Max, Reducer::Min};

TEST(algebra_fuzz, SeparableProducts) {
  int derived = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    Gen gen(seed);
    Expr g = gen.pick(2) ? mul(gen.u(), gen.x()) : mul(gen.x(), ex(sub(gen.u(1), gen.m())));
    for (Reducer red : kReducers) {
      RepairRequest q = req(red, g);
      RepairResult r = derive_repair(q);
      check_sound(seed, q, r);
      if (red == Reducer::Sum) {  // a product g = gu * gx always has h = t * gx(x') / gx(x)
        // (Identity when gx cancels, e.g. sqrt(l) * rsqrt(l))
        EXPECT_NE(r.kind, RepairResult::Kind::Refused) << repro(seed, q, r);
      }
      derived += r.kind == RepairResult::Kind::Derived;
    }
  }
  EXPECT_GT(derived, 150);
}

TEST(algebra_fuzz, SeparableSums) {
  for (uint64_t seed = 1001; seed <= 1150; ++seed) {
    Gen gen(seed);
    Expr g = gen.pick(2) ? add(gen.u(), gen.x()) : sub(gen.u(), mul(lit(gen.konst()), gen.m()));
    for (Reducer red : kReducers) {
      RepairRequest q = req(red, g);
      RepairResult r = derive_repair(q);
      check_sound(seed, q, r);
      if (red == Reducer::Sum) {  // additive g under sum: h = t - gx + gx' never distributes
        EXPECT_EQ(r.kind, RepairResult::Kind::Refused) << repro(seed, q, r);
      } else {  // translation invariance of max/min
        EXPECT_EQ(r.kind, RepairResult::Kind::Derived) << repro(seed, q, r);
      }
    }
    // with the augmented state allowed, the additive term under sum derives (with the count)
    RepairRequest q = req(Reducer::Sum, g);
    q.allow_augmented_state = true;
    RepairResult r = derive_repair(q);
    check_sound(seed, q, r);
    EXPECT_EQ(r.kind, RepairResult::Kind::Derived) << repro(seed, q, r);
  }
}

TEST(algebra_fuzz, NonSeparable) {
  int refused = 0, derived = 0;
  for (uint64_t seed = 2001; seed <= 2300; ++seed) {
    Gen gen(seed);
    Expr g = gen.mixed();
    if (gen.pick(3) == 0) g = mul(g, gen.u(1));
    for (Reducer red : kReducers) {
      for (bool aug : {false, true}) {
        RepairRequest q = req(red, g);
        q.allow_augmented_state = aug;
        RepairResult r = derive_repair(q);
        check_sound(seed, q, r);
        if (r.kind == RepairResult::Kind::Refused) {
          EXPECT_FALSE(r.reason.empty()) << repro(seed, q, r);
        }
        refused += r.kind == RepairResult::Kind::Refused;
        derived += r.kind == RepairResult::Kind::Derived;
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(derived, 0);
}

}  // namespace
