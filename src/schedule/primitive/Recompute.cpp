// \file Recompute.cpp
// recompute(blocks, readers): the blocks' values are computed a second time for `readers` alone.
// Each block's loop nest is copied, the block and the buffer it writes renamed (`<name>.re`),
// the copies reading one another's buffers where the originals read the originals', and the
// readers' loads of the originals redirected to the copies. The copies go in front of the first
// reader's nest, in the blocks' order. Attention's backward pass recomputes the probabilities
// and dS for dQ (a sum over the keys) apart from those of dK and dV (sums over the queries), as
// FlashAttention-2 does, so that each sum can fuse with its own copy of the chain.
// Returns the copies' block names, in the blocks' order.
// Preconditions: every block is alone in its root loop nest and writes one intermediate buffer;
// every reader is a block in a later root nest than every block.
#include <algorithm>

#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/ComputeAt.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::vector<std::string> Schedule::recompute(const std::vector<std::string>& blocks,
                                             const std::vector<std::string>& readers) {
  const std::string P = "recompute";
  if (blocks.empty() || readers.empty())
    throw ScheduleError(P, "name the blocks to compute again and the blocks that read the copies");
  ir::LoopProgram p = program_;
  std::vector<std::pair<size_t, std::string>> order;
  for (const std::string& b : blocks) order.emplace_back(sole_nest_of(p, b, P), b);
  std::sort(order.begin(), order.end());
  size_t first_reader = p.body->stmts.size();
  for (const std::string& r : readers)
    first_reader = std::min(first_reader, root_index(p, find_block(p.body, r, P)));
  if (first_reader <= order.back().first)
    throw ScheduleError(P, "reader '" + readers.front() + "' does not come after block '" +
                               order.back().second + "'");
  std::map<std::string, std::string> copy_of;  // buffer -> the copy's buffer
  std::vector<std::string> names;
  std::vector<ir::Stmt> copies;
  auto redirect = [&](const ir::Expr& x) -> ir::Expr {
    auto it = x->op == ir::Op::Load ? copy_of.find(x->name) : copy_of.end();
    return it == copy_of.end() ? x : ir::make_load(it->second, x->type, x->args, x->loc);
  };
  for (const auto& [root, name] : order) {
    const ir::StmtNode& b = *find_block(p.body, name, P).back();
    std::set<std::string> written = block_writes(b);
    const ir::Buffer* buf = written.size() == 1 ? p.find_buffer(*written.begin()) : nullptr;
    if (!buf || buf->role != ir::BufferRole::Intermediate)
      throw ScheduleError(P, "block '" + name + "' does not write one intermediate buffer");
    ir::Buffer copy = *buf;
    copy.name = fresh_name(buf->name + ".re");
    const std::string block_copy = fresh_name(name + ".re");
    names.push_back(block_copy);
    copy_of[buf->name] = copy.name;  // a reduction's copy accumulates into its own buffer
    ir::Stmt nest = ir::mutate_exprs(p.body->stmts[root], redirect);
    nest = ir::mutate(nest, [&](const ir::Stmt& s) -> ir::Stmt {
      if (s->kind != ir::StmtKind::Block && s->kind != ir::StmtKind::Store) return s;
      ir::StmtNode n = *s;
      if (n.kind == ir::StmtKind::Block) n.name = block_copy;
      if (n.kind == ir::StmtKind::Store) n.buffer = copy.name;
      return std::make_shared<const ir::StmtNode>(std::move(n));
    });
    copies.push_back(nest);
    auto at = std::find_if(p.buffers.begin(), p.buffers.end(),
                           [&](const ir::Buffer& x) { return x.name == buf->name; });
    p.buffers.insert(at + 1, copy);
  }
  const std::set<std::string> reading(readers.begin(), readers.end());
  ir::StmtNode root = *p.body;
  for (size_t k = first_reader; k < root.stmts.size(); ++k)
    root.stmts[k] = ir::mutate(root.stmts[k], [&](const ir::Stmt& s) -> ir::Stmt {
      if (s->kind != ir::StmtKind::Block || !reading.count(s->name)) return s;
      return ir::mutate_exprs(s, redirect);
    });
  root.stmts.insert(root.stmts.begin() + static_cast<long>(first_reader), copies.begin(),
                    copies.end());
  p.body = std::make_shared<const ir::StmtNode>(std::move(root));
  commit(std::move(p), {{"primitive", P}, {"blocks", blocks}, {"readers", readers}});
  return names;
}

void replay_recompute(Schedule& s, const nlohmann::json& j) {
  s.recompute(j.at("blocks").get<std::vector<std::string>>(),
              j.at("readers").get<std::vector<std::string>>());
}

}  // namespace kintsugi::schedule
