// \file RFactor.cpp
// rfactor(block, loop): splits a reduction at `loop` into a partial reduction and a combine.
//
//   for j0: for j1: R[i] = R[i] (+) g(j0 * 16 + j1)
// becomes
//   for j0:
//     for j1: R.rf[i, j0] = R.rf[i, j0] (+) g(j0 * 16 + j1)      block R.rf: spatial i, j0; reduce
//     j1 R[i] = R[i] (+) R.rf[i, j0]                                 block R:    spatial i; reduce
//     j0
// The rf block keeps the reduction over the loops inside `loop` and is data-parallel over
// `loop`; the write-back block (which keeps the name) reduces the partials over `loop`. Every
// reduction variable must be driven by `loop` or loops inside it.
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::string Schedule::rfactor(const std::string& block, const LoopRef& loop, int factor_axis) {
  const std::string P = "rfactor";
  if (loop.block != block) throw ScheduleError(P, "the loop must enclose block '" + block + "'");
  StmtPath path = find_block(program_.body, block, P);
  StmtPath lpath = find_loop(program_.body, loop, P);
  const ir::StmtNode& r = *path.back();
  ir::Reducer reducer;
  ir::Expr term;
  if (!r.body || !match_reduction_update(*r.body, &reducer, &term))
    throw ScheduleError(P, "block '" + block + "' is not a reduction x[...] = x[...] op g");
  const ir::StmtNode& st = *r.body;
  const ir::StmtNode& l = *lpath.back();
  // Loops strictly between `loop` and the block.
  std::vector<const ir::StmtNode*> inner;
  for (size_t k = lpath.size(); k + 1 < path.size(); ++k) {
    if (path[k]->kind == ir::StmtKind::For)
      inner.push_back(path[k]);
    else if (path[k]->kind != ir::StmtKind::Seq)
      throw ScheduleError(
          P, "an if statement lies between loop '" + loop.var + "' and block '" + block + "'");
  }
  // Inner loops drive either reduction variables (they stay in the rf block) or spatial ones
  // (they are repeated around the write-back block).
  std::set<std::string> inner_vars = {l.var};
  for (const ir::StmtNode* f : inner) inner_vars.insert(f->var);
  std::set<std::string> spatial_loops;
  bool drives = false;
  for (const ir::IterVar& iv : r.iters) {
    for (const std::string& v : inner_vars) {
      if (!ir::uses_var(iv.binding, v)) continue;
      if (iv.kind == ir::IterKind::Spatial) {
        if (v == l.var)
          throw ScheduleError(P, "loop '" + v + "' drives the spatial variable '" + iv.name +
                                     "' of block '" + block + "'");
        spatial_loops.insert(v);
      }
      if (v == l.var) drives = true;
    }
    if (iv.kind != ir::IterKind::Spatial) {
      bool inside = false;
      for (const std::string& v : inner_vars) inside |= ir::uses_var(iv.binding, v);
      if (!inside)
        throw ScheduleError(P, "reduction variable '" + iv.name + "' of block '" + block +
                                   "' is driven by loops outside loop '" + loop.var + "'");
    }
  }
  if (!drives)
    throw ScheduleError(
        P, "loop '" + loop.var + "' drives no reduction variable of block '" + block + "'");
  const ir::Buffer* buf = program_.find_buffer(st.buffer);
  std::string rf_buf = fresh_name(st.buffer + ".rf");
  std::string rf_block = fresh_name(block + ".rf");
  ir::Expr ext = l.extent;
  ir::Expr lv = var(l.var);
  // The rf block: original spatial variables, `loop` as a new spatial variable, the inner loops
  // as reduction variables; the original reduction variables become their bindings.
  std::vector<ir::IterVar> rf_iters;
  std::map<std::string, ir::Expr> sub;
  for (const ir::IterVar& iv : r.iters)
    if (iv.kind == ir::IterKind::Spatial)
      rf_iters.push_back(iv);
    else
      sub[iv.name] = iv.binding;
  rf_iters.push_back(ir::IterVar{l.var, ext, ir::IterKind::Spatial, lv});
  for (const ir::StmtNode* f : inner) {
    bool used = false;
    for (const auto& [name, b] : sub) used |= ir::uses_var(b, f->var);
    if (used && spatial_loops.count(f->var))
      throw ScheduleError(P, "loop '" + f->var +
                                 "' drives both spatial and reduction variables of block '" +
                                 block + "'");
    if (used) rf_iters.push_back(ir::IterVar{f->var, f->extent, ir::IterKind::Reduce, var(f->var)});
  }
  if (factor_axis < -1 || factor_axis > static_cast<int>(st.indices.size()))
    throw ScheduleError(P, "factor axis " + std::to_string(factor_axis) + " of block '" + block +
                               "' is not a position in its buffer's " +
                               std::to_string(st.indices.size()) + " dimensions (or -1 for last)");
  size_t at = factor_axis < 0 ? st.indices.size() : static_cast<size_t>(factor_axis);
  std::vector<ir::Expr> rf_idx = st.indices;
  rf_idx.insert(rf_idx.begin() + static_cast<long>(at), lv);
  // A reduction of a narrower float type keeps its partials, and computes their terms, in f32:
  // a partial can exceed the type's range where the whole reduction does not (a chunk's terms
  // on the chunk's own base, before a repair re-bases them).
  const bool widened = is_float(buf->dtype) && buf->dtype != DType::F32;
  const DType rf_type = widened ? DType::F32 : buf->dtype;
  ir::Expr g = ir::substitute(term, sub);
  if (widened) g = ir::widen_to_f32(g);
  const DType t = widened ? DType::F32 : term->type;
  ir::Expr acc = ir::make_load(
      rf_buf, rf_type == DType::I32 || rf_type == DType::I8 ? DType::Int : rf_type, rf_idx);
  ir::Stmt rf = ir::make_block(
      rf_block, rf_iters, ir::make_store(rf_buf, rf_idx, reducer_identity_expr(reducer, t)),
      ir::make_store(rf_buf, rf_idx, combine(reducer, acc, g)), r.predicate);
  // The write-back block: spatial variables, `loop` as the reduction variable.
  std::vector<ir::IterVar> wb_iters;
  for (const ir::IterVar& iv : r.iters)
    if (iv.kind == ir::IterKind::Spatial) wb_iters.push_back(iv);
  wb_iters.push_back(ir::IterVar{l.var, ext, ir::IterKind::Reduce, lv});
  ir::Expr wb_pred;
  std::vector<ir::Expr> terms;
  std::function<void(const ir::Expr&)> split_and = [&](const ir::Expr& e) {
    if (e && e->op == ir::Op::And) {
      split_and(e->args[0]);
      split_and(e->args[1]);
    } else if (e) {
      terms.push_back(e);
    }
  };
  split_and(r.predicate);
  for (const ir::Expr& c : terms) {
    bool uses_inner = false;
    for (const ir::StmtNode* f : inner) uses_inner |= ir::uses_var(c, f->var);
    if (!uses_inner) wb_pred = wb_pred ? ir::make_binary(ir::Op::And, wb_pred, c) : c;
  }
  ir::Expr rf_load = ir::make_load(rf_buf, acc->type, rf_idx);
  ir::Expr self = ir::make_load(st.buffer, st.value->args[0]->type, st.indices);
  ir::Stmt wb = ir::make_block(
      block, wb_iters, r.init,
      ir::make_store(st.buffer, st.indices, combine(reducer, self, rf_load)), wb_pred);
  for (auto it = inner.rbegin(); it != inner.rend(); ++it)
    if (spatial_loops.count((*it)->var))
      wb = ir::make_for((*it)->var, (*it)->min, (*it)->extent, ir::ForKind::Serial, wb);
  // Place: the rf block where the block was, the write-back block after the statement of the
  // loop's body that holds it.
  ir::LoopProgram p = program_;
  p.buffers.push_back(ir::Buffer{rf_buf, rf_type,
                                 [&] {
                                   auto s = buf->shape;
                                   s.insert(s.begin() + static_cast<long>(at), ext);
                                   return s;
                                 }(),
                                 ir::BufferRole::Intermediate, "global"});
  p.body = replace_at(path, rf);
  StmtPath np = find_loop(p.body, LoopRef{rf_block, loop.var}, P);
  const ir::StmtNode& nl = *np.back();
  StmtPath to_rf = find_block(p.body, rf_block, P);
  const ir::StmtNode* holder =
      to_rf[np.size()];  // the child of the loop on the way to the rf block
  ir::StmtNode newl = nl;
  if (nl.body->kind == ir::StmtKind::Seq) {
    ir::StmtNode seq = *nl.body;
    for (size_t k = 0; k < seq.stmts.size(); ++k)
      if (seq.stmts[k].get() == holder ||
          (holder->kind == ir::StmtKind::Seq && seq.stmts[k].get() == to_rf[np.size() + 1])) {
        seq.stmts.insert(seq.stmts.begin() + static_cast<long>(k) + 1, wb);
        break;
      }
    newl.body = std::make_shared<const ir::StmtNode>(std::move(seq));
  } else {
    newl.body = ir::make_seq({nl.body, wb});
  }
  p.body = replace_at(np, std::make_shared<const ir::StmtNode>(std::move(newl)));
  nlohmann::json entry{{"primitive", P}, {"block", block}, {"loop", loop.var}};
  if (factor_axis != -1) entry["factor_axis"] = factor_axis;
  commit(std::move(p), entry);
  return rf_block;
}

void replay_rfactor(Schedule& s, const nlohmann::json& j) {
  s.rfactor(j.at("block").get<std::string>(), loop_arg(j), j.value("factor_axis", -1));
}

}  // namespace kintsugi::schedule
