// \file Fusion.cpp
// Helpers shared by rolling_update and split_k_update (see Fusion.h).
#include "schedule/primitive/Fusion.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include "algebra/Eval.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/Region.h"
#include "schedule/primitive/MaskedTerm.h"

namespace kintsugi::schedule {

void find_frontier(const ir::LoopProgram& program, const ir::StmtNode& target,
                   const std::function<bool(const ir::StmtNode& producer)>& is_frontier,
                   std::set<std::string>* frontier, std::vector<std::string>* between) {
  auto w = block_writers(program.body);
  std::set<std::string> visiting;
  std::function<bool(const ir::StmtNode&)> reaches = [&](const ir::StmtNode& b) -> bool {
    bool any = false;
    for (const std::string& r : block_reads(b)) {
      if (block_writes(b).count(r) || !w.count(r)) continue;
      const ir::StmtNode& prod = *w.at(r);
      if (is_frontier(prod)) {
        frontier->insert(r);
        any = true;
        continue;
      }
      bool is_map = true;
      for (const ir::IterVar& iv : prod.iters) is_map &= iv.kind == ir::IterKind::Spatial;
      if (!is_map || visiting.count(prod.name)) continue;
      visiting.insert(prod.name);
      if (reaches(prod)) {
        any = true;
        if (std::find(between->begin(), between->end(), prod.name) == between->end())
          between->push_back(prod.name);
      }
    }
    return any;
  };
  reaches(target);
}

ir::Expr extrapolation_factor(const ir::Expr& extent, const ir::Expr& covered, DType type) {
  ir::Expr at_least_one = ir::simplify(ir::make_binary(ir::Op::Max, covered, ir::make_int(1)));
  return ir::make_binary(ir::Op::Div, ir::make_cast(type, extent),
                         ir::make_cast(type, at_least_one));
}

ir::Expr extrapolate_sum_reads(ir::LoopProgram& program, const StmtPath& loop,
                               const std::set<std::string>& sums,
                               const std::function<ir::Expr(const ir::Expr& load)>& factor,
                               const ir::Expr& term) {
  ir::StmtNode nl = *loop.back();
  nl.body = ir::mutate(nl.body, [&](const ir::Stmt& n) -> ir::Stmt {
    if (n->kind != ir::StmtKind::Block) return n;
    for (const std::string& w : block_writes(*n))
      if (sums.count(w)) return n;
    ir::StmtNode c = *n;
    auto fix = [&](const ir::Stmt& part) {
      return part ? ir::mutate_exprs(part,
                                     [&](const ir::Expr& x) -> ir::Expr {
                                       if (x->op != ir::Op::Load || !sums.count(x->name)) return x;
                                       return ir::make_binary(ir::Op::Mul, x, factor(x));
                                     })
                  : part;
    };
    c.init = fix(c.init);
    c.body = fix(c.body);
    return std::make_shared<const ir::StmtNode>(std::move(c));
  });
  program.body = replace_at(loop, std::make_shared<const ir::StmtNode>(std::move(nl)));
  return ir::mutate(term, [&](const ir::Expr& x) -> ir::Expr {
    return x->op == ir::Op::Load && sums.count(x->name)
               ? ir::make_load(x->name + ".extrapolated", x->type, x->args)
               : x;
  });
}

bool repair_annihilates_identity(const algebra::RepairResult& repair,
                                 const algebra::IncompleteValue& v, double identity) {
  for (double probe : {-3.0, 0.5, 7.0}) {
    double value = algebra::eval_ir(repair.h, [&](const ir::Expr& n, double* out) {
      if (n->op != ir::Op::Var) return false;
      if (n->name == "t")
        *out = 1.0;
      else if (n->name == v.old_var)
        *out = identity;
      else if (n->name == v.new_var)
        *out = probe;
      else
        *out = 1.25;  // any finite value for the other incomplete values
      return true;
    });
    if (value != 0.0) return false;
  }
  return true;
}

bool repair_exponentiates(const algebra::RepairResult& repair, const algebra::IncompleteValue& v) {
  if (repair.kind != algebra::RepairResult::Kind::Derived) return false;
  bool found = false;
  ir::visit(repair.h_unguarded, [&](const ir::Expr& x) {
    if (found) return false;
    if (x->op == ir::Op::Call && (x->fn == ir::MathFn::Exp || x->fn == ir::MathFn::Exp2))
      ir::visit(x->args[0], [&](const ir::Expr& n) {
        found |= n->op == ir::Op::Var && (n->name == v.old_var || n->name == v.new_var);
        return !found;
      });
    return !found;
  });
  return found;
}

namespace {

enum class Sign { Unknown, NonNegative, Positive };

// The sign of `e` from its structure and `facts` on the names it reads (dims, params, buffers,
// the repair's old and new values): positive literals, exp, sums, products and quotients of
// signed operands, sqrt and rsqrt, abs, a max with a signed operand, casts.
Sign sign_of(const ir::Expr& e, const std::map<std::string, std::string>& facts) {
  auto both = [&](Sign a, Sign b) {
    if (a == Sign::Unknown || b == Sign::Unknown) return Sign::Unknown;
    return a == Sign::Positive && b == Sign::Positive ? Sign::Positive : Sign::NonNegative;
  };
  switch (e->op) {
    case ir::Op::FloatImm:
      return e->float_value > 0    ? Sign::Positive
             : e->float_value == 0 ? Sign::NonNegative
                                   : Sign::Unknown;
    case ir::Op::IntImm:
      return e->int_value > 0    ? Sign::Positive
             : e->int_value == 0 ? Sign::NonNegative
                                 : Sign::Unknown;
    case ir::Op::Var:
    case ir::Op::Load: {
      auto f = facts.find(e->name);
      if (f == facts.end()) return Sign::Unknown;
      return f->second == "positive" ? Sign::Positive : Sign::NonNegative;
    }
    case ir::Op::Cast:
      return sign_of(e->args[0], facts);
    case ir::Op::Add: {
      Sign a = sign_of(e->args[0], facts), b = sign_of(e->args[1], facts);
      if (a == Sign::Unknown || b == Sign::Unknown) return Sign::Unknown;
      return a == Sign::Positive || b == Sign::Positive ? Sign::Positive : Sign::NonNegative;
    }
    case ir::Op::Mul:
    case ir::Op::Div:
      return both(sign_of(e->args[0], facts), sign_of(e->args[1], facts));
    case ir::Op::Max: {
      Sign a = sign_of(e->args[0], facts), b = sign_of(e->args[1], facts);
      if (a == Sign::Positive || b == Sign::Positive) return Sign::Positive;
      return a == Sign::NonNegative || b == Sign::NonNegative ? Sign::NonNegative : Sign::Unknown;
    }
    case ir::Op::Call:
      switch (e->fn) {
        case ir::MathFn::Exp:
        case ir::MathFn::Exp2:
        case ir::MathFn::Sigmoid:
          return Sign::Positive;
        case ir::MathFn::Abs:
          return Sign::NonNegative;
        case ir::MathFn::Sqrt:
        case ir::MathFn::Rsqrt:
          return sign_of(e->args[0], facts);
        default:
          return Sign::Unknown;
      }
    default:
      return Sign::Unknown;
  }
}

}  // namespace

std::string repair_pole(const algebra::RepairResult& repair,
                        const std::set<std::string>& incomplete,
                        const std::map<std::string, std::string>& facts) {
  if (repair.kind != algebra::RepairResult::Kind::Derived) return "";
  // The facts on the repair's variables: an old and a new value are values of their buffer.
  std::map<std::string, std::string> known = facts;
  std::set<std::string> vars;
  for (const algebra::IncompleteValue& v : repair.values) {
    vars.insert(v.old_var);
    vars.insert(v.new_var);
    const std::string name = algebra::incomplete_load(v.load, incomplete)->name;
    if (auto f = facts.find(name); f != facts.end())
      known[v.old_var] = known[v.new_var] = f->second;
  }
  std::string pole;
  ir::visit(repair.h_unguarded, [&](const ir::Expr& x) {
    if (!pole.empty() || x->op != ir::Op::Div) return pole.empty();
    bool reads_partial = false;
    ir::visit(x->args[1], [&](const ir::Expr& n) {
      reads_partial |= n->op == ir::Op::Var && vars.count(n->name) > 0;
      return !reads_partial;
    });
    if (reads_partial && sign_of(x->args[1], known) != Sign::Positive)
      pole = "the repair " + algebra::to_math(repair.h_unguarded) + " divides by " +
             algebra::to_math(x->args[1]) +
             ", which can be zero (a tile or chunk where it is has already lost its terms)";
    return true;
  });
  return pole;
}

namespace {

bool is_map(const ir::StmtNode& b) {
  bool m = b.body && b.body->kind == ir::StmtKind::Store && !b.init;
  for (const ir::IterVar& iv : b.iters) m &= iv.kind == ir::IterKind::Spatial;
  return m;
}

// How `producer` reaches its reducer's identity through a mask: its partial's term (the term of
// a reduction with the producer's reducer whose result the producer's value loads) is
// select(cond, v, identity) inline (`term` and `inner` say where), or reads, directly or through
// maps, a map buffer B = select(cond, v, K) (K a constant) such that the term is the identity
// wherever B is K (checked numerically: attention's masked scores, and chains through them such as
// exp(c - a) of c = select(.., -inf)).
struct Mask {
  bool found = false;
  std::string buffer;  // empty: the mask is inline in the term
  double value = 0.0;  // K
  ir::Expr term;       // inline: the partial's term that holds the mask
  std::string inner;   // inline: the partial's reduction variable (its position in a tile)
};

// `target`: the value the mask drives the term to (the reducer's identity, or for a maximum or
// minimum its absorbing infinity).
Mask producer_mask(const ir::LoopProgram& p, const std::string& producer, ir::Reducer reducer,
                   double target) {
  Mask out;
  auto writers = block_writers(p.body);
  if (!writers.count(producer) || !writers.at(producer)->body) return out;
  ir::Expr partial_term;
  std::string inner;
  ir::visit(writers.at(producer)->body->value, [&](const ir::Expr& x) {
    if (x->op != ir::Op::Load || x->name == producer || !writers.count(x->name)) return true;
    const ir::StmtNode* w = writers.at(x->name);
    ir::Reducer r;
    ir::Expr g;
    if (!partial_term && w->body && match_reduction_update(*w->body, &r, &g) && r == reducer) {
      partial_term = g;
      for (const ir::IterVar& iv : w->iters)
        if (iv.kind == ir::IterKind::Reduce) inner = iv.name;
    }
    return true;
  });
  if (!partial_term) return out;
  auto select_constant = [](const ir::Expr& e) -> std::optional<double> {
    if (e->op == ir::Op::Select && e->args[2]->op == ir::Op::FloatImm)
      return e->args[2]->float_value;
    return std::nullopt;
  };
  // A select in the term itself, or one the mask's constant passes through, can hold a whole
  // chunk on one branch (max[j](select(j < N / 2, c, 0)) of c = select(.., -inf) is -inf on a
  // chunk below N / 2 that c hides): the term counts as masked where some choice of its selects'
  // branches makes it the target.
  if (masked_term_can_be(partial_term, target)) {
    out.found = true;
    out.term = partial_term;
    out.inner = inner;
    return out;
  }
  // The map buffers the term reads through maps, nearest first.
  std::vector<std::string> candidates;
  std::function<void(const ir::Expr&)> reach = [&](const ir::Expr& e) {
    ir::visit(e, [&](const ir::Expr& n) {
      if (n->op != ir::Op::Load) return true;
      auto w = writers.find(n->name);
      if (w == writers.end() || !is_map(*w->second) ||
          std::find(candidates.begin(), candidates.end(), n->name) != candidates.end())
        return true;
      candidates.push_back(n->name);
      reach(w->second->body->value);
      return true;
    });
  };
  reach(partial_term);
  for (const std::string& b : candidates) {
    std::optional<double> k = select_constant(writers.at(b)->body->value);
    if (!k) continue;
    std::function<ir::Expr(const ir::Expr&)> expand = [&](const ir::Expr& e) -> ir::Expr {
      return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
        if (n->op != ir::Op::Load) return n;
        if (n->name == b) return ir::make_float(*k, n->type);
        auto w = writers.find(n->name);
        if (w == writers.end() || !is_map(*w->second)) return n;
        return expand(w->second->body->value);
      });
    };
    if (masked_term_can_be(expand(partial_term), target)) {
      out = {true, b, *k, nullptr, ""};
      return out;
    }
  }
  return out;
}

