// \file CacheWrite.cpp
// cache_write(block, scope): `block` computes into a new buffer `<buffer>.<scope>` (same dtype
// and shape, the given scope) instead of the buffer it writes, and a copy block of the same
// name, placed as its own loop nest right after the block's nest, writes the original buffer
// from it (TVM's cache_write). The block's own loads of the buffer (a reduction's accumulator)
// follow it to the new buffer. With reverse_compute_at the copy then moves under a tile loop.
// Returns the copy block's name.
// Preconditions: the block writes exactly one buffer and is its only writer (otherwise the
// copy would overwrite other blocks' results); no other block of its nest reads the buffer
// (it would see it before the copy); the scope is global, shared or local.
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Cache.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::string Schedule::cache_write(const std::string& block, const std::string& scope) {
  const std::string P = "cache_write";
  const ir::StmtNode& b = *find_block(program_.body, block, P).back();
  std::set<std::string> outs = block_writes(b);
  if (outs.size() != 1)
    throw ScheduleError(P, "block '" + block + "' writes " +
                               (outs.empty() ? "no buffer" : "several buffers") +
                               "; cache_write needs exactly one");
  std::string buffer = *outs.begin();
  check_cache_scope(P, scope);
  for (const ir::StmtNode* w : blocks_under(program_.body))
    if (w != &b && block_writes(*w).count(buffer))
      throw ScheduleError(P, "block '" + w->name + "' also writes '" + buffer + "'; block '" +
                                 block + "' must be its only writer");
  ir::StmtNode root;
  size_t nest = root_nest_of(program_, block, P, &root);
  for (const ir::StmtNode* r : blocks_under(root.stmts[nest]))
    if (r != &b && block_reads(*r).count(buffer))
      throw ScheduleError(P, "block '" + r->name + "' reads '" + buffer +
                                 "' in the loop nest of block '" + block +
                                 "', before the copy back would run");
  const ir::Buffer* dst = program_.find_buffer(buffer);
  std::string name = fresh_cache_name(*this, buffer + "." + scope);
  ir::LoopProgram p = program_;
  ir::Buffer nb = *dst;
  nb.name = name;
  nb.role = ir::BufferRole::Intermediate;
  nb.scope = scope;
  size_t at = 0;
  while (p.buffers[at].name != buffer) ++at;
  ir::Buffer cache = nb;
  ir::Stmt producer = ir::mutate(root.stmts[nest], [&](const ir::Stmt& s) -> ir::Stmt {
    if (s->kind != ir::StmtKind::Block || s->name != block) return s;
    auto redirect = [&](const ir::Stmt& part) -> ir::Stmt {
      if (!part) return part;
      ir::Stmt r = ir::mutate_exprs(part, [&](const ir::Expr& x) -> ir::Expr {
        if (x->op != ir::Op::Load || x->name != buffer) return x;
        return ir::make_load(name, x->type, x->args, x->loc);
      });
      return ir::mutate(r, [&](const ir::Stmt& st) -> ir::Stmt {
        if (st->kind != ir::StmtKind::Store || st->buffer != buffer) return st;
        ir::StmtNode n = *st;
        n.buffer = name;
        return std::make_shared<const ir::StmtNode>(std::move(n));
      });
    };
    ir::StmtNode n = *s;
    n.init = redirect(n.init);
    n.body = redirect(n.body);
    return std::make_shared<const ir::StmtNode>(std::move(n));
  });
  // The copy reads the cache and writes the original buffer.
  ir::Buffer src = cache;
  ir::Stmt copy = copy_nest(*this, name, src, buffer);
  p.buffers.insert(p.buffers.begin() + static_cast<long>(at), nb);
  root.stmts[nest] = producer;
  root.stmts.insert(root.stmts.begin() + static_cast<long>(nest) + 1, copy);
  p.body = std::make_shared<const ir::StmtNode>(std::move(root));
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"scope", scope}});
  return name;
}

void replay_cache_write(Schedule& s, const nlohmann::json& j) {
  s.cache_write(j.at("block").get<std::string>(), j.at("scope").get<std::string>());
}

}  // namespace kintsugi::schedule
