// \file RebaseJoin.cpp
// rebase_join(blocks, part): splits a softmax whose maximum joins reductions over different axes
// into one chain per axis. A join is an elementwise value J = F(A, B, ...) (F max or min) of
// reductions by F over axes of their own, such as the maximum of a cascade's shared prefix and
// its per-sequence suffix:
//
//   m[i]  = max(max[j](sp[i, j]), max[k](sk[i, k]))          J = m, A = m.max0, B = m.max1
//   l0[i] = sum[j](exp(sp[i, j] - m[i]))
//
// A reduction over A's axis that reads J (through elementwise blocks) cannot be fused with A:
// J is complete only after B, which runs over another axis. The algebra engine's repair h
// re-bases a partial from one value of J to another (h(F_j g(r, c), r, r') = F_j g(r', c), Eq. 3
// and 4 of Repair.h), so each such reduction is computed against A instead of J and repaired
// once J is known:
//
//   l0.part[i] = sum[j](exp(sp[i, j] - m.max0[i]))           a chain over j alone
//   l0[i]      = h(l0.part[i], m.max0[i], m[i])              = l0.part[i] * exp(m.max0[i] - m[i])
//
// exactly as split-K combines chunks (here the parts are the join's reductions). `blocks` are the
// reductions over A's axis to re-base (each over one variable, alone in its nest, reading J
// through elementwise blocks); `part` is A's buffer. The elementwise blocks between them and J
// are copied once (`<block>.rb`) to read A; the originals go when nothing reads them any more.
// Each reduction becomes block `<buffer>.part` writing buffer `<buffer>.part`; a repair block of
// its name writes its buffer right after it. Guards as split-K's: a part still at its
// reducer's identity (a side a mask hides) contributes the target's identity, where that is
// sound (identity_guard_sound); a repair that can scale a partial up is guarded or refused.
// Invariant: every buffer holds the values it held before; the chains read only their own part.
#include "schedule/primitive/RebaseJoin.h"
#include "algebra/Repair.h"
#include "ir/Printer.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/ReductionChains.h"
#include "schedule/primitive/ComputeAt.h"
#include "schedule/primitive/Fusion.h"
#include "schedule/primitive/Inline.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

namespace {

// The leaves of a tree of `op` (max(max(a, b), c): a, b, c).
void join_leaves(const ir::Expr& e, ir::Op op, std::vector<ir::Expr>* leaves) {
  if (e->op == op) {
    for (const ir::Expr& a : e->args) join_leaves(a, op, leaves);
    return;
  }
  leaves->push_back(e);
}

}  // namespace

std::optional<JoinPart> join_part(const ir::LoopProgram& p, const ir::StmtNode& join,
                                  const std::string& part) {
  if (!join.body || join.body->kind != ir::StmtKind::Store || join.init) return std::nullopt;
  if (!std::all_of(join.iters.begin(), join.iters.end(),
                   [](const ir::IterVar& iv) { return iv.kind == ir::IterKind::Spatial; }))
    return std::nullopt;
  const ir::Expr& value = join.body->value;
  if (value->op != ir::Op::Max && value->op != ir::Op::Min) return std::nullopt;
  const ir::Reducer reducer = value->op == ir::Op::Max ? ir::Reducer::Max : ir::Reducer::Min;
  std::vector<ir::Expr> leaves;
  join_leaves(value, value->op, &leaves);
  auto writers = block_writers(p.body);
  std::optional<JoinPart> found;
  for (const ir::Expr& leaf : leaves) {
    if (leaf->op != ir::Op::Load || leaf->name != part) continue;
    auto w = writers.find(part);
    ir::Reducer r;
    ir::Expr g;
    if (found || w == writers.end() || !w->second->body ||
        !match_reduction_update(*w->second->body, &r, &g) || r != reducer)
      return std::nullopt;
    found = JoinPart{join.body->buffer, leaf, reducer};
  }
  return found;
}