// Whether two index conditions provably agree: the same comparison of operands whose
// differences are provably equal (j0 * 64 + (j - j0 * 64) <= i and j <= i), and conjunctions and
// disjunctions of agreeing parts.
bool same_condition(const ir::Expr& a, const ir::Expr& b) {
  if (ir::equal(a, b)) return true;
  if (a->op == b->op && (a->op == ir::Op::And || a->op == ir::Op::Or))
    return same_condition(a->args[0], b->args[0]) && same_condition(a->args[1], b->args[1]);
  if (a->op != b->op || !ir::is_comparison(a->op)) return false;
  return ir::provably_equal(ir::make_binary(ir::Op::Sub, a->args[0], a->args[1]),
                            ir::make_binary(ir::Op::Sub, b->args[0], b->args[1]));
}

// The value a map block stores, at the indices of `load` (its store indices that are its own
// variables replaced by the load's).
ir::Expr read_at(const ir::StmtNode& map, const ir::Expr& load) {
  std::map<std::string, ir::Expr> at;
  const std::vector<ir::Expr>& store = map.body->indices;
  for (size_t k = 0; k < store.size() && k < load->args.size(); ++k)
    if (store[k]->op == ir::Op::Var) at[store[k]->name] = load->args[k];
  return ir::substitute(map.body->value, at);
}

}  // namespace

