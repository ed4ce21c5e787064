// \file SplitGroups.cpp
// split_groups(loop, f): the innermost loop `for v in [0, E)` of a map's nest (one block, every
// iteration variable spatial, alone in its root-level nest) is cut into whole groups of f and a
// tail, in two nests:
//
//   for ..: for v in [0, E): map(v)          for ..: for v0 in [0, E / f): for v1 in [0, f):
//                                      =>              map(v0 * f + v1), where v / f reads v0
//                                            for ..: for v2 in [0, E - E / f * f):
//                                                      map.tail(E / f * f + v2)
//
// A map that reads a value per group of f elements through `v / f` (a scale per block of 128
// columns, a group's amax) then reads it once a group, at the group's own index, and its groups
// run over the same grid as the reduction that made the values, so the two kernels become one.
// The factor is an integer over sizes and params; it must be positive where the program runs
// (for a group's extent E / f that sizes a buffer, a nonpositive f is refused when the buffer is
// sized: a negative size or a division by zero).
//
// Invariant: the two nests run the map at every v in [0, E) once, as the loop did: v0 * f + v1
// covers [0, E / f * f) and the tail [E / f * f, E); v / f = v0 there, since 0 <= v1 < f.
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/ComputeAt.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::vector<LoopRef> Schedule::split_groups(const LoopRef& loop, const ir::Expr& factor) {
  const std::string P = "split_groups";
  using ir::Op;
  StmtPath path = find_loop(program_.body, loop, P);
  const ir::StmtNode& f = *path.back();
  auto refuse = [&](const std::string& why) {
    throw ScheduleError(P, "loop '" + loop.var + "' (around block '" + loop.block + "') " + why);
  };
  if (!ir::over_sizes_and_params(factor))
    refuse("can only be cut by an integer over sizes and params, not '" + ir::to_string(factor) +
           "'");
  if (auto c = ir::as_const_int(factor); c && *c <= 0)
    refuse("cannot be cut into groups of " + std::to_string(*c));
  if (ir::as_const_int(f.min) != 0) refuse("does not start at 0");
  if (!f.body || f.body->kind != ir::StmtKind::Block) refuse("does not directly hold its block");
  const ir::StmtNode& block = *f.body;
  if (program_.body->kind != ir::StmtKind::Seq || path.size() < 2 ||
      blocks_under(program_.body->stmts.at(root_index(program_, path))).size() != 1)
    refuse("is not in a root-level nest of its block alone");
  size_t at = block.iters.size();
  for (size_t k = 0; k < block.iters.size(); ++k) {
    const ir::IterVar& iv = block.iters[k];
    if (iv.kind != ir::IterKind::Spatial) refuse("holds a reduction, not a map");
    if (iv.binding->op == Op::Var && iv.binding->name == f.var) at = k;
  }
  if (at == block.iters.size()) refuse("binds no iteration variable of its block alone");
  const ir::IterVar& v = block.iters[at];

  const std::string outer = fresh_name(f.var + "0"), inner = fresh_name(f.var + "1");
  const std::string tail = fresh_name(f.var + "_tail");
  const ir::Expr groups = ir::simplify(ir::make_binary(Op::Div, f.extent, factor));
  const ir::Expr whole = ir::simplify(ir::make_binary(Op::Mul, groups, factor));

  // The groups: v = v0 * f + v1, and v / f is v0.
  std::vector<ir::IterVar> iters = block.iters;
  iters[at] = ir::IterVar{outer, groups, ir::IterKind::Spatial, var(outer)};
  iters.insert(iters.begin() + static_cast<long>(at) + 1,
               ir::IterVar{inner, factor, ir::IterKind::Spatial, var(inner)});
  const ir::Expr at_v = ir::simplify(
      ir::make_binary(Op::Add, ir::make_binary(Op::Mul, var(outer), factor), var(inner)));
  ir::Stmt body = ir::mutate_exprs(block.body, [&](const ir::Expr& e) {
    if (e->op == Op::Div && e->args[0]->op == Op::Var && e->args[0]->name == v.name &&
        ir::equal(e->args[1], factor))
      return var(outer);
    return e;
  });
  body = ir::mutate_exprs(body,
                          [&](const ir::Expr& e) { return ir::substitute(e, {{v.name, at_v}}); });
  ir::Expr predicate =
      block.predicate ? ir::simplify(ir::substitute(block.predicate, {{f.var, at_v}})) : nullptr;
  ir::Stmt groups_nest =
      ir::make_for(outer, ir::make_int(0), groups, f.for_kind,
                   ir::make_for(inner, ir::make_int(0), factor, ir::ForKind::Serial,
                                ir::make_block(block.name, iters, block.init, body, predicate)));

  // The tail: v = E / f * f + v2.
  const ir::Expr at_tail = ir::simplify(ir::make_binary(Op::Add, whole, var(tail)));
  std::vector<ir::IterVar> tail_iters = block.iters;
  tail_iters[at].binding = at_tail;
  ir::Expr tail_predicate =
      block.predicate ? ir::simplify(ir::substitute(block.predicate, {{f.var, at_tail}})) : nullptr;
  ir::Stmt tail_nest = ir::make_for(
      tail, ir::make_int(0), ir::simplify(ir::make_binary(Op::Sub, f.extent, whole)), f.for_kind,
      ir::make_block(fresh_name(block.name + ".tail"), tail_iters, block.init, block.body,
                     tail_predicate));

  // Each nest under its own copy of the loops around the split one.
  for (size_t k = path.size() - 1; k-- > 0;) {
    const ir::StmtNode& l = *path[k];
    if (l.kind != ir::StmtKind::For) continue;
    groups_nest = ir::make_for(l.var, l.min, l.extent, l.for_kind, groups_nest);
    tail_nest = ir::make_for(l.var, l.min, l.extent, l.for_kind, tail_nest);
  }
  const size_t root = root_index(program_, path);
  ir::StmtNode seq = *program_.body;
  seq.stmts[root] = groups_nest;
  seq.stmts.insert(seq.stmts.begin() + static_cast<long>(root) + 1, tail_nest);
  ir::LoopProgram p = program_;
  p.body = std::make_shared<const ir::StmtNode>(std::move(seq));
  commit(std::move(p), {{"primitive", P},
                        {"block", loop.block},
                        {"loop", loop.var},
                        {"factor", factor_json(factor)}});
  return {LoopRef{loop.block, outer}, LoopRef{loop.block, inner}};
}

void replay_split_groups(Schedule& s, const nlohmann::json& j) {
  s.split_groups(loop_arg(j), factor_arg(j.at("factor")));
}

}  // namespace kintsugi::schedule
