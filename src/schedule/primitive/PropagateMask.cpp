// \file PropagateMask.cpp
// propagate_mask(block, loop): skips the iterations of a tile loop in which a mask makes a whole
// tile dead. `block` (under `loop`) computes select(cond, v, K) with a constant K; each conjunct
// of cond that bounds the tiled axis variable linearly (a <= U or a >= L, e.g. the causal
// j <= i + T - S and the window i + T - S - j < W) narrows the loop to the tiles that hold at
// least one live element. Partially masked tiles still run, masked element by element.
//
// Checked, not trusted: skipping is only applied when every reduction under the loop that reads
// the masked values (through elementwise blocks) gets exactly its reducer's identity from K
// (max of -inf, sum of exp(-inf - m) = 0, ...; evaluated with the algebra engine's evaluator at
// random finite values of everything else), so a dead tile's partials are identities; the
// repaired write-backs then leave their accumulators unchanged (h(t, x, x) = t is part of every
// derived repair). Scans must have been split first (split_scan_buffer): a skipped iteration
// must not leave a hole in a scan buffer.
#include <algorithm>
#include <random>

#include "algebra/Eval.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

namespace {
void conjuncts(const ir::Expr& e, std::vector<ir::Expr>& out) {
  if (e->op == ir::Op::And) {
    conjuncts(e->args[0], out);
    conjuncts(e->args[1], out);
  } else {
    out.push_back(e);
  }
}
}  // namespace

