// \file ComputeAt.cpp
// compute_at(block, loop): moves a producer's loop nest to the start of `loop`'s body (loop
// belongs to a consumer nest) and shrinks it to the region the consumers under `loop` read in
// one iteration: tile-by-tile production instead of the whole buffer up front. Every reader of
// the producer's buffer must be under `loop`.
#include "schedule/primitive/ComputeAt.h"

#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

size_t sole_nest_of(const ir::LoopProgram& p, const std::string& block,
                    const std::string& primitive) {
  StmtPath path = find_block(p.body, block, primitive);
  if (path.size() < 2 || p.body->kind != ir::StmtKind::Seq)
    throw ScheduleError(primitive, "block '" + block + "' is not in a loop nest of its own");
  for (size_t k = 0; k < p.body->stmts.size(); ++k) {
    if (p.body->stmts[k].get() != path[1]) continue;
    auto blocks = blocks_under(p.body->stmts[k]);
    if (blocks.size() != 1)
      throw ScheduleError(primitive,
                          "block '" + block + "' shares its loop nest with block '" +
                              (blocks[0]->name == block ? blocks[1]->name : blocks[0]->name) + "'");
    return k;
  }
  throw ScheduleError(primitive, "block '" + block + "' is not in a loop nest of its own");
}

size_t root_index(const ir::LoopProgram& p, const StmtPath& path) {
  size_t k = 0;
  while (k < p.body->stmts.size() && p.body->stmts[k].get() != path[1]) ++k;
  return k;
}

ir::LoopProgram move_nest_into_loop(const ir::LoopProgram& program, const StmtPath& loop_path,
                                    const ir::Stmt& moved, bool at_start, size_t old_nest) {
  ir::LoopProgram p = program;
  ir::StmtNode nl = *loop_path.back();
  nl.body = at_start ? ir::make_seq({moved, nl.body}) : ir::make_seq({nl.body, moved});
  p.body = replace_at(loop_path, std::make_shared<const ir::StmtNode>(std::move(nl)));
  ir::StmtNode root = *p.body;
  root.stmts.erase(root.stmts.begin() + static_cast<long>(old_nest));
  p.body = std::make_shared<const ir::StmtNode>(std::move(root));
  return p;
}

ir::Stmt nest_over_box(const Schedule& s, const ir::StmtNode& block,
                       const std::map<std::string, Range>& box) {
  using ir::Op;
  std::vector<std::pair<std::string, ir::Expr>> loops;  // new loops, outermost first
  std::set<std::string> used_names;
  auto fresh = [&](const std::string& base) {
    std::string n = s.fresh_name(base);
    for (int k = 1; used_names.count(n); ++k) n = s.fresh_name(base + "_" + std::to_string(k));
    used_names.insert(n);
    return n;
  };
  ir::StmtNode b = block;
  ir::Expr pred;
  auto conj = [&](const ir::Expr& c) { pred = pred ? ir::make_binary(Op::And, pred, c) : c; };
  for (ir::IterVar& iv : b.iters) {
    auto it = box.find(iv.name);
    if (it == box.end()) {
      std::string v = fresh(iv.name);
      loops.push_back({v, iv.extent});
      iv.binding = var(v);
      continue;
    }
    const Range& r = it->second;
    ir::Expr value = r.min;
    bool new_loop = !(ir::as_const_int(r.extent) && *ir::as_const_int(r.extent) == 1);
    if (new_loop) {
      std::string v = fresh(iv.name);
      loops.push_back({v, r.extent});
      value = ir::simplify(ir::make_binary(Op::Add, r.min, var(v)));
    }
    iv.binding = value;
    // A new loop from 0 over a region wider than the variable's extent (the whole tiles of a
    // producer whose last tile is partial, cut by the producer's predicate) needs the bound too.
    auto ce = ir::as_const_int(r.extent), ci = ir::as_const_int(iv.extent);
    if (new_loop && value->op == Op::Var && !ir::provably_equal(r.extent, iv.extent) &&
        !(ce && ci && *ce <= *ci))
      conj(ir::make_binary(Op::Lt, value, iv.extent));
    if (value->op != Op::Var) {
      conj(ir::make_binary(Op::Lt, value, iv.extent));
      if (!(ir::as_const_int(r.min) && *ir::as_const_int(r.min) >= 0) && r.min->op != Op::Mul &&
          r.min->op != Op::Var)
        conj(ir::make_binary(Op::Ge, value, ir::make_int(0)));
    }
  }
  // The block's own predicate (a split-K chunk's tail) over its former loops, which bound its
  // iteration variables: a loop L that bound a variable to o + L now reads as the variable's new
  // value minus o.
  if (block.predicate) {
    std::map<std::string, ir::Expr> now;
    for (size_t k = 0; k < block.iters.size(); ++k) {
      const ir::Expr& was = block.iters[k].binding;
      ir::visit(was, [&](const ir::Expr& x) {
        if (x->op != Op::Var || x->var_kind != ir::VarKind::Index || now.count(x->name))
          return true;
        ir::Expr o = ir::simplify(ir::make_binary(Op::Sub, was, x));
        if (!ir::uses_var(o, x->name))
          now[x->name] = ir::simplify(ir::make_binary(Op::Sub, b.iters[k].binding, o));
        return true;
      });
    }
    ir::Expr old = ir::simplify(ir::substitute(block.predicate, now));
    pred = pred ? ir::make_binary(Op::And, old, pred) : old;
  }
  b.predicate = pred;
  ir::Stmt out = std::make_shared<const ir::StmtNode>(std::move(b));
  for (auto it = loops.rbegin(); it != loops.rend(); ++it)
    out = ir::make_for(it->first, ir::make_int(0), it->second, ir::ForKind::Serial, out);
  return out;
}

