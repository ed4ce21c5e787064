// \file ReducePermute.cpp
// A reduction of a permuted tile is a reduction of the tile itself: `reduce(permute(x, perm),
// axis a)` is `reduce(x, axis perm[a])` when the axes that remain keep their order (perm without
// position a is increasing), since both results then hold, at every index, the reduction of the
// same elements. The PV product of a split-K partial (the key axis moved innermost, then summed)
// is such a reduction; back ends then reduce along the tile's own layout instead of moving the
// whole tile to permute it. The permute stays where other operations use it (eliminate_dead drops
// it otherwise).
//
// Invariant established: no reduction reads a permute whose order it does not need.
#include <map>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

// The axis of x that axis `a` of permute(x, perm) is, when the other axes keep their order.
int unpermuted_axis(const std::vector<int>& perm, int a) {
  int last = -1;
  for (size_t k = 0; k < perm.size(); ++k) {
    if (static_cast<int>(k) == a) continue;
    if (perm[k] < last) return -1;
    last = perm[k];
  }
  return perm[static_cast<size_t>(a)];
}

}  // namespace

void fold_permutes_into_reduces(TileProgram& p) {
  for (Kernel& k : p.kernels) {
    std::map<int, const TileOp*> permutes;
    for_each_op(k.body, [&](TileOp& o) {
      if (o.kind == OpKind::Permute) permutes[o.result] = &o;
      if (o.kind != OpKind::Reduce) return;
      auto it = permutes.find(o.args[0]);
      if (it == permutes.end()) return;
      int axis = unpermuted_axis(it->second->perm, o.axis);
      if (axis < 0) return;
      o.args[0] = it->second->args[0];
      o.axis = axis;
    });
  }
}

}  // namespace kintsugi::tile
