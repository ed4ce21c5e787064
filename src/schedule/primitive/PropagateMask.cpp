// \file PropagateMask.cpp
// propagate_mask(block, loop): skips the iterations of a tile loop in which a mask makes a whole
// tile dead. `block` (under `loop`) computes select(cond, v, K) with a constant K (or
// select(cond, K, v), which keeps v where !cond holds; or the mask applied by arithmetic, as
// v + select(cond, -inf, 0): constant_mask); cond narrows
// the loop to a range of tiles that holds every live element: comparisons that bound the tiled
// axis variable linearly (a <= U or a >= L: the causal j <= i + T - S, the window
// i + T - S - j < W) and |e| < c (the bidirectional window |i - j| < W), intersected under &&
// and joined into their hull under || (the prefix LM j < P || j <= i). Partially masked tiles,
// and dead tiles inside the hull, still run, masked element by element. The tiles may start past
// an offset of the loops outside (the walk inside a split-K chunk: base + lv * F).
//
// Checked, not trusted: skipping is only applied when every reduction under the loop that reads
// the masked values (through elementwise blocks) gets exactly its reducer's identity from K
// (max of -inf, sum of exp(-inf - m) = 0, ...; evaluated with the algebra engine's evaluator at
// random finite values of everything else), so a dead tile's partials are identities; the
// repaired write-backs then leave their accumulators unchanged (h(t, x, x) = t is part of every
// derived repair). A row whose every tile is masked would then run no tile at all and keep its
// initial values; where the terms of such a row are NaN (exp(-inf - -inf) over a running maximum
// of -inf), rows with no live tile run one masked tile instead, so they end as the unskipped loop
// does. In a split-K chunk's walk that tile is run by the row's first chunk alone: the combine
// drops the other chunks, whose maximum kept its identity (the schedule's validation checks it
// as it checks every schedule). Scans must have been split first (split_scan_buffer): a skipped
// iteration must not leave a hole in a scan buffer.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/MaskedTerm.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

