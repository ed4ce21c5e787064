// \file Split.cpp
// split(loop, factor): `for v in [min, min + E)` becomes `for v0 in [0, ceil(E / f))` around
// `for v1 in [0, f)` with v = min + v0 * f + v1. When f may not divide E, every block under the
// loop gets the predicate v0 * f + v1 < E, so the tail iterations do nothing. The factor is a
// constant or an integer expression over sizes (HQ / HK: the query heads that share a key/value
// head).
#include "schedule/primitive/Split.h"
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

StripMine strip_mine(const Schedule& s, const ir::StmtNode& f, const ir::Expr& factor,
                     const std::string& primitive) {
  if (!ir::over_sizes(factor))
    throw ScheduleError(primitive, "the factor for loop '" + f.var +
                                       "' must be an integer over sizes, got '" +
                                       ir::to_string(factor) + "'");
  if (auto c = ir::as_const_int(factor); c && *c <= 0)
    throw ScheduleError(primitive, "the factor for loop '" + f.var + "' must be positive, got " +
                                       std::to_string(*c));
  StripMine out;
  out.outer = s.fresh_name(f.var + "0");
  out.inner = s.fresh_name(f.var + "1");
  if (out.inner == out.outer) out.inner = s.fresh_name(out.outer + "_1");
  const ir::Expr& fe = factor;
  ir::Expr offset = ir::simplify(ir::make_binary(
      ir::Op::Add, ir::make_binary(ir::Op::Mul, var(out.outer), fe), var(out.inner)));
  ir::Expr value = ir::simplify(ir::make_binary(ir::Op::Add, f.min, offset));
  out.body = substitute_loop_var(f.body, f.var, value);
  if (!ir::provably_divides(fe, f.extent))
    out.body = add_block_predicate(out.body, ir::make_binary(ir::Op::Lt, offset, f.extent));
  out.outer_extent = ir::simplify(ir::make_binary(
      ir::Op::Div,
      ir::make_binary(ir::Op::Add, f.extent, ir::make_binary(ir::Op::Sub, fe, ir::make_int(1))),
      fe));
  return out;
}

std::vector<LoopRef> Schedule::split(const LoopRef& loop, const ir::Expr& factor) {
  const std::string P = "split";
  StmtPath path = find_loop(program_.body, loop, P);
  const ir::StmtNode& f = *path.back();
  StripMine sm = strip_mine(*this, f, factor, P);
  ir::Stmt inner_loop =
      ir::make_for(sm.inner, ir::make_int(0), factor, ir::ForKind::Serial, sm.body);
  ir::Stmt outer_loop =
      ir::make_for(sm.outer, ir::make_int(0), sm.outer_extent, f.for_kind, inner_loop);
  ir::LoopProgram p = program_;
  p.body = replace_at(path, outer_loop);
  commit(std::move(p), {{"primitive", P},
                        {"block", loop.block},
                        {"loop", loop.var},
                        {"factor", factor_json(factor)}});
  return {LoopRef{loop.block, sm.outer}, LoopRef{loop.block, sm.inner}};
}

void replay_split(Schedule& s, const nlohmann::json& j) {
  s.split(loop_arg(j), factor_arg(j.at("factor")));
}

}  // namespace kintsugi::schedule
