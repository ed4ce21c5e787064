// \file simplify_fuzz_test.cpp
// Seeded fuzzing of the integer simplifier (ir/Simplify.h). Random Int expressions over three
// variables (x, y, z) and small constants with + - * / % min max and negation:
//   - simplify(e) evaluates to the value of e at random points, negative values included (points
//     where e divides by zero are skipped; simplify must never introduce a division by zero
//     where e had none);
//   - provably_equal(a, b) is never true for expressions that evaluate differently, for pairs
//     that are unrelated, related by a small change, or equal by construction;
//   - provably_divides(d, e) is never true when d does not divide e;
//   - simplify_in_ranges keeps the value where its range facts hold.
// The oracle is an independent evaluator (floor division and modulo written out here, overflow
// detected), cross-checked against ir::eval_int. Every failure prints a repro line with the seed
// and the expressions.
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"

namespace {

using namespace kintsugi;
using ir::Expr;
using ir::Op;

struct Point {
  int64_t x, y, z;
};

// Floor division and modulo, written independently of ir::floor_div / floor_mod.
int64_t ref_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (q * b != a && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t ref_mod(int64_t a, int64_t b) {
  return a - ref_div(a, b) * b;
}

enum class Bad { None, DivZero, Overflow };

// Evaluates e at p; nullopt with *why set on a division by zero or an overflow.
std::optional<int64_t> eval(const Expr& e, const Point& p, Bad* why) {
  auto fail = [&](Bad b) -> std::optional<int64_t> {
    if (*why == Bad::None) *why = b;
    return std::nullopt;
  };
  switch (e->op) {
    case Op::IntImm:
      return e->int_value;
    case Op::Var:
      return e->name == "x" ? p.x : e->name == "y" ? p.y : p.z;
    case Op::Neg: {
      auto a = eval(e->args[0], p, why);
      if (!a) return a;
      if (*a == INT64_MIN) return fail(Bad::Overflow);
      return -*a;
    }
    default:
      break;
  }
  auto a = eval(e->args[0], p, why);
  auto b = eval(e->args[1], p, why);
  if (!a || !b) return std::nullopt;
  int64_t out = 0;
  switch (e->op) {
    case Op::Add:
      if (__builtin_add_overflow(*a, *b, &out)) return fail(Bad::Overflow);
      return out;
    case Op::Sub:
      if (__builtin_sub_overflow(*a, *b, &out)) return fail(Bad::Overflow);
      return out;
    case Op::Mul:
      if (__builtin_mul_overflow(*a, *b, &out)) return fail(Bad::Overflow);
      return out;
    case Op::Div:
    case Op::Mod:
      if (*b == 0) return fail(Bad::DivZero);
      if (*a == INT64_MIN && *b == -1) return fail(Bad::Overflow);
      return e->op == Op::Div ? ref_div(*a, *b) : ref_mod(*a, *b);
    case Op::Min:
      return std::min(*a, *b);
    case Op::Max:
      return std::max(*a, *b);
    default:
      ADD_FAILURE() << "unexpected op in " << ir::to_string(e);
      return std::nullopt;
  }
}

struct Gen {
  std::mt19937_64 rng;
  explicit Gen(uint64_t seed) : rng(seed) {}
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }

  Expr var() {
    static const char* names[] = {"x", "y", "z"};
    return ir::make_var(names[pick(3)], ir::VarKind::Dim, DType::Int);
  }
  Expr konst() {
    static const int64_t ks[] = {0, 1, -1, 2, -2, 3, 4, -4, 5, 7, -8, 16, 64};
    return ir::make_int(ks[pick(13)]);
  }
  Expr leaf() { return pick(5) < 3 ? var() : konst(); }

  Expr expr(int depth) {
    if (depth == 0 || pick(6) == 0) return leaf();
    static const Op ops[] = {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Mod, Op::Min, Op::Max};
    int c = pick(10);
    if (c == 0) return ir::make_unary(Op::Neg, expr(depth - 1));
    if (c < 3) {  // constant right operand: the shapes the folding rules look for
      Op op = ops[pick(7)];
      return ir::make_binary(op, expr(depth - 1), konst());
    }
    return ir::make_binary(ops[pick(7)], expr(depth - 1), expr(depth - 1));
  }

  // A variant of e that is often, but not always, equal to it.
  Expr variant(const Expr& e) {
    switch (pick(6)) {
      case 0:  // equal: + 0, * 1, (e + c) - c
        return ir::make_binary(Op::Sub, ir::make_binary(Op::Add, e, ir::make_int(3)),
                               ir::make_int(3));
      case 1:  // off by a constant
        return ir::make_binary(Op::Add, e, konst());
      case 2:  // commuted operands (equal for + * min max)
        if (e->args.size() == 2) return ir::make_binary(e->op, e->args[1], e->args[0]);
        return e;
      case 3:  // a variable replaced
        return ir::make_binary(Op::Add, e, ir::make_binary(Op::Sub, var(), var()));
      case 4:  // scaled
        return ir::make_binary(Op::Mul, e, konst());
      default:
        return expr(3);
    }
  }
};

std::vector<Point> points(Gen& g) {
  std::vector<Point> ps = {{0, 0, 0}, {1, -1, 2}, {-1, -2, -3}, {7, 3, -5}, {-7, 2, 3}};
  for (int k = 0; k < 20; ++k) ps.push_back({g.pick(41) - 20, g.pick(41) - 20, g.pick(41) - 20});
  return ps;
}

std::string at(const Point& p) {
  return "x=" + std::to_string(p.x) + " y=" + std::to_string(p.y) + " z=" + std::to_string(p.z);
}

TEST(simplify_fuzz, EvaluatorAgreesWithEvalInt) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Gen g(seed);
    Expr e = g.expr(4);
    for (const Point& p : points(g)) {
      Bad why = Bad::None;
      auto v = eval(e, p, &why);
      if (!v) continue;
      runtime::SizeMap sizes = {{"x", p.x}, {"y", p.y}, {"z", p.z}};
      EXPECT_EQ(ir::eval_int(e, sizes), *v)
          << "repro: seed=" << seed << " e=" << ir::to_string(e) << " at " << at(p);
    }
  }
}

