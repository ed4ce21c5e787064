// \file ComputeInline.cpp
// compute_inline(block): an elementwise block (spatial iteration variables only, no init, one
// store at exactly its iteration variables) disappears; every load of its buffer elsewhere is
// replaced by its value with the iteration variables replaced by the load's indices. Its
// buffer, an intermediate, is removed.
#include <optional>

#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Inline.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

ElementwiseBlock match_elementwise(const ir::LoopProgram& program, const ir::StmtNode& block,
                                   const std::string& primitive) {
  auto fail = [&](const std::string& why) {
    throw ScheduleError(primitive, "block '" + block.name + "' " + why);
  };
  for (const ir::IterVar& iv : block.iters)
    if (iv.kind != ir::IterKind::Spatial)
      fail("is a reduction (iteration variable '" + iv.name + "'); only elementwise blocks inline");
  if (block.init) fail("has an init statement");
  if (!block.body || block.body->kind != ir::StmtKind::Store) fail("is not a single store");
  const ir::StmtNode& st = *block.body;
  if (st.indices.size() != block.iters.size())
    fail("does not store at exactly its iteration variables");
  for (size_t k = 0; k < st.indices.size(); ++k)
    if (st.indices[k]->op != ir::Op::Var || st.indices[k]->name != block.iters[k].name)
      fail("does not store at exactly its iteration variables, in order");
  const ir::Buffer* buf = program.find_buffer(st.buffer);
  internal_assert(buf) << "store to unknown buffer " << st.buffer;
  if (buf->role != ir::BufferRole::Intermediate)
    fail("writes '" + st.buffer + "', which is an " +
         (buf->role == ir::BufferRole::Output ? "output" : "input"));
  if (ir::uses_var(st.value, st.buffer)) fail("reads its own buffer");
  ElementwiseBlock out;
  out.buffer = st.buffer;
  out.value = st.value;
  for (const ir::IterVar& iv : block.iters) out.iters.push_back(iv.name);
  return out;
}

namespace {

std::optional<double> immediate(const ir::Expr& e) {
  if (e->op == ir::Op::IntImm) return static_cast<double>(e->int_value);
  if (e->op == ir::Op::FloatImm) return round_to_dtype(e->float_value, e->type);
  return std::nullopt;
}

bool compare(ir::Op op, double a, double b) {
  switch (op) {
    case ir::Op::Lt:
      return a < b;
    case ir::Op::Le:
      return a <= b;
    case ir::Op::Gt:
      return a > b;
    case ir::Op::Ge:
      return a >= b;
    case ir::Op::Eq:
      return a == b;
    default:
      return a != b;
  }
}

// A comparison of an indicator with a constant, select(c, 1.0, 0.0) > 0.0 (a mask written as a
// definition, then inlined), is its condition c, !c, or a constant: the condition stays visible
// to the mask analyses (the tile tests of propagate_mask).
ir::Expr fold_indicator_comparison(const ir::Expr& n) {
  if (n->op != ir::Op::Lt && n->op != ir::Op::Le && n->op != ir::Op::Gt && n->op != ir::Op::Ge &&
      n->op != ir::Op::Eq && n->op != ir::Op::Ne)
    return n;
  for (size_t side = 0; side < 2; ++side) {
    const ir::Expr& sel = n->args[side];
    std::optional<double> k = immediate(n->args[1 - side]);
    if (sel->op != ir::Op::Select || !k) continue;
    std::optional<double> then = immediate(sel->args[1]), otherwise = immediate(sel->args[2]);
    if (!then || !otherwise) continue;
    bool t = side == 0 ? compare(n->op, *then, *k) : compare(n->op, *k, *then);
    bool f = side == 0 ? compare(n->op, *otherwise, *k) : compare(n->op, *k, *otherwise);
    if (t == f) return ir::make_bool(t);
    return t ? sel->args[0] : ir::make_unary(ir::Op::Not, sel->args[0]);
  }
  return n;
}

}  // namespace

ir::Expr inline_loads(const ir::Expr& e, const ElementwiseBlock& eb) {
  return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
    if (n->op != ir::Op::Load || n->name != eb.buffer) return fold_indicator_comparison(n);
    std::map<std::string, ir::Expr> sub;
    for (size_t k = 0; k < eb.iters.size(); ++k) sub[eb.iters[k]] = n->args[k];
    return ir::substitute(eb.value, sub);
  });
}

void remove_buffer(ir::LoopProgram& p, const std::string& name) {
  for (auto it = p.buffers.begin(); it != p.buffers.end(); ++it)
    if (it->name == name) {
      p.buffers.erase(it);
      return;
    }
}

void Schedule::compute_inline(const std::string& block) {
  const std::string P = "compute_inline";
  StmtPath path = find_block(program_.body, block, P);
  ElementwiseBlock eb = match_elementwise(program_, *path.back(), P);
  for (const ir::StmtNode* b : blocks_under(program_.body))
    if (b->name != block && block_writes(*b).count(eb.buffer))
      throw ScheduleError(P, "buffer '" + eb.buffer + "' of block '" + block +
                                 "' is also written by block '" + b->name + "'");
  ir::LoopProgram p = program_;
  p.body = replace_at(path, nullptr);
  p.body = ir::mutate(p.body, [&](const ir::Stmt& s) -> ir::Stmt {
    if (s->kind != ir::StmtKind::Block) return s;
    ir::StmtNode n = *s;
    auto rewrite = [&](const ir::Stmt& part) {
      return part ? ir::mutate_exprs(part, [&](const ir::Expr& e) { return inline_loads(e, eb); })
                  : part;
    };
    n.init = rewrite(n.init);
    n.body = rewrite(n.body);
    return std::make_shared<const ir::StmtNode>(std::move(n));
  });
  remove_buffer(p, eb.buffer);
  commit(std::move(p), {{"primitive", P}, {"block", block}});
}

void replay_compute_inline(Schedule& s, const nlohmann::json& j) {
  s.compute_inline(j.at("block").get<std::string>());
}

}  // namespace kintsugi::schedule
