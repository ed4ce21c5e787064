// \file Repair.cpp
// Derivation and verification of repair functions (see the tutorial in Repair.h).
#include "algebra/Repair.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <unordered_map>

#include "algebra/Eval.h"
#include "algebra/Rules.h"
#include "algebra/Term.h"
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"

namespace kintsugi::algebra {

namespace {

using ir::Op;

struct Refusal {
  std::string reason;
};

const double kInf = std::numeric_limits<double>::infinity();

// One derivation: a candidate h over t, x, x' (and statistics), with the data to guard it.
struct Candidate {
  Term h = nullptr;
  std::string method;
  enum class Shape { Product, Sum, General } shape = Shape::General;
  std::vector<std::vector<Term>> groups;  // Product/Sum: the x-only parts of gx, by group
  std::vector<int> stats;                 // statistic symbols (augmented)
  std::vector<Term> stat_terms;           // u-only summand of each statistic
  // Running sums: statistic symbol -> the producer's running value it equals (over old values);
  // h = scale * sum of corrections (t and one term a statistic).
  std::unordered_map<int, Term> running;
  Term scale = nullptr;
  bool scale_at_most_one = false;  // scale = a running sum's old / new value (RepairResult)
  std::vector<Term> corrections;
};

class Engine {
 public:
  explicit Engine(const RepairRequest& req, bool sign_only = false)
      : req_(req), sign_only_(sign_only) {}

  // The sign of the request's term, every load of it a symbol with its fact (sign_fact).
  Sign term_sign() {
    try {
      return cx_.sign(convert(req_.term));
    } catch (const Refusal&) {
      return Sign::Unknown;
    }
  }

  RepairResult run() {
    RepairResult res;
    internal_assert(req_.term) << "derive_repair: null term";
    type_ = is_float(req_.term->type) ? req_.term->type : DType::F32;
    Symbol acc;
    acc.name = "t";
    acc.role = SymRole::Acc;
    acc_ = cx_.add_symbol(acc);
    try {
      g_ = simplify(cx_, convert(req_.term));
    } catch (const Refusal& r) {
      res.reason = r.reason;
      if (!running_extremum(&res)) fill_values(&res);
      return res;
    }
    fill_values(&res);
    if (!cx_.uses_role(g_, SymRole::Old)) {
      res.kind = RepairResult::Kind::Identity;
      res.h = res.h_unguarded = var_of(acc_);
      res.method = "identity";
      res.verified_symbolic = res.verified_numeric = true;
      return res;
    }
    try {
      Candidate c = derive();
      finish(c, &res);
    } catch (const Refusal& r) {
      res.kind = RepairResult::Kind::Refused;
      res.reason = r.reason;
      res.h = nullptr;
    }
    return res;
  }

 private:
  struct Value {
    ir::Expr load;
    int old_sym = -1, new_sym = -1;
  };

  // ---------------------------------------------------------------- classification
  bool has_x(const ir::Expr& e) {
    auto it = has_x_.find(e.get());
    if (it != has_x_.end()) return it->second;
    bool r = e->op == Op::Load && (sign_only_ || req_.incomplete.count(e->name));
    for (const ir::Expr& a : e->args) r = has_x(a) || r;
    has_x_[e.get()] = r;
    return r;
  }

  Sign fact_of(const std::string& name) {
    auto it = req_.facts.find(name);
    if (it == req_.facts.end()) return Sign::Unknown;
    if (it->second == "positive") return Sign::Pos;
    if (it->second == "nonnegative") return Sign::NonNeg;
    throw Refusal{"unknown fact '" + it->second + "' for " + name +
                  " (expected positive or nonnegative)"};
  }

  Term atom(const ir::Expr& e) {
    if (e->op == Op::FloatImm) return cx_.constant(e->float_value);
    if (e->op == Op::IntImm || e->op == Op::BoolImm)
      return cx_.constant(static_cast<double>(e->int_value));
    for (int s : complete_)
      if (ir::equal(cx_.symbol(s).origin, e)) {
        node_sym_[e.get()] = s;
        return cx_.sym(s);
      }
    Symbol s;
    s.role = SymRole::Complete;
    s.origin = e;
    s.name = to_math(e);
    s.integer = is_int(e->type) || e->type == DType::Bool;
    if (e->op == Op::Var || e->op == Op::Load) s.fact = fact_of(e->name);
    if (e->op == Op::Var && e->var_kind == ir::VarKind::Dim) s.fact = Sign::Pos;
    s.invariant = true;
    ir::visit(e, [&](const ir::Expr& n) {
      if (n->op == Op::Load || (n->op == Op::Var && n->var_kind == ir::VarKind::Index))
        s.invariant = false;
      return s.invariant;
    });
    int i = cx_.add_symbol(s);
    complete_.push_back(i);
    node_sym_[e.get()] = i;
    return cx_.sym(i);
  }

  Term incomplete(const ir::Expr& e) {
    for (const Value& v : values_)
      if (ir::equal(v.load, e)) {
        node_sym_[e.get()] = v.old_sym;
        return cx_.sym(v.old_sym);
      }
    auto name_of = [](const ir::Expr& x) { return x->op == Op::Load ? x->name : to_math(x); };
    const std::string base = name_of(e);
    int same = 0;
    for (const Value& v : values_) same += name_of(v.load) == base;
    std::string name = same ? base + "_" + std::to_string(same) : base;
    Value v;
    v.load = e;
    Symbol s;
    s.name = name;
    s.role = SymRole::Old;
    s.value = static_cast<int>(values_.size());
    s.fact = e->op == Op::Load ? fact_of(e->name) : Sign::Unknown;
    v.old_sym = cx_.add_symbol(s);
    s.name = name + "'";
    s.role = SymRole::New;
    v.new_sym = cx_.add_symbol(s);
    values_.push_back(v);
    node_sym_[e.get()] = v.old_sym;
    return cx_.sym(v.old_sym);
  }

  // max(x, u) or min(x, u) with u complete and not varying along the axis, x one incomplete
  // load: x's running value maps to this value's running value, so it is incomplete itself.
  bool composite(const ir::Expr& e) {
    if ((e->op != Op::Max && e->op != Op::Min) || req_.axis.empty() || ir::uses_var(e, req_.axis))
      return false;
    int loads = 0;
    ir::visit(e, [&](const ir::Expr& n) {
      loads += n->op == Op::Load && req_.incomplete.count(n->name);
      return true;
    });
    return loads == 1 && (!has_x(e->args[0]) || !has_x(e->args[1]));
  }

  Term convert(const ir::Expr& e) {
    if (!has_x(e) || (sign_only_ && !is_float(e->type))) return atom(e);
    if (e->op == Op::Load || composite(e)) return incomplete(e);
    if (e->op == Op::Select && has_x(e->args[0]) && !sign_only_)
      throw Refusal{"select condition " + to_math(e->args[0]) + " depends on an incomplete value"};
    std::vector<Term> a;  // operands, converted left to right (deterministic symbol order)
    for (const ir::Expr& arg : e->args)
      a.push_back(sign_only_ && e->op == Op::Select && arg == e->args[0] ? atom(arg)
                                                                         : convert(arg));
    if (is_int(e->type) && e->op != Op::Cast)
      throw Refusal{"integer arithmetic on an incomplete value: " + to_math(e)};
    switch (e->op) {
      case Op::Cast:
        if (!is_float(e->type))
          throw Refusal{"cast of an incomplete value to " + std::string(dtype_name(e->type)) +
                        " is not value preserving: " + to_math(e)};
        return a[0];
      case Op::Neg:
        return cx_.neg(a[0]);
      case Op::Add:
        return cx_.add(a[0], a[1]);
      case Op::Sub:
        return cx_.sub(a[0], a[1]);
      case Op::Mul:
        return cx_.mul(a[0], a[1]);
      case Op::Div:
        return cx_.div(a[0], a[1]);
      case Op::Min:
        return cx_.min({a[0], a[1]});
      case Op::Max:
        return cx_.max({a[0], a[1]});
      case Op::Select:
        return cx_.select(a[0], a[1], a[2]);
      case Op::Call:
        switch (e->fn) {
          case ir::MathFn::Exp:
            return cx_.exp(a[0]);
          case ir::MathFn::Exp2:
            return cx_.exp(cx_.mul(cx_.constant(std::log(2.0)), a[0]));
          case ir::MathFn::Log:
            return cx_.log(a[0]);
          case ir::MathFn::Log2:
            return cx_.mul(cx_.constant(1.0 / std::log(2.0)), cx_.log(a[0]));
          case ir::MathFn::Sqrt:
            return cx_.pow(a[0], 0.5);
          case ir::MathFn::Rsqrt:
            return cx_.pow(a[0], -0.5);
          case ir::MathFn::Abs:
            return cx_.abs(a[0]);
          case ir::MathFn::Pow:
            return cx_.pow(a[0], a[1]);
          case ir::MathFn::Tanh:
          case ir::MathFn::Round:
          case ir::MathFn::Clamp:
          case ir::MathFn::Sigmoid:
          case ir::MathFn::Erf:
            return cx_.fn(e->fn, a);
        }
        break;
      default:
        break;
    }
    throw Refusal{"operator in " + to_math(e) + " is not supported on an incomplete value"};
  }

