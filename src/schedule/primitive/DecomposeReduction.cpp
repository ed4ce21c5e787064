// \file DecomposeReduction.cpp
// decompose_reduction(block, loop): moves the init statement of a reduction block into an init
// block of its own, placed just before `loop`, inside copies of the loops between `loop` and
// the block that drive its spatial iteration variables. The reduction block loses its init.
// After this, the accumulator is initialised once per output element before the loop that
// reduces, which is what loop-to-tile translation and loop-carried registers need.
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

namespace {
// Splits a conjunction into its terms.
void conjuncts(const ir::Expr& e, std::vector<ir::Expr>& out) {
  if (e && e->op == ir::Op::And) {
    conjuncts(e->args[0], out);
    conjuncts(e->args[1], out);
  } else if (e) {
    out.push_back(e);
  }
}
}  // namespace

std::string Schedule::decompose_reduction(const std::string& block, const LoopRef& loop) {
  const std::string P = "decompose_reduction";
  if (loop.block != block)
    throw ScheduleError(
        P, "the loop must enclose block '" + block + "' (got a loop of '" + loop.block + "')");
  StmtPath path = find_block(program_.body, block, P);
  const ir::StmtNode& b = *path.back();
  if (!b.init) throw ScheduleError(P, "block '" + block + "' has no init to decompose");
  StmtPath lpath = find_loop(program_.body, loop, P);
  size_t at = lpath.size() - 1;
  // Loops from `loop` down to the block.
  std::vector<const ir::StmtNode*> inner;
  for (size_t k = at; k + 1 < path.size(); ++k)
    if (path[k]->kind == ir::StmtKind::For)
      inner.push_back(path[k]);
    else if (path[k]->kind == ir::StmtKind::If)
      throw ScheduleError(
          P, "an if statement lies between loop '" + loop.var + "' and block '" + block + "'");
  // Every reduction variable must be driven by loops at or inside `loop`: otherwise the init
  // block would run again for each outer reduction iteration.
  std::set<std::string> inner_vars;
  for (const ir::StmtNode* l : inner) inner_vars.insert(l->var);
  std::vector<ir::IterVar> iters;
  std::set<std::string> needed;
  for (const ir::IterVar& iv : b.iters) {
    std::set<std::string> used;
    ir::visit(iv.binding, [&](const ir::Expr& e) {
      if (e->op == ir::Op::Var) used.insert(e->name);
      return true;
    });
    if (iv.kind == ir::IterKind::Spatial) {
      iters.push_back(iv);
      for (const std::string& u : used)
        if (inner_vars.count(u)) needed.insert(u);
    } else {
      for (const std::string& u : used)
        if (!inner_vars.count(u))
          throw ScheduleError(P, "reduction variable '" + iv.name + "' of block '" + block +
                                     "' is driven by loop '" + u + "', outside loop '" + loop.var +
                                     "'");
    }
  }
  // Keep the predicate terms that only use loops available to the init block.
  std::vector<ir::Expr> terms, kept;
  conjuncts(b.predicate, terms);
  for (const ir::Expr& t : terms) {
    bool ok = true;
    for (const std::string& v : inner_vars)
      if (ir::uses_var(t, v) && !needed.count(v)) ok = false;
    if (ok) kept.push_back(t);
  }
  ir::Expr pred;
  for (const ir::Expr& t : kept) pred = pred ? ir::make_binary(ir::Op::And, pred, t) : t;
  std::string name = fresh_name(block + ".init");
  ir::Stmt init = ir::make_block(name, iters, nullptr, b.init, pred);
  for (auto it = inner.rbegin(); it != inner.rend(); ++it)
    if (needed.count((*it)->var))
      init = ir::make_for((*it)->var, (*it)->min, (*it)->extent, ir::ForKind::Serial, init);
  ir::StmtNode nb = b;
  nb.init = nullptr;
  ir::LoopProgram p = program_;
  p.body = replace_at(path, std::make_shared<const ir::StmtNode>(std::move(nb)));
  // Insert the init nest before `loop`.
  StmtPath lp = find_loop(p.body, loop, P);
  ir::Stmt seq = ir::make_seq({init, std::make_shared<const ir::StmtNode>(*lp.back())});
  p.body = replace_at(lp, seq);
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"loop", loop.var}});
  return name;
}

void replay_decompose_reduction(Schedule& s, const nlohmann::json& j) {
  s.decompose_reduction(j.at("block").get<std::string>(), loop_arg(j));
}

}  // namespace kintsugi::schedule
