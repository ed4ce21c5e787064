// \file Reorder.cpp
// reorder(block, loops): permutes a perfectly nested chain of loops enclosing a block. The named
// loops must be consecutive on the block's path with nothing else between them, and no loop's
// bounds may use another reordered loop's variable.
#include <algorithm>

#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

void Schedule::reorder(const std::string& block, const std::vector<std::string>& order) {
  const std::string P = "reorder";
  StmtPath path = find_block(program_.body, block, P);
  std::vector<size_t> positions;
  for (const std::string& v : order) {
    LoopRef ref{block, v};
    positions.push_back(find_loop(program_.body, ref, P).size() - 1);
  }
  std::vector<size_t> sorted = positions;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw ScheduleError(P, "a loop is named twice in the new order of block '" + block + "'");
  for (size_t k = 0; k + 1 < sorted.size(); ++k)
    if (sorted[k + 1] != sorted[k] + 1)
      throw ScheduleError(P, "the loops of block '" + block +
                                 "' to reorder are not perfectly nested: '" + path[sorted[k]]->var +
                                 "' does not directly contain loop '" + path[sorted[k + 1]]->var +
                                 "'");
  for (size_t k = 0; k + 1 < sorted.size(); ++k) {
    const ir::StmtNode* loop = path[sorted[k]];
    if (loop->body.get() != path[sorted[k + 1]])
      throw ScheduleError(P, "loop '" + loop->var + "' holds more than loop '" +
                                 path[sorted[k + 1]]->var +
                                 "', so they cannot be reordered for block '" + block + "'");
  }
  for (size_t a : sorted)
    for (size_t b : sorted)
      if (a != b &&
          (ir::uses_var(path[a]->extent, path[b]->var) || ir::uses_var(path[a]->min, path[b]->var)))
        throw ScheduleError(
            P, "the bounds of loop '" + path[a]->var + "' depend on loop '" + path[b]->var + "'");
  ir::Stmt body = path[sorted.back()]->body;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::StmtNode* loop = nullptr;
    for (size_t k : sorted)
      if (path[k]->var == *it) loop = path[k];
    ir::StmtNode n = *loop;
    n.body = body;
    body = std::make_shared<const ir::StmtNode>(std::move(n));
  }
  StmtPath outer(path.begin(), path.begin() + static_cast<long>(sorted.front()) + 1);
  ir::LoopProgram p = program_;
  p.body = replace_at(outer, body);
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"order", order}});
}

void replay_reorder(Schedule& s, const nlohmann::json& j) {
  s.reorder(j.at("block").get<std::string>(), j.at("order").get<std::vector<std::string>>());
}

}  // namespace kintsugi::schedule