  void fill_values(RepairResult* res) {
    res->values.clear();
    for (const Value& v : values_)
      res->values.push_back({v.load, cx_.symbol(v.old_sym).name, cx_.symbol(v.new_sym).name});
  }

  // ---------------------------------------------------------------- helpers
  bool uses_x(Term t) { return cx_.uses_role(t, SymRole::Old) || cx_.uses_role(t, SymRole::New); }
  // Complete values that vary between the terms of the reduction (params, dims and literals do
  // not: they may sit in gx like constants).
  bool uses_u(Term t) {
    if (t->kind == TermKind::Sym) {
      const Symbol& s = cx_.symbol(t->sym);
      return s.role == SymRole::Complete && !s.invariant;
    }
    for (Term a : t->args)
      if (uses_u(a)) return true;
    return false;
  }
  Term t_sym() { return cx_.sym(acc_); }

  Term to_new(Term t) {
    std::unordered_map<int, Term> m;
    for (const Value& v : values_) m[v.old_sym] = cx_.sym(v.new_sym);
    return cx_.substitute(t, m);
  }
  Term to_old(Term t) {
    std::unordered_map<int, Term> m;
    for (const Value& v : values_) m[v.new_sym] = cx_.sym(v.old_sym);
    return cx_.substitute(t, m);
  }

  std::string loads_in(Term t) {
    std::vector<int> syms;
    cx_.collect_symbols(t, &syms);
    std::string u, x;
    int nu = 0;
    for (int s : syms) {
      const Symbol& sy = cx_.symbol(s);
      if (sy.role == SymRole::Complete && !sy.invariant) u += (nu++ ? ", " : "") + sy.name;
      if (sy.role == SymRole::Old) x += (x.empty() ? "" : ", ") + to_math(values_[sy.value].load);
    }
    return "complete value" + std::string(nu > 1 ? "s " : " ") + u + " with incomplete " + x;
  }

  // Factors of a product (exp(a + b) split into exp of its u-, x- and mixed summands).
  struct Parts {
    std::vector<Term> u, x, mixed;
  };
  Parts split_product(Term g) {
    Parts p;
    std::vector<Term> factors = g->kind == TermKind::Mul ? g->args : std::vector<Term>{g};
    for (Term f : factors) {
      if (!uses_x(f))
        p.u.push_back(f);
      else if (!uses_u(f))
        p.x.push_back(f);
      else if (f->kind == TermKind::Exp) {
        // Expanded, so that a scale of the exponent (a temperature, exp((x - m) / T)) spreads
        // over its terms: exp(x / T - m / T) = exp(x / T) exp(-m / T).
        Term arg = expand(cx_, f->args[0]);
        std::vector<Term> terms = arg->kind == TermKind::Add ? arg->args : std::vector<Term>{arg};
        std::vector<Term> tu, tx, tm;
        for (Term s : terms) (!uses_x(s) ? tu : !uses_u(s) ? tx : tm).push_back(s);
        if (!tu.empty()) p.u.push_back(cx_.exp(cx_.add(tu)));
        // exp(c log a) of a positive incomplete a is a^c: a ratio of running values, not an
        // exponential of one (exp(s - m - log l) = exp(s) exp(-m) / l).
        std::erase_if(tx, [&](Term s) {
          double c = 1.0;
          Term a = s;
          if (s->kind == TermKind::Mul && s->args.size() == 2 &&
              s->args[0]->kind == TermKind::Const)
            c = s->args[0]->value, a = s->args[1];
          if (a->kind != TermKind::Log || cx_.sign(a->args[0]) != Sign::Pos) return false;
          p.x.push_back(cx_.pow(a->args[0], c));
          return true;
        });
        if (!tx.empty()) p.x.push_back(cx_.exp(cx_.add(tx)));
        for (Term m : tm) p.mixed.push_back(cx_.exp(m));
      } else if (Parts in = masked_product(f); in.mixed.empty() && !in.x.empty()) {
        p.u.insert(p.u.end(), in.u.begin(), in.u.end());
        p.x.insert(p.x.end(), in.x.begin(), in.x.end());
      } else {
        p.mixed.push_back(f);
      }
    }
    return p;
  }
  // A mask that zeroes a product, select(c, U X, 0) with a complete condition c, is the masked
  // complete part times the incomplete part: select(c, U, 0) X (and select(c, 0, U) X). The
  // identity holds wherever X is finite, which is where g is evaluated; the numeric check of
  // Eq. 3 confirms it. Returns the parts with `mixed` non-empty when f is no such mask.
  Parts masked_product(Term f) {
    Parts none;
    none.mixed.push_back(f);
    if (f->kind != TermKind::Select) return none;
    const Term zero = cx_.constant(0.0);
    const bool kept_first = f->args[2] == zero;
    if (!kept_first && f->args[1] != zero) return none;
    Parts in = split_product(f->args[kept_first ? 1 : 2]);
    if (!in.mixed.empty() || in.x.empty()) return none;
    Term u = cx_.mul(in.u);
    in.u = {kept_first ? cx_.select(f->args[0], u, zero) : cx_.select(f->args[0], zero, u)};
    return in;
  }

  Parts split_sum(Term g) {
    Parts p;
    std::vector<Term> terms = g->kind == TermKind::Add ? g->args : std::vector<Term>{g};
    for (Term s : terms) (!uses_x(s) ? p.u : !uses_u(s) ? p.x : p.mixed).push_back(s);
    return p;
  }

  // Groups x-only parts by connected incomplete values (for the guards); exp factors are split
  // per group first.
  std::vector<std::vector<Term>> group_parts(const std::vector<Term>& parts, bool product) {
    std::vector<Term> pieces;
    for (Term p : parts) {
      if (product && p->kind == TermKind::Exp && p->args[0]->kind == TermKind::Add) {
        std::map<std::vector<int>, std::vector<Term>> by_vars;
        for (Term s : p->args[0]->args) {
          std::vector<int> v;
          cx_.collect_symbols(s, &v);
          std::sort(v.begin(), v.end());
          by_vars[v].push_back(s);
        }
        for (auto& [v, ts] : by_vars) pieces.push_back(cx_.exp(cx_.add(ts)));
      } else {
        pieces.push_back(p);
      }
    }
    // union-find over pieces sharing a value
    std::vector<int> parent(pieces.size());
    std::iota(parent.begin(), parent.end(), 0);
    std::function<int(int)> find = [&](int i) {
      return parent[i] == i ? i : parent[i] = find(parent[i]);
    };
    std::vector<std::vector<int>> vars(pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i) cx_.collect_symbols(pieces[i], &vars[i]);
    for (size_t i = 0; i < pieces.size(); ++i)
      for (size_t j = i + 1; j < pieces.size(); ++j)
        for (int v : vars[i])
          if (std::find(vars[j].begin(), vars[j].end(), v) != vars[j].end())
            parent[find(static_cast<int>(i))] = find(static_cast<int>(j));
    std::map<int, std::vector<Term>> groups;
    for (size_t i = 0; i < pieces.size(); ++i)
      groups[find(static_cast<int>(i))].push_back(pieces[i]);
    std::vector<std::vector<Term>> out;
    for (auto& [r, g] : groups) out.push_back(g);
    return out;
  }

