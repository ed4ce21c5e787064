// \file CancelPermutes.cpp
// A permute of elementwise operations on permuted tiles is the operations on the unpermuted
// tiles: `permute(map(permute(x, q), y), p)` is `map(x, permute(y, p))` when p after q is the
// identity. Translation computes an elementwise expression in the axis order of the tensor it
// reads, so a mask stored key-major (`MASK[b, j, i]`) makes the scores a [keys, rows] tile
// between two transposes; moving the outer transpose onto the mask's load leaves the scores in
// their own order, and the load transposed is read where it is used (no tile is moved). Only a
// permute under which some permute cancels is rewritten, through maps and casts whose tile
// operands are permutes, loads, or such maps and casts in turn; other operands get the permute
// themselves, so no permute of a computed tile is added. A permute of a broadcast vector is the
// vector broadcast along the permuted axes.
//
// Invariant established: no permute is applied to an elementwise tree in which a permute
// inverse to it could cancel.
#include <algorithm>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

// Axis k of the result of permute(permute(x, inner), outer) is x's axis inner[outer[k]].
std::vector<int> compose(const std::vector<int>& inner, const std::vector<int>& outer) {
  std::vector<int> c;
  for (int k : outer) c.push_back(inner[static_cast<size_t>(k)]);
  return c;
}

bool is_identity(const std::vector<int>& perm) {
  for (size_t k = 0; k < perm.size(); ++k)
    if (perm[k] != static_cast<int>(k)) return false;
  return true;
}

std::vector<int64_t> permuted_shape(const std::vector<int64_t>& shape,
                                    const std::vector<int>& perm) {
  std::vector<int64_t> out;
  for (int a : perm) out.push_back(shape[static_cast<size_t>(a)]);
  return out;
}

class CancelPermutes : public OpRewriter {
 public:
  using OpRewriter::OpRewriter;

 protected:
  void rewrite(TileOp& o, TileBody& out) override {
    if (o.kind != OpKind::Permute) return;
    if (const TileOp* b = def(o.args[0]); b && broadcast_leaf(*b)) {
      o = permuted_broadcast(*b, o.perm, o.result);
      return;
    }
    const TileOp* tree = def(o.args[0]);
    if (!tree || (tree->kind != OpKind::Map && tree->kind != OpKind::Cast)) return;
    if (!movable(tree->result) || !cancels(tree->result, o.perm)) return;
    TileOp moved = *tree;
    moved.type.shape = o.type.shape;
    for (int& a : moved.args)
      if (!is_scalar(a)) a = permuted(a, o.perm, out);
    moved.result = o.result;
    o = moved;
  }

 private:
  bool is_scalar(int id) const {
    const TileOp* d = def(id);
    return d && d->type.shape.empty();
  }

  // A broadcast of a scalar or of a vector: permuted, it is the same operand broadcast along the
  // permuted axes (a row's statistic along the other axis of a transposed tile).
  bool broadcast_leaf(const TileOp& d) const {
    return d.kind == OpKind::Broadcast && d.dims.size() <= 1;
  }

  TileOp permuted_broadcast(const TileOp& b, const std::vector<int>& perm, int result) const {
    TileOp p = b;
    p.result = result;
    p.type.shape = permuted_shape(b.type.shape, perm);
    for (int& a : p.dims)
      a = static_cast<int>(std::find(perm.begin(), perm.end(), a) - perm.begin());
    return p;
  }

  // Whether the permute can move through `id`'s tree: maps and casts down to permutes, loads and
  // broadcasts of vectors.
  bool movable(int id) const {
    const TileOp* d = def(id);
    if (!d) return false;
    if (d->type.shape.empty() || d->kind == OpKind::Permute || d->kind == OpKind::Load ||
        broadcast_leaf(*d))
      return true;
    if (d->kind != OpKind::Map && d->kind != OpKind::Cast) return false;
    for (int a : d->args)
      if (!movable(a)) return false;
    return true;
  }

  // Whether some permute of `id`'s tree composes with `perm` to the identity.
  bool cancels(int id, const std::vector<int>& perm) const {
    const TileOp* d = def(id);
    if (!d || d->type.shape.empty()) return false;
    if (d->kind == OpKind::Permute) return is_identity(compose(d->perm, perm));
    if (d->kind != OpKind::Map && d->kind != OpKind::Cast) return false;
    for (int a : d->args)
      if (cancels(a, perm)) return true;
    return false;
  }

  // permute(id, perm), built from id's tree (movable) with the permute moved to its leaves.
  int permuted(int id, const std::vector<int>& perm, TileBody& out) {
    const TileOp* d = def(id);
    if (d->kind == OpKind::Permute) {
      std::vector<int> c = compose(d->perm, perm);
      if (is_identity(c)) return d->args[0];
      TileOp p = *d;
      p.perm = c;
      p.type.shape = permuted_shape(def(d->args[0])->type.shape, c);
      return append(p, out);
    }
    if (broadcast_leaf(*d)) return append(permuted_broadcast(*d, perm, -1), out);
    if (d->kind == OpKind::Load) {
      TileOp p;
      p.kind = OpKind::Permute;
      p.args = {id};
      p.perm = perm;
      p.type = TileType{d->type.dtype, permuted_shape(d->type.shape, perm)};
      return append(p, out);
    }
    TileOp m = *d;
    m.type.shape = permuted_shape(d->type.shape, perm);
    for (int& a : m.args)
      if (!is_scalar(a)) a = permuted(a, perm, out);
    return append(m, out);
  }
};

}  // namespace

void cancel_permutes(TileProgram& p) {
  for (Kernel& k : p.kernels) CancelPermutes(k).run();
}

}  // namespace kintsugi::tile