bool producer_masked(const ir::LoopProgram& p, const std::string& producer,
                     ir::Reducer producer_reducer) {
  return producer_mask(p, producer, producer_reducer, ir::reducer_identity(producer_reducer)).found;
}

std::map<std::string, std::string> partial_facts(
    const ir::LoopProgram& p, std::map<std::string, std::string> facts,
    const std::map<std::string, std::string>& partial_of) {
  auto writers = block_writers(p.body);
  for (const auto& [producer, partial] : partial_of) {
    auto f = facts.find(partial);
    auto w = writers.find(producer);
    if (f == facts.end() || f->second != "positive" || w == writers.end() || !w->second->body)
      continue;
    ir::Reducer r;
    ir::Expr g;
    if (match_reduction_update(*w->second->body, &r, &g) &&
        producer_mask(p, producer, r, 0.0).found)
      f->second = "nonnegative";
  }
  return facts;
}

bool mask_makes_producer_infinite(const ir::LoopProgram& p, const std::string& producer,
                                  ir::Reducer producer_reducer) {
  const double inf = std::numeric_limits<double>::infinity();
  if (producer_reducer == ir::Reducer::Sum)  // either infinity absorbs a sum of finite terms
    return producer_mask(p, producer, producer_reducer, inf).found ||
           producer_mask(p, producer, producer_reducer, -inf).found;
  if (producer_reducer != ir::Reducer::Max && producer_reducer != ir::Reducer::Min) return false;
  const double absorbing = -ir::reducer_identity(producer_reducer);
  return producer_mask(p, producer, producer_reducer, absorbing).found;
}

