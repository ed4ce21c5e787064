// \file FactorGroup.cpp
// factor_group(block): a reduction over a group's members e and further axes, that reads e only
// as the member index g * E + e of group g (E the extent of e, g one of its spatial variables,
// read nowhere else), becomes a reduction over the further axes for every member h = g * E + e of
// every group, then a sum of the members' partial results over each group:
//
//   X[b, g, j] = sum[e: E, i](P[b, g * E + e, i, j] * Y[b, g * E + e, i])
// =>
//   X.grp[b, h: G * E, j] = sum[i](P[b, h, i, j] * Y[b, h, i])     (block X.grp)
//   X[b, g, j] = sum[e: E](X.grp[b, g * E + e, j])                 (block X)
//
// Grouped-query attention's dK and dV are such sums over the query heads of a key/value head and
// their queries: each query head's partial gradient then fuses with that head's recomputed
// probabilities, and the sum over the group is a reduction down short columns.
// Invariant: every term is combined into the same result (in another order); X.grp has X's
// dimensions with g's replaced by h, in f32 where X is a narrower float.
// Preconditions: the block is alone in its root nest and is a reduction update over at least two
// reduced variables, e the first; no predicate.
#include "ir/Printer.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/ComputeAt.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

namespace {

// Whether x is `g * E + e` (in either order of either operation) for some spatial variable g
// of `spatial`; sets *g.
bool member_index(const ir::Expr& x, const std::string& e, const ir::Expr& extent,
                  const std::set<std::string>& spatial, std::string* g) {
  if (x->op != ir::Op::Add) return false;
  for (int k = 0; k < 2; ++k) {
    const ir::Expr &a = x->args[static_cast<size_t>(k)], &m = x->args[static_cast<size_t>(1 - k)];
    if (a->op != ir::Op::Var || a->name != e || m->op != ir::Op::Mul) continue;
    for (int f = 0; f < 2; ++f) {
      const ir::Expr &v = m->args[static_cast<size_t>(f)], &c = m->args[static_cast<size_t>(1 - f)];
      if (v->op == ir::Op::Var && spatial.count(v->name) && ir::equal(c, extent)) {
        *g = v->name;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::string Schedule::factor_group(const std::string& block) {
  const std::string P = "factor_group";
  ir::LoopProgram p = program_;
  const size_t root = sole_nest_of(p, block, P);
  const ir::StmtNode& r = *find_block(p.body, block, P).back();
  ir::Reducer reducer;
  ir::Expr term;
  if (!r.body || !match_reduction_update(*r.body, &reducer, &term))
    throw ScheduleError(P, "block '" + block + "' is not a reduction x[...] = x[...] op g");
  if (r.predicate) throw ScheduleError(P, "block '" + block + "' has a predicate");
  const ir::IterVar* e = nullptr;
  size_t reduced = 0;
  std::set<std::string> spatial;
  for (const ir::IterVar& iv : r.iters) {
    if (iv.binding->op != ir::Op::Var)
      throw ScheduleError(P, "iteration variable '" + iv.name + "' of block '" + block +
                                 "' is not bound to a loop of its own");
    if (iv.kind == ir::IterKind::Spatial) spatial.insert(iv.name);
    if (iv.kind != ir::IterKind::Spatial && reduced++ == 0) e = &iv;
  }
  if (reduced < 2)
    throw ScheduleError(P, "block '" + block + "' does not reduce over several axes");
  // Every read of e, g * E + e for one g, becomes the member variable h.
  std::string g;
  // (Named apart from the block's own variables only: members of two groups over one head, dK's
  // and dV's, then run along the same variable.)
  std::string h = e->name + "_member";
  for (bool taken = true; taken;) {
    taken = std::any_of(r.iters.begin(), r.iters.end(),
                        [&](const ir::IterVar& iv) { return iv.name == h; });
    if (taken) h += "_";
  }
  const ir::Expr member = var(h);
  bool other = false;
  ir::Expr grouped = ir::mutate(term, [&](const ir::Expr& x) -> ir::Expr {
    std::string found;
    if (!member_index(x, e->name, e->extent, spatial, &found)) return x;
    other = other || (!g.empty() && found != g);
    g = found;
    return member;
  });
  if (g.empty() || other || ir::uses_var(grouped, e->name) || ir::uses_var(grouped, g)) {
    const bool plain = e->extent->op == ir::Op::Var || e->extent->op == ir::Op::IntImm;
    const std::string extent = ir::to_string(e->extent);
    throw ScheduleError(P, "block '" + block + "' reads its first reduced variable '" + e->name +
                               "' other than as a member g * " +
                               (plain ? extent : "(" + extent + ")") + " + " + e->name +
                               " of one group g");
  }
  const ir::StmtNode& st = *r.body;
  size_t at = st.indices.size();
  for (size_t k = 0; k < st.indices.size(); ++k)
    if (st.indices[k]->op == ir::Op::Var && st.indices[k]->name == g) at = k;
  if (at == st.indices.size())
    throw ScheduleError(P, "block '" + block + "' does not store at its group '" + g + "'");
  const ir::Buffer* buf = p.find_buffer(st.buffer);
  const ir::IterVar* group = nullptr;
  for (const ir::IterVar& iv : r.iters)
    if (iv.name == g) group = &iv;
  // The members: as many as the dimension the member index reads has (the query heads, HQ, of
  // which the groups read HK * (HQ / HK)), where every such dimension agrees; else the groups'.
  ir::Expr members_extent;
  bool agree = true;
  ir::visit(term, [&](const ir::Expr& x) {
    if (x->op != ir::Op::Load) return true;
    const ir::Buffer* read = p.find_buffer(x->name);
    for (size_t k = 0; read && k < x->args.size(); ++k) {
      std::string found;
      if (!member_index(x->args[k], e->name, e->extent, spatial, &found)) continue;
      agree = agree && (!members_extent || ir::equal(members_extent, read->shape[k]));
      members_extent = read->shape[k];
    }
    return true;
  });
  if (!agree || !members_extent)
    members_extent = ir::make_binary(ir::Op::Mul, group->extent, e->extent);
  // The partials: X's dimensions with g's replaced by the members, accumulated as rfactor's are
  // (in f32 where X is a narrower float).
  ir::Buffer partial = *buf;
  partial.name = fresh_name(buf->name + ".grp");
  partial.role = ir::BufferRole::Intermediate;
  partial.shape[at] = members_extent;
  const bool widened = is_float(buf->dtype) && buf->dtype != DType::F32;
  if (widened) {
    partial.dtype = DType::F32;
    grouped = ir::widen_to_f32(grouped);
  }
  const DType t = widened ? DType::F32 : term->type;
  std::vector<ir::IterVar> member_iters, group_iters;
  for (const ir::IterVar& iv : r.iters) {
    if (&iv == e) continue;
    member_iters.push_back(&iv == group
                               ? ir::IterVar{h, partial.shape[at], ir::IterKind::Spatial, member}
                               : ir::IterVar{iv.name, iv.extent, iv.kind, var(iv.name)});
  }
  for (const ir::IterVar& iv : r.iters)
    if (iv.kind == ir::IterKind::Spatial)
      group_iters.push_back(ir::IterVar{iv.name, iv.extent, iv.kind, var(iv.name)});
  group_iters.push_back(ir::IterVar{e->name, e->extent, e->kind, var(e->name)});
  std::vector<ir::Expr> member_at = st.indices, group_at = st.indices;
  member_at[at] = member;
  group_at[at] =
      ir::make_binary(ir::Op::Add, ir::make_binary(ir::Op::Mul, var(g), e->extent), var(e->name));
  const DType acc_type =
      partial.dtype == DType::I32 || partial.dtype == DType::I8 ? DType::Int : partial.dtype;
  ir::Expr acc = ir::make_load(partial.name, acc_type, member_at);
  const std::string partial_block = fresh_name(block + ".grp");
  ir::Stmt members = nest_over(
      member_iters,
      ir::make_block(partial_block, member_iters,
                     ir::make_store(partial.name, member_at, reducer_identity_expr(reducer, t)),
                     ir::make_store(partial.name, member_at, combine(reducer, acc, grouped))));
  ir::Expr self = ir::make_load(st.buffer, st.value->args[0]->type, st.indices);
  ir::Stmt groups = nest_over(
      group_iters,
      ir::make_block(
          block, group_iters, r.init,
          ir::make_store(st.buffer, st.indices,
                         combine(reducer, self, ir::make_load(partial.name, acc_type, group_at)))));
  ir::StmtNode body = *p.body;
  body.stmts[root] = groups;
  body.stmts.insert(body.stmts.begin() + static_cast<long>(root), members);
  p.body = std::make_shared<const ir::StmtNode>(std::move(body));
  auto it = std::find_if(p.buffers.begin(), p.buffers.end(),
                         [&](const ir::Buffer& x) { return x.name == buf->name; });
  p.buffers.insert(it, partial);
  commit(std::move(p), {{"primitive", P}, {"block", block}});
  return partial_block;
}

void replay_factor_group(Schedule& s, const nlohmann::json& j) {
  s.factor_group(j.at("block").get<std::string>());
}

}  // namespace kintsugi::schedule
