// \file Simplify.cpp
// The integer simplifier (see Simplify.h).
#include "ir/Simplify.h"

#include <climits>
#include <utility>

#include "ir/Interpreter.h"
#include "ir/Visit.h"

namespace kintsugi::ir {

std::optional<int64_t> as_const_int(const Expr& e) {
  if (e && e->op == Op::IntImm) return e->int_value;
  return std::nullopt;
}

namespace {

bool is_const(const Expr& e, int64_t v) {
  return e->op == Op::IntImm && e->int_value == v;
}

// Splits e into (non-constant part, constant addend): x + 3 -> (x, 3).
std::pair<Expr, int64_t> split_addend(const Expr& e) {
  if (e->op == Op::Add && e->args[1]->op == Op::IntImm) return {e->args[0], e->args[1]->int_value};
  if (e->op == Op::Sub && e->args[1]->op == Op::IntImm) return {e->args[0], -e->args[1]->int_value};
  return {e, 0};
}

Expr fold(const Expr& e) {
  if (e->type != DType::Int || e->args.size() != 2 ||
      !(is_arith(e->op) || e->op == Op::Min || e->op == Op::Max))
    return e;
  const Expr& a = e->args[0];
  const Expr& b = e->args[1];
  auto ca = as_const_int(a), cb = as_const_int(b);
  if (ca && cb) {
    int64_t r = 0;
    bool divisible = *cb != 0 && !(*cb == -1 && *ca == INT64_MIN);  // never fold a trap
    switch (e->op) {
      case Op::Add:
        return __builtin_add_overflow(*ca, *cb, &r) ? e : make_int(r);
      case Op::Sub:
        return __builtin_sub_overflow(*ca, *cb, &r) ? e : make_int(r);
      case Op::Mul:
        return __builtin_mul_overflow(*ca, *cb, &r) ? e : make_int(r);
      case Op::Div:
        if (divisible) return make_int(floor_div(*ca, *cb));
        return e;
      case Op::Mod:
        if (divisible) return make_int(floor_mod(*ca, *cb));
        return e;
      case Op::Min:
        return make_int(std::min(*ca, *cb));
      case Op::Max:
        return make_int(std::max(*ca, *cb));
      default:
        return e;
    }
  }
  switch (e->op) {
    case Op::Add:
      if (is_const(a, 0)) return b;
      if (is_const(b, 0)) return a;
      if (cb) {  // (x + c1) + c2 -> x + (c1 + c2)
        auto [x, c] = split_addend(a);
        if (c != 0) return fold(make_binary(Op::Add, x, make_int(c + *cb)));
      }
      if (ca) return fold(make_binary(Op::Add, b, a));  // constants to the right
      return e;
    case Op::Sub:
      if (is_const(b, 0)) return a;
      if (equal(a, b)) return make_int(0);
      if (cb) {
        auto [x, c] = split_addend(a);
        int64_t total = c - *cb;
        if (c != 0) return total == 0 ? x : fold(make_binary(Op::Add, x, make_int(total)));
      }
      return e;
    case Op::Mul:
      if (is_const(a, 0) || is_const(b, 0)) return make_int(0);
      if (is_const(a, 1)) return b;
      if (is_const(b, 1)) return a;
      if (ca) return make_binary(Op::Mul, b, a);
      return e;
    case Op::Div:
      if (is_const(b, 1)) return a;
      return e;
    case Op::Mod:
      if (is_const(b, 1)) return make_int(0);
      return e;
    case Op::Min:
    case Op::Max:
      if (equal(a, b)) return a;
      return e;
    default:
      return e;
  }
}

// Integer sums in linear form: sum of coefficient * atom plus a constant, atoms in order of first
// appearance (so that `i + T - S` prints as written). Atoms are variables and every sub-expression
// that is not a sum, a difference, a negation or a product with a constant.
struct Linear {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;
  void add(const Expr& atom, int64_t c) {
    for (auto& [a, k] : terms)
      if (equal(a, atom)) {
        k += c;
        return;
      }
    terms.push_back({atom, c});
  }
};

void linearize(const Expr& e, int64_t scale, Linear& out) {
  if (e->type == DType::Int) {
    switch (e->op) {
      case Op::IntImm:
        out.constant += scale * e->int_value;
        return;
      case Op::Add:
        linearize(e->args[0], scale, out);
        linearize(e->args[1], scale, out);
        return;
      case Op::Sub:
        linearize(e->args[0], scale, out);
        linearize(e->args[1], -scale, out);
        return;
      case Op::Neg:
        linearize(e->args[0], -scale, out);
        return;
      case Op::Mul:
        if (auto c = as_const_int(e->args[1])) return linearize(e->args[0], scale * *c, out);
        if (auto c = as_const_int(e->args[0])) return linearize(e->args[1], scale * *c, out);
        break;
      default:
        break;
    }
  }
  out.add(e, scale);
}

Expr rebuild(const Linear& l) {
  Expr out;
  for (const auto& [atom, c] : l.terms) {
    if (c == 0) continue;
    Expr term = (c == 1 || c == -1) ? atom : make_binary(Op::Mul, atom, make_int(c < 0 ? -c : c));
    if (!out)
      out = c < 0 ? make_unary(Op::Neg, term) : term;
    else
      out = make_binary(c < 0 ? Op::Sub : Op::Add, out, term);
  }
  if (!out) return make_int(l.constant);
  if (l.constant > 0) out = make_binary(Op::Add, out, make_int(l.constant));
  if (l.constant < 0) out = make_binary(Op::Sub, out, make_int(-l.constant));
  return out;
}

// (x / E) * E + x % E = x for floor division and its remainder (a position split into a run and an
// offset, joined again): in a sum, the two terms with equal coefficients become x.
void join_quotient_and_remainder(Linear& l) {
  for (size_t r = 0; r < l.terms.size(); ++r) {
    const Expr mod = l.terms[r].first;
    const int64_t k = l.terms[r].second;
    if (mod->op != Op::Mod || k == 0) continue;
    const Expr& x = mod->args[0];
    const Expr& E = mod->args[1];
    auto is_quotient = [&](const Expr& q) {
      return q->op == Op::Div && equal(q->args[0], x) && equal(q->args[1], E);
    };
    for (size_t q = 0; q < l.terms.size(); ++q) {
      const Expr& t = l.terms[q].first;
      const std::optional<int64_t> c = as_const_int(E);
      const bool joined = (is_quotient(t) && c && l.terms[q].second == k * *c) ||
                          (t->op == Op::Mul && l.terms[q].second == k &&
                           ((is_quotient(t->args[0]) && equal(t->args[1], E)) ||
                            (is_quotient(t->args[1]) && equal(t->args[0], E))));
      if (!joined) continue;
      l.terms[q].second = 0;
      l.terms[r].second = 0;
      l.add(x, k);
      break;
    }
  }
}

Expr fold_linear(const Expr& e) {
  Expr f = fold(e);
  if (f->type != DType::Int ||
      !(f->op == Op::Add || f->op == Op::Sub || f->op == Op::Mul || f->op == Op::Neg))
    return f;
  Linear l;
  linearize(f, 1, l);
  join_quotient_and_remainder(l);
  return rebuild(l);
}

// The comparison that holds exactly where integer comparison `op` does not.
std::optional<Op> complement(Op op) {
  constexpr std::pair<Op, Op> pairs[] = {{Op::Lt, Op::Ge}, {Op::Le, Op::Gt}, {Op::Eq, Op::Ne}};
  for (const auto& [a, b] : pairs) {
    if (op == a) return b;
    if (op == b) return a;
  }
  return std::nullopt;
}

// !(a < b) is a >= b (and so on) where a and b are integers: the comparison a mask analysis reads
// (a causal mask written !(j > i + T - S)). Float comparisons keep their negation (NaN).
Expr fold_negated_comparison(const Expr& e) {
  if (e->op != Op::Not || e->args.size() != 1) return e;
  const Expr& c = e->args[0];
  if (c->args.size() != 2 || c->args[0]->type != DType::Int || c->args[1]->type != DType::Int)
    return e;
  std::optional<Op> op = complement(c->op);
  return op ? make_binary(*op, c->args[0], c->args[1]) : e;
}

}  // namespace

Expr simplify(const Expr& e) {
  return mutate(e, [](const Expr& x) { return fold_linear(fold_negated_comparison(x)); });
}

bool provably_equal(const Expr& a, const Expr& b) {
  Expr d = simplify(make_binary(Op::Sub, a, b));
  return is_const(d, 0);
}

namespace {

// k with e = k * divisor, when e has that form syntactically (or is 0).
Expr quotient(const Expr& e, const Expr& divisor) {
  if (is_const(e, 0)) return e;
  if (e->op != Op::Mul) return nullptr;
  if (provably_equal(e->args[1], divisor)) return e->args[0];
  if (provably_equal(e->args[0], divisor)) return e->args[1];
  return nullptr;
}

}  // namespace

Expr simplify_in_ranges(const Expr& e, const std::map<std::string, Expr>& extents) {
  return simplify(mutate(simplify(e), [&](const Expr& x) -> Expr {
    if ((x->op != Op::Div && x->op != Op::Mod) || x->type != DType::Int) return x;
    for (const auto& [name, extent] : extents) {
      if (!extent || !provably_equal(x->args[1], extent)) continue;
      Expr v = make_var(name, VarKind::Index, DType::Int);
      Expr rest = simplify(make_binary(Op::Sub, x->args[0], v));
      if (uses_var(rest, name)) continue;
      if (Expr q = quotient(rest, extent)) return x->op == Op::Div ? q : v;
    }
    return x;
  }));
}

bool provably_divides(const Expr& divisor, const Expr& e) {
  auto cd = as_const_int(divisor), ce = as_const_int(e);
  if (cd && ce) return *cd != 0 && *ce % *cd == 0;
  if (cd && *cd == 1) return true;
  if (e->op == Op::Mul)
    return provably_equal(e->args[0], divisor) || provably_equal(e->args[1], divisor);
  return false;
}

}  // namespace kintsugi::ir
