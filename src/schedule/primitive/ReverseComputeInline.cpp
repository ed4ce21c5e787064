// \file ReverseComputeInline.cpp
// reverse_compute_inline(block): an elementwise consumer C that reads an intermediate P only at
// its own iteration variables (P[i, j] in C(i, j)) is folded into P's elementwise producer
// block: the producer now stores C's value, computed from its own value, into C's buffer. C's
// nest and P's buffer disappear.
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Inline.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

void Schedule::reverse_compute_inline(const std::string& block) {
  const std::string P = "reverse_compute_inline";
  StmtPath cpath = find_block(program_.body, block, P);
  const ir::StmtNode& c = *cpath.back();
  // The consumer must itself be elementwise (its buffer may be an output).
  for (const ir::IterVar& iv : c.iters)
    if (iv.kind != ir::IterKind::Spatial)
      throw ScheduleError(P, "block '" + block + "' is a reduction");
  if (c.init || !c.body || c.body->kind != ir::StmtKind::Store)
    throw ScheduleError(P, "block '" + block + "' is not a single store");
  const ir::StmtNode& cst = *c.body;
  // Its one intermediate input, produced by an elementwise block.
  std::string input;
  for (const std::string& r : block_reads(c)) {
    for (const ir::StmtNode* b : blocks_under(program_.body))
      if (b != &c && block_writes(*b).count(r)) {
        if (!input.empty() && input != r)
          throw ScheduleError(P, "block '" + block + "' reads two computed buffers ('" + input +
                                     "' and '" + r + "')");
        input = r;
      }
  }
  if (input.empty()) throw ScheduleError(P, "block '" + block + "' reads no computed buffer");
  const ir::StmtNode* producer = nullptr;
  for (const ir::StmtNode* b : blocks_under(program_.body))
    if (b != &c && block_writes(*b).count(input)) producer = b;
  ElementwiseBlock eb = match_elementwise(program_, *producer, P);
  if (cst.indices.size() != c.iters.size())
    throw ScheduleError(P,
                        "block '" + block + "' does not store at exactly its iteration variables");
  for (size_t k = 0; k < cst.indices.size(); ++k)
    if (cst.indices[k]->op != ir::Op::Var || cst.indices[k]->name != c.iters[k].name)
      throw ScheduleError(
          P, "block '" + block + "' does not store at exactly its iteration variables, in order");
  if (producer->iters.size() != c.iters.size())
    throw ScheduleError(
        P, "blocks '" + producer->name + "' and '" + block + "' iterate over different domains");
  for (size_t k = 0; k < c.iters.size(); ++k)
    if (!ir::equal(producer->iters[k].extent, c.iters[k].extent))
      throw ScheduleError(
          P, "blocks '" + producer->name + "' and '" + block + "' iterate over different domains");
  bool identity_reads = true;
  ir::visit(cst.value, [&](const ir::Expr& x) {
    if (x->op == ir::Op::Load && x->name == input)
      for (size_t k = 0; k < x->args.size(); ++k)
        identity_reads &= x->args[k]->op == ir::Op::Var && x->args[k]->name == c.iters[k].name;
    return true;
  });
  if (!identity_reads)
    throw ScheduleError(P, "block '" + block + "' reads '" + input +
                               "' at other positions than its own iteration variables");
  for (const ir::StmtNode* b : blocks_under(program_.body))
    if (b != &c && b != producer && block_reads(*b).count(input))
      throw ScheduleError(P, "buffer '" + input + "' is also read by block '" + b->name + "'");
  // The new producer value: C's value with P's loads replaced by P's value, in P's iteration
  // variables.
  std::map<std::string, ir::Expr> to_producer;
  for (size_t k = 0; k < c.iters.size(); ++k)
    to_producer[c.iters[k].name] = var(producer->iters[k].name);
  ir::Expr value = ir::substitute(inline_loads(cst.value, eb), to_producer);
  std::vector<ir::Expr> idx;
  for (const ir::IterVar& iv : producer->iters) idx.push_back(var(iv.name));
  ir::StmtNode np = *producer;
  np.body = ir::make_store(cst.buffer, idx, value);
  ir::LoopProgram p = program_;
  p.body = replace_at(cpath, nullptr);
  p.body = replace_at(find_block(p.body, producer->name, P),
                      std::make_shared<const ir::StmtNode>(std::move(np)));
  remove_buffer(p, input);
  commit(std::move(p), {{"primitive", P}, {"block", block}});
}

void replay_reverse_compute_inline(Schedule& s, const nlohmann::json& j) {
  s.reverse_compute_inline(j.at("block").get<std::string>());
}

}  // namespace kintsugi::schedule
