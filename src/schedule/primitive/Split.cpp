// \file Split.cpp
// split(loop, factor): `for v in [min, min + E)` becomes `for v0 in [0, ceil(E / f))` around
// `for v1 in [0, f)` with v = min + v0 * f + v1. When f may not divide E, every block under the
// loop gets the predicate v0 * f + v1 < E, so the tail iterations do nothing.
#include "ir/Simplify.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::vector<LoopRef> Schedule::split(const LoopRef& loop, int64_t factor) {
  const std::string P = "split";
  StmtPath path = find_loop(program_.body, loop, P);
  if (factor <= 0)
    throw ScheduleError(P, "the factor for loop '" + loop.var + "' (around block '" + loop.block +
                               "') must be positive, got " + std::to_string(factor));
  const ir::StmtNode& f = *path.back();
  std::string outer = fresh_name(f.var + "0");
  std::string inner = fresh_name(f.var + "1");
  if (inner == outer) inner = fresh_name(outer + "_1");
  ir::Expr fe = ir::make_int(factor);
  ir::Expr offset = ir::simplify(
      ir::make_binary(ir::Op::Add, ir::make_binary(ir::Op::Mul, var(outer), fe), var(inner)));
  ir::Expr value = ir::simplify(ir::make_binary(ir::Op::Add, f.min, offset));
  ir::Stmt body = substitute_loop_var(f.body, f.var, value);
  if (!ir::provably_divides(fe, f.extent))
    body = add_block_predicate(body, ir::make_binary(ir::Op::Lt, offset, f.extent));
  ir::Expr outer_extent = ir::simplify(ir::make_binary(
      ir::Op::Div, ir::make_binary(ir::Op::Add, f.extent, ir::make_int(factor - 1)), fe));
  ir::Stmt inner_loop = ir::make_for(inner, ir::make_int(0), fe, ir::ForKind::Serial, body);
  ir::Stmt outer_loop = ir::make_for(outer, ir::make_int(0), outer_extent, f.for_kind, inner_loop);
  ir::LoopProgram p = program_;
  p.body = replace_at(path, outer_loop);
  commit(std::move(p),
         {{"primitive", P}, {"block", loop.block}, {"loop", loop.var}, {"factor", factor}});
  return {LoopRef{loop.block, outer}, LoopRef{loop.block, inner}};
}

void replay_split(Schedule& s, const nlohmann::json& j) {
  s.split(loop_arg(j), j.at("factor").get<int64_t>());
}

}  // namespace kintsugi::schedule
