// \file CacheRead.cpp
// cache_read(block, buffer, scope): the consumer `block` reads `buffer` through a copy (TVM's
// cache_read). A new buffer `<buffer>.<scope>` (same dtype and shape, the given scope) is filled
// by a copy block of the same name, placed as its own loop nest right before the consumer's
// nest, and the consumer's loads of `buffer` are redirected to it; other readers are unchanged.
// With compute_at the copy then moves under a tile loop (the Q tile loaded once per CTA), and
// compact_buffer shrinks it to the tile. Returns the copy block's name.
// Preconditions: the buffer exists and the block reads it; the scope is global, shared or
// local; no block of the consumer's nest writes the buffer (the copy would be stale).
#include <algorithm>

#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Cache.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

void check_cache_scope(const std::string& primitive, const std::string& scope) {
  if (scope != "global" && scope != "shared" && scope != "local")
    throw ScheduleError(primitive, "unknown storage scope '" + scope +
                                       "' (expected \"global\", \"shared\" or \"local\")");
}

std::string fresh_cache_name(const Schedule& s, const std::string& base) {
  // Schedule::fresh_name already avoids buffers, blocks, loops, dims and params.
  return s.fresh_name(base);
}

ir::Stmt copy_nest(const Schedule& s, const std::string& block, const ir::Buffer& src,
                   const std::string& dst) {
  std::vector<std::string> vars;
  std::vector<ir::IterVar> iters;
  std::vector<ir::Expr> idx;
  for (size_t d = 0; d < src.shape.size(); ++d) {
    std::string v = s.fresh_name("ax" + std::to_string(d));
    for (int k = 1; std::find(vars.begin(), vars.end(), v) != vars.end(); ++k)
      v = s.fresh_name("ax" + std::to_string(d) + "_" + std::to_string(k));
    vars.push_back(v);
    iters.push_back(ir::IterVar{v, src.shape[d], ir::IterKind::Spatial, var(v)});
    idx.push_back(var(v));
  }
  ir::Stmt body = ir::make_store(dst, idx, ir::make_load(src.name, src.dtype, idx));
  ir::Stmt out = ir::make_block(block, std::move(iters), nullptr, body);
  for (size_t d = src.shape.size(); d-- > 0;)
    out = ir::make_for(vars[d], ir::make_int(0), src.shape[d], ir::ForKind::Serial, out);
  return out;
}

size_t root_nest_of(const ir::LoopProgram& p, const std::string& block,
                    const std::string& primitive, ir::StmtNode* root) {
  StmtPath path = find_block(p.body, block, primitive);
  if (p.body->kind == ir::StmtKind::Seq) {
    *root = *p.body;
  } else {
    *root = ir::StmtNode{};
    root->kind = ir::StmtKind::Seq;
    root->stmts = {p.body};
    path.insert(path.begin(), nullptr);
  }
  for (size_t k = 0; k < root->stmts.size(); ++k)
    if (path.size() > 1 && root->stmts[k].get() == path[1]) return k;
  throw ScheduleError(primitive, "block '" + block + "' is not inside a root-level loop nest");
}

std::string Schedule::cache_read(const std::string& block, const std::string& buffer,
                                 const std::string& scope) {
  const std::string P = "cache_read";
  const ir::StmtNode& b = *find_block(program_.body, block, P).back();
  const ir::Buffer* src = program_.find_buffer(buffer);
  if (!src) throw ScheduleError(P, "there is no buffer named '" + buffer + "'");
  if (!block_reads(b).count(buffer))
    throw ScheduleError(P, "block '" + block + "' does not read buffer '" + buffer + "'");
  check_cache_scope(P, scope);
  ir::StmtNode root;
  size_t nest = root_nest_of(program_, block, P, &root);
  for (const ir::StmtNode* w : blocks_under(root.stmts[nest]))
    if (block_writes(*w).count(buffer))
      throw ScheduleError(P, "block '" + w->name + "' writes '" + buffer +
                                 "' in the loop nest of block '" + block +
                                 "'; a copy placed before the nest would be stale");
  std::string name = fresh_cache_name(*this, buffer + "." + scope);
  ir::LoopProgram p = program_;
  ir::Buffer nb = *src;
  nb.name = name;
  nb.role = ir::BufferRole::Intermediate;
  nb.scope = scope;
  // Intermediates follow the inputs; a copy of an intermediate or output sits before it.
  size_t at = 0;
  if (src->role == ir::BufferRole::Input) {
    while (at < p.buffers.size() && p.buffers[at].role == ir::BufferRole::Input) ++at;
  } else {
    while (p.buffers[at].name != buffer) ++at;
  }
  ir::Stmt copy = copy_nest(*this, name, *src, name);
  // Redirect the consumer's loads.
  ir::Stmt consumer = ir::mutate(root.stmts[nest], [&](const ir::Stmt& s) -> ir::Stmt {
    if (s->kind != ir::StmtKind::Block || s->name != block) return s;
    ir::StmtNode n = *s;
    auto redirect = [&](const ir::Expr& x) -> ir::Expr {
      if (x->op != ir::Op::Load || x->name != buffer) return x;
      return ir::make_load(name, x->type, x->args, x->loc);
    };
    if (n.init) n.init = ir::mutate_exprs(n.init, redirect);
    n.body = ir::mutate_exprs(n.body, redirect);
    return std::make_shared<const ir::StmtNode>(std::move(n));
  });
  p.buffers.insert(p.buffers.begin() + static_cast<long>(at), nb);
  root.stmts[nest] = consumer;
  root.stmts.insert(root.stmts.begin() + static_cast<long>(nest), copy);
  p.body = std::make_shared<const ir::StmtNode>(std::move(root));
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"buffer", buffer}, {"scope", scope}});
  return name;
}

void replay_cache_read(Schedule& s, const nlohmann::json& j) {
  s.cache_read(j.at("block").get<std::string>(), j.at("buffer").get<std::string>(),
               j.at("scope").get<std::string>());
}

}  // namespace kintsugi::schedule
