// \file NameTerm.cpp
// name_term(block, buffers): the inverse of compute_inline for a reduction's term. Each maximal
// subexpression of the term of reduction `block` that reads one of `buffers` and varies along a
// reduction variable, but along no iteration variable beyond those the reads of `buffers` use
// and the reduction variables, becomes an elementwise block `<block>.term<k>` of its own (buffer
// `<buffer>.term<k>`, over those variables, in a nest right before the block's), and the term
// reads it instead:
//
//   l[r] = sum[v](exp(X[r, v] - m[r]))
// becomes
//   l.term0[r, v] = exp(X[r, v] - m[r])
//   l[r]          = sum[v](l.term0[r, v])
//
// and in `o[i, d] = sum[j](exp(c[i, j] - m[i]) * V[j, d])` only exp(c[i, j] - m[i]) is named
// (the product also varies along d, which the read of m does not use). Invariant: the program
// computes the same values (the named expression is evaluated at the same points); after it,
// the block reads `buffers` only through elementwise blocks, the form fusion expects, so that
// writing an expression inline or naming it makes no difference to the schedule.
#include "ir/Printer.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/ComputeAt.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::vector<std::string> Schedule::name_term(const std::string& block,
                                             const std::set<std::string>& buffers) {
  const std::string P = "name_term";
  size_t nest = sole_nest_of(program_, block, P);
  StmtPath path = find_block(program_.body, block, P);
  const ir::StmtNode& r = *path.back();
  ir::Reducer reducer;
  ir::Expr term;
  if (!r.body || !match_reduction_update(*r.body, &reducer, &term))
    throw ScheduleError(P, "block '" + block + "' is not a reduction x[...] = x[...] op g");
  auto reads = [&](const ir::Expr& e) {
    bool found = false;
    ir::visit(e, [&](const ir::Expr& x) {
      found = found || (x->op == ir::Op::Load && buffers.count(x->name));
      return !found;
    });
    return found;
  };
  // The variables the named expressions may use: those indexing the reads of `buffers`, and
  // the reduction variables.
  std::set<std::string> allowed, reduce;
  for (const ir::IterVar& iv : r.iters)
    if (iv.kind != ir::IterKind::Spatial) {
      allowed.insert(iv.name);
      reduce.insert(iv.name);
    }
  ir::visit(term, [&](const ir::Expr& x) {
    if (x->op == ir::Op::Load && buffers.count(x->name))
      for (const ir::Expr& i : x->args)
        for (const ir::IterVar& iv : r.iters)
          if (ir::uses_var(i, iv.name)) allowed.insert(iv.name);
    return true;
  });
  // An integer term (an index chosen by a select) is named as the reduction's own integer type,
  // the type its result is stored as.
  const DType result_type = program_.find_buffer(r.body->buffer)->dtype;
  auto fits = [&](const ir::Expr& e) {
    bool along = false;
    for (const ir::IterVar& iv : r.iters) {
      if (!ir::uses_var(e, iv.name)) continue;
      if (!allowed.count(iv.name)) return false;
      along = along || reduce.count(iv.name) > 0;
    }
    return along && (is_float(e->type) || (is_int(e->type) && is_int(result_type)));
  };
  ir::LoopProgram p = program_;
  std::vector<ir::Stmt> nests;
  std::vector<std::string> names;
  // Top down, so that the named subexpressions are maximal. The branches of a select are not
  // entered: a branch is evaluated only where it is chosen, a named one everywhere.
  std::function<ir::Expr(const ir::Expr&)> name = [&](const ir::Expr& e) -> ir::Expr {
    if (!reads(e)) return e;
    if (e->op == ir::Op::Load || !fits(e)) {
      if (e->op == ir::Op::Select || e->args.empty()) return e;
      std::vector<ir::Expr> args;
      bool changed = false;
      for (const ir::Expr& a : e->args) {
        args.push_back(name(a));
        changed = changed || args.back() != a;
      }
      return changed ? ir::with_args(e, std::move(args)) : e;
    }
    std::string name = fresh_name(block + ".term" + std::to_string(names.size()));
    std::string buffer = fresh_name(r.body->buffer + ".term" + std::to_string(names.size()));
    std::vector<ir::IterVar> iters;
    std::vector<ir::Expr> shape, idx;
    for (const ir::IterVar& iv : r.iters)
      if (ir::uses_var(e, iv.name)) {
        iters.push_back(ir::IterVar{iv.name, iv.extent, ir::IterKind::Spatial, var(iv.name)});
        shape.push_back(iv.extent);
        idx.push_back(var(iv.name));
      }
    nests.push_back(
        nest_over(iters, ir::make_block(name, iters, nullptr, ir::make_store(buffer, idx, e))));
    names.push_back(name);
    const DType stored = is_int(e->type) ? result_type : e->type;
    p.buffers.push_back(ir::Buffer{buffer, stored, shape, ir::BufferRole::Intermediate, "global"});
    return ir::make_load(buffer, e->type, idx);
  };
  ir::Expr new_term = name(term);
  if (names.empty())
    throw ScheduleError(P, "the term of block '" + block +
                               "' has no subexpression over a reduction variable that reads " +
                               "the given buffers and nothing wider");
  ir::StmtNode nb = r;
  nb.body = ir::make_store(r.body->buffer, r.body->indices,
                           combine(reducer, r.body->value->args[0], new_term));
  p.body = replace_at(path, std::make_shared<const ir::StmtNode>(std::move(nb)));
  ir::StmtNode root = *p.body;
  root.stmts.insert(root.stmts.begin() + static_cast<long>(nest), nests.begin(), nests.end());
  p.body = std::make_shared<const ir::StmtNode>(std::move(root));
  commit(std::move(p), {{"primitive", P},
                        {"block", block},
                        {"buffers", std::vector<std::string>(buffers.begin(), buffers.end())}});
  return names;
}

void replay_name_term(Schedule& s, const nlohmann::json& j) {
  s.name_term(j.at("block").get<std::string>(), j.at("buffers").get<std::set<std::string>>());
}

}  // namespace kintsugi::schedule