void Schedule::compute_at(const std::string& block, const LoopRef& loop) {
  const std::string P = "compute_at";
  size_t nest = sole_nest_of(program_, block, P);
  StmtPath lpath = find_loop(program_.body, loop, P);
  size_t lnest = root_index(program_, lpath);
  if (lnest == nest)
    throw ScheduleError(P, "loop '" + loop.var + "' belongs to block '" + block + "' itself");
  if (lnest < nest)
    throw ScheduleError(P, "block '" + block + "' comes after loop '" + loop.var +
                               "'; compute_at moves a producer into a later consumer");
  const ir::StmtNode& b = *find_block(program_.body, block, P).back();
  std::set<std::string> outs = block_writes(b);
  if (outs.size() != 1) throw ScheduleError(P, "block '" + block + "' writes several buffers");
  std::string buffer = *outs.begin();
  // Every reader must be under the loop.
  const ir::StmtNode& l = *lpath.back();
  std::set<const ir::StmtNode*> inside;
  for (const ir::StmtNode* r : blocks_under(l.body)) inside.insert(r);
  for (const ir::StmtNode* r : blocks_under(program_.body))
    if (r != &b && !inside.count(r) && block_reads(*r).count(buffer))
      throw ScheduleError(
          P, "block '" + r->name + "' reads '" + buffer + "' outside loop '" + loop.var + "'");
  std::vector<Range> region;
  if (!access_region(l.body, program_, buffer, false, &region))
    throw ScheduleError(P, "no block under loop '" + loop.var + "' reads '" + buffer + "'");
  // The block stores at its spatial iteration variables: the region of dimension d restricts the
  // variable stored at d.
  const ir::StmtNode& st = *b.body;
  if (st.kind != ir::StmtKind::Store)
    throw ScheduleError(P, "block '" + block + "' is not a single store");
  std::map<std::string, Range> box;
  for (size_t d = 0; d < st.indices.size(); ++d) {
    if (st.indices[d]->op != ir::Op::Var)
      throw ScheduleError(
          P, "block '" + block + "' stores at a computed index " + ir::to_string(st.indices[d]));
    box[st.indices[d]->name] = region[d];
  }
  ir::LoopProgram p =
      move_nest_into_loop(program_, lpath, nest_over_box(*this, b, box), true, nest);
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"loop", loop_json(loop)}});
}

void replay_compute_at(Schedule& s, const nlohmann::json& j) {
  s.compute_at(j.at("block").get<std::string>(), loop_arg(j.at("loop")));
}

}  // namespace kintsugi::schedule
