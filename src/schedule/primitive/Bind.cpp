// \file Bind.cpp
// bind(loop, axis): marks a data-parallel loop as a grid axis: its iterations run in parallel
// (CTAs on a GPU, threads on the CPU). Checked: every block under the loop uses the loop only in
// spatial iteration variables, so distinct iterations write distinct elements, and no block
// reads an element that another iteration writes (every buffer written under the loop is read
// there only at the writer's own spatial position).
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

namespace {
const std::set<std::string> kAxes = {"grid.x", "grid.y", "grid.z"};

// An access index in terms of loop variables: the block's iteration variables replaced by their
// bindings.
ir::Expr in_loop_terms(const ir::StmtNode& block, const ir::Expr& index) {
  std::map<std::string, ir::Expr> sub;
  for (const ir::IterVar& iv : block.iters) sub[iv.name] = iv.binding;
  return ir::simplify(ir::substitute(index, sub));
}

// Every read under the loop of a buffer written under the loop must hit the writer's own
// iteration: some dimension's index, in loop terms, must equal the writer's and move with `var`.
void check_no_cross_iteration_reads(const std::vector<const ir::StmtNode*>& blocks,
                                    const std::string& var) {
  for (const ir::StmtNode* w : blocks) {
    ir::visit(w->body, [&](const ir::Stmt& st) {
      if (st->kind != ir::StmtKind::Store) return true;
      std::vector<ir::Expr> written;
      for (const ir::Expr& i : st->indices) written.push_back(in_loop_terms(*w, i));
      for (const ir::StmtNode* r : blocks) {
        ir::visit_exprs(r->body, [&](const ir::Expr& e) {
          ir::visit(e, [&](const ir::Expr& x) {
            if (x->op != ir::Op::Load || x->name != st->buffer) return true;
            bool same_iteration = false;
            for (size_t d = 0; d < x->args.size() && d < written.size(); ++d)
              same_iteration |= ir::uses_var(written[d], var) &&
                                ir::equal(in_loop_terms(*r, x->args[d]), written[d]);
            if (!same_iteration)
              throw ScheduleError("bind", "block '" + r->name + "' reads " + ir::to_string(x) +
                                              ", which other iterations of loop '" + var +
                                              "' write (block '" + w->name +
                                              "'); the loop is not data-parallel");
            return true;
          });
        });
      }
      return true;
    });
  }
}
}  // namespace

void Schedule::bind(const LoopRef& loop, const std::string& axis) {
  const std::string P = "bind";
  if (!kAxes.count(axis))
    throw ScheduleError(P, "unknown axis '" + axis + "'; use grid.x, grid.y or grid.z");
  StmtPath path = find_loop(program_.body, loop, P);
  const ir::StmtNode& f = *path.back();
  for (const ir::StmtNode* b : blocks_under(f.body)) {
    for (const ir::IterVar& iv : b->iters)
      if (iv.kind != ir::IterKind::Spatial && ir::uses_var(iv.binding, f.var))
        throw ScheduleError(
            P, "loop '" + f.var + "' drives the " +
                   std::string(iv.kind == ir::IterKind::Reduce ? "reduction" : "scan") +
                   " variable '" + iv.name + "' of block '" + b->name +
                   "'; only data-parallel loops can be bound");
    bool uses = false;
    for (const ir::IterVar& iv : b->iters) uses |= ir::uses_var(iv.binding, f.var);
    if (!uses)
      throw ScheduleError(
          P, "block '" + b->name + "' under loop '" + f.var +
                 "' does not depend on it: every iteration would write the same elements");
  }
  check_no_cross_iteration_reads(blocks_under(f.body), f.var);
  ir::StmtNode n = f;
  n.for_kind = ir::ForKind::Parallel;
  n.annotation = axis;
  ir::LoopProgram p = program_;
  p.body = replace_at(path, std::make_shared<const ir::StmtNode>(std::move(n)));
  commit(std::move(p),
         {{"primitive", P}, {"block", loop.block}, {"loop", loop.var}, {"axis", axis}});
}

void replay_bind(Schedule& s, const nlohmann::json& j) {
  s.bind(loop_arg(j), j.at("axis").get<std::string>());
}

}  // namespace kintsugi::schedule
