// \file MoveNest.cpp
// move_nest(block, before): moves the root-level loop nest that holds `block` so that it runs
// right before the root-level nest that holds block `before` (earlier or later in the program).
//
//   nest A                       nest C   <- holds `block`
//   nest B             =>        nest A   <- holds `before`
//   nest C                       nest B
//
// Invariant: every buffer sees the same sequence of writes and reads as before. The moved nest
// may cross only nests it is independent of: a crossed nest may not write what the moved nest
// reads or writes, nor read what it writes (checked on the reads and writes of every block of
// both nests). The auto-scheduler uses it to compute the complete producers of a reduction chain
// (Performer's key-side sums, a query norm) before the tile loop the chain is fused under.
#include "schedule/Analysis.h"
#include "schedule/primitive/ComputeAt.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

namespace {

struct Access {
  std::set<std::string> reads, writes;
};

Access nest_access(const ir::Stmt& nest) {
  Access a;
  for (const ir::StmtNode* b : blocks_under(nest)) {
    for (const std::string& r : block_reads(*b)) a.reads.insert(r);
    for (const std::string& w : block_writes(*b)) a.writes.insert(w);
  }
  return a;
}

// A buffer through which the order of the two nests matters, or "" when they are independent.
std::string conflict(const Access& a, const Access& b) {
  for (const std::string& w : a.writes)
    if (b.reads.count(w) || b.writes.count(w)) return w;
  for (const std::string& w : b.writes)
    if (a.reads.count(w)) return w;
  return "";
}

}  // namespace

void Schedule::move_nest(const std::string& block, const std::string& before) {
  const std::string P = "move_nest";
  size_t from = root_index(program_, find_block(program_.body, block, P));
  size_t to = root_index(program_, find_block(program_.body, before, P));
  if (from == to)
    throw ScheduleError(
        P, "block '" + block + "' and block '" + before + "' are in the same root-level nest");
  const std::vector<ir::Stmt>& nests = program_.body->stmts;
  Access moved = nest_access(nests[from]);
  // The nests the moved one crosses: [to, from) when moving up, (from, to) when moving down.
  size_t lo = from < to ? from + 1 : to, hi = from < to ? to : from;
  for (size_t k = lo; k < hi; ++k) {
    std::string buffer = conflict(moved, nest_access(nests[k]));
    if (buffer.empty()) continue;
    std::string other = blocks_under(nests[k]).front()->name;
    for (const ir::StmtNode* b : blocks_under(nests[k]))
      if (block_reads(*b).count(buffer) || block_writes(*b).count(buffer)) other = b->name;
    throw ScheduleError(P, "the nest of block '" + block + "' cannot move past block '" + other +
                               "': both access '" + buffer + "' and one of them writes it");
  }
  ir::StmtNode root = *program_.body;
  ir::Stmt nest = root.stmts[from];
  root.stmts.erase(root.stmts.begin() + static_cast<long>(from));
  root.stmts.insert(root.stmts.begin() + static_cast<long>(from < to ? to - 1 : to), nest);
  ir::LoopProgram p = program_;
  p.body = std::make_shared<const ir::StmtNode>(std::move(root));
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"before", before}});
}

void replay_move_nest(Schedule& s, const nlohmann::json& j) {
  s.move_nest(j.at("block").get<std::string>(), j.at("before").get<std::string>());
}

}  // namespace kintsugi::schedule
