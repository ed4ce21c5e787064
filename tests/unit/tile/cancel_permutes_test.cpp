// Permutes moved through elementwise trees (tile/passes/CancelPermutes.cpp): a transpose of a
// map over a transposed tile and a load becomes the map over the tile and the load transposed;
// a transpose under which no permute cancels stays where it is.
#include <gtest/gtest.h>

#include "TileTestUtil.h"
#include "tile/Passes.h"

using namespace kintsugi;
using namespace kintsugi::tile_test;

namespace {

int transpose(Builder& b, int x, std::vector<int64_t> shape) {
  TileOp p;
  p.kind = OpKind::Permute;
  p.args = {x};
  p.perm = {1, 0};
  p.type = f32({shape[1], shape[0]});
  return b.emit(p);
}

// out = transpose(mul(inner, Y[0:4, 0:8])) : [8, 4], summed along its rows; inner is [4, 8]:
// transpose(E) when `transposed`, else E itself, E = exp(f32(X[0:4, 0:8])) transposed to [8, 4].
struct Program {
  tile::TileProgram p;
  int scores, out;
};
Program masked_transpose(bool transposed) {
  Builder b;
  int e = b.exp(b.cast(b.load_x(ir::make_int(0), false), f32({4, 8})), f32({4, 8}));
  int scores = transpose(b, e, {4, 8});  // [8, 4], the tile computed in the other order
  int inner = transposed ? transpose(b, scores, {8, 4}) : e;
  int masked = b.map(ir::Op::Mul, {inner, b.load_y(ir::make_int(0), false)}, f32({4, 8}));
  int out = transpose(b, masked, {4, 8});
  TileOp r;
  r.kind = OpKind::Reduce;
  r.args = {out};
  r.axis = 1;
  r.type = f32({8});
  b.emit(r);
  return {b.program, scores, out};
}

}  // namespace

TEST(TileCancelPermutes, TransposeMovesOntoTheLoadAndCancels) {
  Program t = masked_transpose(true);
  tile::cancel_permutes(t.p);
  tile::verify(t.p);
  tile::TileBody& body = t.p.kernels[0].body;
  const TileOp* out = find_def(body, t.out);
  ASSERT_EQ(out->kind, OpKind::Map);
  EXPECT_EQ(out->type.shape, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(out->args[0], t.scores);  // the two transposes cancel
  const TileOp* mask = find_def(body, out->args[1]);
  ASSERT_EQ(mask->kind, OpKind::Permute);
  EXPECT_EQ(find_def(body, mask->args[0])->kind, OpKind::Load);
}

TEST(TileCancelPermutes, NothingToCancelKeepsTheTranspose) {
  Program t = masked_transpose(false);
  tile::cancel_permutes(t.p);
  tile::verify(t.p);
  EXPECT_EQ(find_def(t.p.kernels[0].body, t.out)->kind, OpKind::Permute);
}