TEST(simplify_fuzz, SimplifyPreservesValues) {
  int checked = 0, changed = 0;
  for (uint64_t seed = 1; seed <= 4000; ++seed) {
    Gen g(seed);
    Expr e = g.expr(1 + g.pick(4));
    Expr s = ir::simplify(e);
    std::string repro = "repro: seed=" + std::to_string(seed) + " e=" + ir::to_string(e) +
                        " simplified=" + ir::to_string(s);
    ASSERT_TRUE(s) << repro;
    EXPECT_EQ(s->type, DType::Int) << repro;
    changed += !ir::equal(e, s);
    // simplify is idempotent on its own output's value, and deterministic
    EXPECT_TRUE(ir::equal(ir::simplify(e), s)) << repro;
    for (const Point& p : points(g)) {
      Bad why_e = Bad::None, why_s = Bad::None;
      auto ve = eval(e, p, &why_e);
      if (!ve) continue;
      auto vs = eval(s, p, &why_s);
      if (!vs && why_s == Bad::Overflow) continue;  // reassociation may overflow; not a value
      ++checked;
      EXPECT_NE(why_s, Bad::DivZero)
          << "simplify introduced a division by zero; " << repro << " at " << at(p);
      if (vs) {
        EXPECT_EQ(*vs, *ve) << repro << " at " << at(p);
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(checked, 40000);
  EXPECT_GT(changed, 1000);
}

// provably_equal(a, b) must imply that a and b agree wherever both are defined.
TEST(simplify_fuzz, ProvablyEqualIsSound) {
  int proved = 0;
  for (uint64_t seed = 10001; seed <= 14000; ++seed) {
    Gen g(seed);
    Expr a = g.expr(1 + g.pick(3));
    Expr b = g.pick(4) == 0 ? g.expr(1 + g.pick(3)) : g.variant(a);
    if (g.pick(4) == 0) b = ir::simplify(b);
    if (!ir::provably_equal(a, b)) continue;
    ++proved;
    for (const Point& p : points(g)) {
      Bad wa = Bad::None, wb = Bad::None;
      auto va = eval(a, p, &wa), vb = eval(b, p, &wb);
      if (!va || !vb) continue;
      EXPECT_EQ(*va, *vb) << "provably_equal returned true; repro: seed=" << seed
                          << " a=" << ir::to_string(a) << " b=" << ir::to_string(b) << " at "
                          << at(p);
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(proved, 500);
}

// provably_divides(d, e) must imply that d divides e wherever both are defined and d != 0.
TEST(simplify_fuzz, ProvablyDividesIsSound) {
  int proved = 0;
  for (uint64_t seed = 20001; seed <= 23000; ++seed) {
    Gen g(seed);
    Expr d = g.pick(2) ? g.konst() : g.expr(1);
    Expr e = g.pick(2) ? ir::make_binary(Op::Mul, g.expr(2), g.pick(2) ? d : g.expr(1)) : g.expr(2);
    if (g.pick(3) == 0) e = ir::simplify(e);
    if (!ir::provably_divides(d, e)) continue;
    ++proved;
    for (const Point& p : points(g)) {
      Bad wd = Bad::None, we = Bad::None;
      auto vd = eval(d, p, &wd), ve = eval(e, p, &we);
      if (!vd || !ve || *vd == 0) continue;
      EXPECT_EQ(ref_mod(*ve, *vd), 0)
          << "provably_divides returned true; repro: seed=" << seed << " d=" << ir::to_string(d)
          << " e=" << ir::to_string(e) << " at " << at(p);
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(proved, 300);
}

}  // namespace

// simplify_in_ranges with z in [0, E), E over x and y: the folds of (q * E + z) / E and % E keep
// the value wherever E > 0 and z lies in its range (q may use z too: then nothing may fold).
TEST(simplify_fuzz, RangeFoldsPreserveValues) {
  int checked = 0, folded = 0;
  Expr z = ir::make_var("z", ir::VarKind::Index, DType::Int);
  for (uint64_t seed = 30001; seed <= 33000; ++seed) {
    Gen g(seed);
    auto with_index_z = [&](const Expr& e) { return ir::substitute(e, {{"z", z}}); };
    Expr extent =
        ir::substitute(g.expr(2), {{"z", ir::make_var("y", ir::VarKind::Dim, DType::Int)}});
    Expr num = g.pick(3) == 0
                   ? with_index_z(g.expr(3))
                   : ir::make_binary(Op::Add,
                                     ir::make_binary(Op::Mul, with_index_z(g.expr(2)), extent), z);
    Expr e = ir::make_binary(g.pick(2) ? Op::Div : Op::Mod, num, extent);
    if (g.pick(2)) e = ir::make_binary(Op::Add, e, with_index_z(g.expr(1)));
    Expr s = ir::simplify_in_ranges(e, {{"z", extent}});
    folded += !ir::equal(ir::simplify(e), s);
    std::string repro = "repro: seed=" + std::to_string(seed) + " e=" + ir::to_string(e) +
                        " extent(z)=" + ir::to_string(extent) + " simplified=" + ir::to_string(s);
    for (Point p : points(g)) {
      Bad why = Bad::None;
      auto n = eval(extent, p, &why);
      if (!n || *n <= 0) continue;
      p.z = static_cast<int64_t>(g.rng() % static_cast<uint64_t>(*n));
      Bad why_e = Bad::None, why_s = Bad::None;
      auto ve = eval(e, p, &why_e);
      if (!ve) continue;
      auto vs = eval(s, p, &why_s);
      if (!vs && why_s == Bad::Overflow) continue;
      ++checked;
      EXPECT_NE(why_s, Bad::DivZero) << repro << " at " << at(p);
      if (vs) {
        EXPECT_EQ(*vs, *ve) << repro << " at " << at(p);
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(checked, 5000);
  EXPECT_GT(folded, 300);
}
