// \file Repair.h
// The algebra engine: derives the repair function h that lets a target reduction be fused under
// the loop of a producer reduction it consumes (Neptune's rolling update), and verifies it.
// Invariant: a result of kind Derived has passed the randomized numeric check of Eq. 3, Eq. 4
// and the identity guard; anything that fails is Refused with a reason.
//
// ---------------------------------------------------------------------------------------------
// Tutorial
// ---------------------------------------------------------------------------------------------
// A target reduction X_t[i] = F_j g(X_r[i], C[i, j]) (reducer F in sum/max/min/prod) reads the
// result X_r of a producer reduction over the same axis j. Fused under j, g sees the producer's
// running value r instead of its final value. The accumulator t = F_{i<=j} g(r, c_i) is kept
// correct by repairing it whenever the producer moves from r to r':
//
//   Eq. 3   h(g(r, c), r, r') = g(r', c)             (h re-bases one term)
//   Eq. 4   h(a F b, r, r') = h(a, r, r') F h(b, r, r')   (h distributes over the reducer)
//   Eq. 7   t_j = h(t_{j-1}, r_{j-1}, r_j) F g(r_j, c_j)
//
// Together Eq. 3 and 4 give h(F_i g(r, c_i), r, r') = F_i g(r', c_i): one call re-bases a whole
// partial result. The engine derives h in five steps:
//
//  1. Classify (as Neptune): loads of buffers named `incomplete` are incomplete values x (one
//     per structurally distinct load; each gets an old/new pair x, x'); every maximal
//     sub-expression free of x is a complete value u (an opaque atom: loads, params, dims,
//     masks, softcap, ...). Float casts are dropped (value preserving in this algebra).
//  2. Canonicalise (Term.h, Rules.h): hash-consed terms; flattened sorted sums and products,
//     folded constants, exp(a) exp(b) = exp(a + b), division = power -1, sqrt = power 1/2,
//     rsqrt = power -1/2; side-conditioned rules (exp(log a) = a for a > 0, abs(a b) =
//     abs(a) abs(b), abs(a) = a for a >= 0, ...) are a table of text rules.
//  3. Separate g = gu(u) (x) gx(x), (x) in {*, +} (exp(u - x) is split into exp(u) * exp(-x)).
//     Product: h = t * gx(x') / gx(x) (also for a sum of products with one x-part,
//     u1 gx(x) + u2 gx(x) = (u1 + u2) gx(x)). Sum: h = t - gx(x) + gx(x'). When no split exists, a
//     peeling inverter solves t = g(x, U) for the u-part U layer by layer (Eq. 5:
//     h = g(x', g^-1(x, t))), undoing +, *, powers, exp and log.
//  4. Distributivity (Eq. 4) by table: sum needs h = t * k; max/min need h non-decreasing in t
//     (t * k with k >= 0 proven by sign facts, t + k, or a monotone composition); prod would
//     need h = t^k and is refused. Facts: exp > 0, sqrt >= 0, rsqrt > 0, abs >= 0, sums and
//     products of signed terms, max >= its operands, facts ("positive", "nonnegative") on
//     names: params, dims, and buffers whose definitions are signed (sign_fact below).
//  5. Verify: Eq. 3, Eq. 4 and h(t, r, r) = t symbolically on canonical forms where the rules
//     suffice, and always numerically (seeded, fp64, hundreds of points with negative and large
//     values, respecting facts and domains). A failure refuses the derivation.
//
// When g mixes x and u inside one term (Welford's (c - mean)^2 = c^2 - 2 c mean + mean^2) no
// h(t, r, r') exists. If every expanded term is still a product u-part * x-part, the exact
// update exists with extra statistics (sums of the u-parts, e.g. S = sum c and the count n):
// h = t - 2 S (mean' - mean) + n (mean'^2 - mean^2). The engine derives it when
// `allow_augmented_state` is set (method "augmented state (Welford)") and otherwise refuses,
// naming the statistics that would be needed.
//
// Running sums. A statistic can be a producer the target already reads: the entropy of a
// softmax, sum_j p log p with p = exp(x - m) / l, expands to (x - m - log l) exp(x - m) / l,
// whose correction needs sum_j exp(x) beside t, and that sum is l exp(m), l's own running value
// (l = sum_j exp(x - m)). Given the summands of the incomplete sums (`running_sums`), such a
// statistic is replaced by the producer's old value over its incomplete part, and t carries the
// one group no producer sums: h = rho (t + sum_k A_k (b_k' / rho - b_k)), rho = b_1' / b_1, which
// simplifies to old-minus-new differences (entropy: l (m - m' + log l - log l' + t) exp(m - m')
// / l'). It holds wherever h is applied to a partial and the producers' values over the same
// elements (a tile prefix, a chunk); it is verified with its statistics (Eq. 3, 4) and again
// with them replaced, on prefixes whose running sums are their summands' sums (method "running
// sums"). Emission adds each old value to its new value's negation first (m - m' + t, not
// t + m - m'), so that t never meets a large value alone.
//
// Guard convention (masked tiles). The emitted h is safe when r = r' = -inf (a fully masked
// leading tile): every factor k_C of h = t * prod_C k_C that depends on a group C of incomplete
// values is emitted as select(x == x' && ..., 1, k_C) (additive parts: select(.., 0, k_C);
// other forms: select(all equal, t, h)). So h(t, r, r) is exactly t, and exp(m - m') is never
// evaluated at m = m' = -inf. `select` evaluates only the chosen branch (as in Eval.h).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/Expr.h"