bool identity_guard_sound(const ir::LoopProgram& p, const std::string& producer,
                          ir::Reducer producer_reducer, const ir::Expr& term,
                          ir::Reducer target_reducer,
                          const std::map<std::string, std::string>& aliases,
                          const ir::Expr& inner_position) {
  Mask mask = producer_mask(p, producer, producer_reducer, ir::reducer_identity(producer_reducer));
  if (!mask.found) return true;  // no mask: the data itself is the identity
  // An inline mask select(C, v, identity) hides an element where C is false. C is written in
  // the partial's variables: with its position in the tile expressed in the target's (the
  // partial's reduction variable = inner_position), a select of the target's term on a condition
  // that agrees with C everywhere is taken on its hiding side.
  std::vector<std::pair<ir::Expr, bool>> hiding;  // (C, whether the mask hides where C holds)
  if (mask.buffer.empty()) {
    if (!inner_position || mask.inner.empty()) return false;
    const double id = ir::reducer_identity(producer_reducer);
    auto is_identity = [&](const ir::Expr& e) {
      return e->op == ir::Op::FloatImm && e->float_value == id;
    };
    ir::visit(mask.term, [&](const ir::Expr& n) {
      if (n->op == ir::Op::Select && is_identity(n->args[1]) != is_identity(n->args[2]))
        hiding.push_back(
            {ir::substitute(n->args[0], {{mask.inner, inner_position}}), is_identity(n->args[1])});
      return true;
    });
    if (hiding.empty()) return false;  // no condition the target could share
  }
  auto hidden_branch = [&](const ir::Expr& n) -> ir::Expr {
    if (n->op != ir::Op::Select) return nullptr;
    for (const auto& [cond, hides_where_true] : hiding)
      if (same_condition(n->args[0], cond)) return hides_where_true ? n->args[1] : n->args[2];
    return nullptr;
  };
  std::set<std::string> hidden = {mask.buffer};
  if (auto a = aliases.find(mask.buffer); a != aliases.end()) hidden.insert(a->second);
  auto writers = block_writers(p.body);
  std::function<ir::Expr(const ir::Expr&)> expand = [&](const ir::Expr& e) -> ir::Expr {
    return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
      if (ir::Expr branch = hidden_branch(n)) return branch;
      if (n->op != ir::Op::Load) return n;
      if (hidden.count(n->name)) return ir::make_float(mask.value, n->type);
      auto w = writers.find(n->name);
      if (w == writers.end() || !is_map(*w->second)) return n;
      // Conditions are compared by value: the map's body is read at the load's indices.
      return expand(hiding.empty() ? w->second->body->value : read_at(*w->second, n));
    });
  };
  return !masked_term_differs(expand(term), ir::reducer_identity(target_reducer));
}

