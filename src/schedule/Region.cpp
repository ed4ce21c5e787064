// \file Region.cpp
// Region inference (see Region.h).
#include "schedule/Region.h"

#include <functional>
#include <set>

#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"

namespace kintsugi::schedule {

using ir::Expr;
using ir::Op;

bool Interval::is_point() const {
  return ok && ir::equal(lo, hi);
}

namespace {
Expr add(const Expr& a, const Expr& b) {
  return ir::simplify(ir::make_binary(Op::Add, a, b));
}
Expr sub(const Expr& a, const Expr& b) {
  return ir::simplify(ir::make_binary(Op::Sub, a, b));
}
Expr mul(const Expr& a, const Expr& b) {
  return ir::simplify(ir::make_binary(Op::Mul, a, b));
}
Interval point(const Expr& e) {
  return Interval{e, e, true};
}
Interval unknown() {
  return Interval{};
}
}  // namespace

Interval bound(const Expr& e, const std::map<std::string, Range>& varying) {
  switch (e->op) {
    case Op::IntImm:
      return point(e);
    case Op::Var: {
      auto it = varying.find(e->name);
      if (it == varying.end()) return point(e);
      return Interval{it->second.min, sub(add(it->second.min, it->second.extent), ir::make_int(1)),
                      true};
    }
    case Op::Add:
    case Op::Sub: {
      Interval a = bound(e->args[0], varying), b = bound(e->args[1], varying);
      if (!a.ok || !b.ok) return unknown();
      if (e->op == Op::Add) return Interval{add(a.lo, b.lo), add(a.hi, b.hi), true};
      return Interval{sub(a.lo, b.hi), sub(a.hi, b.lo), true};
    }
    case Op::Neg: {
      Interval a = bound(e->args[0], varying);
      if (!a.ok) return unknown();
      return Interval{ir::simplify(ir::make_unary(Op::Neg, a.hi)),
                      ir::simplify(ir::make_unary(Op::Neg, a.lo)), true};
    }
    case Op::Mul: {
      Interval a = bound(e->args[0], varying), b = bound(e->args[1], varying);
      if (!a.ok || !b.ok) return unknown();
      if (a.is_point() && b.is_point()) return point(mul(a.lo, b.lo));
      // One side must be a constant to know the direction.
      auto ca = ir::as_const_int(a.is_point() ? a.lo : nullptr),
           cb = ir::as_const_int(b.is_point() ? b.lo : nullptr);
      if (cb) std::swap(a, b), std::swap(ca, cb);
      if (!ca) return unknown();
      if (*ca >= 0) return Interval{mul(a.lo, b.lo), mul(a.lo, b.hi), true};
      return Interval{mul(a.lo, b.hi), mul(a.lo, b.lo), true};
    }
    case Op::Div:
    case Op::Mod: {
      Interval a = bound(e->args[0], varying), b = bound(e->args[1], varying);
      if (!a.ok || !b.ok || !b.is_point()) return unknown();
      if (a.is_point()) return point(ir::simplify(ir::make_binary(e->op, a.lo, b.lo)));
      auto c = ir::as_const_int(b.lo);
      if (!c || *c <= 0) return unknown();
      if (e->op == Op::Div)
        return Interval{ir::simplify(ir::make_binary(Op::Div, a.lo, b.lo)),
                        ir::simplify(ir::make_binary(Op::Div, a.hi, b.lo)), true};
      return Interval{ir::make_int(0), ir::make_int(*c - 1), true};
    }
    case Op::Min:
    case Op::Max: {
      Interval a = bound(e->args[0], varying), b = bound(e->args[1], varying);
      if (!a.ok || !b.ok) return unknown();
      auto f = [&](const Expr& x, const Expr& y) {
        return ir::simplify(ir::make_binary(e->op, x, y));
      };
      return Interval{f(a.lo, b.lo), f(a.hi, b.hi), true};
    }
    case Op::Select: {
      // Either branch: the hull of both (a split-K chunk's walk that runs one masked tile only
      // in the first chunk of a row with no live tile).
      if (e->type != DType::Int) return unknown();
      Interval a = bound(e->args[1], varying), b = bound(e->args[2], varying);
      if (!a.ok || !b.ok) return unknown();
      return Interval{ir::simplify(ir::make_binary(Op::Min, a.lo, b.lo)),
                      ir::simplify(ir::make_binary(Op::Max, a.hi, b.hi)), true};
    }
    default: {
      // Anything else is a point when it does not vary.
      bool varies = false;
      for (const auto& [name, r] : varying) varies |= ir::uses_var(e, name);
      return varies ? unknown() : point(e);
    }
  }
}

Expr in_loop_terms(const ir::StmtNode& block, const Expr& index) {
  std::map<std::string, Expr> sub;
  for (const ir::IterVar& iv : block.iters) sub[iv.name] = iv.binding;
  return ir::simplify(ir::substitute(index, sub));
}

namespace {
// Walks s collecting loop ranges; calls f on every block with the ranges of its enclosing loops.
void walk(const ir::Stmt& s, std::map<std::string, Range>& loops,
          const std::function<void(const ir::StmtNode&, const std::map<std::string, Range>&)>& f) {
  if (!s) return;
  switch (s->kind) {
    case ir::StmtKind::Seq:
      for (const ir::Stmt& c : s->stmts) walk(c, loops, f);
      return;
    case ir::StmtKind::For: {
      auto saved = loops;
      loops[s->var] = Range{s->min, s->extent};
      walk(s->body, loops, f);
      loops = saved;
      return;
    }
    case ir::StmtKind::If:
      walk(s->then_case, loops, f);
      walk(s->else_case, loops, f);
      return;
    case ir::StmtKind::Block:
      f(*s, loops);
      return;
    case ir::StmtKind::Allocate:
      walk(s->body, loops, f);
      return;
    case ir::StmtKind::Store:
      return;
  }
}
}  // namespace

bool access_region(const ir::Stmt& s, const ir::LoopProgram& program, const std::string& buffer,
                   bool writes, std::vector<Range>* region) {
  const ir::Buffer* buf = program.find_buffer(buffer);
  internal_assert(buf) << "access_region: unknown buffer " << buffer;
  size_t rank = buf->shape.size();
  std::vector<Interval> box(rank);
  bool any = false;
  auto merge = [&](size_t d, const Interval& iv) {
    if (!box[d].ok && !any) {
      box[d] = iv;
      return;
    }
    if (!box[d].ok || !iv.ok) {
      box[d] = Interval{};
      return;
    }
    if (!ir::equal(box[d].lo, iv.lo))
      box[d].lo = ir::simplify(ir::make_binary(Op::Min, box[d].lo, iv.lo));
    if (!ir::equal(box[d].hi, iv.hi))
      box[d].hi = ir::simplify(ir::make_binary(Op::Max, box[d].hi, iv.hi));
  };
  std::vector<bool> seen(rank, false);
  auto on_access = [&](const ir::StmtNode& block, const std::map<std::string, Range>& loops,
                       const std::vector<Expr>& idx) {
    for (size_t d = 0; d < rank; ++d) {
      Interval iv = bound(in_loop_terms(block, idx[d]), loops);
      if (!seen[d]) {
        box[d] = iv;
        seen[d] = true;
      } else {
        merge(d, iv);
      }
    }
    any = true;
  };
  std::map<std::string, Range> loops;
  walk(s, loops, [&](const ir::StmtNode& block, const std::map<std::string, Range>& ls) {
    for (const ir::Stmt& part : {block.init, block.body}) {
      if (!part) continue;
      if (writes) {
        ir::visit(part, [&](const ir::Stmt& st) {
          if (st->kind == ir::StmtKind::Store && st->buffer == buffer)
            on_access(block, ls, st->indices);
          return true;
        });
      } else {
        ir::visit_exprs(part, [&](const Expr& e) {
          ir::visit(e, [&](const Expr& x) {
            if (x->op == Op::Load && x->name == buffer) on_access(block, ls, x->args);
            return true;
          });
        });
      }
    }
  });
  if (!any) return false;
  region->clear();
  for (size_t d = 0; d < rank; ++d) {
    if (box[d].ok)
      region->push_back(Range{
          box[d].lo,
          ir::simplify(ir::make_binary(Op::Add, sub(box[d].hi, box[d].lo), ir::make_int(1)))});
    else
      region->push_back(Range{ir::make_int(0), buf->shape[d]});
  }
  return true;
}

// The tile of the reduction axis that one iteration of the loop covers (see Region.h).
bool find_axis_tile(const ir::LoopProgram& p, const ir::StmtNode& loop, const ir::StmtNode& target,
                    const ir::IterVar& axis, Range* tile, bool* of_chunk) {
  const ir::Expr& axis_extent = axis.extent;
  // The target's reads at `offset + axis`: buffer, dimension and the offset in loop terms.
  struct Shifted {
    std::string buffer;
    size_t dim;
    ir::Expr offset;
  };
  // Followed through the producers: a block storing a shifted buffer's dimension at its
  // variable v reads its own inputs at o + v, shifted by the sum of both offsets (the exponentials
  // of a chunk that its sum reads, computed from the scores).
  std::vector<Shifted> shifted;
  std::map<std::string, const ir::StmtNode*> writers = block_writers(p.body);
  std::set<std::string> seen;
  std::function<void(const ir::StmtNode&, const std::string&, const ir::Expr&)> reads_of =
      [&](const ir::StmtNode& block, const std::string& v, const ir::Expr& base) {
        ir::Expr v_expr = ir::make_var(v, ir::VarKind::Index, DType::Int);
        for (const ir::Stmt& part : {block.init, block.body}) {
          if (!part) continue;
          ir::visit_exprs(part, [&](const ir::Expr& e) {
            ir::visit(e, [&](const ir::Expr& x) {
              if (x->op != ir::Op::Load) return true;
              for (size_t d = 0; d < x->args.size(); ++d) {
                if (!ir::uses_var(x->args[d], v)) continue;
                ir::Expr o = sub(x->args[d], v_expr);
                if (ir::uses_var(o, v)) continue;
                ir::Expr offset = add(base, in_loop_terms(block, o));
                shifted.push_back(Shifted{x->name, d, offset});
                auto w = writers.find(x->name);
                if (w == writers.end() || !seen.insert(x->name).second) continue;
                const ir::StmtNode& wb = *w->second;
                if (!wb.body || wb.body->kind != ir::StmtKind::Store ||
                    d >= wb.body->indices.size())
                  continue;
                const ir::Expr& stored = wb.body->indices[d];
                if (stored->op == ir::Op::Var) reads_of(wb, stored->name, offset);
              }
              return true;
            });
          });
        }
      };
  reads_of(target, axis.name, ir::make_int(0));
  bool found = false, by_iters = false;
  std::map<std::string, Range> inner;
  std::function<void(const ir::Stmt&)> walk = [&](const ir::Stmt& s) {
    if (!s || found) return;
    switch (s->kind) {
      case ir::StmtKind::Seq:
        for (const ir::Stmt& c : s->stmts) walk(c);
        return;
      case ir::StmtKind::For: {
        auto saved = inner;
        inner[s->var] = Range{s->min, s->extent};
        walk(s->body);
        inner = saved;
        return;
      }
      case ir::StmtKind::If:
        walk(s->then_case);
        return;
      case ir::StmtKind::Allocate:
        walk(s->body);
        return;
      case ir::StmtKind::Store:
        return;
      case ir::StmtKind::Block:
        break;
    }
    // Whether index `index` of the block spans [origin + v * F, origin + v * F + F) for one of
    // the origins, v the loop's variable and the loop running ceil(extent / F) times.
    auto try_span = [&](const ir::Expr& index, const std::vector<ir::Expr>& origins) {
      Interval iv = bound(in_loop_terms(*s, index), inner);
      if (!iv.ok) return;
      ir::Expr ext = ir::simplify(ir::make_binary(
          ir::Op::Add, ir::make_binary(ir::Op::Sub, iv.hi, iv.lo), ir::make_int(1)));
      auto f = ir::as_const_int(ext);
      if (!f || *f <= 0) return;
      ir::Expr start = ir::make_binary(
          ir::Op::Mul, ir::make_var(loop.var, ir::VarKind::Index, DType::Int), ir::make_int(*f));
      ir::Expr count = ir::simplify(ir::make_binary(
          ir::Op::Div, ir::make_binary(ir::Op::Add, axis_extent, ir::make_int(*f - 1)),
          ir::make_int(*f)));
      if (!ir::provably_equal(loop.extent, count)) return;
      for (const ir::Expr& origin : origins)
        if (ir::provably_equal(sub(iv.lo, origin), start)) {
          *tile = Range{ir::simplify(start), ext};
          if (of_chunk) *of_chunk = !ir::equal(origin, ir::make_int(0));
          found = true;
          return;
        }
    };
    auto try_access = [&](const std::string& buffer, const std::vector<ir::Expr>& idx) {
      const ir::Buffer* b = p.find_buffer(buffer);
      if (!b || found) return;
      for (size_t d = 0; d < idx.size() && d < b->shape.size() && !found; ++d) {
        // Where this dimension starts the axis: 0 for a dimension of the axis' extent, the
        // target's offset for a dimension the target reads shifted.
        std::vector<ir::Expr> origins;
        if (ir::equal(b->shape[d], axis_extent)) origins.push_back(ir::make_int(0));
        for (const Shifted& sh : shifted)
          if (sh.buffer == buffer && sh.dim == d) origins.push_back(sh.offset);
        if (!origins.empty()) try_span(idx[d], origins);
      }
    };
    for (const ir::Stmt& part : {s->init, s->body}) {
      if (!part || by_iters) continue;
      ir::visit(part, [&](const ir::Stmt& st) {
        if (st->kind == ir::StmtKind::Store) try_access(st->buffer, st->indices);
        return true;
      });
      ir::visit_exprs(part, [&](const ir::Expr& e) {
        ir::visit(e, [&](const ir::Expr& x) {
          if (x->op == ir::Op::Load) try_access(x->name, x->args);
          return true;
        });
      });
    }
    // Where no access does (by_iters: a second walk), a reduction axis of the same extent, which no
    // buffer has as a dimension (reductions over a flattened index,
    // `max[r: H * W](F[b, r / W, r % W])`): as a dimension of that extent, it is taken for the
    // target's axis. So is the partial of such a reduction split over the loop (split_k_update's
    // block `r.rf(spatial r0, reduce r1: F)`): its chunk r0 covers r0 * F + r1 of the axis.
    auto as_var = [](const ir::IterVar& iv) {
      return ir::make_var(iv.name, ir::VarKind::Index, DType::Int);
    };
    for (const ir::IterVar& iv : s->iters) {
      if (iv.kind == ir::IterKind::Spatial || found || !by_iters) continue;
      if (ir::equal(iv.extent, axis_extent)) try_span(as_var(iv), {ir::make_int(0)});
      for (const ir::IterVar& chunk : s->iters)
        if (chunk.kind == ir::IterKind::Spatial && !found &&
            ir::equal(chunk.binding, ir::make_var(loop.var, ir::VarKind::Index, DType::Int)) &&
            ir::provably_equal(chunk.extent, loop.extent) && ir::as_const_int(iv.extent))
          try_span(add(ir::make_binary(ir::Op::Mul, as_var(chunk), iv.extent), as_var(iv)),
                   {ir::make_int(0)});
    }
  };
  walk(loop.body);
  by_iters = true;
  walk(loop.body);
  return found;
}

}  // namespace kintsugi::schedule