void Schedule::propagate_mask(const std::string& block, const LoopRef& loop) {
  const std::string P = "propagate_mask";
  StmtPath path = find_block(program_.body, block, P);
  StmtPath lpath = find_loop(program_.body, loop, P);
  const ir::StmtNode& b = *path.back();
  const ir::StmtNode& l = *lpath.back();
  if (!b.body || b.body->kind != ir::StmtKind::Store || b.body->value->op != ir::Op::Select ||
      b.body->value->args[2]->op != ir::Op::FloatImm)
    throw ScheduleError(P, "block '" + block + "' does not compute select(cond, value, constant)");
  // A scan that still stores one entry per iteration (not split into prev / next) would keep
  // holes for the skipped iterations.
  for (const ir::StmtNode* s : blocks_under(l.body))
    for (const ir::IterVar& iv : s->iters)
      if (iv.kind == ir::IterKind::Scan && s->body && s->body->kind == ir::StmtKind::Store &&
          std::any_of(s->body->indices.begin(), s->body->indices.end(),
                      [&](const ir::Expr& i) { return ir::uses_var(i, iv.name); }))
        throw ScheduleError(P, "block '" + s->name + "' under loop '" + loop.var +
                                   "' is a scan; split_scan_buffer first");
  const ir::Expr cond = b.body->value->args[0];
  const double masked = b.body->value->args[2]->float_value;
  const std::string buffer = b.body->buffer;
  // The tiled axis variable: bound to lv * F + (loops inside lv).
  std::map<std::string, Range> inner;
  for (size_t k = lpath.size(); k < path.size(); ++k)
    if (path[k]->kind == ir::StmtKind::For)
      inner[path[k]->var] = Range{path[k]->min, path[k]->extent};
  std::string axis;
  int64_t factor = 0;
  std::map<std::string, ir::Expr> outer_binding;  // other iteration variables, in loop terms
  for (const ir::IterVar& iv : b.iters) {
    if (ir::uses_var(iv.binding, l.var)) {
      Interval r = bound(iv.binding, inner);
      ir::Expr ext =
          r.ok ? ir::simplify(ir::make_binary(ir::Op::Add, ir::make_binary(ir::Op::Sub, r.hi, r.lo),
                                              ir::make_int(1)))
               : nullptr;
      auto f = ext ? ir::as_const_int(ext) : std::nullopt;
      if (f &&
          ir::provably_equal(r.lo, ir::make_binary(ir::Op::Mul, var(l.var), ir::make_int(*f)))) {
        axis = iv.name;
        factor = *f;
      }
      continue;
    }
    for (const auto& [v, r] : inner)
      if (ir::uses_var(iv.binding, v)) outer_binding[iv.name] = nullptr;
    if (!outer_binding.count(iv.name)) outer_binding[iv.name] = iv.binding;
  }
  if (axis.empty())
    throw ScheduleError(P,
                        "block '" + block + "' has no variable tiled by loop '" + loop.var + "'");
  // Loop bounds from the conjuncts that bound the axis linearly.
  ir::Expr lo = l.min, hi = ir::simplify(ir::make_binary(ir::Op::Add, l.min, l.extent));
  bool narrowed = false;
  std::vector<ir::Expr> terms;
  conjuncts(cond, terms);
  auto at = [&](const ir::Expr& e, int64_t v) {
    return ir::simplify(ir::substitute(e, {{axis, ir::make_int(v)}}));
  };
  for (const ir::Expr& t : terms) {
    if (!ir::is_comparison(t->op) || t->op == ir::Op::Eq || t->op == ir::Op::Ne ||
        t->args[0]->type != DType::Int)
      continue;
    ir::Expr e = ir::make_binary(ir::Op::Sub, t->args[0], t->args[1]);  // e (op) 0
    ir::Expr e0 = at(e, 0), e1 = at(e, 1), e2 = at(e, 2);
    auto c = ir::as_const_int(ir::simplify(ir::make_binary(ir::Op::Sub, e1, e0)));
    if (!c || (*c != 1 && *c != -1) ||
        !ir::provably_equal(ir::make_binary(ir::Op::Sub, e2, e0), ir::make_int(2 * *c)))
      continue;
    // In loop terms; the rest must depend only on loops outside the tile loop.
    bool outer_only = true;
    ir::visit(e0, [&](const ir::Expr& x) {
      if (x->op == ir::Op::Var && x->var_kind == ir::VarKind::Index &&
          (!outer_binding.count(x->name) || !outer_binding.at(x->name)))
        outer_only = false;
      return true;
    });
    if (!outer_only) continue;
    std::map<std::string, ir::Expr> sub;
    for (const auto& [n, bnd] : outer_binding)
      if (bnd) sub[n] = bnd;
    ir::Expr rest = ir::simplify(ir::substitute(e0, sub));
    // Normalise to  c * a + rest <= adj.
    int64_t sign = (t->op == ir::Op::Ge || t->op == ir::Op::Gt) ? -1 : 1;
    int64_t adj = (t->op == ir::Op::Lt || t->op == ir::Op::Gt) ? -1 : 0;
    int64_t cc = sign * *c;
    ir::Expr r = sign == 1 ? rest : ir::simplify(ir::make_unary(ir::Op::Neg, rest));
    ir::Expr F = ir::make_int(factor);
    if (cc == 1) {  // a <= adj - r: live tiles have lv * F <= adj - r
      ir::Expr u = ir::simplify(ir::make_binary(ir::Op::Sub, ir::make_int(adj), r));
      ir::Expr h = ir::simplify(
          ir::make_binary(ir::Op::Add, ir::make_binary(ir::Op::Div, u, F), ir::make_int(1)));
      hi = ir::make_binary(ir::Op::Min, hi, h);
    } else {  // a >= r - adj: live tiles have lv * F + F - 1 >= r - adj
      ir::Expr lb = ir::simplify(ir::make_binary(ir::Op::Sub, r, ir::make_int(adj)));
      lo = ir::make_binary(ir::Op::Max, lo, ir::simplify(ir::make_binary(ir::Op::Div, lb, F)));
    }
    narrowed = true;
  }
  if (!narrowed)
    throw ScheduleError(
        P, "the mask of block '" + block + "' bounds no tile of loop '" + loop.var + "' linearly");
  // The check: every reduction under the loop that reads the masked values gets its identity.
  std::map<std::string, const ir::StmtNode*> maps;  // elementwise blocks under the loop
  for (const ir::StmtNode* s : blocks_under(l.body)) {
    bool is_map = s->body && s->body->kind == ir::StmtKind::Store;
    for (const ir::IterVar& iv : s->iters) is_map &= iv.kind == ir::IterKind::Spatial;
    if (is_map) maps[s->body->buffer] = s;
  }
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> dist(-4.0, 4.0);
  for (const ir::StmtNode* s : blocks_under(l.body)) {
    ir::Reducer red;
    ir::Expr g;
    if (!s->body || !match_reduction_update(*s->body, &red, &g)) continue;
    bool reads = false;
    std::function<ir::Expr(const ir::Expr&)> expand = [&](const ir::Expr& e) -> ir::Expr {
      return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
        if (n->op != ir::Op::Load) return n;
        if (n->name == buffer) {
          reads = true;
          return ir::make_float(masked, n->type);
        }
        auto it = maps.find(n->name);
        if (it == maps.end() || it->second == &b) return n;
        return expand(it->second->body->value);
      });
    };
    ir::Expr term = expand(g);
    if (!reads) continue;
    double identity = ir::reducer_identity(red);
    for (int trial = 0; trial < 8; ++trial) {
      std::map<std::string, double> values;
      double v = algebra::eval_ir(term, [&](const ir::Expr& n, double* out) {
        if (n->op != ir::Op::Load && n->op != ir::Op::Var) return false;
        std::string key = ir::to_string(n);
        if (!values.count(key)) values[key] = dist(rng);
        *out = values[key];
        return true;
      });
      if (!(v == identity))
        throw ScheduleError(P,
                            "block '" + s->name +
                                "' does not get its identity from a masked tile (its term gives " +
                                ir::format_double(v) + " where " + ir::format_double(identity) +
                                " is needed); skipping tiles would change the result");
    }
  }
  // Reductions over the tile loop initialise when its variable is 0, an iteration that may now
  // be skipped: their inits move before the loop first (decompose_reduction).
  Schedule tmp(program_);
  for (const ir::StmtNode* s : blocks_under(l.body)) {
    if (!s->init) continue;
    bool over_loop = false;
    for (const ir::IterVar& iv : s->iters)
      over_loop |= iv.kind != ir::IterKind::Spatial && ir::uses_var(iv.binding, l.var);
    if (over_loop) tmp.decompose_reduction(s->name, LoopRef{s->name, l.var});
  }
  StmtPath tpath = find_loop(tmp.program_.body, LoopRef{loop.block, l.var}, P);
  ir::StmtNode nl = *tpath.back();
  nl.min = ir::simplify(lo);
  nl.extent = ir::simplify(ir::make_binary(ir::Op::Sub, hi, lo));
  ir::LoopProgram p = tmp.program_;
  p.body = replace_at(tpath, std::make_shared<const ir::StmtNode>(std::move(nl)));
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"loop", loop_json(loop)}});
}

void replay_propagate_mask(Schedule& s, const nlohmann::json& j) {
  s.propagate_mask(j.at("block").get<std::string>(), loop_arg(j.at("loop")));
}

}  // namespace kintsugi::schedule
