// \file Fuse.cpp
// fuse(outer, inner): a loop and the loop it directly holds become one loop f over the product
// of their extents, with outer = f / E_inner and inner = f % E_inner.
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

LoopRef Schedule::fuse(const LoopRef& outer, const std::string& inner) {
  const std::string P = "fuse";
  StmtPath path = find_loop(program_.body, outer, P);
  const ir::StmtNode& o = *path.back();
  if (!o.body || o.body->kind != ir::StmtKind::For || o.body->var != inner)
    throw ScheduleError(P, "loop '" + outer.var + "' (around block '" + outer.block +
                               "') does not directly hold loop '" + inner + "'");
  const ir::StmtNode& i = *o.body;
  if (ir::uses_var(i.extent, o.var) || ir::uses_var(i.min, o.var))
    throw ScheduleError(P, "the bounds of loop '" + inner + "' depend on loop '" + outer.var + "'");
  std::string fused = fresh_name(o.var + "_" + i.var);
  ir::Expr f = var(fused);
  using ir::Op;
  ir::Expr o_value =
      ir::simplify(ir::make_binary(Op::Add, o.min, ir::make_binary(Op::Div, f, i.extent)));
  ir::Expr i_value =
      ir::simplify(ir::make_binary(Op::Add, i.min, ir::make_binary(Op::Mod, f, i.extent)));
  ir::Stmt body = substitute_loop_var(substitute_loop_var(i.body, o.var, o_value), i.var, i_value);
  ir::Stmt loop =
      ir::make_for(fused, ir::make_int(0),
                   ir::simplify(ir::make_binary(Op::Mul, o.extent, i.extent)), o.for_kind, body);
  ir::LoopProgram p = program_;
  p.body = replace_at(path, loop);
  commit(std::move(p),
         {{"primitive", P}, {"block", outer.block}, {"loop", outer.var}, {"inner", inner}});
  return LoopRef{outer.block, fused};
}

void replay_fuse(Schedule& s, const nlohmann::json& j) {
  s.fuse(loop_arg(j), j.at("inner").get<std::string>());
}

}  // namespace kintsugi::schedule