namespace {

ir::Expr running_term(const ir::LoopProgram& p, const std::string& buffer, ir::Reducer reducer,
                      const ir::Expr& inner_position, const std::string& loop_var,
                      const ir::Expr& position) {
  auto writers = block_writers(p.body);
  auto w = writers.find(buffer);
  if (w == writers.end() || !w->second->body) return nullptr;
  auto summand = [&](const ir::StmtNode& b) -> ir::Expr {
    ir::Reducer r;
    ir::Expr g;
    if (!b.body || !match_reduction_update(*b.body, &r, &g) || r != reducer) return nullptr;
    // The element first (its tile start reads the loop variable), then the loop's position
    // spelled as the target's term spells it.
    std::string inner, tile;
    for (const ir::IterVar& iv : b.iters) {
      if (iv.kind == ir::IterKind::Reduce) inner = iv.name;
      if (iv.kind == ir::IterKind::Spatial && iv.binding->op == ir::Op::Var &&
          iv.binding->name == loop_var)
        tile = iv.name;
    }
    if (inner.empty()) return nullptr;
    std::map<std::string, ir::Expr> at = {{loop_var, position}};
    if (!tile.empty()) at[tile] = position;
    return ir::substitute(ir::substitute(g, {{inner, inner_position}}), at);
  };
  if (ir::Expr g = summand(*w->second)) return g;  // a chunk's partial
  ir::Expr found;                                  // a scan: the partial it adds up
  ir::visit(w->second->body->value, [&](const ir::Expr& x) {
    if (!found && x->op == ir::Op::Load && x->name != buffer && writers.count(x->name))
      found = summand(*writers.at(x->name));
    return !found;
  });
  return found;
}

}  // namespace

