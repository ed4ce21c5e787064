// Reductions of permuted tiles (tile/passes/ReducePermute.cpp): reduce(permute(x, (1, 0)), 1) is
// reduce(x, 0) (the permute is left for eliminate_dead); a permute that reorders the axes that
// remain stays.
#include <gtest/gtest.h>

#include "TileTestUtil.h"
#include "tile/Passes.h"

using namespace kintsugi;
using namespace kintsugi::tile_test;

namespace {

// sum over axis `axis` of permute(f32(X[0:4, 0:8]) broadcast to [4, 8, 2], perm).
tile::TileProgram reduce_of_permute(std::vector<int> perm, int axis) {
  Builder b;
  int x =
      b.broadcast(b.cast(b.load_x(ir::make_int(0), false), f32({4, 8})), {0, 1}, f32({4, 8, 2}));
  std::vector<int64_t> shape = {4, 8, 2}, permuted;
  for (int a : perm) permuted.push_back(shape[static_cast<size_t>(a)]);
  TileOp p;
  p.kind = OpKind::Permute;
  p.args = {x};
  p.perm = perm;
  p.type = f32(permuted);
  int y = b.emit(p);
  TileOp r;
  r.kind = OpKind::Reduce;
  r.args = {y};
  r.axis = axis;
  permuted.erase(permuted.begin() + axis);
  r.type = f32(permuted);
  b.emit(r);
  return b.program;
}

const TileOp& the_reduce(tile::TileProgram& p) {
  const TileOp* out = nullptr;
  tile::for_each_op(p.kernels[0].body, [&](TileOp& o) {
    if (o.kind == OpKind::Reduce) out = &o;
  });
  return *out;
}

}  // namespace

TEST(TileReducePermute, ReductionReadsTheUnpermutedTile) {
  tile::TileProgram p = reduce_of_permute({1, 0, 2}, 1);  // sums X's rows: axis 0 of x
  tile::fold_permutes_into_reduces(p);
  tile::verify(p);
  EXPECT_EQ(the_reduce(p).axis, 0);
  EXPECT_EQ(find_def(p.kernels[0].body, the_reduce(p).args[0])->kind, OpKind::Broadcast);
}

TEST(TileReducePermute, ReorderedRemainingAxesKeepThePermute) {
  tile::TileProgram p = reduce_of_permute({2, 0, 1}, 0);  // remaining axes (0, 1) come out (0, 1)
  tile::fold_permutes_into_reduces(p);
  EXPECT_EQ(the_reduce(p).axis, 2);
  tile::TileProgram q = reduce_of_permute({1, 0, 2}, 2);  // remaining axes come out (1, 0)
  tile::fold_permutes_into_reduces(q);
  tile::verify(q);
  EXPECT_EQ(find_def(q.kernels[0].body, the_reduce(q).args[0])->kind, OpKind::Permute);
  EXPECT_EQ(the_reduce(q).axis, 2);
}