void Schedule::rebase_join(const std::vector<std::string>& blocks, const std::string& part) {
  const std::string P = "rebase_join";
  if (blocks.empty()) throw ScheduleError(P, "no block to re-base onto '" + part + "'");
  ir::LoopProgram p = program_;
  auto writers = block_writers(p.body);
  // The join: the one elementwise block between each target and `part` whose value joins it.
  std::optional<JoinPart> join;
  const ir::StmtNode* join_block = nullptr;
  std::vector<std::string> between;  // elementwise blocks from the join to the targets
  for (const std::string& name : blocks) {
    const ir::StmtNode& t = *find_block(p.body, name, P).back();
    std::set<std::string> frontier;
    std::vector<std::string> path;
    find_frontier(
        p, t, [&](const ir::StmtNode& prod) { return join_part(p, prod, part).has_value(); },
        &frontier, &path);
    if (frontier.size() != 1)
      throw ScheduleError(P, "block '" + name + "' reads " +
                                 (frontier.empty() ? std::string("no") : "more than one") +
                                 " maximum or minimum that joins '" + part + "' with other values");
    const ir::StmtNode* w = writers.at(*frontier.begin());
    if (join_block && join_block != w)
      throw ScheduleError(P, "blocks '" + blocks.front() + "' and '" + name +
                                 "' read different joins of '" + part + "'");
    join_block = w;
    join = join_part(p, *w, part);
    for (const std::string& b : path)
      if (std::find(between.begin(), between.end(), b) == between.end()) between.push_back(b);
  }
  const ElementwiseBlock jb = match_elementwise(p, *join_block, P);
  // J[args] read as A: A's load in the join, at the join's indices.
  auto part_at = [&](const ir::Expr& join_load) {
    std::map<std::string, ir::Expr> sub;
    for (size_t d = 0; d < jb.iters.size(); ++d) sub[jb.iters[d]] = join_load->args[d];
    return ir::substitute(join->part_load, sub);
  };
  // (1) The elementwise blocks between, copied to read A (producers first, as find_frontier
  // lists them; a copy reads the copies of what it reads).
  std::map<std::string, std::string> copy_of;  // buffer -> its copy
  auto rebased = [&](const ir::Expr& e) {
    return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
      if (n->op != ir::Op::Load) return n;
      if (n->name == join->join) return part_at(n);
      if (auto c = copy_of.find(n->name); c != copy_of.end())
        return ir::make_load(c->second, n->type, n->args);
      return n;
    });
  };
  auto rebase_stmt = [&](const ir::Stmt& s, const std::string& block, const std::string& nb,
                         const std::string& buffer, const std::string& nbuf) {
    return ir::mutate(s, [&](const ir::Stmt& n) -> ir::Stmt {
      ir::StmtNode c = *n;
      if (c.kind == ir::StmtKind::Block && c.name == block) c.name = nb;
      if (c.kind == ir::StmtKind::Store) {
        if (c.buffer == buffer) c.buffer = nbuf;
        c.value = ir::mutate(rebased(c.value), [&](const ir::Expr& x) -> ir::Expr {
          return x->op == ir::Op::Load && x->name == buffer ? ir::make_load(nbuf, x->type, x->args)
                                                            : x;
        });
      }
      return std::make_shared<const ir::StmtNode>(std::move(c));
    });
  };
  auto insert_after = [&](const std::string& block, ir::Stmt nest) {
    size_t at = sole_nest_of(p, block, P);
    ir::StmtNode root = *p.body;
    root.stmts.insert(root.stmts.begin() + static_cast<long>(at) + 1, std::move(nest));
    p.body = std::make_shared<const ir::StmtNode>(std::move(root));
  };
  for (const std::string& name : between) {
    const ir::StmtNode& b = *find_block(p.body, name, P).back();
    const std::string buffer = match_elementwise(p, b, P).buffer;
    const std::string nb = fresh_name(name + ".rb"), nbuf = fresh_name(buffer + ".rb");
    ir::Stmt nest = p.body->stmts[sole_nest_of(p, name, P)];
    ir::Stmt copy = rebase_stmt(nest, name, nb, buffer, nbuf);
    ir::Buffer cb = *p.find_buffer(buffer);
    cb.name = nbuf;
    p.buffers.push_back(cb);
    insert_after(name, copy);
    copy_of[buffer] = nbuf;
  }
  // (2) Each target against A, then its repair.
  const std::map<std::string, std::string> facts = repair_facts(program_);
  nlohmann::json repairs = nlohmann::json::array(), parts = nlohmann::json::array();
  for (const std::string& name : blocks) {
    StmtPath path = find_block(p.body, name, P);
    const ir::StmtNode& t = *path.back();
    ir::Reducer reducer;
    ir::Expr term;
    if (!t.body || !match_reduction_update(*t.body, &reducer, &term) || t.predicate)
      throw ScheduleError(P, "block '" + name + "' is not a reduction x[...] = x[...] op g");
    const ir::IterVar* axis = nullptr;
    for (const ir::IterVar& iv : t.iters)
      if (iv.kind != ir::IterKind::Spatial) {
        if (axis) throw ScheduleError(P, "block '" + name + "' reduces over several variables");
        axis = &iv;
      }
    for (const ir::Expr& i : t.body->indices)
      if (i->op != ir::Op::Var)
        throw ScheduleError(P, "block '" + name + "' stores at an index that is not a variable");
    // The term with the blocks between inlined: what the repair is derived over.
    std::function<ir::Expr(const ir::Expr&)> expand = [&](const ir::Expr& e) -> ir::Expr {
      return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
        if (n->op != ir::Op::Load ||
            std::find(between.begin(), between.end(),
                      writers.count(n->name) ? writers.at(n->name)->name : "") == between.end())
          return n;
        return expand(inline_loads(n, match_elementwise(program_, *writers.at(n->name), P)));
      });
    };
    algebra::RepairRequest req;
    req.reducer = reducer;
    req.term = expand(term);
    req.incomplete = {join->join};
    req.facts = facts;
    req.axis = axis->name;
    algebra::RepairResult repair = algebra::derive_repair(req);
    const std::string refusal = "block '" + name + "' cannot be re-based onto '" + part + "'";
    if (repair.kind != algebra::RepairResult::Kind::Derived || !repair.statistics.empty())
      throw ScheduleError(P, refusal + ": " +
                                 (repair.kind == algebra::RepairResult::Kind::Refused
                                      ? repair.reason
                                      : std::string("its repair needs statistics of its own")));
    const std::string pbuf = fresh_name(t.body->buffer + ".part");
    ir::Buffer pb = *p.find_buffer(t.body->buffer);
    pb.name = pbuf;
    p.buffers.push_back(pb);
    const ir::Expr t_load = ir::make_load(pbuf, pb.dtype, t.body->indices);
    std::map<std::string, ir::Expr> sub{{"t", t_load}};
    std::map<std::string, ir::Reducer> moves;
    ir::Expr at_identity;
    for (const algebra::IncompleteValue& v : repair.values) {
      const ir::Expr load = algebra::incomplete_load(v.load, req.incomplete);
      if (ir::uses_var(load, axis->name))
        throw ScheduleError(P, refusal + ": it reads '" + join->join + "' along its axis");
      const ir::Expr a = part_at(load);
      sub[v.old_var] =
          ir::mutate(v.load, [&](const ir::Expr& n) { return ir::equal(n, load) ? a : n; });
      sub[v.new_var] = v.load;
      moves[v.old_var] = join->reducer;
      if (mask_makes_producer_infinite(p, part, join->reducer))
        throw ScheduleError(P, refusal + ": a masked element makes '" + part + "' infinite");
      const double id = ir::reducer_identity(join->reducer, p.find_buffer(part)->dtype);
      const bool annihilates = repair_annihilates_identity(repair, v, id);
      if (!annihilates && !repair.exact_at_identity && producer_masked(p, part, join->reducer))
        throw ScheduleError(P, refusal + ": where a mask hides all of '" + part +
                                   "', the repair cannot re-base its terms from " +
                                   ir::format_double(id));
      if (!annihilates) continue;
      if (!identity_guard_sound(p, part, join->reducer, term, reducer, copy_of, var(axis->name)))
        throw ScheduleError(P, refusal + ": where '" + part +
                                   "' is its identity its terms are not the identity (they " +
                                   "read what the mask hides from it)");
      ir::Expr is_id = ir::make_binary(
          ir::Op::And,
          ir::make_binary(ir::Op::Eq, sub[v.old_var],
                          ir::reducer_identity_expr(join->reducer, sub[v.old_var]->type)),
          ir::make_binary(ir::Op::Ne, v.load,
                          ir::reducer_identity_expr(join->reducer, v.load->type)));
      at_identity = at_identity ? ir::make_binary(ir::Op::Or, at_identity, is_id) : is_id;
    }
    ir::Expr h = ir::widen_to_f32(ir::substitute(repair.h, sub));
    h = guard_scaled_partial(repair, moves, t_load, h, P, refusal);
    if (at_identity) h = ir::make_select(at_identity, reducer_identity_expr(reducer, h->type), h);
    // The target writes its part, reading A where it read J.
    const size_t at = sole_nest_of(p, name, P);
    ir::StmtNode root = *p.body;
    root.stmts[at] = rebase_stmt(p.body->stmts[at], name, pbuf, t.body->buffer, pbuf);
    p.body = std::make_shared<const ir::StmtNode>(std::move(root));
    // The repair, over the target's rows.
    std::vector<ir::IterVar> iters;
    for (const ir::IterVar& iv : t.iters)
      if (iv.kind == ir::IterKind::Spatial)
        iters.push_back(ir::IterVar{iv.name, iv.extent, ir::IterKind::Spatial, var(iv.name)});
    ir::Stmt fix = nest_over(
        iters,
        ir::make_block(name, iters, nullptr,
                       ir::make_store(t.body->buffer, t.body->indices,
                                      h->type == pb.dtype ? h : ir::make_cast(pb.dtype, h))));
    insert_after(pbuf, fix);
    repairs.push_back(algebra::to_math(repair.h_unguarded));
    parts.push_back(pbuf);
  }
  // (3) The blocks between that nothing reads any more.
  for (auto it = between.rbegin(); it != between.rend(); ++it) {
    const std::string buffer = match_elementwise(p, *find_block(p.body, *it, P).back(), P).buffer;
    bool read = false;
    for (const ir::StmtNode* b : blocks_under(p.body)) read = read || block_reads(*b).count(buffer);
    const ir::Buffer* buf = p.find_buffer(buffer);
    if (read || buf->role != ir::BufferRole::Intermediate) continue;
    ir::StmtNode root = *p.body;
    root.stmts.erase(root.stmts.begin() + static_cast<long>(sole_nest_of(p, *it, P)));
    p.body = std::make_shared<const ir::StmtNode>(std::move(root));
    remove_buffer(p, buffer);
  }
  commit(std::move(p), {{"primitive", P},
                        {"blocks", blocks},
                        {"part", part},
                        {"parts", parts},
                        {"repairs", repairs}});
}

void replay_rebase_join(Schedule& s, const nlohmann::json& j) {
  s.rebase_join(j.at("blocks").get<std::vector<std::string>>(), j.at("part").get<std::string>());
}

}  // namespace kintsugi::schedule
