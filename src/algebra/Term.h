// \file Term.h
// The float expression representation of the algebra engine: hash-consed terms in canonical form.
//
// A Term is a pointer to an interned node owned by a TermContext. The constructors of the context
// (add, mul, pow, exp, ...) are the canonical form: they flatten nested sums and products, sort
// operands by a structural order, fold constants, merge like terms (2a + 3a = 5a) and like bases
// (a^p * a^q = a^(p+q)), and merge exponentials inside products (exp(a) * exp(b) = exp(a + b)).
// Division is a negative power, sqrt is a^(1/2), rsqrt is a^(-1/2).
// Invariant: two terms built in one context are structurally equal after canonicalisation iff
// they are the same pointer, so equality checks are pointer comparisons.
// Rewrites that need side conditions (exp(log a) = a for a > 0, ...) live in Rules.h as data.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/Expr.h"

namespace kintsugi::algebra {

enum class TermKind : uint8_t { Const, Sym, Add, Mul, Pow, Exp, Log, Abs, Max, Min, Select, Fn };

// What a symbol stands for. Acc is the accumulator t; Old/New are the old and new value (x, x') of
// an incomplete producer; Complete is a complete value u; Stat is an extra statistic of an
// augmented state; Wild/WildConst are pattern variables of the rule table.
enum class SymRole : uint8_t { Acc, Old, New, Stat, Complete, Wild, WildConst };

// Sign facts. NonNeg/NonPos include zero.
enum class Sign : uint8_t { Unknown, Zero, Pos, Neg, NonNeg, NonPos };
inline bool is_nonneg(Sign s) {
  return s == Sign::Pos || s == Sign::NonNeg || s == Sign::Zero;
}
inline bool is_nonpos(Sign s) {
  return s == Sign::Neg || s == Sign::NonPos || s == Sign::Zero;
}
const char* sign_name(Sign s);

struct TermNode {
  TermKind kind = TermKind::Const;
  double value = 0.0;  // Const
  int sym = -1;        // Sym: symbol index; Fn: the ir::MathFn as an int
  std::vector<const TermNode*> args;
  size_t hash = 0;
};
using Term = const TermNode*;

struct Symbol {
  std::string name;
  SymRole role = SymRole::Complete;
  int value = -1;  // Old/New: index of the incomplete value; Stat: index of the statistic
  Sign fact = Sign::Unknown;
  ir::Expr origin;         // Complete: the ir sub-expression the symbol stands for
  bool integer = false;    // Complete: an integer-valued (index/dim) expression
  bool invariant = false;  // Complete: reads no load and no index variable (params, dims,
                           // literals): the same for every term of the reduction
};

class TermContext {
 public:
  TermContext();
  TermContext(const TermContext&) = delete;
  TermContext& operator=(const TermContext&) = delete;

  int add_symbol(Symbol s);
  const Symbol& symbol(int i) const { return symbols_[i]; }
  Symbol& symbol(int i) { return symbols_[i]; }
  int num_symbols() const { return static_cast<int>(symbols_.size()); }

  // --- Canonical constructors.
  Term constant(double v);
  Term sym(int index);
  Term add(std::vector<Term> args);
  Term mul(std::vector<Term> args);
  Term pow(Term base, Term exponent);
  Term exp(Term a);
  Term log(Term a);
  Term abs(Term a);
  Term max(std::vector<Term> args);
  Term min(std::vector<Term> args);
  Term select(Term cond, Term a, Term b);
  Term fn(ir::MathFn f, std::vector<Term> args);
  // Rebuilds a node of `like`'s kind with new operands through the canonical constructors.
  Term rebuild(Term like, std::vector<Term> args);

  Term add(Term a, Term b) { return add(std::vector<Term>{a, b}); }
  Term mul(Term a, Term b) { return mul(std::vector<Term>{a, b}); }
  Term neg(Term a) { return mul(constant(-1.0), a); }
  Term sub(Term a, Term b) { return add(a, neg(b)); }
  Term div(Term a, Term b) { return mul(a, pow(b, constant(-1.0))); }
  Term pow(Term base, double e) { return pow(base, constant(e)); }

  // Replaces symbols (by index) and rebuilds canonically.
  Term substitute(Term t, const std::unordered_map<int, Term>& by_symbol);
  // Replaces whole sub-terms (by pointer) and rebuilds canonically.
  Term replace(Term t, const std::unordered_map<Term, Term>& by_term);
  // True when t mentions a symbol with the given role (or the symbol itself).
  bool uses_role(Term t, SymRole role) const;
  bool uses_symbol(Term t, int index) const;
  void collect_symbols(Term t, std::vector<int>* out) const;

  // Sign facts: exp > 0, a^(non-integer) >= 0, a^(negative non-integer) > 0, abs >= 0, sums and
  // products of signed terms, max >= each operand, user facts on symbols.
  Sign sign(Term t) const;
  // Numeric value with symbol values given by index (NaN for missing).
  double eval(Term t, const std::vector<double>& values) const;
  // Readable text ("t * exp(m - m')").
  std::string str(Term t) const;

  // A total structural order (used to sort operands; independent of construction order).
  static int compare(Term a, Term b);

  // Compiled rule tables (Rules.cpp), built on first use in this context.
  std::shared_ptr<void> rule_cache;

 private:
  Term intern(TermNode n);
  std::vector<Symbol> symbols_;
  std::deque<TermNode> nodes_;
  std::unordered_multimap<size_t, Term> table_;
};

}  // namespace kintsugi::algebra
