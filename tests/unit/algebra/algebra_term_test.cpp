// \file algebra_term_test.cpp
// The canonical form (hash-consing, flattening, folding, exp merging, powers) and the rule table
// (side-conditioned rewrites, sign facts) of the algebra engine.
#include <gtest/gtest.h>

#include <cmath>

#include "algebra/Rules.h"
#include "algebra/Term.h"

namespace {

using namespace kintsugi;
using namespace kintsugi::algebra;

struct Fixture {
  TermContext cx;
  Term sym(const std::string& name, SymRole role = SymRole::Complete, Sign fact = Sign::Unknown) {
    Symbol s;
    s.name = name;
    s.role = role;
    s.fact = fact;
    return cx.sym(cx.add_symbol(s));
  }
};

TEST(algebra_term, CanonicalFormIsHashConsed) {
  Fixture f;
  TermContext& cx = f.cx;
  Term a = f.sym("a"), b = f.sym("b"), c = f.sym("c");
  // order and nesting do not matter; equal terms are the same pointer
  EXPECT_EQ(cx.add({a, cx.add(b, c)}), cx.add({cx.add(c, a), b}));
  EXPECT_EQ(cx.mul({a, cx.mul(b, c)}), cx.mul({c, b, a}));
  // like terms and constants fold
  EXPECT_EQ(cx.add({a, a, cx.constant(2), cx.constant(3)}),
            cx.add(cx.constant(5), cx.mul(cx.constant(2), a)));
  EXPECT_EQ(cx.sub(a, a), cx.constant(0));
  EXPECT_EQ(cx.div(a, a), cx.constant(1));
  EXPECT_EQ(cx.mul(cx.pow(a, 0.5), cx.pow(a, 0.5)), a);
  // exp(a) * exp(b) = exp(a + b); exp(a)^k = exp(k a)
  EXPECT_EQ(cx.mul(cx.exp(a), cx.exp(b)), cx.exp(cx.add(a, b)));
  EXPECT_EQ(cx.pow(cx.exp(a), 2.0), cx.exp(cx.mul(cx.constant(2), a)));
  EXPECT_EQ(cx.mul(cx.exp(a), cx.exp(cx.neg(a))), cx.constant(1));
  EXPECT_EQ(cx.str(cx.mul({f.sym("t", SymRole::Acc), cx.exp(cx.sub(b, c))})), "t * exp(b - c)");
}

TEST(algebra_term, RulesNeedTheirFacts) {
  Fixture f;
  TermContext& cx = f.cx;
  Term p = f.sym("p", SymRole::Complete, Sign::Pos), a = f.sym("a");
  EXPECT_EQ(simplify(cx, cx.exp(cx.log(p))), p);  // exp(log p) = p, p > 0
  EXPECT_NE(simplify(cx, cx.exp(cx.log(a))), a);  // unknown sign: kept
  EXPECT_EQ(simplify(cx, cx.log(cx.exp(a))), a);
  EXPECT_EQ(simplify(cx, cx.pow(cx.pow(a, 2.0), 0.5)), cx.abs(a));  // sqrt(a^2) = |a|
  EXPECT_EQ(simplify(cx, cx.abs(cx.mul(a, cx.exp(a)))), cx.mul(cx.abs(a), cx.exp(a)));
  EXPECT_EQ(simplify(cx, cx.abs(cx.pow(cx.add(a, p), -0.5))), cx.pow(cx.add(a, p), -0.5));
  // expansion: (a + p)^2
  EXPECT_EQ(expand(cx, cx.pow(cx.add(a, p), 2.0)),
            cx.add({cx.pow(a, 2.0), cx.mul({cx.constant(2), a, p}), cx.pow(p, 2.0)}));
  // distribution into max needs a nonnegative factor
  Term t1 = f.sym("x"), t2 = f.sym("y");
  EXPECT_EQ(distribute(cx, cx.mul(cx.max({t1, t2}), cx.exp(a))),
            cx.max({cx.mul(t1, cx.exp(a)), cx.mul(t2, cx.exp(a))}));
  EXPECT_EQ(distribute(cx, cx.mul(cx.max({t1, t2}), a)), cx.mul(cx.max({t1, t2}), a));
  EXPECT_FALSE(rule_table(RuleSetKind::Simplify).empty());
}

// The log of a quotient of positive values expands: log(exp(a) / p) = a - log(p).
TEST(algebra_term, LogOfAPositiveQuotientExpands) {
  Fixture f;
  TermContext& cx = f.cx;
  Term p = f.sym("p", SymRole::Complete, Sign::Pos), a = f.sym("a");
  EXPECT_EQ(simplify(cx, cx.log(cx.div(cx.exp(a), p))), cx.sub(a, cx.log(p)));
  Term u = f.sym("u");  // unknown sign: kept
  EXPECT_EQ(simplify(cx, cx.log(cx.div(cx.exp(a), u))), cx.log(cx.div(cx.exp(a), u)));
}

TEST(algebra_term, SignFacts) {
  Fixture f;
  TermContext& cx = f.cx;
  Term a = f.sym("a"), eps = f.sym("eps", SymRole::Complete, Sign::Pos);
  EXPECT_EQ(cx.sign(cx.exp(a)), Sign::Pos);
  EXPECT_EQ(cx.sign(cx.pow(a, 0.5)), Sign::NonNeg);            // sqrt >= 0
  EXPECT_EQ(cx.sign(cx.pow(a, -0.5)), Sign::Pos);              // rsqrt > 0
  EXPECT_EQ(cx.sign(cx.add(cx.pow(a, 2.0), eps)), Sign::Pos);  // a^2 + eps > 0
  EXPECT_EQ(cx.sign(cx.max({a, eps})), Sign::Pos);             // max >= each operand
  EXPECT_EQ(cx.sign(cx.mul(a, cx.exp(a))), Sign::Unknown);
  EXPECT_EQ(cx.sign(cx.abs(a)), Sign::NonNeg);
  std::vector<double> vals(cx.num_symbols(), 2.0);
  EXPECT_DOUBLE_EQ(cx.eval(cx.mul(cx.exp(a), cx.pow(eps, -0.5)), vals),
                   std::exp(2.0) / std::sqrt(2.0));
}

}  // namespace