std::map<std::string, ir::Expr> running_terms(
    const ir::LoopProgram& p, const std::set<std::string>& incomplete, ir::Reducer reducer,
    const ir::Expr& inner_position, const std::string& loop_var, const ir::Expr& position,
    const std::function<ir::Expr(const ir::Expr&)>& expand) {
  // Maps the target's term does not pass through (a summand named apart, l.term0) are inlined
  // too: at the load's indices, the loop's iteration at `position`.
  // Only maps that read a running value: the others stay complete values, as in the target.
  auto writers = block_writers(p.body);
  std::function<bool(const ir::Expr&)> reads_running = [&](const ir::Expr& e) {
    bool found = false;
    ir::visit(e, [&](const ir::Expr& n) {
      if (found || n->op != ir::Op::Load) return !found;
      auto w = writers.find(n->name);
      found = incomplete.count(n->name) ||
              (w != writers.end() && is_map(*w->second) && reads_running(w->second->body->value));
      return !found;
    });
    return found;
  };
  std::function<ir::Expr(const ir::Expr&)> inline_maps = [&](const ir::Expr& e) -> ir::Expr {
    return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
      auto w = writers.find(n->op == ir::Op::Load ? n->name : "");
      if (w == writers.end() || !is_map(*w->second) || !reads_running(w->second->body->value))
        return n;
      std::map<std::string, ir::Expr> at;
      const std::vector<ir::Expr>& store = w->second->body->indices;
      for (size_t d = 0; d < store.size() && d < n->args.size(); ++d)
        if (store[d]->op == ir::Op::Var) at[store[d]->name] = n->args[d];
      for (const ir::IterVar& iv : w->second->iters)
        if (!at.count(iv.name) && iv.binding->op == ir::Op::Var && iv.binding->name == loop_var)
          at[iv.name] = position;
      return inline_maps(ir::substitute(w->second->body->value, at));
    });
  };
  std::map<std::string, ir::Expr> out;
  for (const std::string& buffer : incomplete)
    if (ir::Expr summand = running_term(p, buffer, reducer, inner_position, loop_var, position))
      out[buffer] = ir::mutate(inline_maps(expand(summand)), [](const ir::Expr& n) {
        if (n->op != ir::Op::Load) return n;
        std::vector<ir::Expr> index;
        for (const ir::Expr& a : n->args) index.push_back(ir::simplify(a));
        return ir::make_load(n->name, n->type, index);
      });
  return out;
}

std::map<std::string, std::pair<ir::Reducer, ir::Expr>> running_extrema(
    const ir::LoopProgram& p, const std::set<std::string>& incomplete,
    const ir::Expr& inner_position, const std::string& loop_var, const ir::Expr& position,
    const std::function<ir::Expr(const ir::Expr&)>& expand) {
  std::map<std::string, std::pair<ir::Reducer, ir::Expr>> out;
  for (ir::Reducer r : {ir::Reducer::Max, ir::Reducer::Min})
    for (auto& [buffer, element] :
         running_terms(p, incomplete, r, inner_position, loop_var, position, expand))
      out[buffer] = {r, element};
  return out;
}

