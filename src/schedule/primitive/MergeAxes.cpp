// \file MergeAxes.cpp
// The loop rewrite shared by merge_reduce_axes and merge_map_axes (see MergeAxes.h).
//
// Invariant: the block runs once for each point of the merged axes, in the order the loops ran
// them (h outer, d inner: h_d = h * D + d).
#include "schedule/primitive/MergeAxes.h"

#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"

namespace kintsugi::schedule {

MergedAxes merge_axes(const Schedule& s, const std::string& block, const std::vector<size_t>& axes,
                      const std::string& P) {
  using ir::Op;
  StmtPath path = find_block(s.program().body, block, P);
  const ir::StmtNode& b = *path.back();
  std::vector<const ir::StmtNode*> loops = loops_on(path);
  if (loops.size() < axes.size())
    throw ScheduleError(P, "block '" + block + "' has fewer loops than axes to merge");
  const size_t first = loops.size() - axes.size();
  for (size_t a = 0; a < axes.size(); ++a) {
    const ir::IterVar& iv = b.iters[axes[a]];
    const ir::StmtNode& l = *loops[first + a];
    if (iv.binding->op != Op::Var || iv.binding->name != l.var || ir::as_const_int(l.min) != 0 ||
        !ir::equal(l.extent, iv.extent))
      throw ScheduleError(P, "the axis '" + iv.name + "' of block '" + block +
                                 "' is not bound to the loop at its place among the innermost "
                                 "loops, from 0 over its extent");
    for (size_t o = first; o < first + a; ++o)
      if (ir::uses_var(l.extent, loops[o]->var))
        throw ScheduleError(
            P, "the extent of loop '" + l.var + "' depends on loop '" + loops[o]->var + "'");
  }
  MergedAxes out;
  std::string name;
  for (size_t a : axes) name += (name.empty() ? "" : "_") + b.iters[a].name;
  out.name = s.fresh_name(name);
  for (size_t a : axes)
    out.extent =
        out.extent ? ir::make_binary(Op::Mul, out.extent, b.iters[a].extent) : b.iters[a].extent;
  out.extent = ir::simplify(out.extent);

  // Axis a is (merged / (the extents inside it)) % its extent; the outermost needs no modulo.
  std::map<std::string, ir::Expr> iter_values, loop_values;
  out.values.resize(axes.size());
  ir::Expr inside = ir::make_int(1);
  for (size_t a = axes.size(); a-- > 0;) {
    const ir::IterVar& iv = b.iters[axes[a]];
    ir::Expr value = ir::as_const_int(inside) == 1
                         ? var(out.name)
                         : ir::make_binary(Op::Div, var(out.name), inside);
    if (a > 0) value = ir::make_binary(Op::Mod, value, iv.extent);
    value = ir::simplify(value);
    out.values[a] = value;
    iter_values[iv.name] = value;
    loop_values[loops[first + a]->var] = value;
    inside = ir::simplify(ir::make_binary(Op::Mul, iv.extent, inside));
  }
  std::vector<ir::IterVar> iters;
  for (size_t k = 0; k < b.iters.size(); ++k) {
    if (k == axes.front())
      iters.push_back(ir::IterVar{out.name, out.extent, b.iters[k].kind, var(out.name)});
    if (std::find(axes.begin(), axes.end(), k) == axes.end()) iters.push_back(b.iters[k]);
  }
  auto rewrite = [&](const ir::Stmt& st) {
    return st ? ir::mutate_exprs(
                    st,
                    [&](const ir::Expr& e) { return ir::simplify(ir::substitute(e, iter_values)); })
              : st;
  };
  ir::Expr predicate =
      b.predicate ? ir::simplify(ir::substitute(b.predicate, loop_values)) : nullptr;
  ir::Stmt nest =
      ir::make_for(out.name, ir::make_int(0), out.extent, ir::ForKind::Serial,
                   ir::make_block(b.name, iters, rewrite(b.init), rewrite(b.body), predicate));
  StmtPath outer = path;
  while (outer.back() != loops[first]) outer.pop_back();
  out.program = s.program();
  out.program.body = replace_at(outer, nest);
  return out;
}

}  // namespace kintsugi::schedule