  // ---------------------------------------------------------------- distributivity (Eq. 4)
  // h = t * k with k free of t?
  bool linear_in_t(Term h, Term* k) {
    if (h == t_sym()) {
      *k = cx_.constant(1.0);
      return true;
    }
    if (h->kind != TermKind::Mul) return false;
    std::vector<Term> rest;
    int seen = 0;
    for (Term f : h->args) {
      if (f == t_sym())
        ++seen;
      else if (cx_.uses_symbol(f, acc_))
        return false;
      else
        rest.push_back(f);
    }
    if (seen != 1) return false;
    *k = cx_.mul(rest);
    return true;
  }
  // h = t + k with k free of t?
  bool translate_in_t(Term h, Term* k) {
    if (h->kind != TermKind::Add) return false;
    std::vector<Term> rest;
    int seen = 0;
    for (Term s : h->args) {
      if (s == t_sym())
        ++seen;
      else if (cx_.uses_symbol(s, acc_))
        return false;
      else
        rest.push_back(s);
    }
    if (seen != 1) return false;
    *k = cx_.add(rest);
    return true;
  }
  // +1 non-decreasing in t, -1 non-increasing, 0 free of t, 2 unknown.
  int monotone(Term h) {
    if (!cx_.uses_symbol(h, acc_)) return 0;
    if (h == t_sym()) return 1;
    auto flip = [](int m) { return m == 2 ? 2 : -m; };
    switch (h->kind) {
      case TermKind::Add:
      case TermKind::Max:
      case TermKind::Min: {
        int dir = 0;
        for (Term a : h->args) {
          int m = monotone(a);
          if (m == 2 || (m != 0 && dir != 0 && m != dir)) return 2;
          if (m != 0) dir = m;
        }
        return dir;
      }
      case TermKind::Mul: {
        int dir = 0;
        Sign rest = Sign::Pos;
        std::vector<Term> others;
        for (Term a : h->args) {
          int m = monotone(a);
          if (m == 0)
            others.push_back(a);
          else if (dir != 0)
            return 2;
          else
            dir = m;
        }
        rest = cx_.sign(cx_.mul(others));
        if (is_nonneg(rest)) return dir;
        if (is_nonpos(rest)) return flip(dir);
        return 2;
      }
      case TermKind::Exp:
        return monotone(h->args[0]);
      case TermKind::Log:
        return monotone(h->args[0]);
      case TermKind::Pow: {
        Term e = h->args[1];
        if (e->kind != TermKind::Const || cx_.uses_symbol(e, acc_)) return 2;
        int m = monotone(h->args[0]);
        double k = e->value;
        bool odd_int = k == std::floor(k) && std::fmod(std::fabs(k), 2.0) == 1.0;
        if (k > 0 && (odd_int || k != std::floor(k))) return m;  // domain of a^(p/q): base >= 0
        if (k > 0 && is_nonneg(cx_.sign(h->args[0]))) return m;
        return 2;
      }
      default:
        return 2;
    }
  }

  // Throws a precise refusal when h does not distribute over the reducer.
  void check_distributes(Term h) {
    Term k = nullptr;
    std::string hs = cx_.str(h);
    switch (req_.reducer) {
      case ir::Reducer::Sum:
        if (linear_in_t(h, &k)) return;
        if (translate_in_t(h, &k))
          throw Refusal{"reducer sum does not distribute over h = " + hs + " (h = t + k, k = " +
                        cx_.str(k) + "): h(a + b) = a + b + k but h(a) + h(b) = a + b + 2 k; " +
                        "sum needs h linear in t (t * k)"};
        throw Refusal{"reducer sum does not distribute over h = " + hs +
                      ": sum needs h linear in t (t * k)"};
      case ir::Reducer::Max:
      case ir::Reducer::Min: {
        const char* f = req_.reducer == ir::Reducer::Max ? "max" : "min";
        if (linear_in_t(h, &k)) {
          Sign s = cx_.sign(k);
          if (is_nonneg(s)) return;
          throw Refusal{std::string("reducer ") + f + " does not distribute over h = " + hs +
                        ": h = t * k needs k >= 0, but k = " + cx_.str(k) + " is " +
                        (s == Sign::Unknown ? "of unknown sign" : sign_name(s)) +
                        " (give a fact \"positive\" for the values it depends on)"};
        }
        if (translate_in_t(h, &k)) return;
        if (monotone(h) == 1) return;
        throw Refusal{std::string("reducer ") + f + " does not distribute over h = " + hs +
                      ": h is not provably non-decreasing in t"};
      }
      case ir::Reducer::Prod:
        throw Refusal{"reducer prod does not distribute over h = " + hs +
                      ": prod needs h multiplicative in t (h(a * b) = h(a) * h(b), i.e. t^k); " +
                      "a repair t * k would be applied once per partial (k^n), which needs the "
                      "count of terms"};
    }
  }

  // ---------------------------------------------------------------- derivation
  Candidate product(const Parts& p) {
    Term gx = cx_.mul(p.x);
    Candidate c;
    c.h = simplify(cx_, cx_.mul({t_sym(), to_new(gx), cx_.pow(gx, -1.0)}));
    c.method = "separable product";
    c.shape = Candidate::Shape::Product;
    c.groups = group_parts(p.x, true);
    // A partial normalised by its running sum (o = sum(e / l) v): gx'/gx is the sum over the
    // partial's elements over the sum over a superset, so h never scales a partial up.
    c.scale_at_most_one = running_sum_ratio(gx);
    return c;
  }
  Candidate sum(const Parts& p) {
    Term gx = cx_.add(p.x);
    Candidate c;
    c.h = simplify(cx_, cx_.add({t_sym(), to_new(gx), cx_.neg(gx)}));
    c.method = "separable sum";
    c.shape = Candidate::Shape::Sum;
    c.groups = group_parts(p.x, false);
    return c;
  }

  // Solves g = z for the single u-carrying subterm S of g: returns S and E(x, z) with S = E.
  bool isolate(Term g, Term z, Term* s, Term* e, std::string* why) {
    if (!uses_x(g)) {
      *s = g;
      *e = z;
      return true;
    }
    auto single = [&](std::vector<Term>* rest) -> Term {
      Term found = nullptr;
      for (Term a : g->args) {
        if (uses_u(a)) {
          if (found) return nullptr;
          found = a;
        } else {
          rest->push_back(a);
        }
      }
      return found;
    };
    std::vector<Term> rest;
    switch (g->kind) {
      case TermKind::Add: {
        Term a = single(&rest);
        if (!a) break;
        return isolate(a, cx_.sub(z, cx_.add(rest)), s, e, why);
      }
      case TermKind::Mul: {
        Term a = single(&rest);
        if (!a) break;
        return isolate(a, cx_.div(z, cx_.mul(rest)), s, e, why);
      }
      case TermKind::Pow:
        if (!uses_u(g->args[1]))
          return isolate(g->args[0], cx_.pow(z, cx_.pow(g->args[1], -1.0)), s, e, why);
        if (!uses_u(g->args[0]))
          return isolate(g->args[1], cx_.div(cx_.log(z), cx_.log(g->args[0])), s, e, why);
        break;
      case TermKind::Exp:
        return isolate(g->args[0], cx_.log(z), s, e, why);
      case TermKind::Log:
        return isolate(g->args[0], cx_.exp(z), s, e, why);
      default:
        break;
    }
    *why =
        "cannot peel " + cx_.str(g) + " down to its complete part (it mixes " + loads_in(g) + ")";
    return false;
  }

  bool peel(Candidate* c, std::string* why) {
    Term s = nullptr, e = nullptr;
    if (!isolate(g_, t_sym(), &s, &e, why)) return false;
    Symbol w;
    w.name = "@w";
    w.role = SymRole::Wild;
    int wi = cx_.add_symbol(w);
    Term gw = cx_.replace(g_, {{s, cx_.sym(wi)}});
    if (uses_u(gw)) {
      *why = "the complete part of g is not one sub-term";
      return false;
    }
    c->h = simplify(cx_, cx_.substitute(to_new(gw), {{wi, e}}));
    c->method = "peeled inverse (Eq. 5)";
    c->shape = Candidate::Shape::General;
    return true;
  }

  // The incomplete value x when every x-part but the constant one (`base`) is x^p for one old
  // value x and a positive integer p; null otherwise.
  Term power_base(const std::vector<std::pair<Term, std::vector<Term>>>& groups, size_t base) {
    Term x = nullptr;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (i == base) continue;
      Term b = groups[i].first, v = b;
      if (b->kind == TermKind::Pow) {
        Term e = b->args[1];
        if (e->kind != TermKind::Const || e->value < 1 || e->value != std::floor(e->value) ||
            e->value > 8)
          return nullptr;
        v = b->args[0];
      }
      if (v->kind != TermKind::Sym || cx_.symbol(v->sym).role != SymRole::Old) return nullptr;
      if (x && x != v) return nullptr;
      x = v;
    }
    return x;
  }

