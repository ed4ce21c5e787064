// \file MergeMapAxes.cpp
// merge_map_axes(block, count): a map over its innermost `count` axes, storing an intermediate
// buffer at those axes in its last dimensions, becomes a map over one axis of their product, and
// the buffer's last `count` dimensions become one; every access of the buffer reads the flattened
// position:
//
//   for y in [0, H): for x in [0, W):            for y_x in [0, H * W):
//     block e(spatial y:H, spatial x:W):   =>      block e(spatial y_x:H * W):
//       e[b, y, x] = exp(F[b, y, x] - m[b])          e[b, y_x] = exp(F[b, y_x / W, y_x % W] - m[b])
//   ... e[b, y, x] ...                           ... e[b, y * W + x] ...
//
// Between reductions whose axes were merged (merge_reduce_axes), such a map is read at the merged
// axis itself, e[b, (r / W) * W + r % W] = e[b, r], so the chain fuses through it as through a
// map written over the flattened position.
//
// Invariant: the buffer holds the same values at the same row-major positions; only its shape
// and the expressions of the positions change.
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/MergeAxes.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

std::string Schedule::merge_map_axes(const std::string& block, int count) {
  const std::string P = "merge_map_axes";
  using ir::Op;
  const ir::StmtNode& b = *find_block(program_.body, block, P).back();
  if (count < 2 || static_cast<size_t>(count) > b.iters.size())
    throw ScheduleError(P,
                        "block '" + block + "' has no " + std::to_string(count) + " axes to merge");
  for (const ir::IterVar& iv : b.iters)
    if (iv.kind != ir::IterKind::Spatial)
      throw ScheduleError(P, "block '" + block + "' reduces: it is not a map");
  const ir::StmtNode& store = *b.body;
  const ir::Buffer* buffer = program_.find_buffer(store.buffer);
  if (store.kind != ir::StmtKind::Store || !buffer ||
      buffer->role != ir::BufferRole::Intermediate ||
      buffer->shape.size() < static_cast<size_t>(count))
    throw ScheduleError(P, "block '" + block + "' does not store an intermediate buffer");
  // The block's innermost loops bind its last `count` iterations, which index the buffer's last
  // `count` dimensions, over their extents.
  std::vector<size_t> axes;
  const size_t dims = buffer->shape.size();
  for (int a = 0; a < count; ++a) {
    const size_t d = dims - static_cast<size_t>(count) + static_cast<size_t>(a);
    const ir::Expr& index = store.indices[d];
    size_t k = 0;
    while (k < b.iters.size() && !(index->op == Op::Var && index->name == b.iters[k].name)) ++k;
    if (k == b.iters.size() || !ir::provably_equal(b.iters[k].extent, buffer->shape[d]))
      throw ScheduleError(P, "block '" + block + "' does not store '" + buffer->name +
                                 "' at its own axes in the buffer's last " + std::to_string(count) +
                                 " dimensions");
    axes.push_back(k);
  }
  MergedAxes merged = merge_axes(*this, block, axes, P);

  // The buffer's last `count` dimensions flattened: (i1, .., ik) -> ((i1 * E2 + i2) * E3 + ..).
  ir::LoopProgram p = std::move(merged.program);
  ir::Buffer& flat = *std::find_if(p.buffers.begin(), p.buffers.end(),
                                   [&](const ir::Buffer& x) { return x.name == buffer->name; });
  const std::vector<ir::Expr> extents(flat.shape.end() - count, flat.shape.end());
  auto flatten = [&](std::vector<ir::Expr> indices) {
    ir::Expr at = indices[dims - static_cast<size_t>(count)];
    for (size_t a = 1; a < static_cast<size_t>(count); ++a)
      at = ir::make_binary(Op::Add, ir::make_binary(Op::Mul, at, extents[a]),
                           indices[dims - static_cast<size_t>(count) + a]);
    indices.resize(dims - static_cast<size_t>(count));
    indices.push_back(ir::simplify(at));
    return indices;
  };
  flat.shape.resize(dims - static_cast<size_t>(count));
  flat.shape.push_back(merged.extent);
  p.body = ir::mutate_exprs(p.body, [&](const ir::Expr& e) {
    if (e->op != Op::Load || e->name != buffer->name) return e;
    ir::ExprNode n = *e;
    n.args = flatten(e->args);
    return ir::Expr(std::make_shared<const ir::ExprNode>(std::move(n)));
  });
  p.body = ir::mutate(p.body, [&](const ir::Stmt& st) -> ir::Stmt {
    if (st->kind != ir::StmtKind::Store || st->buffer != buffer->name) return st;
    ir::StmtNode n = *st;
    n.indices = flatten(st->indices);
    return std::make_shared<const ir::StmtNode>(std::move(n));
  });
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"count", count}});
  return merged.name;
}

void replay_merge_map_axes(Schedule& s, const nlohmann::json& j) {
  s.merge_map_axes(j.at("block").get<std::string>(), j.at("count").get<int>());
}

}  // namespace kintsugi::schedule
