// \file Rules.h
// Rewrite rules of the algebra engine, written as data: each rule is a line of text
// `{name, pattern, replacement, condition}` parsed once into terms with pattern variables.
//
// Pattern language: a, b, c, d match any term; k, p, q match constants only; + - * / ^, unary
// minus, exp log abs sqrt max min. A binary pattern `a * b` (also +, max, min) matches an n-ary
// node by giving one operand to one side and the product (sum, ...) of the others to the other
// side, so one rule covers every arity. Conditions (comma separated): `a>0`, `a>=0`, `a<=0`,
// `a<0`, `k int`, `k even`, `k>=2`, `k<=6` (sign conditions use the facts of TermContext::sign).
// Invariant: every rule preserves the value wherever its condition holds and both sides are
// defined; rewriting runs bottom-up to a fixpoint (bounded), results rebuilt canonically.
#pragma once

#include <string>
#include <vector>

#include "algebra/Term.h"

namespace kintsugi::algebra {

struct RuleText {
  const char* name;
  const char* pattern;
  const char* replacement;
  const char* condition;  // "" when none
};

enum class RuleSetKind {
  Simplify,    // exp/log, powers, roots, abs (always applied by `simplify`)
  Expand,      // distribute products over sums, expand small integer powers of sums
  Distribute,  // push * (by a nonnegative factor) and + into max/min (Eq. 4 proofs)
};

// The rule tables (for documentation and tests).
const std::vector<RuleText>& rule_table(RuleSetKind kind);

// Rewrites t to a fixpoint with the Simplify rules.
Term simplify(TermContext& cx, Term t);
// Simplify + Expand (a polynomial-like normal form: a sum of products).
Term expand(TermContext& cx, Term t);
// Simplify + Distribute.
Term distribute(TermContext& cx, Term t);

}  // namespace kintsugi::algebra