namespace kintsugi::algebra {

struct RepairRequest {
  ir::Reducer reducer = ir::Reducer::Sum;  // f of the target
  ir::Expr term;  // g: the target's reduction body. Loads of buffers named in `incomplete` are
                  // producer values x; every other Load, Var and literal is a complete value u.
  std::set<std::string> incomplete;          // buffer names of incomplete producers
  std::map<std::string, std::string> facts;  // name -> "positive" | "nonnegative" (params,
                                             // dims, loads by buffer name)
  bool allow_augmented_state = false;        // derive augmented-state repairs (Welford)
  // The target's reduction variable. When set, a max or min of an incomplete value and complete
  // values that do not vary along it (max(m[i], SINK[h])) is one incomplete value: its old and
  // new values are the max with the producer's old and new values, so it repairs like the
  // producer itself (the max of a reduction and a complete term is a max reduction started
  // from that term).
  std::string axis;
  // Incomplete buffers that are sums over the target's axis, with their summand in the target's
  // variables (loads of incomplete buffers as in `term`). A statistic of an augmented state that
  // is such a summand's complete part is the producer's running value divided by its incomplete
  // part (at the old values), so h needs no statistic of its own ("running sums").
  std::map<std::string, ir::Expr> running_sums;
  // Incomplete buffers that are a max or min over the target's axis, with that reducer and their
  // element in the target's variables. Such a running extremum bounds every element it has seen,
  // so a term that selects on an element equal to it (the index of the maximum,
  // select(X[i, j] == m[i], j, N)) is repaired by whether the extremum moved ("running
  // extremum").
  std::map<std::string, std::pair<ir::Reducer, ir::Expr>> running_extrema;
};

struct IncompleteValue {
  ir::Expr load;  // e.g. m[b, h, i]; or a max/min of one such load and complete values that do
                  // not vary along the axis, e.g. max(SINK[h], m[b, h, i]) (RepairRequest::axis)
  std::string old_var, new_var;  // e.g. "m" and "m'"
};

// The load of an incomplete buffer inside `value` (the value itself when it is one).
ir::Expr incomplete_load(const ir::Expr& value, const std::set<std::string>& incomplete);

// An extra accumulator of an augmented state: `var` = F_j term, reduced alongside t (term is
// complete, so it needs no repair). Only in augmented derivations.
struct AugmentedStatistic {
  std::string var;  // "n" for the count, "S0", "S1", ... otherwise
  ir::Expr term;    // the summand (1.0 for the count)
};

struct RepairResult {
  enum class Kind { Identity /*g has no x*/, Derived, Refused } kind = Kind::Refused;
  ir::Expr h;  // Derived: over Var "t", the old/new Vars of each value (and statistic Vars),
               // guarded (see the convention above). Identity: Var "t".
  ir::Expr h_unguarded;                        // Derived: the same h without guards (for reading)
  std::vector<IncompleteValue> values;         // one per distinct incomplete load
  std::vector<AugmentedStatistic> statistics;  // augmented derivations only
  std::string method;  // "separable product", "separable sum", "peeled inverse (Eq. 5)",
                       // "augmented state (Welford)", "running sums", "running extremum",
                       // "identity"
  std::string reason;  // Refused: why
  bool verified_symbolic = false, verified_numeric = false;
  // Running sums whose scale is a running sum's old value over its new one (h = rho (..), rho =
  // sum over the partial's elements of a nonnegative summand / the same sum over a superset):
  // wherever h is applied, rho is in [0, 1], so h never scales a partial up.
  bool scale_at_most_one = false;
  // h re-bases a partial whose incomplete value is still its producer's identity exactly (a
  // running extremum over elements a mask hid), so such a partial needs no guard.
  bool exact_at_identity = false;
};

RepairResult derive_repair(const RepairRequest& request);

// The sign of `value` as the algebra proves it from the expression's structure and the facts on
// the names it reads (RepairRequest::facts): exp(..) > 0, sums, products and maxes of signed
// terms, powers, abs. "positive", "nonnegative", or "" when unknown. Select conditions and
// integer sub-expressions are opaque.
std::string sign_fact(const ir::Expr& value, const std::map<std::string, std::string>& facts);

// Readable math for printing, e.g. "t * exp(m - m')".
std::string to_math(const ir::Expr& h);

}  // namespace kintsugi::algebra
