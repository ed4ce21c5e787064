// \file Term.cpp
// Hash-consed canonical terms, sign facts, evaluation and printing (see Term.h).
#include "algebra/Term.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "ir/Printer.h"

namespace kintsugi::algebra {

const char* sign_name(Sign s) {
  switch (s) {
    case Sign::Unknown:
      return "unknown";
    case Sign::Zero:
      return "zero";
    case Sign::Pos:
      return "positive";
    case Sign::Neg:
      return "negative";
    case Sign::NonNeg:
      return "nonnegative";
    case Sign::NonPos:
      return "nonpositive";
  }
  return "?";
}

namespace {

size_t hash_node(const TermNode& n) {
  uint64_t bits = 0;
  double v = std::isnan(n.value) ? std::numeric_limits<double>::quiet_NaN() : n.value;
  std::memcpy(&bits, &v, sizeof bits);
  size_t h = std::hash<uint64_t>()(bits) ^ (static_cast<size_t>(n.kind) * 0x9e3779b97f4a7c15ULL);
  h ^= std::hash<int>()(n.sym) + 0x9e3779b9 + (h << 6) + (h >> 2);
  for (Term a : n.args) h ^= std::hash<const void*>()(a) + 0x9e3779b9 + (h << 6) + (h >> 2);
  return h;
}

bool same_value(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

bool is_const(Term t, double v) {
  return t->kind == TermKind::Const && t->value == v;
}

std::string num(double v) {
  std::string s = ir::format_double(v);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

}  // namespace

TermContext::TermContext() = default;

Term TermContext::intern(TermNode n) {
  n.hash = hash_node(n);
  auto range = table_.equal_range(n.hash);
  for (auto it = range.first; it != range.second; ++it) {
    Term t = it->second;
    if (t->kind == n.kind && same_value(t->value, n.value) && t->sym == n.sym && t->args == n.args)
      return t;
  }
  nodes_.push_back(std::move(n));
  Term t = &nodes_.back();
  table_.emplace(t->hash, t);
  return t;
}

int TermContext::add_symbol(Symbol s) {
  symbols_.push_back(std::move(s));
  return static_cast<int>(symbols_.size()) - 1;
}

int TermContext::compare(Term a, Term b) {
  if (a == b) return 0;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (!same_value(a->value, b->value)) return a->value < b->value ? -1 : 1;
  if (a->sym != b->sym) return a->sym < b->sym ? -1 : 1;
  if (a->args.size() != b->args.size()) return a->args.size() < b->args.size() ? -1 : 1;
  for (size_t i = 0; i < a->args.size(); ++i)
    if (int c = compare(a->args[i], b->args[i])) return c;
  return 0;
}

static void sort_terms(std::vector<Term>* v) {
  std::sort(v->begin(), v->end(), [](Term a, Term b) { return TermContext::compare(a, b) < 0; });
}

Term TermContext::constant(double v) {
  TermNode n;
  n.kind = TermKind::Const;
  n.value = v == 0.0 ? 0.0 : v;  // no negative zero
  return intern(std::move(n));
}

Term TermContext::sym(int index) {
  internal_assert(index >= 0 && index < num_symbols()) << "unknown symbol " << index;
  TermNode n;
  n.kind = TermKind::Sym;
  n.sym = index;
  // Sort key of symbols: t, statistics, complete values, old values, new values.
  static const double kRank[] = {0, 3, 4, 1, 2, 5, 5};  // by SymRole
  n.value = kRank[static_cast<int>(symbols_[index].role)];
  return intern(std::move(n));
}

Term TermContext::add(std::vector<Term> in) {
  std::vector<Term> flat;
  for (Term a : in) {
    if (a->kind == TermKind::Add)
      flat.insert(flat.end(), a->args.begin(), a->args.end());
    else
      flat.push_back(a);
  }
  double c = 0.0;
  std::vector<std::pair<Term, double>> like;  // monomial without coefficient -> coefficient
  std::unordered_map<Term, size_t> index;
  for (Term a : flat) {
    if (a->kind == TermKind::Const) {
      c += a->value;
      continue;
    }
    double coef = 1.0;
    Term rest = a;
    if (a->kind == TermKind::Mul && a->args[0]->kind == TermKind::Const) {
      coef = a->args[0]->value;
      if (a->args.size() == 2) {
        rest = a->args[1];
      } else {
        TermNode n;
        n.kind = TermKind::Mul;
        n.args.assign(a->args.begin() + 1, a->args.end());
        rest = intern(std::move(n));
      }
    }
    auto it = index.find(rest);
    if (it == index.end()) {
      index.emplace(rest, like.size());
      like.emplace_back(rest, coef);
    } else {
      like[it->second].second += coef;
    }
  }
  std::vector<Term> terms;
  for (auto& [rest, coef] : like) {
    if (coef == 0.0) continue;
    terms.push_back(coef == 1.0 ? rest : mul(constant(coef), rest));
  }
  sort_terms(&terms);
  if (c != 0.0) terms.insert(terms.begin(), constant(c));
  if (terms.empty()) return constant(c);
  if (terms.size() == 1) return terms[0];
  TermNode n;
  n.kind = TermKind::Add;
  n.args = std::move(terms);
  return intern(std::move(n));
}

Term TermContext::mul(std::vector<Term> in) {
  std::vector<Term> flat;
  for (Term a : in) {
    if (a->kind == TermKind::Mul)
      flat.insert(flat.end(), a->args.begin(), a->args.end());
    else
      flat.push_back(a);
  }
  double c = 1.0;
  std::vector<Term> exp_args;
  std::vector<std::pair<Term, std::vector<Term>>> bases;
  std::unordered_map<Term, size_t> index;
  for (Term a : flat) {
    if (a->kind == TermKind::Const) {
      c *= a->value;
      continue;
    }
    if (a->kind == TermKind::Exp) {
      exp_args.push_back(a->args[0]);
      continue;
    }
    Term base = a, e = constant(1.0);
    if (a->kind == TermKind::Pow) base = a->args[0], e = a->args[1];
    auto it = index.find(base);
    if (it == index.end()) {
      index.emplace(base, bases.size());
      bases.push_back({base, {e}});
    } else {
      bases[it->second].second.push_back(e);
    }
  }
  if (c == 0.0) return constant(0.0);
  std::vector<Term> factors;
  bool reflatten = false;
  auto take = [&](Term p) {
    if (p->kind == TermKind::Const)
      c *= p->value;
    else {
      reflatten |= p->kind == TermKind::Mul;
      factors.push_back(p);
    }
  };
  for (auto& [base, es] : bases) take(es.size() == 1 ? pow(base, es[0]) : pow(base, add(es)));
  if (!exp_args.empty()) take(exp(add(exp_args)));
  if (reflatten) {
    if (c != 1.0) factors.push_back(constant(c));
    return mul(factors);
  }
  sort_terms(&factors);
  if (factors.empty()) return constant(c);
  if (c == 0.0) return constant(0.0);
  if (c != 1.0) factors.insert(factors.begin(), constant(c));
  if (factors.size() == 1) return factors[0];
  TermNode n;
  n.kind = TermKind::Mul;
  n.args = std::move(factors);
  return intern(std::move(n));
}

Term TermContext::pow(Term base, Term e) {
  if (e->kind == TermKind::Const) {
    if (e->value == 0.0) return constant(1.0);
    if (e->value == 1.0) return base;
    if (base->kind == TermKind::Const) return constant(std::pow(base->value, e->value));
  }
  if (is_const(base, 1.0)) return base;
  if (base->kind == TermKind::Exp) return exp(mul(e, base->args[0]));  // exp(a)^k = exp(k a)
  TermNode n;
  n.kind = TermKind::Pow;
  n.args = {base, e};
  return intern(std::move(n));
}

Term TermContext::exp(Term a) {
  if (a->kind == TermKind::Const) return constant(std::exp(a->value));
  TermNode n;
  n.kind = TermKind::Exp;
  n.args = {a};
  return intern(std::move(n));
}

Term TermContext::log(Term a) {
  if (a->kind == TermKind::Const) return constant(std::log(a->value));
  TermNode n;
  n.kind = TermKind::Log;
  n.args = {a};
  return intern(std::move(n));
}

Term TermContext::abs(Term a) {
  if (a->kind == TermKind::Const) return constant(std::fabs(a->value));
  if (a->kind == TermKind::Abs) return a;
  TermNode n;
  n.kind = TermKind::Abs;
  n.args = {a};
  return intern(std::move(n));
}

static Term minmax(TermContext& cx, TermKind kind, std::vector<Term> in,
                   const std::function<Term(TermNode)>& intern) {
  std::vector<Term> flat;
  for (Term a : in) {
    if (a->kind == kind)
      flat.insert(flat.end(), a->args.begin(), a->args.end());
    else
      flat.push_back(a);
  }
  bool have_c = false;
  double c = 0.0;
  std::vector<Term> rest;
  for (Term a : flat) {
    if (a->kind == TermKind::Const) {
      c = !have_c ? a->value
                  : (kind == TermKind::Max ? std::max(c, a->value) : std::min(c, a->value));
      have_c = true;
    } else if (std::find(rest.begin(), rest.end(), a) == rest.end()) {
      rest.push_back(a);
    }
  }
  sort_terms(&rest);
  double identity = kind == TermKind::Max ? -std::numeric_limits<double>::infinity()
                                          : std::numeric_limits<double>::infinity();
  if (have_c && !(c == identity && !rest.empty())) rest.insert(rest.begin(), cx.constant(c));
  internal_assert(!rest.empty()) << "empty max/min";
  if (rest.size() == 1) return rest[0];
  TermNode n;
  n.kind = kind;
  n.args = std::move(rest);
  return intern(std::move(n));
}

Term TermContext::max(std::vector<Term> args) {
  return minmax(*this, TermKind::Max, std::move(args), [this](TermNode n) { return intern(n); });
}

Term TermContext::min(std::vector<Term> args) {
  return minmax(*this, TermKind::Min, std::move(args), [this](TermNode n) { return intern(n); });
}

Term TermContext::select(Term cond, Term a, Term b) {
  if (a == b) return a;
  if (cond->kind == TermKind::Const) return cond->value != 0.0 ? a : b;
  TermNode n;
  n.kind = TermKind::Select;
  n.args = {cond, a, b};
  return intern(std::move(n));
}

Term TermContext::fn(ir::MathFn f, std::vector<Term> args) {
  bool all_const =
      std::all_of(args.begin(), args.end(), [](Term a) { return a->kind == TermKind::Const; });
  if (all_const && (f == ir::MathFn::Tanh || f == ir::MathFn::Sigmoid || f == ir::MathFn::Erf)) {
    TermNode n;
    n.kind = TermKind::Fn;
    n.sym = static_cast<int>(f);
    n.args = std::move(args);
    return constant(eval(intern(std::move(n)), {}));
  }
  TermNode n;
  n.kind = TermKind::Fn;
  n.sym = static_cast<int>(f);
  n.args = std::move(args);
  return intern(std::move(n));
}

Term TermContext::rebuild(Term like, std::vector<Term> args) {
  switch (like->kind) {
    case TermKind::Const:
    case TermKind::Sym:
      return like;
    case TermKind::Add:
      return add(std::move(args));
    case TermKind::Mul:
      return mul(std::move(args));
    case TermKind::Pow:
      return pow(args[0], args[1]);
    case TermKind::Exp:
      return exp(args[0]);
    case TermKind::Log:
      return log(args[0]);
    case TermKind::Abs:
      return abs(args[0]);
    case TermKind::Max:
      return max(std::move(args));
    case TermKind::Min:
      return min(std::move(args));
    case TermKind::Select:
      return select(args[0], args[1], args[2]);
    case TermKind::Fn:
      return fn(static_cast<ir::MathFn>(like->sym), std::move(args));
  }
  return like;
}

Term TermContext::replace(Term t, const std::unordered_map<Term, Term>& by_term) {
  std::unordered_map<Term, Term> memo;
  std::function<Term(Term)> go = [&](Term x) -> Term {
    auto r = by_term.find(x);
    if (r != by_term.end()) return r->second;
    auto m = memo.find(x);
    if (m != memo.end()) return m->second;
    Term out = x;
    if (!x->args.empty()) {
      std::vector<Term> args;
      bool changed = false;
      for (Term a : x->args) {
        args.push_back(go(a));
        changed |= args.back() != a;
      }
      if (changed) out = rebuild(x, std::move(args));
    }
    memo.emplace(x, out);
    return out;
  };
  return go(t);
}

Term TermContext::substitute(Term t, const std::unordered_map<int, Term>& by_symbol) {
  std::unordered_map<Term, Term> by_term;
  for (auto& [i, v] : by_symbol) by_term.emplace(sym(i), v);
  return replace(t, by_term);
}

bool TermContext::uses_role(Term t, SymRole role) const {
  if (t->kind == TermKind::Sym) return symbols_[t->sym].role == role;
  for (Term a : t->args)
    if (uses_role(a, role)) return true;
  return false;
}

bool TermContext::uses_symbol(Term t, int index) const {
  if (t->kind == TermKind::Sym) return t->sym == index;
  for (Term a : t->args)
    if (uses_symbol(a, index)) return true;
  return false;
}

void TermContext::collect_symbols(Term t, std::vector<int>* out) const {
  if (t->kind == TermKind::Sym) {
    if (std::find(out->begin(), out->end(), t->sym) == out->end()) out->push_back(t->sym);
    return;
  }
  for (Term a : t->args) collect_symbols(a, out);
}

namespace {
Sign join(Sign a, Sign b) {
  if (a == b) return a;
  if (is_nonneg(a) && is_nonneg(b)) return Sign::NonNeg;
  if (is_nonpos(a) && is_nonpos(b)) return Sign::NonPos;
  return Sign::Unknown;
}
}  // namespace

Sign TermContext::sign(Term t) const {
  switch (t->kind) {
    case TermKind::Const:
      if (std::isnan(t->value)) return Sign::Unknown;
      return t->value > 0 ? Sign::Pos : t->value < 0 ? Sign::Neg : Sign::Zero;
    case TermKind::Sym:
      return symbols_[t->sym].fact;
    case TermKind::Exp:
      return Sign::Pos;
    case TermKind::Log:
      return Sign::Unknown;
    case TermKind::Abs: {
      Sign s = sign(t->args[0]);
      return s == Sign::Pos || s == Sign::Neg ? Sign::Pos : Sign::NonNeg;
    }
    case TermKind::Add: {
      bool nonneg = true, nonpos = true, pos = false, neg = false;
      for (Term a : t->args) {
        Sign s = sign(a);
        nonneg &= is_nonneg(s);
        nonpos &= is_nonpos(s);
        pos |= s == Sign::Pos;
        neg |= s == Sign::Neg;
      }
      if (nonneg) return pos ? Sign::Pos : Sign::NonNeg;
      if (nonpos) return neg ? Sign::Neg : Sign::NonPos;
      return Sign::Unknown;
    }
    case TermKind::Mul: {
      bool strict = true;
      int negs = 0;
      for (Term a : t->args) {
        Sign s = sign(a);
        if (s == Sign::Unknown) return Sign::Unknown;
        if (s == Sign::Zero) return Sign::Zero;
        strict &= s == Sign::Pos || s == Sign::Neg;
        negs += is_nonpos(s) ? 1 : 0;
      }
      if (negs % 2 == 0) return strict ? Sign::Pos : Sign::NonNeg;
      return strict ? Sign::Neg : Sign::NonPos;
    }
    case TermKind::Pow: {
      Sign b = sign(t->args[0]);
      if (b == Sign::Pos) return Sign::Pos;
      Term e = t->args[1];
      if (e->kind != TermKind::Const) return Sign::Unknown;
      double k = e->value;
      if (k != std::floor(k)) return k < 0 ? Sign::Pos : Sign::NonNeg;  // defined only for b >= 0
      bool even = std::fmod(k, 2.0) == 0.0;
      if (even) return (b == Sign::Neg || k < 0) ? Sign::Pos : Sign::NonNeg;
      if (k < 0) return b == Sign::Neg ? Sign::Neg : b == Sign::NonNeg ? Sign::Pos : b;
      return b;
    }
    case TermKind::Max: {
      Sign out = sign(t->args[0]);
      for (size_t i = 1; i < t->args.size(); ++i) {
        Sign s = sign(t->args[i]);
        if (out == Sign::Pos || s == Sign::Pos)
          out = Sign::Pos;
        else if (is_nonneg(out) || is_nonneg(s))
          out = Sign::NonNeg;
        else if (is_nonpos(out) && is_nonpos(s))
          out = join(out, s);
        else
          out = Sign::Unknown;
      }
      return out;
    }
    case TermKind::Min: {
      Sign out = sign(t->args[0]);
      for (size_t i = 1; i < t->args.size(); ++i) {
        Sign s = sign(t->args[i]);
        if (out == Sign::Neg || s == Sign::Neg)
          out = Sign::Neg;
        else if (is_nonpos(out) || is_nonpos(s))
          out = Sign::NonPos;
        else if (is_nonneg(out) && is_nonneg(s))
          out = join(out, s);
        else
          out = Sign::Unknown;
      }
      return out;
    }
    case TermKind::Select:
      return join(sign(t->args[1]), sign(t->args[2]));
    case TermKind::Fn:
      switch (static_cast<ir::MathFn>(t->sym)) {
        case ir::MathFn::Tanh:
        case ir::MathFn::Erf:
          return sign(t->args[0]);  // odd and increasing
        case ir::MathFn::Sigmoid:
          return Sign::Pos;  // in (0, 1), as exp is positive
        default:
          return Sign::Unknown;
      }
  }
  return Sign::Unknown;
}

double TermContext::eval(Term t, const std::vector<double>& values) const {
  auto ev = [&](size_t i) { return eval(t->args[i], values); };
  switch (t->kind) {
    case TermKind::Const:
      return t->value;
    case TermKind::Sym:
      return t->sym < static_cast<int>(values.size()) ? values[t->sym]
                                                      : std::numeric_limits<double>::quiet_NaN();
    case TermKind::Add: {
      double s = 0;
      for (size_t i = 0; i < t->args.size(); ++i) s += ev(i);
      return s;
    }
    case TermKind::Mul: {
      double p = 1;
      for (size_t i = 0; i < t->args.size(); ++i) p *= ev(i);
      return p;
    }
    case TermKind::Pow:
      return std::pow(ev(0), ev(1));
    case TermKind::Exp:
      return std::exp(ev(0));
    case TermKind::Log:
      return std::log(ev(0));
    case TermKind::Abs:
      return std::fabs(ev(0));
    case TermKind::Max: {
      double m = ev(0);
      for (size_t i = 1; i < t->args.size(); ++i) m = std::max(m, ev(i));
      return m;
    }
    case TermKind::Min: {
      double m = ev(0);
      for (size_t i = 1; i < t->args.size(); ++i) m = std::min(m, ev(i));
      return m;
    }
    case TermKind::Select:
      return ev(0) != 0.0 ? ev(1) : ev(2);
    case TermKind::Fn:
      switch (static_cast<ir::MathFn>(t->sym)) {
        case ir::MathFn::Tanh:
          return std::tanh(ev(0));
        case ir::MathFn::Sigmoid:
          return 1.0 / (1.0 + std::exp(-ev(0)));
        case ir::MathFn::Erf:
          return std::erf(ev(0));
        case ir::MathFn::Round:
          return std::nearbyint(ev(0));
        case ir::MathFn::Clamp:
          return std::min(std::max(ev(0), ev(1)), ev(2));
        default:
          return std::numeric_limits<double>::quiet_NaN();
      }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// --- Printing. Precedence: 1 sum, 2 product, 3 power/unary, 4 atom.
namespace {
int prec(Term t) {
  switch (t->kind) {
    case TermKind::Add:
      return 1;
    case TermKind::Mul:
      return 2;
    case TermKind::Pow:
      return 3;
    case TermKind::Const:
      return t->value < 0 ? 1 : 4;
    default:
      return 4;
  }
}
}  // namespace

std::string TermContext::str(Term t) const {
  auto paren = [&](Term a, int min_prec) {
    std::string s = str(a);
    return prec(a) < min_prec ? "(" + s + ")" : s;
  };
  switch (t->kind) {
    case TermKind::Const:
      return num(t->value);
    case TermKind::Sym:
      return symbols_[t->sym].name;
    case TermKind::Add: {
      std::string out;
      for (size_t i = 0; i < t->args.size(); ++i) {
        Term a = t->args[i];
        bool negative = (a->kind == TermKind::Const && a->value < 0) ||
                        (a->kind == TermKind::Mul && a->args[0]->kind == TermKind::Const &&
                         a->args[0]->value < 0);
        std::string s;
        if (negative && i > 0) {
          if (a->kind == TermKind::Const) {
            s = num(-a->value);
          } else {
            double c = -a->args[0]->value;
            std::vector<std::string> parts;
            if (c != 1.0) parts.push_back(num(c));
            // (a leading coefficient is printed bare)
            for (size_t j = 1; j < a->args.size(); ++j) parts.push_back(paren(a->args[j], 3));
            for (size_t j = 0; j < parts.size(); ++j) s += (j ? " * " : "") + parts[j];
          }
          out += " - " + s;
        } else {
          out += (i ? " + " : "") + str(a);
        }
      }
      return out;
    }
    case TermKind::Mul: {
      std::vector<std::string> numr, den;
      for (Term a : t->args) {
        if (a->kind == TermKind::Pow && a->args[1]->kind == TermKind::Const &&
            a->args[1]->value < 0) {
          double k = -a->args[1]->value;
          Term b = a->args[0];
          den.push_back(k == 1.0   ? paren(b, 3)
                        : k == 0.5 ? "sqrt(" + str(b) + ")"
                                   : paren(b, 4) + "^" + num(k));
        } else if (a->kind == TermKind::Const) {
          numr.push_back(num(a->value));
        } else {
          numr.push_back(paren(a, 3));
        }
      }
      std::string out;
      if (numr.empty()) out = "1";
      for (size_t i = 0; i < numr.size(); ++i) out += (i ? " * " : "") + numr[i];
      if (!den.empty()) {
        std::string d;
        for (size_t i = 0; i < den.size(); ++i) d += (i ? " * " : "") + den[i];
        out += " / " + (den.size() > 1 ? "(" + d + ")" : d);
      }
      return out;
    }
    case TermKind::Pow: {
      Term e = t->args[1];
      if (e->kind == TermKind::Const) {
        if (e->value == 0.5) return "sqrt(" + str(t->args[0]) + ")";
        if (e->value == -0.5) return "rsqrt(" + str(t->args[0]) + ")";
        if (e->value == -1.0) return "1 / " + paren(t->args[0], 4);
      }
      return paren(t->args[0], 4) + "^" + paren(e, 4);
    }
    case TermKind::Exp:
      return "exp(" + str(t->args[0]) + ")";
    case TermKind::Log:
      return "log(" + str(t->args[0]) + ")";
    case TermKind::Abs:
      return "abs(" + str(t->args[0]) + ")";
    case TermKind::Max:
    case TermKind::Min:
    case TermKind::Select:
    case TermKind::Fn: {
      std::string out = t->kind == TermKind::Max   ? "max("
                        : t->kind == TermKind::Min ? "min("
                        : t->kind == TermKind::Select
                            ? "select("
                            : std::string(ir::math_fn_name(static_cast<ir::MathFn>(t->sym))) + "(";
      for (size_t i = 0; i < t->args.size(); ++i) out += (i ? ", " : "") + str(t->args[i]);
      return out + ")";
    }
  }
  return "?";
}

}  // namespace kintsugi::algebra