  // g = sum_k a_k(u) * b_k(x) after expansion: the augmented state sum_k a_k.
  bool augmented(Candidate* c, std::string* need, std::string* mixed) {
    Term ge = expand(cx_, g_);
    std::vector<Term> terms = ge->kind == TermKind::Add ? ge->args : std::vector<Term>{ge};
    std::vector<std::pair<Term, std::vector<Term>>> groups;  // b(x) -> a(u) summands
    for (Term s : terms) {
      Parts p = split_product(s);
      if (!p.mixed.empty()) {
        *mixed = "term " + cx_.str(s) + " mixes " + loads_in(s);
        return false;
      }
      Term b = cx_.mul(p.x), a = cx_.mul(p.u);
      auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == b; });
      if (it == groups.end())
        groups.push_back({b, {a}});
      else
        it->second.push_back(a);
    }
    if (groups.size() < 2) return false;
    // The accumulator t carries the group whose x-part is constant (t = A_1 + sum_k A_k b_k(x));
    // without one, t would be re-scaled and corrected (t rho - A_k b_k rho), which cancels
    // catastrophically, so that form is not offered, unless every other group's sum is a
    // producer's running value (running_sum_of): then t = A_1 b_1 + sum_k A_k b_k with known
    // A_k, and h = rho (t + sum_k A_k (b_k' / rho - b_k)), rho = b_1' / b_1, whose corrections
    // simplify to differences of old and new values (softmax entropy: rho (t + m - m' + log l -
    // log l'), rho = exp(m - m') l / l').
    size_t base = groups.size();
    for (size_t i = 0; i < groups.size(); ++i)
      if (groups[i].first->kind == TermKind::Const) base = i;
    if (base == groups.size()) return running_sums(groups, c, need);
    Term b1 = groups[base].first;
    Term rho = simplify(cx_, cx_.mul(to_new(b1), cx_.pow(b1, -1.0)));
    std::vector<Term> h = {cx_.mul(t_sym(), rho)};
    // Every other x-part a positive integer power x^p of one incomplete value (a variance about
    // a mean): h is re-based as t + (x' - x) * sum_k coef_k S_k q_k with q_k = (x'^p - x^p) /
    // (x' - x) written as sum_i x'^i x^(p-1-i), so that no difference of large, nearly equal
    // powers is ever formed (x far from zero, x' close to x).
    Term x = power_base(groups, base);
    std::vector<Term> rebased;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (i == base) continue;
      Term a = cx_.add(groups[i].second);
      double coef = 1.0;
      if (a->kind == TermKind::Const)
        coef = a->value, a = cx_.constant(1.0);
      else if (a->kind == TermKind::Mul && a->args[0]->kind == TermKind::Const) {
        coef = a->args[0]->value;
        a = cx_.mul(std::vector<Term>(a->args.begin() + 1, a->args.end()));
      }
      Symbol st;
      st.role = SymRole::Stat;
      st.value = static_cast<int>(c->stats.size());
      st.name = a == cx_.constant(1.0) ? "n" : "S" + std::to_string(c->stats.size());
      int si = cx_.add_symbol(st);
      c->stats.push_back(si);
      c->stat_terms.push_back(a);
      Term bk = groups[i].first;
      h.push_back(
          cx_.mul({cx_.constant(coef), cx_.sym(si), cx_.sub(to_new(bk), cx_.mul(bk, rho))}));
      if (x) {
        int p = bk == x ? 1 : static_cast<int>(bk->args[1]->value);
        std::vector<Term> q;
        for (int k = 0; k < p; ++k)
          q.push_back(cx_.mul(cx_.pow(to_new(x), static_cast<double>(k)),
                              cx_.pow(x, static_cast<double>(p - 1 - k))));
        rebased.push_back(cx_.mul({cx_.constant(coef), cx_.sym(si), cx_.add(q)}));
      }
      *need += std::string(need->empty() ? "" : " and ") +
               (a == cx_.constant(1.0) ? "the count n" : "sum of " + cx_.str(a));
    }
    c->h = x ? cx_.add(t_sym(), cx_.mul(cx_.sub(to_new(x), x), cx_.add(rebased)))
             : simplify(cx_, expand(cx_, cx_.add(h)));
    bool count = false;
    for (Term a : c->stat_terms) count |= a == cx_.constant(1.0);
    c->method = count && c->stats.size() > 1 ? "augmented state (Welford)" : "augmented state";
    c->shape = Candidate::Shape::General;
    return true;
  }

  // A group's complete part split into its constant coefficient and the rest.
  std::pair<double, Term> coefficient(Term a) {
    if (a->kind == TermKind::Const) return {a->value, cx_.constant(1.0)};
    if (a->kind == TermKind::Mul && a->args[0]->kind == TermKind::Const)
      return {a->args[0]->value, cx_.mul(std::vector<Term>(a->args.begin() + 1, a->args.end()))};
    return {1.0, a};
  }

  // A running sum the term reads (RepairRequest::running_sums) whose summand separates as a(u)
  // k(x) over the term's own incomplete values.
  struct RunningSum {
    size_t value;  // index in values_
    Term summand, u, k;
  };
  const std::vector<RunningSum>& running_sum_parts() {
    if (running_sums_ready_) return running_sums_;
    running_sums_ready_ = true;
    for (const auto& [name, summand] : req_.running_sums) {
      auto v = std::find_if(values_.begin(), values_.end(),
                            [&](const Value& x) { return x.load->name == name; });
      if (v == values_.end()) continue;
      const size_t index = static_cast<size_t>(v - values_.begin());
      const size_t known_values = values_.size();
      Term ts;
      try {
        ts = simplify(cx_, convert(summand));
      } catch (const Refusal&) {
        values_.resize(known_values);
        continue;
      }
      if (values_.size() != known_values) {  // reads an incomplete value the term does not
        values_.resize(known_values);
        continue;
      }
      Parts p = split_product(ts);
      if (!p.mixed.empty() || p.u.empty()) continue;
      running_sums_.push_back({index, ts, cx_.mul(p.u), cx_.mul(p.x)});
    }
    return running_sums_;
  }

  // The sum over the prefix of complete part `a` when it is the complete part of a running sum's
  // summand: its running value over the summand's incomplete part, at the old values. Null
  // otherwise.
  Term running_sum_of(Term a) {
    for (const RunningSum& r : running_sum_parts()) {
      auto [coef, rest] = coefficient(r.u);
      if (rest != a) continue;
      return cx_.mul(
          {cx_.constant(1.0 / coef), cx_.sym(values_[r.value].old_sym), cx_.pow(r.k, -1.0)});
    }
    return nullptr;
  }

  // Whether x-part b is k / p for a running sum p whose summand is a(u) k(x) with a >= 0: then
  // b' / b = (p k^-1) / (p' k'^-1), a sum of a over the partial's elements over the same sum
  // over a superset of them.
  bool running_sum_ratio(Term b) {
    for (const RunningSum& r : running_sum_parts()) {
      Sign a = cx_.sign(r.u);
      if (a != Sign::Pos && a != Sign::NonNeg) continue;
      if (simplify(cx_, cx_.mul(r.k, cx_.pow(cx_.sym(values_[r.value].old_sym), -1.0))) ==
          simplify(cx_, b))
        return true;
    }
    return false;
  }

  // The augmented form whose statistics are all running sums but for the group t carries.
  bool running_sums(const std::vector<std::pair<Term, std::vector<Term>>>& groups, Candidate* c,
                    std::string* need) {
    size_t base = groups.size();
    std::vector<Term> known(groups.size());
    for (size_t i = 0; i < groups.size(); ++i) {
      known[i] = running_sum_of(coefficient(cx_.add(groups[i].second)).second);
      if (known[i]) continue;
      if (base != groups.size()) return false;  // two groups no producer sums
      base = i;
    }
    if (base == groups.size()) return false;
    Term b1 = groups[base].first;
    Term rho = simplify(cx_, cx_.mul(to_new(b1), cx_.pow(b1, -1.0)));
    std::vector<Term> corrections = {t_sym()};
    for (size_t i = 0; i < groups.size(); ++i) {
      if (i == base) continue;
      auto [coef, a] = coefficient(cx_.add(groups[i].second));
      Symbol st;
      st.role = SymRole::Stat;
      st.value = static_cast<int>(c->stats.size());
      st.name = "S" + std::to_string(c->stats.size());
      int si = cx_.add_symbol(st);
      c->stats.push_back(si);
      c->stat_terms.push_back(a);
      c->running[si] = known[i];
      Term bk = groups[i].first;
      corrections.push_back(cx_.mul(
          {cx_.constant(coef), cx_.sym(si), cx_.sub(cx_.mul(to_new(bk), cx_.pow(rho, -1.0)), bk)}));
      *need += std::string(need->empty() ? "" : " and ") + "sum of " + cx_.str(a);
    }
    c->h = cx_.mul(rho, cx_.add(corrections));
    c->scale = rho;
    c->scale_at_most_one = running_sum_ratio(b1);
    c->corrections = corrections;
    c->method = "running sums";
    c->shape = Candidate::Shape::General;
    return true;
  }

  Candidate derive() {
    bool sum_reducer = req_.reducer == ir::Reducer::Sum;
    // 1. separable product
    Parts p = split_product(g_);
    if (p.mixed.empty() && !p.x.empty()) {
      Candidate c = product(p);
      check_distributes(c.h);
      return c;
    }
    // 1b. a sum of separable products with one incomplete part, sum_i u_i X(x) = (sum_i u_i)
    // X(x): the exponentials of two score sets against one maximum, exp(a - m) + exp(c - m)
    if (g_->kind == TermKind::Add) {
      std::vector<Term> us;
      Term common = nullptr;
      for (Term s : g_->args) {
        Parts q = split_product(s);
        Term x = q.mixed.empty() && !q.x.empty() ? simplify(cx_, cx_.mul(q.x)) : nullptr;
        if (!x || (common && x != common)) {
          common = nullptr;
          break;
        }
        common = x;
        us.push_back(q.u.empty() ? cx_.constant(1.0) : cx_.mul(q.u));
      }
      if (common) {
        Parts q;
        q.u = {cx_.add(us)};
        q.x = {common};
        Candidate c = product(q);
        check_distributes(c.h);
        return c;
      }
    }
    // 2. separable sum (on g, then on its expanded form)
    for (Term form : {g_, expand(cx_, g_)}) {
      Parts s = split_sum(form);
      if (!s.mixed.empty() || s.x.empty()) continue;
      Candidate c = sum(s);
      if (sum_reducer) {
        std::string need, mixed;
        Candidate a;
        bool aug = augmented(&a, &need, &mixed);
        if (aug && (req_.allow_augmented_state || !a.running.empty())) return a;
        try {
          check_distributes(c.h);
        } catch (const Refusal& r) {
          throw Refusal{r.reason + (aug ? "; the exact update needs " + need +
                                              " beyond (t, r, r') (augmented state: h = " +
                                              cx_.str(a.h) + "; set allow_augmented_state)"
                                        : "")};
        }
      }
      check_distributes(c.h);
      return c;
    }
    // 3. peeling inverter (Eq. 5)
    std::string why, peel_refusal;
    Candidate c;
    if (peel(&c, &why)) {
      try {
        check_distributes(c.h);
        return c;
      } catch (const Refusal& r) {
        peel_refusal = r.reason;
      }
    }
    // 4. augmented state (sum only) or a precise refusal
    std::string need, mixed;
    Candidate a;
    bool aug = sum_reducer && augmented(&a, &need, &mixed);
    if (aug && (req_.allow_augmented_state || !a.running.empty())) return a;
    if (mixed.empty()) {
      Parts s = split_sum(expand(cx_, g_));
      if (!s.mixed.empty())
        mixed = "term " + cx_.str(s.mixed[0]) + " mixes " + loads_in(s.mixed[0]);
      else
        mixed = why;
    }
    std::string reason = "g = " + cx_.str(g_) + " does not separate: " + mixed;
    if (aug)
      reason += "; no h(t, r, r') exists: h would need " + need +
                " beyond (t, r, r') (augmented state: h = " + cx_.str(a.h) +
                "; set allow_augmented_state)";
    else if (!peel_refusal.empty())
      reason +=
          "; the general inverse (Eq. 5) gives " + peel_refusal.substr(peel_refusal.find("h = "));
    throw Refusal{reason};
  }

  // ---------------------------------------------------------------- emission
  ir::Expr var_of(int s) {
    auto it = vars_.find(s);
    if (it != vars_.end()) return it->second;
    const Symbol& sy = cx_.symbol(s);
    DType t = type_;
    if ((sy.role == SymRole::Old || sy.role == SymRole::New) &&
        is_float(values_[sy.value].load->type))
      t = values_[sy.value].load->type;
    ir::Expr v = ir::make_var(sy.name, ir::VarKind::Index, t);
    vars_[s] = v;
    node_sym_[v.get()] = s;
    return v;
  }

  ir::Expr lit(double v) { return ir::make_float(v, type_); }

  // A sum whose terms share factors, as those factors times the sum of the rest: the exponent of
  // a repair, exp(m / T - m' / T), is emitted as exp((m - m') / T). Each term rounded on its own
  // keeps its rounding in the difference, which cancels where m' is close to m (|m| = 1000, T =
  // 0.7: a relative error of 5e-4 after a row of tiles); the difference first is exact there.
  Term factor_common(Term sum) {
    if (sum->kind != TermKind::Add) return sum;
    auto factors = [](Term a) {
      std::vector<Term> f;
      for (Term x : a->kind == TermKind::Mul ? a->args : std::vector<Term>{a})
        if (x->kind != TermKind::Const) f.push_back(x);
      return f;
    };
    std::vector<Term> common = factors(sum->args[0]);
    for (size_t k = 1; k < sum->args.size() && !common.empty(); ++k) {
      std::vector<Term> f = factors(sum->args[k]), kept;
      for (Term c : common)
        if (auto it = std::find(f.begin(), f.end(), c); it != f.end()) {
          kept.push_back(c);
          f.erase(it);
        }
      common = kept;
    }
    if (common.empty()) return sum;
    const Term shared = cx_.mul(common);
    std::vector<Term> rest;
    for (Term a : sum->args) rest.push_back(simplify(cx_, cx_.mul(a, cx_.pow(shared, -1.0))));
    return cx_.mul(shared, cx_.add(rest));
  }

  ir::Expr emit(Term t) {
    switch (t->kind) {
      case TermKind::Const:
        return lit(t->value);
      case TermKind::Sym: {
        const Symbol& s = cx_.symbol(t->sym);
        if (s.role == SymRole::Complete) return s.origin;
        return var_of(t->sym);
      }
      case TermKind::Add: {
        ir::Expr out;
        // An old value and its new value's negation are added first, (m - m') + ..., so that
        // the difference of two large, close values is formed exactly before it meets small
        // terms (t + m - m' would round t to the precision of m).
        std::vector<Term> args;
        std::vector<bool> taken(t->args.size(), false);
        if (t->args.size() > 2)
          for (size_t i = 0; i < t->args.size(); ++i)
            for (size_t j = 0; j < t->args.size() && !taken[i]; ++j)
              if (!taken[j] && i != j && cx_.uses_role(t->args[i], SymRole::Old) &&
                  t->args[j] == cx_.neg(to_new(t->args[i]))) {
                args.push_back(cx_.add(t->args[i], t->args[j]));
                taken[i] = taken[j] = true;
              }
        for (size_t i = 0; i < t->args.size(); ++i)
          if (!taken[i]) args.push_back(t->args[i]);
        for (Term a : args) {
          bool neg = (a->kind == TermKind::Const && a->value < 0) ||
                     (a->kind == TermKind::Mul && a->args[0]->kind == TermKind::Const &&
                      a->args[0]->value < 0);
          ir::Expr e = emit(neg ? cx_.neg(a) : a);
          if (!out)
            out = neg ? ir::make_unary(Op::Neg, e) : e;
          else
            out = ir::make_binary(neg ? Op::Sub : Op::Add, out, e);
        }
        return out;
      }
      case TermKind::Mul: {
        double coef = 1.0;
        ir::Expr num, den;
        auto times = [](ir::Expr acc, ir::Expr e) {
          return acc ? ir::make_binary(Op::Mul, acc, e) : e;
        };
        if (t->args[0]->kind == TermKind::Const) {
          coef = t->args[0]->value;
          if (coef != 1.0 && coef != -1.0) num = lit(coef);
        }
        for (Term a : t->args) {
          if (a->kind == TermKind::Const)
            continue;
          else if (a->kind == TermKind::Pow && a->args[1]->kind == TermKind::Const &&
                   a->args[1]->value < 0)
            den = times(den, emit(cx_.pow(a->args[0], -a->args[1]->value)));
          else
            num = times(num, emit(a));
        }
        if (!num) num = lit(1.0);
        ir::Expr out = den ? ir::make_binary(Op::Div, num, den) : num;
        return coef == -1.0 ? ir::make_unary(Op::Neg, out) : out;
      }
      case TermKind::Pow: {
        Term e = t->args[1];
        ir::Expr b = emit(t->args[0]);
        if (e->kind == TermKind::Const) {
          if (e->value == 0.5) return ir::make_call(ir::MathFn::Sqrt, {b});
          if (e->value == -0.5) return ir::make_call(ir::MathFn::Rsqrt, {b});
          if (e->value == -1.0) return ir::make_binary(Op::Div, lit(1.0), b);
        }
        return ir::make_call(ir::MathFn::Pow, {b, emit(e)});
      }
      case TermKind::Exp:
        return ir::make_call(ir::MathFn::Exp, {emit(factor_common(t->args[0]))});
      case TermKind::Log:
        return ir::make_call(ir::MathFn::Log, {emit(t->args[0])});
      case TermKind::Abs:
        return ir::make_call(ir::MathFn::Abs, {emit(t->args[0])});
      case TermKind::Max:
      case TermKind::Min: {
        ir::Expr out = emit(t->args[0]);
        for (size_t i = 1; i < t->args.size(); ++i)
          out =
              ir::make_binary(t->kind == TermKind::Max ? Op::Max : Op::Min, out, emit(t->args[i]));
        return out;
      }
      case TermKind::Select:
        return ir::make_select(emit(t->args[0]), emit(t->args[1]), emit(t->args[2]));
      case TermKind::Fn: {
        std::vector<ir::Expr> args;
        for (Term a : t->args) args.push_back(emit(a));
        return ir::make_call(static_cast<ir::MathFn>(t->sym), args);
      }
    }
    internal_error << "emit: unknown term";
    return nullptr;
  }

  // x == x' for every incomplete value mentioned in `parts` (or all values when empty).
  ir::Expr unchanged(const std::vector<Term>& parts) {
    std::vector<int> syms;
    for (Term p : parts) cx_.collect_symbols(p, &syms);
    ir::Expr out;
    for (const Value& v : values_) {
      bool used = parts.empty() || std::find(syms.begin(), syms.end(), v.old_sym) != syms.end();
      if (!used) continue;
      ir::Expr eq = ir::make_binary(Op::Eq, var_of(v.old_sym), var_of(v.new_sym));
      out = out ? ir::make_binary(Op::And, out, eq) : eq;
    }
    return out;
  }

  ir::Expr guarded(const Candidate& c) {
    ir::Expr t = var_of(acc_);
    if (c.shape == Candidate::Shape::Product) {
      ir::Expr out = t;
      for (const auto& g : c.groups) {
        Term gx = cx_.mul(g);
        Term k = simplify(cx_, cx_.mul(to_new(gx), cx_.pow(gx, -1.0)));
        if (k == cx_.constant(1.0)) continue;
        out = ir::make_binary(Op::Mul, out, ir::make_select(unchanged(g), lit(1.0), emit(k)));
      }
      return out;
    }
    if (c.shape == Candidate::Shape::Sum) {
      ir::Expr out = t;
      for (const auto& g : c.groups) {
        Term gx = cx_.add(g);
        Term k = simplify(cx_, cx_.sub(to_new(gx), gx));
        if (k == cx_.constant(0.0)) continue;
        out = ir::make_binary(Op::Add, out, ir::make_select(unchanged(g), lit(0.0), emit(k)));
      }
      return out;
    }
    return ir::make_select(unchanged({}), t, emit(c.h));
  }

  // ---------------------------------------------------------------- running extremum
  // g = select(E == x, A, B) with x a running max (or min) of the elements E along the axis
  // (RepairRequest::running_extrema), A and B complete and B the same for every element. Every
  // element a partial has seen is at most x, so where x moves to x' > x none equals x' any more:
  // each term becomes B, and the reducer of B's is B (min and max; sum for B = 0, product for
  // B = 1). h = select(x == x', t, B). The forms E != x (branches swapped), and E >= x for a
  // max (E <= x for a min), which hold where E == x, are read alike. Verified on sequences of
  // elements and their extremum (running_extremum_holds). False when g has another form.
  bool running_extremum(RepairResult* res) {
    const ir::Expr& g = req_.term;
    if (g->op != Op::Select || has_x(g->args[1]) || has_x(g->args[2])) return false;
    const ir::Expr& cond = g->args[0];
    if (cond->args.size() != 2) return false;
    for (int side = 0; side < 2; ++side) {
      const ir::Expr& x = cond->args[static_cast<size_t>(side)];
      const ir::Expr& e = cond->args[static_cast<size_t>(1 - side)];
      auto ext =
          x->op == Op::Load ? req_.running_extrema.find(x->name) : req_.running_extrema.end();
      if (ext == req_.running_extrema.end() || !req_.incomplete.count(x->name) || has_x(e) ||
          !ir::equal(ir::simplify(e), ir::simplify(ext->second.second)))
        continue;
      // The comparison as E op x, and whether it holds exactly where E == x.
      Op op = cond->op;
      if (side == 0 && (op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge))
        op = op == Op::Lt ? Op::Gt : op == Op::Le ? Op::Ge : op == Op::Gt ? Op::Lt : Op::Le;
      const bool is_max = ext->second.first == ir::Reducer::Max;
      bool equal = op == Op::Eq || (is_max && op == Op::Ge) || (!is_max && op == Op::Le);
      if (!equal && op != Op::Ne) continue;
      const ir::Expr& b = equal ? g->args[2] : g->args[1];
      const ir::Expr& a = equal ? g->args[1] : g->args[2];
      if (ir::uses_var(b, req_.axis)) continue;
      const bool literal = b->op == Op::FloatImm || b->op == Op::IntImm;
      const double bv = b->op == Op::FloatImm ? b->float_value : static_cast<double>(b->int_value);
      if ((req_.reducer == ir::Reducer::Sum && !(literal && bv == 0)) ||
          (req_.reducer == ir::Reducer::Prod && !(literal && bv == 1)))
        continue;
      for (const ir::Expr& part : {e, a, b}) atom(part);
      incomplete(x);
      if (values_.size() != 1) continue;
      *res = RepairResult{};
      type_ = req_.term->type;
      fill_values(res);
      const Value& v = values_.front();
      res->h = res->h_unguarded = ir::make_select(
          ir::make_binary(Op::Eq, var_of(v.old_sym), var_of(v.new_sym)), var_of(acc_), b);
      res->method = "running extremum";
      res->exact_at_identity = true;
      std::string why;
      res->verified_numeric = running_extremum_holds(res->h, e, is_max, &why);
      res->kind = res->verified_numeric ? RepairResult::Kind::Derived : RepairResult::Kind::Refused;
      if (!res->verified_numeric) {
        res->reason = "derived h = " + to_math(res->h) + " (running extremum) failed numeric " +
                      "verification: " + why;
        res->h = nullptr;
      }
      return true;
    }
    return false;
  }

  // h of a running extremum on sequences of elements (ties among them too, and elements at the
  // extremum's identity, as a mask leaves them): the partial over the first k elements at their
  // extremum, re-based to the extremum of all of them, must be the reduction of the first k
  // terms at the latter.
  bool running_extremum_holds(const ir::Expr& h, const ir::Expr& element, bool is_max,
                              std::string* why) {
    std::vector<double> vals(cx_.num_symbols(), std::numeric_limits<double>::quiet_NaN());
    Sampler smp{std::mt19937_64(0x657874726d756dULL), 0};
    const Value& x = values_.front();
    for (int trial = 0; trial < 240; ++trial) {
      smp.regime = trial % 4;
      draw_complete(smp, true, &vals);
      const int n = 1 + static_cast<int>(smp.rng() % 6), k = 1 + static_cast<int>(smp.rng() % n);
      std::vector<std::vector<double>> elements;
      std::vector<double> at;  // each element's E
      for (int i = 0; i < n; ++i) {
        if (i == 0 || smp.rng() % 4) draw_complete(smp, false, &vals);
        // Elements a mask hid: the extremum's identity (a partial of them only is the identity).
        if (smp.rng() % 5 == 0) vals[node_sym_.at(element.get())] = is_max ? -kInf : kInf;
        elements.push_back(vals);
        at.push_back(eval_with(element, vals));
      }
      auto extremum = [&](int count) {
        double r = at[0];
        for (int i = 1; i < count; ++i) r = is_max ? std::max(r, at[i]) : std::min(r, at[i]);
        return r;
      };
      const double old = extremum(k), now = extremum(n);
      double t = 0, want = 0;
      for (int i = 0; i < k; ++i) {
        std::vector<double>& el = elements[static_cast<size_t>(i)];
        el[x.old_sym] = el[x.new_sym] = old;
        double gv = eval_with(req_.term, el);
        el[x.old_sym] = el[x.new_sym] = now;
        double gn = eval_with(req_.term, el);
        t = i ? combine(t, gv) : gv;
        want = i ? combine(want, gn) : gn;
      }
      vals[x.old_sym] = old;
      vals[x.new_sym] = now;
      vals[acc_] = t;
      double got = eval_with(h, vals);
      if (!close(got, want, std::fabs(want))) {
        *why = "on " + std::to_string(k) + " of " + std::to_string(n) + " elements h gives " +
               ir::format_double(got) + " but the terms at the new extremum give " +
               ir::format_double(want) + " (trial " + std::to_string(trial) + ")";
        return false;
      }
    }
    return true;
  }

  // ---------------------------------------------------------------- verification
  bool symbolic(const Candidate& c) {
    // Eq. 3: h(g(x, u), x, x') = g(x', u), statistics replaced by one term's summands.
    std::unordered_map<int, Term> one = {{acc_, g_}};
    for (size_t i = 0; i < c.stats.size(); ++i) one[c.stats[i]] = c.stat_terms[i];
    Term lhs = simplify(cx_, cx_.substitute(c.h, one)), rhs = simplify(cx_, to_new(g_));
    bool eq3 = lhs == rhs || expand(cx_, lhs) == expand(cx_, rhs);
    // identity: h(t, x, x) = t (statistics arbitrary)
    bool ident = simplify(cx_, to_old(c.h)) == t_sym() || expand(cx_, to_old(c.h)) == t_sym();
    // Eq. 4 with fresh partials a, b (and split statistics)
    auto fresh = [&](const std::string& name) {
      Symbol s;
      s.name = name;
      s.role = SymRole::Stat;
      return cx_.sym(cx_.add_symbol(s));
    };
    Term a = fresh("@a"), b = fresh("@b");
    std::unordered_map<int, Term> ma = {{acc_, a}}, mb = {{acc_, b}}, mab;
    std::vector<Term> sa, sb;
    for (size_t i = 0; i < c.stats.size(); ++i) {
      Term x = fresh("@sa"), y = fresh("@sb");
      ma[c.stats[i]] = x;
      mb[c.stats[i]] = y;
      mab[c.stats[i]] = cx_.add(x, y);
    }
    bool eq4 = false;
    Term ha = cx_.substitute(c.h, ma), hb = cx_.substitute(c.h, mb);
    switch (req_.reducer) {
      case ir::Reducer::Sum:
        mab[acc_] = cx_.add(a, b);
        eq4 = expand(cx_, cx_.substitute(c.h, mab)) == expand(cx_, cx_.add(ha, hb));
        break;
      case ir::Reducer::Max:
      case ir::Reducer::Min: {
        bool mx = req_.reducer == ir::Reducer::Max;
        mab[acc_] = mx ? cx_.max({a, b}) : cx_.min({a, b});
        eq4 = distribute(cx_, cx_.substitute(c.h, mab)) ==
              distribute(cx_, mx ? cx_.max({ha, hb}) : cx_.min({ha, hb}));
        break;
      }
      case ir::Reducer::Prod:
        break;
    }
    return eq3 && eq4 && ident;
  }

  struct Sampler {
    std::mt19937_64 rng;
    int regime = 0;
    double uniform(double lo, double hi) {
      return std::uniform_real_distribution<double>(lo, hi)(rng);
    }
    double draw(Sign fact, bool integer, bool boolean) {
      if (boolean) return static_cast<double>(rng() & 1);
      if (integer) return static_cast<double>(1 + rng() % 64);
      double v = 0;
      switch (regime) {
        case 0:
          v = uniform(0.1, 3.0);
          break;
        case 1:
          v = uniform(-3.0, 3.0);
          break;
        case 2:
          v = std::pow(10.0, uniform(-3.0, 4.0)) * ((rng() & 1) ? 1 : -1);
          break;
        default:
          v = uniform(-30.0, 30.0);
          break;
      }
      if (fact == Sign::Pos || fact == Sign::NonNeg)
        v = std::fabs(v) + (fact == Sign::Pos ? 1e-3 : 0);
      return v;
    }
  };

  double eval_with(const ir::Expr& e, const std::vector<double>& vals) {
    return eval_ir(e, [&](const ir::Expr& n, double* v) {
      auto it = node_sym_.find(n.get());
      if (it == node_sym_.end()) return false;
      *v = vals[it->second];
      return true;
    });
  }

  double combine(double a, double b) {
    switch (req_.reducer) {
      case ir::Reducer::Sum:
        return a + b;
      case ir::Reducer::Max:
        return std::max(a, b);
      case ir::Reducer::Min:
        return std::min(a, b);
      case ir::Reducer::Prod:
        return a * b;
    }
    return a;
  }

  static bool close(double x, double y, double scale) {
    if (x == y) return true;
    if (!std::isfinite(x) || !std::isfinite(y)) return false;
    return std::fabs(x - y) <= 1e-8 * std::max({scale, std::fabs(x), std::fabs(y)}) + 1e-280;
  }

  // Randomized check of Eq. 3, Eq. 4 (on partial reductions, with Lemma 4.3) and the guards.
  bool numeric(const Candidate& c, const ir::Expr& h, std::string* why) {
    std::vector<double> vals(cx_.num_symbols(), std::numeric_limits<double>::quiet_NaN());
    Sampler smp{std::mt19937_64(0x4b696e7473756769ULL), 0};
    auto draw_u = [&](bool invariant) { draw_complete(smp, invariant, &vals); };
    auto set_x = [&](const std::vector<double>& r, const std::vector<double>& rn) {
      for (size_t i = 0; i < values_.size(); ++i) {
        vals[values_[i].old_sym] = r[i];
        vals[values_[i].new_sym] = rn[i];
      }
    };
    auto g_at = [&](const std::vector<double>& r) {
      set_x(r, r);
      return eval_with(req_.term, vals);
    };
    auto tiny = [](double v) { return v != 0 && std::fabs(v) < 1e-250; };
    int valid = 0, nonfinite = 0;
    const int trials = 240;
    for (int trial = 0; trial < trials; ++trial) {
      smp.regime = trial % 4;
      std::vector<double> r(values_.size()), rn(values_.size());
      for (size_t i = 0; i < values_.size(); ++i) {
        Sign f = cx_.symbol(values_[i].old_sym).fact;
        r[i] = smp.draw(f, false, false);
        rn[i] = smp.draw(f, false, false);
      }
      // partials a (n1 terms) and b (n2 terms): old and new values of each, statistics
      draw_u(true);
      int n1 = 1 + static_cast<int>(smp.rng() % 3), n2 = 1 + static_cast<int>(smp.rng() % 3);
      double part[2] = {0, 0}, ref[2] = {0, 0}, scale = 0;
      std::vector<double> stat[2] = {std::vector<double>(c.stats.size(), 0.0),
                                     std::vector<double>(c.stats.size(), 0.0)};
      double first_g = 0, first_ref = 0;
      std::vector<double> first_stat(c.stats.size(), 0.0);
      bool ok = true;
      for (int side = 0; side < 2 && ok; ++side)
        for (int i = 0; i < (side ? n2 : n1) && ok; ++i) {
          draw_u(false);
          double gv = g_at(r), gn = g_at(rn);
          if (!std::isfinite(gv) || !std::isfinite(gn) || tiny(gv) || tiny(gn) ||
              (gv == 0) != (gn == 0)) {
            ok = false;
            break;
          }
          for (size_t k = 0; k < c.stats.size(); ++k) {
            double sv = cx_.eval(c.stat_terms[k], vals);
            stat[side][k] = i ? stat[side][k] + sv : sv;
            if (side == 0 && i == 0) first_stat[k] = sv;
          }
          if (side == 0 && i == 0) first_g = gv, first_ref = gn;
          part[side] = i ? combine(part[side], gv) : gv;
          ref[side] = i ? combine(ref[side], gn) : gn;
          scale += std::fabs(gv) + std::fabs(gn);
        }
      if (!ok) continue;
      auto h_at = [&](double t, const std::vector<double>& st, const std::vector<double>& x0,
                      const std::vector<double>& x1) {
        set_x(x0, x1);
        vals[acc_] = t;
        for (size_t k = 0; k < c.stats.size(); ++k) vals[c.stats[k]] = st[k];
        double v = eval_with(h, vals);
        double sc = 0;
        Term ht = c.h;
        for (Term s : ht->kind == TermKind::Add ? ht->args : std::vector<Term>{ht})
          sc += std::fabs(cx_.eval(s, vals));
        scale = std::max(scale, sc);
        return v;
      };
      std::vector<double> both(c.stats.size());
      for (size_t k = 0; k < both.size(); ++k) both[k] = stat[0][k] + stat[1][k];
      double eq3 = h_at(first_g, first_stat, r, rn);
      double ab = combine(part[0], part[1]);
      double lhs = h_at(ab, both, r, rn);
      double ha = h_at(part[0], stat[0], r, rn), hb = h_at(part[1], stat[1], r, rn);
      double ident = h_at(part[0], stat[0], r, r);
      double want = combine(ref[0], ref[1]);
      ++valid;
      if (!std::isfinite(eq3) || !std::isfinite(lhs) || !std::isfinite(ha) || !std::isfinite(hb)) {
        ++nonfinite;
        continue;
      }
      std::ostringstream at;
      at << " at t = " << part[0] << ", r = " << (r.empty() ? 0 : r[0])
         << ", r' = " << (rn.empty() ? 0 : rn[0]) << " (trial " << trial << ")";
      if (!close(eq3, first_ref, scale)) {
        *why = "Eq. 3 fails: h(g(r, c), r, r') = " + ir::format_double(eq3) +
               " but g(r', c) = " + ir::format_double(first_ref) + at.str();
        return false;
      }
      if (!close(lhs, combine(ha, hb), scale)) {
        *why = "Eq. 4 fails: h(a f b) = " + ir::format_double(lhs) +
               " but h(a) f h(b) = " + ir::format_double(combine(ha, hb)) + at.str();
        return false;
      }
      if (!close(lhs, want, scale)) {
        *why = "h(F g(r, c_i), r, r') = " + ir::format_double(lhs) +
               " but F g(r', c_i) = " + ir::format_double(want) + at.str();
        return false;
      }
      if (!close(ident, part[0], scale)) {
        *why =
            "identity guard fails: h(t, r, r) = " + ir::format_double(ident) + " != t" + at.str();
        return false;
      }
    }
    if (valid < 40) {
      *why = "too few valid sample points (" + std::to_string(valid) + ") to verify h";
      return false;
    }
    if (nonfinite * 4 > valid) {
      *why = "h is not finite at " + std::to_string(nonfinite) + " of " + std::to_string(valid) +
             " valid sample points";
      return false;
    }
    // Guard at -inf: fully masked producers (all, then each alone).
    for (int which = -1; which < static_cast<int>(values_.size()); ++which) {
      smp.regime = 1;
      std::vector<double> r(values_.size());
      for (size_t i = 0; i < values_.size(); ++i)
        r[i] = (which < 0 || which == static_cast<int>(i)) ? -kInf
                                                           : smp.draw(Sign::Unknown, false, false);
      for (double t : {0.0, 1.5, -2.0}) {
        std::vector<double> st(c.stats.size(), 2.0);
        set_x(r, r);
        vals[acc_] = t;
        for (size_t k = 0; k < c.stats.size(); ++k) vals[c.stats[k]] = st[k];
        double v = eval_with(h, vals);
        if (v != t) {
          *why = "guard fails: h(t, -inf, -inf) = " + ir::format_double(v) +
                 " for t = " + ir::format_double(t);
          return false;
        }
      }
    }
    return true;
  }

  void finish(const Candidate& c, RepairResult* res) {
    res->h_unguarded = emit(c.h);
    res->h = guarded(c);
    res->method = c.method;
    res->scale_at_most_one = c.scale_at_most_one;
    for (size_t i = 0; i < c.stats.size(); ++i)
      res->statistics.push_back({cx_.symbol(c.stats[i]).name, emit(c.stat_terms[i])});
    res->verified_symbolic = symbolic(c);
    std::string why;
    res->verified_numeric = numeric(c, res->h, &why);
    if (!res->verified_numeric) {
      res->kind = RepairResult::Kind::Refused;
      res->reason =
          "derived h = " + cx_.str(c.h) + " (" + c.method + ") failed numeric verification: " + why;
      res->h = nullptr;
      return;
    }
    if (!c.running.empty()) {
      // Verified with its statistics; each is now the producer's running value, which holds
      // wherever h is applied (a partial and its producers' values over the same elements).
      Candidate r = c;
      std::unordered_map<int, Term> sub(c.running.begin(), c.running.end());
      std::vector<Term> corrections;
      for (Term k : c.corrections)
        corrections.push_back(simplify(cx_, expand(cx_, cx_.substitute(k, sub))));
      r.h = cx_.mul(c.scale, cx_.add(corrections));
      r.stats.clear();
      r.stat_terms.clear();
      r.running.clear();
      res->statistics.clear();
      res->h_unguarded = emit(r.h);
      res->h = guarded(r);
      if (!running_sums_hold(res->h, &why)) {
        res->kind = RepairResult::Kind::Refused;
        res->reason = "derived h = " + cx_.str(r.h) + " (" + c.method +
                      ") failed numeric verification: " + why;
        res->h = nullptr;
        return;
      }
    }
    res->kind = RepairResult::Kind::Derived;
  }

  // Draws the complete values that are (`invariant`) or are not constant along the axis.
  void draw_complete(Sampler& smp, bool invariant, std::vector<double>* vals) {
    for (int s : complete_) {
      const Symbol& sy = cx_.symbol(s);
      if (sy.invariant != invariant) continue;
      const bool boolean = sy.origin->type == DType::Bool;
      (*vals)[s] = smp.draw(sy.fact, sy.integer && !boolean, boolean);
    }
  }

  // h with its statistics replaced by running sums, checked on prefixes: the running sums' old
  // values are their summands' sums over the prefix at the old values, the new values are free,
  // and h(sum g(old), old, new) must be sum g(new) (sum reducer; chunks add).
  bool running_sums_hold(const ir::Expr& h, std::string* why) {
    std::vector<double> vals(cx_.num_symbols(), std::numeric_limits<double>::quiet_NaN());
    Sampler smp{std::mt19937_64(0x72756e6e696e67ULL), 0};
    std::vector<std::pair<size_t, Term>> sums;  // value index -> its summand
    for (const RunningSum& r : running_sum_parts()) sums.push_back({r.value, r.summand});
    int valid = 0;
    for (int trial = 0; trial < 240; ++trial) {
      smp.regime = trial % 4;
      draw_complete(smp, true, &vals);
      std::vector<double> r(values_.size()), rn(values_.size());
      for (size_t i = 0; i < values_.size(); ++i) {
        Sign f = cx_.symbol(values_[i].old_sym).fact;
        r[i] = smp.draw(f, false, false);
        rn[i] = smp.draw(f, false, false);
      }
      const int n = 1 + static_cast<int>(smp.rng() % 4);
      std::vector<std::vector<double>> elements;
      for (auto& [i, summand] : sums) r[i] = 0;
      for (int e = 0; e < n; ++e) {
        draw_complete(smp, false, &vals);
        elements.push_back(vals);
        for (size_t i = 0; i < values_.size(); ++i) {
          vals[values_[i].old_sym] = r[i];
          vals[values_[i].new_sym] = r[i];
        }
        for (auto& [i, summand] : sums) r[i] += cx_.eval(summand, vals);
      }
      double t = 0, want = 0, scale = 0;
      bool ok = true;
      for (std::vector<double>& el : elements) {
        for (size_t i = 0; i < values_.size(); ++i)
          el[values_[i].old_sym] = el[values_[i].new_sym] = r[i];
        double gv = eval_with(req_.term, el);
        for (size_t i = 0; i < values_.size(); ++i)
          el[values_[i].old_sym] = el[values_[i].new_sym] = rn[i];
        double gn = eval_with(req_.term, el);
        ok = ok && std::isfinite(gv) && std::isfinite(gn);
        t += gv;
        want += gn;
        scale += std::fabs(gv) + std::fabs(gn);
      }
      if (!ok) continue;
      for (size_t i = 0; i < values_.size(); ++i) {
        vals[values_[i].old_sym] = r[i];
        vals[values_[i].new_sym] = rn[i];
      }
      vals[acc_] = t;
      double got = eval_with(h, vals);
      if (!std::isfinite(got)) continue;
      ++valid;
      if (!close(got, want, scale)) {
        *why = "on a prefix of " + std::to_string(n) + " elements h gives " +
               ir::format_double(got) + " but the sum at the new values is " +
               ir::format_double(want) + " (trial " + std::to_string(trial) + ")";
        return false;
      }
    }
    if (valid < 40) {
      *why = "too few valid prefixes (" + std::to_string(valid) + ") to verify h";
      return false;
    }
    return true;
  }

  const RepairRequest& req_;
  const bool sign_only_;  // every load a symbol with its fact (term_sign)
  TermContext cx_;
  DType type_ = DType::F32;
  int acc_ = -1;
  Term g_ = nullptr;
  std::vector<Value> values_;
  std::vector<RunningSum> running_sums_;  // running_sum_parts, computed once
  bool running_sums_ready_ = false;
  std::vector<int> complete_;
  std::unordered_map<const ir::ExprNode*, bool> has_x_;
  std::unordered_map<const ir::ExprNode*, int> node_sym_;
  std::unordered_map<int, ir::Expr> vars_;
};

}  // namespace

ir::Expr incomplete_load(const ir::Expr& value, const std::set<std::string>& incomplete) {
  ir::Expr found;
  ir::visit(value, [&](const ir::Expr& n) {
    if (!found && n->op == Op::Load && incomplete.count(n->name)) found = n;
    return !found;
  });
  internal_assert(found) << "incomplete value " << to_math(value) << " reads no incomplete buffer";
  return found;
}

RepairResult derive_repair(const RepairRequest& request) {
  return Engine(request).run();
}

std::string sign_fact(const ir::Expr& value, const std::map<std::string, std::string>& facts) {
  RepairRequest req;
  req.term = value;
  req.facts = facts;
  Sign s = Engine(req, true).term_sign();
  return s == Sign::Pos ? "positive" : s == Sign::NonNeg || s == Sign::Zero ? "nonnegative" : "";
}

std::string to_math(const ir::Expr& h) {
  if (!h) return "<none>";
  return ir::to_string(h, ir::ExprStyle::Math);
}

}  // namespace kintsugi::algebra