void Schedule::propagate_mask(const std::string& block, const LoopRef& loop) {
  const std::string P = "propagate_mask";
  StmtPath path = find_block(program_.body, block, P);
  StmtPath lpath = find_loop(program_.body, loop, P);
  const ir::StmtNode& b = *path.back();
  const ir::StmtNode& l = *lpath.back();
  const std::optional<ConstantMask> mask =
      b.body && b.body->kind == ir::StmtKind::Store ? constant_mask(b.body->value) : std::nullopt;
  if (!mask)
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
  const ir::Expr cond = mask->kept;
  const double masked = mask->masked;
  const std::string buffer = b.body->buffer;
  // The tiled axis variable: bound to lv * F + (loops inside lv).
  std::map<std::string, Range> inner;
  for (size_t k = lpath.size(); k < path.size(); ++k)
    if (path[k]->kind == ir::StmtKind::For)
      inner[path[k]->var] = Range{path[k]->min, path[k]->extent};
  std::string axis;
  int64_t factor = 0;
  ir::Expr base = ir::make_int(0);  // where tile 0 starts: 0, or a chunk's first element
  std::map<std::string, ir::Expr> outer_binding;  // other iteration variables, in loop terms
  for (const ir::IterVar& iv : b.iters) {
    if (ir::uses_var(iv.binding, l.var)) {
      Interval r = bound(iv.binding, inner);
      ir::Expr ext =
          r.ok ? ir::simplify(ir::make_binary(ir::Op::Add, ir::make_binary(ir::Op::Sub, r.hi, r.lo),
                                              ir::make_int(1)))
               : nullptr;
      auto f = ext ? ir::as_const_int(ext) : std::nullopt;
      // The tiled axis is the variable a tile spans; a block that also reads the tile's index
      // itself (a variable bound to the loop, one value a tile) keeps the axis. Its tiles may
      // start past an offset of loops outside this one (the tiles walked inside a chunk).
      if (!f || *f <= factor || !r.ok) continue;
      const ir::Expr offset = ir::simplify(
          ir::make_binary(ir::Op::Sub, r.lo, ir::make_binary(ir::Op::Mul, var(l.var), ext)));
      bool outside = !ir::uses_var(offset, l.var);
      for (const auto& [v, range] : inner) outside = outside && !ir::uses_var(offset, v);
      if (outside) {
        axis = iv.name;
        factor = *f;
        base = offset;
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
  // The live tiles: a range [lo, hi) of the tile loop that holds every tile with a live
  // element. A comparison that bounds the axis linearly bounds one side; a conjunction
  // intersects, a disjunction takes the hull of its sides (the prefix-LM j < P || j <= i);
  // |e| < c is -c < e < c (the bidirectional window). Anything else bounds nothing.
  struct TileRange {
    ir::Expr lo, hi;  // null: unbounded on that side
  };
  auto at = [&](const ir::Expr& e, int64_t v) {
    return ir::simplify(ir::substitute(e, {{axis, ir::make_int(v)}}));
  };
  std::map<std::string, ir::Expr> sub;
  for (const auto& [n, bnd] : outer_binding)
    if (bnd) sub[n] = bnd;
  const ir::Expr F = ir::make_int(factor);
  // One comparison `a op b`: the side of the live tiles it bounds, when linear in the axis with
  // a slope of +-1 and otherwise in loops outside the tile loop.
  auto compared = [&](ir::Op op, const ir::Expr& a, const ir::Expr& b) -> TileRange {
    if (op == ir::Op::Eq || op == ir::Op::Ne || a->type != DType::Int) return {};
    ir::Expr e = ir::make_binary(ir::Op::Sub, a, b);  // e (op) 0
    ir::Expr e0 = at(e, 0), e1 = at(e, 1), e2 = at(e, 2);
    auto c = ir::as_const_int(ir::simplify(ir::make_binary(ir::Op::Sub, e1, e0)));
    if (!c || (*c != 1 && *c != -1) ||
        !ir::provably_equal(ir::make_binary(ir::Op::Sub, e2, e0), ir::make_int(2 * *c)))
      return {};
    bool outer_only = true;
    ir::visit(e0, [&](const ir::Expr& x) {
      if (x->op == ir::Op::Var && x->var_kind == ir::VarKind::Index &&
          (!outer_binding.count(x->name) || !outer_binding.at(x->name)))
        outer_only = false;
      return true;
    });
    if (!outer_only) return {};
    ir::Expr rest = ir::simplify(ir::substitute(e0, sub));
    // Normalise to  c * a + rest <= adj.
    int64_t sign = (op == ir::Op::Ge || op == ir::Op::Gt) ? -1 : 1;
    int64_t adj = (op == ir::Op::Lt || op == ir::Op::Gt) ? -1 : 0;
    ir::Expr r = sign == 1 ? rest : ir::simplify(ir::make_unary(ir::Op::Neg, rest));
    // With a = base + lv * F + (0 .. F - 1):
    if (sign * *c == 1) {  // a <= adj - r: live tiles have base + lv * F <= adj - r
      ir::Expr u = ir::simplify(
          ir::make_binary(ir::Op::Sub, ir::make_binary(ir::Op::Sub, ir::make_int(adj), r), base));
      return {nullptr, ir::simplify(ir::make_binary(ir::Op::Add, ir::make_binary(ir::Op::Div, u, F),
                                                    ir::make_int(1)))};
    }
    // a >= r - adj: live tiles have base + lv * F + F - 1 >= r - adj
    ir::Expr lb = ir::simplify(
        ir::make_binary(ir::Op::Sub, ir::make_binary(ir::Op::Sub, r, ir::make_int(adj)), base));
    return {ir::simplify(ir::make_binary(ir::Op::Div, lb, F)), nullptr};
  };
  auto is_abs = [](const ir::Expr& e) { return e->op == ir::Op::Call && e->fn == ir::MathFn::Abs; };
  auto both = [](ir::Op op, const ir::Expr& a, const ir::Expr& b) {
    return a && b ? ir::make_binary(op, a, b) : nullptr;
  };
  auto either = [](ir::Op op, const ir::Expr& a, const ir::Expr& b) {
    return a && b ? ir::make_binary(op, a, b) : a ? a : b;
  };
  std::function<TileRange(const ir::Expr&)> live = [&](const ir::Expr& t) -> TileRange {
    if (t->op == ir::Op::And) {
      TileRange a = live(t->args[0]), b = live(t->args[1]);
      return {either(ir::Op::Max, a.lo, b.lo), either(ir::Op::Min, a.hi, b.hi)};
    }
    if (t->op == ir::Op::Or) {
      TileRange a = live(t->args[0]), b = live(t->args[1]);
      return {both(ir::Op::Min, a.lo, b.lo), both(ir::Op::Max, a.hi, b.hi)};
    }
    if (t->op == ir::Op::Not) {  // !(j > i + T - S): the complementary comparison of integers
      ir::Expr n = ir::simplify(t);
      return n->op == ir::Op::Not ? TileRange{} : live(n);
    }
    if (!ir::is_comparison(t->op)) return {};
    // |e| < c and c > |e|: -c < e < c.
    bool abs_left = (t->op == ir::Op::Lt || t->op == ir::Op::Le) && is_abs(t->args[0]);
    bool abs_right = (t->op == ir::Op::Gt || t->op == ir::Op::Ge) && is_abs(t->args[1]);
    if (abs_left || abs_right) {
      ir::Expr e = (abs_left ? t->args[0] : t->args[1])->args[0];
      ir::Expr c = abs_left ? t->args[1] : t->args[0];
      ir::Op below = abs_left ? t->op : (t->op == ir::Op::Gt ? ir::Op::Lt : ir::Op::Le);
      TileRange up = compared(below, e, c),
                down = compared(below, ir::make_unary(ir::Op::Neg, e), c);
      return {either(ir::Op::Max, up.lo, down.lo), either(ir::Op::Min, up.hi, down.hi)};
    }
    return compared(t->op, t->args[0], t->args[1]);
  };
  TileRange range = live(cond);
  if (!range.lo && !range.hi)
    throw ScheduleError(
        P, "the mask of block '" + block + "' bounds no tile of loop '" + loop.var + "' linearly");
  const ir::Expr end = ir::simplify(ir::make_binary(ir::Op::Add, l.min, l.extent));
  ir::Expr lo = l.min, hi = end;
  if (range.lo) lo = ir::make_binary(ir::Op::Max, lo, range.lo);
  if (range.hi) hi = ir::make_binary(ir::Op::Min, hi, range.hi);
  // The check: every reduction under the loop that reads the masked values gets its identity.
  std::map<std::string, const ir::StmtNode*> maps;  // elementwise blocks under the loop
  for (const ir::StmtNode* s : blocks_under(l.body)) {
    bool is_map = s->body && s->body->kind == ir::StmtKind::Store;
    for (const ir::IterVar& iv : s->iters) is_map &= iv.kind == ir::IterKind::Spatial;
    if (is_map) maps[s->body->buffer] = s;
  }
  // Buffers that reductions and scans under the loop write: in a row whose every tile is masked
  // they hold what masked terms gave (a running maximum of -inf).
  std::set<std::string> accumulated;
  for (const ir::StmtNode* s : blocks_under(l.body))
    if (s->body && s->body->kind == ir::StmtKind::Store && !maps.count(s->body->buffer))
      accumulated.insert(s->body->buffer);
  bool row_needs_a_tile = false;
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
    if (auto v = masked_term_differs(term, identity))
      throw ScheduleError(P, "block '" + s->name +
                                 "' does not get its identity from a masked tile (its term gives " +
                                 ir::format_double(*v) + " where " + ir::format_double(identity) +
                                 " is needed); skipping tiles would change the result");
    // A row whose every tile is masked: the accumulated values are a reducer's identity
    // (infinite) there. Where the term is then NaN (exp(-inf - -inf)), the skipped row must
    // still see it: such a row runs one masked tile. A finite value would depend on how many
    // tiles ran.
    for (double state :
         {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()}) {
      auto v = masked_term_differs(term, identity, [&](const ir::Expr& n, double* out) {
        if (n->op != ir::Op::Load || !accumulated.count(n->name)) return false;
        *out = state;
        return true;
      });
      if (!v) continue;
      if (!std::isnan(*v))
        throw ScheduleError(P, "block '" + s->name + "' gives " + ir::format_double(*v) +
                                   " on a row whose every tile is masked, where " +
                                   ir::format_double(identity) +
                                   " is needed; skipping tiles would change the result");
      row_needs_a_tile = true;
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
  ir::Expr extent;
  if (row_needs_a_tile) {
    // Rows with no live tile run one (fully masked) tile of the loop: the first live one would
    // start at lo, else the last tile.
    auto one = ir::make_int(1);
    ir::Expr one_lo = lo;
    if (range.lo)
      one_lo = ir::simplify(ir::make_binary(
          ir::Op::Max, l.min,
          ir::make_binary(ir::Op::Min, lo, ir::make_binary(ir::Op::Sub, end, one))));
    ir::Expr one_hi = ir::make_binary(
        ir::Op::Max, hi,
        ir::make_binary(ir::Op::Min, ir::make_binary(ir::Op::Add, one_lo, one), end));
    const std::optional<int64_t> at_zero = ir::as_const_int(base);
    if (at_zero && *at_zero == 0) {
      lo = one_lo, hi = one_hi;
    } else {
      // The walk inside a split-K chunk: the combine drops a chunk whose running maximum kept
      // its identity once another chunk has left it, so a dead chunk of a live row runs no tile
      // at all. A row with no live tile anywhere along the axis runs one masked tile, in its
      // first chunk, and ends as the unskipped walk does.
      const ir::Expr chunk_base = base;
      base = ir::make_int(0);
      const TileRange whole = live(cond);
      base = chunk_base;
      ir::Expr axis_extent;
      for (const ir::IterVar& iv : b.iters)
        if (iv.name == axis) axis_extent = iv.extent;
      const ir::Expr tiles = ir::make_binary(
          ir::Op::Div, ir::make_binary(ir::Op::Add, axis_extent, ir::make_int(factor - 1)), F);
      const ir::Expr first =
          whole.lo ? ir::make_binary(ir::Op::Max, whole.lo, ir::make_int(0)) : ir::make_int(0);
      const ir::Expr last = whole.hi ? ir::make_binary(ir::Op::Min, whole.hi, tiles) : tiles;
      const ir::Expr dead_first_chunk =
          ir::make_binary(ir::Op::And, ir::make_binary(ir::Op::Ge, first, last),
                          ir::make_binary(ir::Op::Eq, chunk_base, ir::make_int(0)));
      if (!ir::provably_equal(one_lo, lo)) lo = ir::make_select(dead_first_chunk, one_lo, lo);
      hi = ir::make_select(dead_first_chunk, one_hi, hi);
      extent = ir::make_binary(ir::Op::Max, ir::make_binary(ir::Op::Sub, hi, lo), ir::make_int(0));
    }
  }
  if (!extent) extent = ir::make_binary(ir::Op::Sub, hi, lo);
  StmtPath tpath = find_loop(tmp.program_.body, LoopRef{loop.block, l.var}, P);
  ir::StmtNode nl = *tpath.back();
  nl.min = ir::simplify(lo);
  nl.extent = ir::simplify(extent);
  ir::LoopProgram p = tmp.program_;
  p.body = replace_at(tpath, std::make_shared<const ir::StmtNode>(std::move(nl)));
  // A mask applied by arithmetic (v + select(c, -inf, 0)) is stored as the select it amounts to
  // wherever v is finite, select(kept, v, K): what the skipped tiles assume of the masked
  // elements, and the form the tile writers fold over whole tiles.
  if (mask->arithmetic) {
    StmtPath bpath = find_block(p.body, block, P);
    ir::StmtNode nb = *bpath.back();
    ir::StmtNode store = *nb.body;
    store.value =
        ir::make_select(mask->kept, mask->value, ir::make_float(mask->masked, store.value->type));
    nb.body = std::make_shared<const ir::StmtNode>(std::move(store));
    p.body = replace_at(bpath, std::make_shared<const ir::StmtNode>(std::move(nb)));
  }
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"loop", loop_json(loop)}});
}

void replay_propagate_mask(Schedule& s, const nlohmann::json& j) {
  s.propagate_mask(j.at("block").get<std::string>(), loop_arg(j.at("loop")));
}

}  // namespace kintsugi::schedule
