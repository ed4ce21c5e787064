// \file MergeReduceAxes.cpp
// merge_reduce_axes(block): a reduction over several axes, each bound to one of the innermost
// loops around the block (outermost first), becomes a reduction over one axis of the product of
// their extents; the block reads the axes it had as quotients and remainders of the new one:
//
//   for h in [0, H): for d in [0, D):                 for h_d in [0, H * D):
//     block s(reduce h:H, reduce d:D):          =>      block s(reduce h_d:H * D):
//       s = s + X[b, h, d]                                s = s + X[b, h_d / D, h_d % D]
//
// A chain of reductions over the same several axes (a group norm's mean and variance over
// (c, p)) then has one reduced axis, which fusion follows; where the tiles of that axis divide the
// innermost extent, the tile passes read X a run at a time (tile::within_run).
//
// Invariant: the block runs once for each point of the axes, in the order the loops ran them (h
// outer, d inner: h_d = h * D + d), so a reduction in any order, and a scan, gives what it gave.
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::string Schedule::merge_reduce_axes(const std::string& block) {
  const std::string P = "merge_reduce_axes";
  using ir::Op;
  StmtPath path = find_block(program_.body, block, P);
  const ir::StmtNode& b = *path.back();
  std::vector<const ir::StmtNode*> loops = loops_on(path);
  std::vector<size_t> axes;  // the block's reduce iterations, in the order of its loops
  for (size_t k = 0; k < b.iters.size(); ++k)
    if (b.iters[k].kind == ir::IterKind::Reduce) axes.push_back(k);
  if (axes.size() < 2)
    throw ScheduleError(P, "block '" + block + "' does not reduce over several axes");
  if (loops.size() < axes.size())
    throw ScheduleError(P, "block '" + block + "' has fewer loops than reduced axes");
  const size_t first = loops.size() - axes.size();
  for (size_t a = 0; a < axes.size(); ++a) {
    const ir::IterVar& iv = b.iters[axes[a]];
    const ir::StmtNode& l = *loops[first + a];
    if (iv.binding->op != Op::Var || iv.binding->name != l.var || ir::as_const_int(l.min) != 0 ||
        !ir::equal(l.extent, iv.extent))
      throw ScheduleError(P, "the reduced axis '" + iv.name + "' of block '" + block +
                                 "' is not bound to the loop at its place among the innermost "
                                 "loops, from 0 over its extent");
    for (size_t o = first; o < first + a; ++o)
      if (ir::uses_var(l.extent, loops[o]->var))
        throw ScheduleError(
            P, "the extent of loop '" + l.var + "' depends on loop '" + loops[o]->var + "'");
  }
  std::string name;
  for (size_t a : axes) name += (name.empty() ? "" : "_") + b.iters[a].name;
  name = fresh_name(name);
  ir::Expr extent;
  for (size_t a : axes)
    extent = extent ? ir::make_binary(Op::Mul, extent, b.iters[a].extent) : b.iters[a].extent;
  extent = ir::simplify(extent);

  // Axis a is (merged / (the extents inside it)) % its extent; the outermost needs no modulo.
  std::map<std::string, ir::Expr> iter_values, loop_values;
  ir::Expr inside = ir::make_int(1);
  for (size_t a = axes.size(); a-- > 0;) {
    const ir::IterVar& iv = b.iters[axes[a]];
    ir::Expr value =
        ir::as_const_int(inside) == 1 ? var(name) : ir::make_binary(Op::Div, var(name), inside);
    if (a > 0) value = ir::make_binary(Op::Mod, value, iv.extent);
    value = ir::simplify(value);
    iter_values[iv.name] = value;
    loop_values[loops[first + a]->var] = value;
    inside = ir::simplify(ir::make_binary(Op::Mul, iv.extent, inside));
  }
  std::vector<ir::IterVar> iters;
  for (size_t k = 0; k < b.iters.size(); ++k) {
    if (k == axes.front())
      iters.push_back(ir::IterVar{name, extent, ir::IterKind::Reduce, var(name)});
    if (b.iters[k].kind != ir::IterKind::Reduce) iters.push_back(b.iters[k]);
  }
  auto rewrite = [&](const ir::Stmt& s) {
    return s ? ir::mutate_exprs(s,
                                [&](const ir::Expr& e) { return ir::substitute(e, iter_values); })
             : s;
  };
  ir::Expr predicate =
      b.predicate ? ir::simplify(ir::substitute(b.predicate, loop_values)) : nullptr;
  ir::Stmt nest =
      ir::make_for(name, ir::make_int(0), extent, ir::ForKind::Serial,
                   ir::make_block(b.name, iters, rewrite(b.init), rewrite(b.body), predicate));
  StmtPath outer = path;
  while (outer.back() != loops[first]) outer.pop_back();
  ir::LoopProgram p = program_;
  p.body = replace_at(outer, nest);
  commit(std::move(p), {{"primitive", P}, {"block", block}});
  return name;
}

void replay_merge_reduce_axes(Schedule& s, const nlohmann::json& j) {
  s.merge_reduce_axes(j.at("block").get<std::string>());
}

}  // namespace kintsugi::schedule
