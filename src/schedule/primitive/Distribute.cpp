// \file Distribute.cpp
// distribute(loop, factor): strip-mines a data-parallel loop and pushes the inner strip into
// every leaf nest of its body.
//
//   for i in [0, E):            for i0 in [0, ceil(E / f)):
//     nest A                      for i1 in [0, f): nest A      (i = i0 * f + i1)
//     for j in [0, n(i)):   =>    for j in [0, max over i1 of n(i)):
//       nest B                      for i1 in [0, f): nest B    (where j < n(i))
//
// This is what turns a row-at-a-time fused program into one that works on a tile of rows: each
// leaf nest then covers f rows at once, and a serial loop between them (the tile loop of a
// rolling update) runs once for the whole strip. It is legal because the iterations of `loop`
// are independent: every block under it binds the loop only to spatial iteration variables and
// writes only elements indexed by them, so different iterations touch different elements and
// may run in any interleaving. A serial loop whose bounds depend on the row is widened to the
// largest bound in the strip, and its blocks get a predicate that keeps exactly the original
// iterations; a reduction that would start (run its init) in a widened iteration is refused.
// Allocations are not allowed under the loop (compact buffers after distributing).
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"
#include "schedule/primitive/Split.h"

namespace kintsugi::schedule {

namespace {

const std::string kPrimitive = "distribute";

// A chain of loops ending in one block, with nothing else in between.
bool is_leaf_nest(const ir::Stmt& s) {
  const ir::StmtNode* n = s.get();
  while (n->kind == ir::StmtKind::For) n = n->body.get();
  return n->kind == ir::StmtKind::Block;
}

bool expr_uses(const ir::Expr& e, const std::string& v) {
  return e && ir::uses_var(e, v);
}

// Every iteration of `loop` touches its own elements (see the file comment).
void check_independent(const ir::StmtNode& loop) {
  ir::visit(loop.body, [&](const ir::Stmt& n) {
    if (n->kind == ir::StmtKind::Allocate)
      throw ScheduleError(kPrimitive, "loop '" + loop.var + "' holds an allocation of '" +
                                          n->buffer + "'; distribute before compact_buffer");
    if (n->kind == ir::StmtKind::If)
      throw ScheduleError(kPrimitive, "loop '" + loop.var + "' holds a conditional statement");
    if (n->kind != ir::StmtKind::Block) return true;
    std::set<std::string> row_iters;
    for (const ir::IterVar& iv : n->iters) {
      if (!expr_uses(iv.binding, loop.var)) continue;
      if (iv.kind != ir::IterKind::Spatial)
        throw ScheduleError(kPrimitive, "block '" + n->name + "' reduces or scans over loop '" +
                                            loop.var + "' (iteration variable '" + iv.name +
                                            "'), so its iterations are not independent");
      row_iters.insert(iv.name);
    }
    auto check_store = [&](const ir::Stmt& st) {
      ir::visit(st, [&](const ir::Stmt& s) {
        if (s->kind != ir::StmtKind::Store) return true;
        bool indexed = false;
        for (const ir::Expr& idx : s->indices)
          for (const std::string& r : row_iters) indexed = indexed || ir::uses_var(idx, r);
        if (!indexed)
          throw ScheduleError(kPrimitive, "block '" + n->name + "' writes '" + s->buffer +
                                              "' at an element shared by all iterations of loop '" +
                                              loop.var + "'");
        return false;
      });
    };
    check_store(n->body);
    if (n->init) check_store(n->init);
    return false;
  });
}

// A reduction whose first iteration is reached through `loop_var` would lose its init when the
// widened iterations are predicated off.
void check_widenable(const ir::StmtNode& loop) {
  for (const ir::StmtNode* b : blocks_under(loop.body)) {
    if (!b->init) continue;
    for (const ir::IterVar& iv : b->iters)
      if (iv.kind != ir::IterKind::Spatial && expr_uses(iv.binding, loop.var))
        throw ScheduleError(kPrimitive, "the bounds of loop '" + loop.var +
                                            "' depend on the row, and block '" + b->name +
                                            "' starts a reduction over it");
  }
}

class Distributor {
 public:
  Distributor(std::string inner, ir::Expr factor)
      : inner_(std::move(inner)), factor_(std::move(factor)) {}

  ir::Stmt push(const ir::Stmt& s) const {
    if (s->kind == ir::StmtKind::Seq) {
      std::vector<ir::Stmt> out;
      for (const ir::Stmt& c : s->stmts) out.push_back(push(c));
      return ir::make_seq(std::move(out));
    }
    if (is_leaf_nest(s))
      return ir::make_for(inner_, ir::make_int(0), factor_, ir::ForKind::Serial, s);
    internal_assert(s->kind == ir::StmtKind::For) << "distribute met an unexpected statement";
    ir::StmtNode loop = *s;
    if (expr_uses(s->min, inner_) || expr_uses(s->extent, inner_)) {
      check_widenable(*s);
      std::map<std::string, Range> strip = {{inner_, Range{ir::make_int(0), factor_}}};
      ir::Expr end = ir::simplify(ir::make_binary(ir::Op::Add, s->min, s->extent));
      Interval first = bound(s->min, strip), last = bound(end, strip);
      if (!first.ok || !last.ok)
        throw ScheduleError(kPrimitive,
                            "cannot bound the range of loop '" + s->var + "' over a strip of rows");
      loop.min = ir::simplify(first.lo);
      loop.extent = ir::simplify(ir::make_binary(ir::Op::Sub, last.hi, first.lo));
      ir::Expr v = var(s->var);
      ir::Expr keep = ir::make_binary(ir::Op::Lt, v, end);
      if (expr_uses(s->min, inner_))
        keep = ir::make_binary(ir::Op::And, ir::make_binary(ir::Op::Ge, v, s->min), keep);
      loop.body = add_block_predicate(loop.body, keep);
    }
    loop.body = push(loop.body);
    return std::make_shared<const ir::StmtNode>(std::move(loop));
  }

 private:
  std::string inner_;
  ir::Expr factor_;
};

}  // namespace

std::vector<LoopRef> Schedule::distribute(const LoopRef& loop, const ir::Expr& factor) {
  StmtPath path = find_loop(program_.body, loop, kPrimitive);
  const ir::StmtNode& f = *path.back();
  check_independent(f);
  StripMine sm = strip_mine(*this, f, factor, kPrimitive);
  ir::Stmt body = Distributor(sm.inner, factor).push(sm.body);
  ir::LoopProgram p = program_;
  p.body =
      replace_at(path, ir::make_for(sm.outer, ir::make_int(0), sm.outer_extent, f.for_kind, body));
  commit(std::move(p), {{"primitive", kPrimitive},
                        {"block", loop.block},
                        {"loop", loop.var},
                        {"factor", factor_json(factor)}});
  return {LoopRef{loop.block, sm.outer}, LoopRef{loop.block, sm.inner}};
}

void replay_distribute(Schedule& s, const nlohmann::json& j) {
  s.distribute(loop_arg(j), factor_arg(j.at("factor")));
}

}  // namespace kintsugi::schedule
