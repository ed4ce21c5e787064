// \file AlgebraTestUtil.h
// Helpers for the algebra engine's tests: expression builders and an independent, seeded numeric
// checker of a derived repair (Eq. 3, Eq. 4 on partial reductions, identity and -inf guards).
// The checker evaluates the request's g and the result's h with ir-level evaluation only (it does
// not use the engine's internal terms), so it checks what a code generator would emit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "algebra/Eval.h"
#include "algebra/Repair.h"
#include "ir/Expr.h"
#include "ir/Printer.h"
#include "ir/Visit.h"

namespace algtest {

using namespace kintsugi;
using namespace kintsugi::ir;
using namespace kintsugi::algebra;

inline Expr idx(const char* n) {
  return make_var(n, VarKind::Index, DType::Int);
}
inline Expr dim(const char* n) {
  return make_var(n, VarKind::Dim, DType::Int);
}
inline Expr param(const char* n) {
  return make_var(n, VarKind::Param, DType::F32);
}
inline Expr ld(const std::string& name, std::vector<Expr> ix, DType t = DType::F32) {
  return make_load(name, t, std::move(ix));
}
inline Expr lit(double v) {
  return make_float(v, DType::F32);
}
inline Expr add(Expr a, Expr b) {
  return make_binary(Op::Add, a, b);
}
inline Expr sub(Expr a, Expr b) {
  return make_binary(Op::Sub, a, b);
}
inline Expr mul(Expr a, Expr b) {
  return make_binary(Op::Mul, a, b);
}
inline Expr div(Expr a, Expr b) {
  return make_binary(Op::Div, a, b);
}
inline Expr call(MathFn f, Expr a) {
  return make_call(f, {a});
}
inline Expr ex(Expr a) {
  return call(MathFn::Exp, a);
}
inline Expr lg(Expr a) {
  return call(MathFn::Log, a);
}
inline Expr sq(Expr a) {
  return call(MathFn::Sqrt, a);
}
inline Expr rsq(Expr a) {
  return call(MathFn::Rsqrt, a);
}
inline Expr ab(Expr a) {
  return call(MathFn::Abs, a);
}
inline Expr f32(Expr a) {
  return make_cast(DType::F32, a);
}
inline Expr f16(Expr a) {
  return make_cast(DType::F16, a);
}

inline double fold(Reducer r, double a, double b) {
  switch (r) {
    case Reducer::Sum:
      return a + b;
    case Reducer::Max:
      return std::max(a, b);
    case Reducer::Min:
      return std::min(a, b);
    case Reducer::Prod:
      return a * b;
  }
  return a;
}

struct NumericReport {
  int eq3 = 0, eq4 = 0, ident = 0;  // points checked
  std::string failure;              // empty when all passed
};

// Checks a Derived result at random points (seeded). Complete leaves (loads by text, vars by
// name) get random values per term; facts are respected (positive / nonnegative), dims are
// positive integers, Bool loads are 0/1.
inline NumericReport check_numeric(const RepairRequest& req, const RepairResult& res, uint64_t seed,
                                   int points = 300) {
  NumericReport rep;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // complete leaves of g
  std::map<std::string, Expr> leaves;
  visit(req.term, [&](const Expr& e) {
    if (e->op == Op::Load && req.incomplete.count(e->name)) return false;
    if (e->op == Op::Load || e->op == Op::Var) {
      leaves[(e->op == Op::Var ? "$" : "") + to_string(e)] = e;
      return false;
    }
    return true;
  });
  auto fact = [&](const std::string& n) {
    auto it = req.facts.find(n);
    return it == req.facts.end() ? std::string() : it->second;
  };
  auto draw = [&](int regime, const std::string& f) {
    double v = regime == 0   ? 0.1 + 3 * unit(rng)
               : regime == 1 ? -3 + 6 * unit(rng)
               : regime == 2 ? std::pow(10.0, -2 + 4.5 * unit(rng)) * (unit(rng) < .5 ? -1 : 1)
                             : -20 + 40 * unit(rng);
    if (f == "positive") v = std::fabs(v) + 1e-3;
    if (f == "nonnegative") v = std::fabs(v);
    return v;
  };
  std::map<std::string, double> c;
  // Params and dims are the same for every term of a reduction: drawn once per point.
  auto per_point = [](const Expr& e) { return e->op == Op::Var && e->var_kind != VarKind::Index; };
  auto draw_c = [&](int regime, bool point) {
    for (auto& [k, e] : leaves) {
      if (per_point(e) != point) continue;
      if (e->type == DType::Bool)
        c[k] = static_cast<double>(rng() & 1);
      else if (is_int(e->type))
        c[k] = static_cast<double>(1 + rng() % 32);
      else
        c[k] = draw(regime, fact(e->name));
    }
  };
  // a term that overflows, underflows or vanishes at only one of r, r' is not a valid point
  auto bad = [](double a, double b) {
    auto tiny = [](double v) { return v != 0 && std::fabs(v) < 1e-200; };
    return !std::isfinite(a) || !std::isfinite(b) || (a == 0) != (b == 0) || tiny(a) || tiny(b);
  };
  size_t nv = res.values.size();
  auto value_of = [&](const Expr& load) -> int {
    for (size_t i = 0; i < nv; ++i)
      if (equal(res.values[i].load, load)) return static_cast<int>(i);
    return -1;
  };
  auto complete_leaf = [&](const Expr& e, double* v) {
    if (e->op != Op::Load && e->op != Op::Var) return false;
    auto it = c.find((e->op == Op::Var ? "$" : "") + to_string(e));
    if (it == c.end()) return false;
    *v = it->second;
    return true;
  };
  auto g = [&](const std::vector<double>& r) {
    return eval_ir(req.term, [&](const Expr& e, double* v) {
      if (e->op == Op::Load && req.incomplete.count(e->name)) {
        *v = r[value_of(e)];
        return true;
      }
      return complete_leaf(e, v);
    });
  };
  auto h = [&](double t, const std::vector<double>& r, const std::vector<double>& rn,
               const std::map<std::string, double>& stats) {
    return eval_ir(res.h, [&](const Expr& e, double* v) {
      if (e->op == Op::Var) {
        if (e->name == "t") return (*v = t), true;
        for (size_t i = 0; i < nv; ++i) {
          if (e->name == res.values[i].old_var) return (*v = r[i]), true;
          if (e->name == res.values[i].new_var) return (*v = rn[i]), true;
        }
        auto it = stats.find(e->name);
        if (it != stats.end()) return (*v = it->second), true;
      }
      return complete_leaf(e, v);
    });
  };
  auto stat_values = [&]() {
    std::map<std::string, double> s;
    for (const auto& st : res.statistics)
      s[st.var] = eval_ir(st.term, [&](const Expr& e, double* v) { return complete_leaf(e, v); });
    return s;
  };
  auto close = [](double a, double b, double scale) {
    if (a == b) return true;
    if (!std::isfinite(a) || !std::isfinite(b)) return false;
    return std::fabs(a - b) <= 1e-8 * std::max({scale, std::fabs(a), std::fabs(b)}) + 1e-290;
  };
  auto fail = [&](const std::string& what, int point) {
    std::ostringstream s;
    s << what << " (seed " << seed << ", point " << point << ", h = " << to_math(res.h) << ")";
    rep.failure = s.str();
  };
  for (int p = 0; p < points && rep.failure.empty(); ++p) {
    int regime = p % 4;
    std::vector<double> r(nv), rn(nv);
    for (size_t i = 0; i < nv; ++i) {
      r[i] = draw(regime, fact(res.values[i].load->name));
      rn[i] = draw(regime, fact(res.values[i].load->name));
    }
    // Eq. 3
    draw_c(regime, true);
    draw_c(regime, false);
    double gv = g(r), gn = g(rn);
    auto st = stat_values();
    bool ok3 = !bad(gv, gn);
    if (ok3) {
      double hv = h(gv, r, rn, st);
      if (std::isfinite(hv)) {
        ++rep.eq3;
        if (!close(hv, gn, std::fabs(gv) + std::fabs(gn))) {
          fail("Eq.3: h(g(r,c),r,r') = " + format_double(hv) + " vs g(r',c) = " + format_double(gn),
               p);
          break;
        }
      }
      double id = h(gv, r, r, st);
      ++rep.ident;
      if (!close(id, gv, std::fabs(gv))) {
        fail("identity: h(t,r,r) = " + format_double(id) + " vs t = " + format_double(gv), p);
        break;
      }
    }
    // Eq. 4 on partial reductions a, b
    double part[2] = {0, 0}, want[2] = {0, 0}, scale = 0;
    std::map<std::string, double> sp[2];
    bool ok = true;
    for (int side = 0; side < 2 && ok; ++side) {
      int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) {
        draw_c(regime, false);
        double a = g(r), b = g(rn);
        if (bad(a, b)) {
          ok = false;
          break;
        }
        for (auto& [k, v] : stat_values()) sp[side][k] += v;
        part[side] = i ? fold(req.reducer, part[side], a) : a;
        want[side] = i ? fold(req.reducer, want[side], b) : b;
        scale += std::fabs(a) + std::fabs(b);
      }
    }
    if (!ok) continue;
    std::map<std::string, double> sab;
    for (auto& [k, v] : sp[0]) sab[k] = v + sp[1][k];
    double lhs = h(fold(req.reducer, part[0], part[1]), r, rn, sab);
    double rhs = fold(req.reducer, h(part[0], r, rn, sp[0]), h(part[1], r, rn, sp[1]));
    if (!std::isfinite(lhs) || !std::isfinite(rhs)) continue;
    ++rep.eq4;
    if (!close(lhs, rhs, scale)) {
      fail("Eq.4: h(a f b) = " + format_double(lhs) + " vs h(a) f h(b) = " + format_double(rhs), p);
      break;
    }
    if (!close(lhs, fold(req.reducer, want[0], want[1]), scale)) {
      fail("Lemma 4.3: h(F g(r)) = " + format_double(lhs) +
               " vs F g(r') = " + format_double(fold(req.reducer, want[0], want[1])),
           p);
      break;
    }
  }
  // guard: r = r' = -inf (all values, then each alone) keeps h(t) = t, finite
  if (rep.failure.empty()) {
    const double inf = std::numeric_limits<double>::infinity();
    for (int which = -1; which < static_cast<int>(nv); ++which) {
      std::vector<double> r(nv);
      for (size_t i = 0; i < nv; ++i)
        r[i] = (which < 0 || which == static_cast<int>(i)) ? -inf : 0.7;
      draw_c(1, true);
      draw_c(1, false);
      auto st = stat_values();
      for (double t : {0.0, 2.5}) {
        double v = h(t, r, r, st);
        if (v != t)
          fail("guard at -inf: h(" + format_double(t) + ", -inf, -inf) = " + format_double(v),
               which);
      }
    }
  }
  return rep;
}

// Asserts a Derived result whose numeric behaviour matches Eq. 3 / Eq. 4 / the guards.
inline void expect_derived(const RepairRequest& req, const RepairResult& res, uint64_t seed) {
  ASSERT_EQ(res.kind, RepairResult::Kind::Derived) << res.reason;
  ASSERT_TRUE(res.h);
  EXPECT_TRUE(res.verified_numeric);
  NumericReport rep = check_numeric(req, res, seed);
  EXPECT_TRUE(rep.failure.empty()) << rep.failure;
  EXPECT_GE(rep.eq3, 40);
  EXPECT_GE(rep.eq4, 40);
  EXPECT_GE(rep.ident, 40);
}

}  // namespace algtest