void refuse_masked_infinite_statistics(const ir::LoopProgram& p,
                                       const algebra::RepairResult& repair,
                                       const std::string& primitive, const std::string& refusal) {
  auto writers = block_writers(p.body);
  std::function<ir::Expr(const ir::Expr&)> expand = [&](const ir::Expr& e) -> ir::Expr {
    return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
      if (n->op == ir::Op::Select && n->args[2]->op == ir::Op::FloatImm &&
          std::isinf(n->args[2]->float_value))
        return n->args[2];
      if (n->op != ir::Op::Load) return n;
      auto w = writers.find(n->name);
      if (w == writers.end() || !is_map(*w->second)) return n;
      return expand(w->second->body->value);
    });
  };
  for (const algebra::AugmentedStatistic& stat : repair.statistics)
    if (masked_term_nonfinite(expand(stat.term)))
      throw ScheduleError(primitive, refusal + ": statistic " + stat.var + " = " +
                                         algebra::to_math(stat.term) +
                                         " of its augmented state sums values a mask sets to an "
                                         "infinity, and the repair would subtract infinities");
}

bool repair_scale_may_overflow(const algebra::RepairResult& repair,
                               const std::map<std::string, ir::Reducer>& moves) {
  if (repair.scale_at_most_one) return false;  // proven by the algebra (running sums)
  // Old values and steps of the new value from the old one (signed as the producer allows).
  const double olds[] = {-3.0, 0.5, 7.0, 40.0};
  const double steps[] = {0.0, 0.25, 3.0, 30.0};
  auto h_at = [&](double t, double old_value, double step, int sign_of_free) {
    return algebra::eval_ir(repair.h, [&](const ir::Expr& n, double* out) {
      if (n->op != ir::Op::Var) return false;
      *out = 1.25;  // statistics: any finite value
      if (n->name == "t") *out = t;
      for (const algebra::IncompleteValue& v : repair.values) {
        double sign = sign_of_free;
        if (auto m = moves.find(v.old_var); m != moves.end())
          sign = m->second == ir::Reducer::Min ? -1.0 : 1.0;
        if (n->name == v.old_var) *out = old_value;
        if (n->name == v.new_var) *out = old_value + sign * step;
      }
      return true;
    });
  };
  // A sum of nonnegative terms is never negative.
  const bool nonnegative = std::any_of(moves.begin(), moves.end(),
                                       [](const auto& m) { return m.second == ir::Reducer::Sum; });
  for (double old_value : olds)
    for (double step : steps)
      for (int sign : {1, -1}) {
        if (nonnegative && old_value < 0) continue;
        double zero = h_at(0.0, old_value, step, sign);
        if (std::isnan(zero)) continue;  // outside the repair's domain
        if (zero != 0.0) return false;   // not a rescaling
        if (!(std::fabs(h_at(1.0, old_value, step, sign)) <= 1.0)) return true;
      }
  return false;
}

ir::Expr guard_scaled_partial(const algebra::RepairResult& repair,
                              const std::map<std::string, ir::Reducer>& moves, const ir::Expr& t,
                              const ir::Expr& h, const std::string& primitive,
                              const std::string& refusal) {
  if (!repair_scale_may_overflow(repair, moves)) return h;
  for (const algebra::IncompleteValue& v : repair.values)
    if (repair_exponentiates(repair, v))
      throw ScheduleError(primitive, refusal + ": the repair scales a partial up (" +
                                         algebra::to_math(repair.h) +
                                         "), and a partial that underflowed cannot be restored");
  return ir::make_select(ir::make_binary(ir::Op::Eq, t, ir::make_float(0.0, t->type)), t, h);
}

std::map<std::string, Range> axis_box(const std::map<std::string, AxisIteration>& axis_iter,
                                      const std::string& block, const Range& tile) {
  std::map<std::string, Range> box;
  auto it = axis_iter.find(block);
  if (it != axis_iter.end())
    box[it->second.var] =
        Range{ir::simplify(ir::make_binary(ir::Op::Add, it->second.offset, tile.min)), tile.extent};
  return box;
}

