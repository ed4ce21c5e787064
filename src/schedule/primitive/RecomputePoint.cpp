// \file RecomputePoint.cpp
// recompute_point(block, reader): the reduction (or map) `block` computed again at the one point
// each instance of `reader` reads of it. A new block `<block>.at`, over the reader's spatial
// variables and the reduction's reduce variables (renamed where the reader uses their names),
// computes the block's value with its spatial variables replaced by the indices of the reader's
// load, into a buffer `<buffer>.at` of the reader's spatial extents; the reader loads that at its
// own variables. The new nest goes in front of the reader's. (A map so copied reads what it reads
// at the point: a scaled score s[i, i] reads its sum at (i, i), computed again the same way.)
// A language model's loss read at its target, z[r, TGT[r]] where z[r, v] = sum[c](h[r, c] *
// w[c, v]), is one sum of C products a row: read from z itself, it keeps the R x V logits in
// memory, which the chain fused over the vocabulary (a maximum and a sum of exponentials) never
// stores otherwise.
// Preconditions: `block` is alone in its root nest, a reduction (reduce variables and an init) or
// a map, with no predicate, whose store indexes its one intermediate buffer by its spatial
// variables, each once; `reader` is a block of a later root nest, bound to its loops as written
// (spatial variables only), and every load of the buffer in it is at the same indices.
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/ComputeAt.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::string Schedule::recompute_point(const std::string& block, const std::string& reader) {
  const std::string P = "recompute_point";
  ir::LoopProgram p = program_;
  const size_t producer_root = sole_nest_of(p, block, P);
  const StmtPath reader_path = find_block(p.body, reader, P);
  const size_t reader_root = root_index(p, reader_path);
  if (reader_root <= producer_root)
    throw ScheduleError(P, "reader '" + reader + "' does not come after block '" + block + "'");
  const ir::StmtNode& b = *find_block(p.body, block, P).back();
  const ir::StmtNode& r = *reader_path.back();
  std::set<std::string> written = block_writes(b);
  const ir::Buffer* buf = written.size() == 1 ? p.find_buffer(*written.begin()) : nullptr;
  if (!buf || buf->role != ir::BufferRole::Intermediate)
    throw ScheduleError(P, "block '" + block + "' does not write one intermediate buffer");
  const bool reduces = std::any_of(b.iters.begin(), b.iters.end(), [](const ir::IterVar& iv) {
    return iv.kind == ir::IterKind::Reduce;
  });
  if (reduces != static_cast<bool>(b.init) || !b.body || b.body->kind != ir::StmtKind::Store)
    throw ScheduleError(P, "block '" + block + "' is not a reduction or a map of one store");
  if (b.predicate)
    throw ScheduleError(P, "block '" + block + "' runs under a predicate (its loops were split)");
  // The reduction's spatial variables, by the store index that names each.
  std::map<std::string, size_t> position;
  for (size_t k = 0; k < b.body->indices.size(); ++k) {
    const ir::Expr& i = b.body->indices[k];
    if (i->op == ir::Op::Var && i->var_kind == ir::VarKind::Index) position.emplace(i->name, k);
  }
  for (const ir::IterVar& iv : b.iters)
    if (iv.kind == ir::IterKind::Spatial && !position.count(iv.name))
      throw ScheduleError(
          P, "block '" + block + "' does not store at its spatial variable '" + iv.name + "'");
  // The reader's one point of the buffer.
  std::vector<ir::Expr> point;
  bool alike = true;
  ir::visit_exprs(r.body, [&](const ir::Expr& e) {
    ir::visit(e, [&](const ir::Expr& x) {
      if (x->op != ir::Op::Load || x->name != buf->name) return true;
      if (point.empty()) point = x->args;
      alike =
          alike && std::equal(point.begin(), point.end(), x->args.begin(), x->args.end(),
                              [](const ir::Expr& u, const ir::Expr& v) { return ir::equal(u, v); });
      return true;
    });
  });
  if (point.empty())
    throw ScheduleError(P, "block '" + reader + "' does not read '" + buf->name + "'");
  if (!alike)
    throw ScheduleError(P, "block '" + reader + "' reads '" + buf->name + "' at several points");
  std::set<std::string> reader_vars;
  for (const ir::IterVar& iv : r.iters) {
    if (iv.kind != ir::IterKind::Spatial || !iv.binding || iv.binding->op != ir::Op::Var)
      throw ScheduleError(P, "block '" + reader + "' is not a map bound to its loops as written");
    reader_vars.insert(iv.name);
  }
  // The copy: the reduce variables renamed away from the reader's, the spatial ones replaced by
  // the point, its accumulator the new buffer at the reader's variables.
  std::map<std::string, ir::Expr> subst;
  std::vector<ir::IterVar> iters;
  std::vector<ir::Expr> own;
  for (const ir::IterVar& iv : r.iters) {
    own.push_back(ir::make_var(iv.name, ir::VarKind::Index, DType::Int));
    iters.push_back({iv.name, iv.extent, ir::IterKind::Spatial, own.back()});
  }
  std::set<std::string> taken = reader_vars;
  for (const ir::IterVar& iv : b.iters) {
    if (iv.kind == ir::IterKind::Spatial) {
      subst[iv.name] = point[position.at(iv.name)];
      continue;
    }
    std::string name = iv.name;
    for (int k = 1; taken.count(name); ++k) name = iv.name + "_" + std::to_string(k);
    taken.insert(name);
    subst[iv.name] = ir::make_var(name, ir::VarKind::Index, DType::Int);
    iters.push_back({name, iv.extent, iv.kind, subst[iv.name]});
  }
  ir::Buffer at = *buf;
  at.name = fresh_name(buf->name + ".at");
  at.shape.clear();
  for (const ir::IterVar& iv : r.iters) at.shape.push_back(iv.extent);
  auto retarget = [&](const ir::Expr& x) -> ir::Expr {
    return x->op == ir::Op::Load && x->name == buf->name
               ? ir::make_load(at.name, x->type, own, x->loc)
               : x;
  };
  auto copy = [&](const ir::Stmt& store) {
    return ir::make_store(at.name, own, ir::mutate(ir::substitute(store->value, subst), retarget));
  };
  const std::string name = fresh_name(block + ".at");
  ir::Stmt nest = ir::make_block(name, iters, b.init ? copy(b.init) : nullptr, copy(b.body));
  for (auto it = iters.rbegin(); it != iters.rend(); ++it)
    nest = ir::make_for(it->name, ir::make_int(0), it->extent, ir::ForKind::Serial, nest);
  ir::StmtNode root = *p.body;
  root.stmts[reader_root] = ir::mutate(root.stmts[reader_root], [&](const ir::Stmt& s) {
    return s->kind == ir::StmtKind::Block && s->name == reader ? ir::mutate_exprs(s, retarget) : s;
  });
  root.stmts.insert(root.stmts.begin() + static_cast<long>(reader_root), nest);
  p.body = std::make_shared<const ir::StmtNode>(std::move(root));
  auto pos = std::find_if(p.buffers.begin(), p.buffers.end(),
                          [&](const ir::Buffer& x) { return x.name == buf->name; });
  p.buffers.insert(pos + 1, at);
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"reader", reader}});
  return name;
}

void replay_recompute_point(Schedule& s, const nlohmann::json& j) {
  s.recompute_point(j.at("block").get<std::string>(), j.at("reader").get<std::string>());
}

}  // namespace kintsugi::schedule
