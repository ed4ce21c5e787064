// \file SplitScanBuffer.cpp
// split_scan_buffer(block, loop): replaces the scan buffer S written by a scan block (one entry
// per iteration of `loop`) by two buffers without the scan dimension, `S.prev` and `S.next`:
// reads of S[.., j0 - 1] become S.prev, reads and the write of S[.., j0] become S.next, and reads
// of the final value S[.., extent - 1] after the loop become S.prev. An init block before the
// loop sets S.prev to the scan's initial value and a copy block at the end of each iteration
// moves S.next into S.prev. The running max of attention goes from O(tiles) memory to a pair of
// loop-carried values. Any other read of S is an error naming the block.
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

void Schedule::split_scan_buffer(const std::string& block, const LoopRef& loop) {
  const std::string P = "split_scan_buffer";
  StmtPath path = find_block(program_.body, block, P);
  StmtPath lpath = find_loop(program_.body, loop, P);
  const ir::StmtNode& w = *path.back();
  const ir::StmtNode& l = *lpath.back();
  const ir::IterVar* scan_iter = nullptr;
  for (const ir::IterVar& iv : w.iters)
    if (iv.kind == ir::IterKind::Scan) scan_iter = &iv;
  if (!scan_iter || !(scan_iter->binding->op == ir::Op::Var && scan_iter->binding->name == l.var))
    throw ScheduleError(P, "block '" + block + "' is not a scan over loop '" + loop.var +
                               "' (use reduce_to_scan first)");
  const ir::StmtNode& st = *w.body;
  // The store is S[idx.., pos] = combine(select(pos > 0, S[idx.., pos - 1], init), v), or a
  // repaired combine that reads that select (reduce_to_scan of a rolled write-back).
  ir::Expr init_value;
  ir::visit(st.value, [&](const ir::Expr& x) {
    if (!init_value && x->op == ir::Op::Select && x->args[1]->op == ir::Op::Load &&
        x->args[1]->name == st.buffer)
      init_value = x->args[2];
    return !init_value;
  });
  if (!init_value)
    throw ScheduleError(P, "block '" + block + "' does not start from an initial value");
  for (const ir::IterVar& iv : w.iters)
    if (iv.kind == ir::IterKind::Spatial)
      for (const ir::StmtNode* f : loops_on(find_block(program_.body, block, P)))
        if (f->var != l.var && ir::uses_var(iv.binding, f->var)) {
          bool inside = false;
          for (size_t k = lpath.size(); k < path.size(); ++k) inside |= path[k] == f;
          if (inside)
            throw ScheduleError(P, "spatial variable '" + iv.name + "' of block '" + block +
                                       "' is driven by loop '" + f->var + "' inside loop '" +
                                       loop.var + "'");
        }
  const std::string scan = st.buffer;
  const ir::Buffer* buf = program_.find_buffer(scan);
  std::string base = scan.size() > 5 && scan.substr(scan.size() - 5) == ".scan"
                         ? scan.substr(0, scan.size() - 5)
                         : scan;
  std::string prev = fresh_name(base + ".prev"), next = fresh_name(base + ".next");
  std::vector<ir::Expr> shape(buf->shape.begin(), buf->shape.end() - 1);
  ir::Expr last = ir::simplify(ir::make_binary(ir::Op::Sub, l.extent, ir::make_int(1)));
  std::set<const ir::StmtNode*> under;
  for (const ir::StmtNode* b : blocks_under(l.body)) under.insert(b);
  ir::LoopProgram p = program_;
  p.body = ir::mutate(p.body, [&](const ir::Stmt& n) -> ir::Stmt {
    if (n->kind != ir::StmtKind::Block) return n;
    // The block's name for the loop position, if it has one.
    std::string pos;
    for (const ir::IterVar& iv : n->iters)
      if (iv.binding->op == ir::Op::Var && iv.binding->name == l.var) pos = iv.name;
    bool inside = false;
    for (const ir::StmtNode* b : blocks_under(l.body)) inside |= b->name == n->name;
    auto rewrite = [&](const ir::Expr& e) -> ir::Expr {
      if (e->op != ir::Op::Load || e->name != scan) return e;
      std::vector<ir::Expr> idx(e->args.begin(), e->args.end() - 1);
      const ir::Expr& at = e->args.back();
      if (!pos.empty() && ir::provably_equal(at, var(pos)))
        return ir::make_load(next, e->type, idx);
      if (!pos.empty() &&
          ir::provably_equal(at, ir::make_binary(ir::Op::Sub, var(pos), ir::make_int(1))))
        return ir::make_load(prev, e->type, idx);
      if (!inside && ir::provably_equal(at, last)) return ir::make_load(prev, e->type, idx);
      throw ScheduleError(
          P, "block '" + n->name + "' reads " + ir::to_string(e) +
                 ", neither the current, the previous nor the final value of the scan");
    };
    ir::StmtNode b = *n;
    auto fix = [&](const ir::Stmt& part) { return part ? ir::mutate_exprs(part, rewrite) : part; };
    b.init = fix(b.init);
    b.body = fix(b.body);
    if (b.body && b.body->kind == ir::StmtKind::Store && b.body->buffer == scan) {
      std::vector<ir::Expr> idx(b.body->indices.begin(), b.body->indices.end() - 1);
      b.body = ir::make_store(next, idx, b.body->value);
    }
    return std::make_shared<const ir::StmtNode>(std::move(b));
  });
  // The loop-carried pair: prev = init before the loop, prev = next at the end of each iteration.
  std::vector<ir::IterVar> iters;
  for (const ir::IterVar& iv : w.iters)
    if (iv.kind == ir::IterKind::Spatial) iters.push_back(iv);
  std::vector<ir::Expr> idx(st.indices.begin(), st.indices.end() - 1);
  DType t = st.value->type;
  ir::Stmt init = ir::make_block(fresh_name(base + ".prev.init"), iters, nullptr,
                                 ir::make_store(prev, idx, init_value));
  ir::Stmt copy = ir::make_block(fresh_name(base + ".prev.update"), iters, nullptr,
                                 ir::make_store(prev, idx, ir::make_load(next, t, idx)));
  StmtPath np = find_loop(p.body, loop, P);
  ir::StmtNode nl = *np.back();
  nl.body = ir::make_seq({nl.body, copy});
  p.body =
      replace_at(np, ir::make_seq({init, std::make_shared<const ir::StmtNode>(std::move(nl))}));
  for (auto it = p.buffers.begin(); it != p.buffers.end(); ++it)
    if (it->name == scan) {
      p.buffers.erase(it);
      break;
    }
  p.buffers.push_back(ir::Buffer{prev, buf->dtype, shape, ir::BufferRole::Intermediate, "global"});
  p.buffers.push_back(ir::Buffer{next, buf->dtype, shape, ir::BufferRole::Intermediate, "global"});
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"loop", loop.var}});
}

void replay_split_scan_buffer(Schedule& s, const nlohmann::json& j) {
  s.split_scan_buffer(j.at("block").get<std::string>(), loop_arg(j));
}

}  // namespace kintsugi::schedule