std::map<std::string, AxisIteration> axis_iterations(const ir::LoopProgram& program,
                                                     const std::string& target,
                                                     const std::string& axis,
                                                     const std::vector<std::string>& between) {
  std::map<std::string, AxisIteration> out = {{target, AxisIteration{axis, ir::make_int(0)}}};
  for (auto it = between.rbegin(); it != between.rend(); ++it) {
    const ir::StmtNode& prod = *find_block(program.body, *it, "fusion").back();
    const ir::StmtNode& st = *prod.body;
    for (const auto& [consumer, civ] : out) {
      const ir::StmtNode& c = *find_block(program.body, consumer, "fusion").back();
      ir::Expr consumer_var = ir::make_var(civ.var, ir::VarKind::Index, DType::Int);
      ir::visit_exprs(c.body, [&](const ir::Expr& e) {
        ir::visit(e, [&](const ir::Expr& x) {
          if (x->op == ir::Op::Load && x->name == st.buffer)
            for (size_t d = 0; d < x->args.size(); ++d) {
              if (!ir::uses_var(x->args[d], civ.var) || st.indices[d]->op != ir::Op::Var) continue;
              ir::Expr o = ir::simplify(ir::make_binary(ir::Op::Sub, x->args[d], consumer_var));
              if (ir::uses_var(o, civ.var)) continue;
              out[*it] = AxisIteration{
                  st.indices[d]->name,
                  ir::simplify(ir::make_binary(ir::Op::Add, civ.offset, in_loop_terms(c, o)))};
            }
          return true;
        });
      });
      if (out.count(*it)) break;
    }
  }
  return out;
}

ir::LoopProgram add_statistic(const Schedule& s, const std::string& target, const LoopRef& loop,
                              const algebra::AugmentedStatistic& statistic,
                              const std::string& position, const std::string& primitive,
                              std::string* name) {
  const ir::LoopProgram& program = s.program();
  StmtPath path = find_block(program.body, target, primitive);
  StmtPath lpath = find_loop(program.body, loop, primitive);
  if (ir::uses_var(statistic.term, position))
    throw ScheduleError(primitive, "statistic " + statistic.var + " of block '" + target +
                                       "' depends on the position of loop '" + loop.var + "'");
  const ir::StmtNode& t = *path.back();
  const ir::StmtNode& st = *t.body;
  ir::Reducer reducer;
  ir::Expr target_term;
  internal_assert(match_reduction_update(st, &reducer, &target_term))
      << "add_statistic: block '" << target << "' is not a reduction";
  DType type = st.value->type;
  *name = s.fresh_name(target + "." + statistic.var);
  std::string buffer = s.fresh_name(st.buffer + "." + statistic.var);
  ir::Expr term =
      statistic.term->type == type ? statistic.term : ir::make_cast(type, statistic.term);
  ir::StmtNode b = t;
  b.name = *name;
  b.init = ir::make_store(buffer, st.indices, reducer_identity_expr(reducer, type));
  b.body = ir::make_store(buffer, st.indices,
                          combine(reducer, ir::make_load(buffer, type, st.indices), term));
  ir::Stmt nest = std::make_shared<const ir::StmtNode>(std::move(b));
  for (size_t k = path.size() - 1; k-- > lpath.size();)
    if (path[k]->kind == ir::StmtKind::For)
      nest = ir::make_for(path[k]->var, path[k]->min, path[k]->extent, path[k]->for_kind, nest);
  ir::LoopProgram p = program;
  ir::StmtNode l = *lpath.back();
  l.body = ir::make_seq({l.body, nest});
  p.body = replace_at(lpath, std::make_shared<const ir::StmtNode>(std::move(l)));
  p.buffers.push_back(ir::Buffer{buffer, type, program.find_buffer(st.buffer)->shape,
                                 ir::BufferRole::Intermediate, "global"});
  return p;
}

}  // namespace kintsugi::schedule
