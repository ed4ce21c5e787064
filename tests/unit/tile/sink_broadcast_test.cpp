// Broadcast sinking (tile/passes/SinkBroadcast.cpp): several broadcasts of functions of one
// loaded tile become that function of one broadcast (after cse), a broadcast of free values
// becomes the values made at the broadcast's shape (an arange along the axis the broadcast puts
// it at), a lone broadcast of a loaded tile's function stays, and kernels with dots are left
// alone. The examples' CPU runs check the rewritten programs' values against the reference.
#include <gtest/gtest.h>

#include "TileTestUtil.h"
#include "tile/Passes.h"

using namespace kintsugi;
using namespace kintsugi::tile_test;

namespace {

const TileType kWide = f32({4, 8, 2});

// Y = the sum over a new last axis of exp(f32(X[0:4, 0:8])) broadcast along it, times f32(X)
// broadcast the same way when `twice`.
tile::TileProgram broadcasts_of_x(bool twice) {
  Builder b;
  int x = b.cast(b.load_x(ir::make_int(0), false), f32({4, 8}));
  int wide = b.broadcast(b.exp(x, f32({4, 8})), {0, 1}, kWide);
  if (twice) wide = b.map(ir::Op::Mul, {wide, b.broadcast(x, {0, 1}, kWide)}, kWide);
  TileOp r;
  r.kind = OpKind::Reduce;
  r.args = {wide};
  r.axis = 2;
  r.type = f32({4, 8});
  b.store_y(ir::make_int(0), b.emit(r), false);
  return b.program;
}

// lt(arange(0, 4), 3) broadcast to [4, 8] with its axis at `dims`; with a dot in the kernel when
// `dot`.
tile::TileProgram broadcast_of_mask(std::vector<int> dims, bool dot) {
  Builder b;
  if (dot) {
    int a = b.cast(b.load_x(ir::make_int(0), false), f32({4, 8}));
    TileOp d;
    d.kind = OpKind::Dot;
    d.args = {a, b.broadcast(b.full(ir::make_float(1.0, DType::F32)), {}, f32({8, 4}))};
    d.type = f32({4, 4});
    b.emit(d);
  }
  int three = b.full(ir::make_int(3));
  int n = dims[0] == 0 ? 4 : 8;
  int mask = b.map(ir::Op::Lt, {b.arange(ir::make_int(0), n), three}, TileType{DType::Bool, {n}});
  b.broadcast(mask, std::move(dims), TileType{DType::Bool, {4, 8}});
  return b.program;
}

const TileOp* last_of(tile::TileProgram& p, OpKind kind) {
  const TileOp* out = nullptr;
  tile::for_each_op(p.kernels[0].body, [&](TileOp& o) {
    if (o.kind == kind) out = &o;
  });
  return out;
}

}  // namespace

TEST(TileSinkBroadcast, BroadcastsOfOneLoadedTileMerge) {
  tile::TileProgram p = broadcasts_of_x(true);
  tile::sink_broadcasts(p);
  tile::verify(p);
  tile::cse(p);
  tile::eliminate_dead(p);
  tile::verify(p);
  EXPECT_EQ(count(p.kernels[0].body, OpKind::Broadcast), 1) << tile::to_string(p);
  const TileOp* product = last_of(p, OpKind::Map);
  ASSERT_NE(product, nullptr);
  const TileOp* e = find_def(p.kernels[0].body, product->args[0]);  // the exp, of the wide tile
  EXPECT_TRUE(e->is_call && e->fn == ir::MathFn::Exp);
  EXPECT_EQ(e->type.shape, kWide.shape);
  EXPECT_EQ(find_def(p.kernels[0].body, e->args[0])->type.shape, kWide.shape);
}

TEST(TileSinkBroadcast, ALoneBroadcastOfALoadedTileStays) {
  tile::TileProgram p = broadcasts_of_x(false);
  std::string before = tile::to_string(p);
  tile::sink_broadcasts(p);
  EXPECT_EQ(tile::to_string(p), before);
}

TEST(TileSinkBroadcast, FreeValuesAreMadeAtTheBroadcastShape) {
  for (std::vector<int> dims : {std::vector<int>{0}, std::vector<int>{1}}) {
    tile::TileProgram p = broadcast_of_mask(dims, false);
    tile::sink_broadcasts(p);
    tile::verify(p);
    EXPECT_EQ(count(p.kernels[0].body, OpKind::Broadcast), 0) << tile::to_string(p);
    const TileOp* a = last_of(p, OpKind::Arange);
    EXPECT_EQ(a->type.shape, (std::vector<int64_t>{4, 8}));
    EXPECT_EQ(a->axis, dims[0]) << tile::to_string(p);
  }
}

TEST(TileSinkBroadcast, KernelsWithDotsAreLeftAlone) {
  tile::TileProgram p = broadcast_of_mask({0}, true);
  std::string before = tile::to_string(p);
  tile::sink_broadcasts(p);
  EXPECT_EQ(tile::to_string(p), before);
}

// The split-K combine of decode: the chunk scales and masks of the output combine read one
// broadcast of the chunks' maximum.
TEST(TileSinkBroadcast, DecodeCombineBroadcastsTheMaximumOnce) {
  tile::TileProgram p =
      tiled("attention/decode_causal.te", {{"B", 1}, {"H", 2}, {"S", 1}, {"T", 4096}, {"D", 32}});
  tile::Kernel& combine = p.kernels.back();
  int broadcasts = 0;
  tile::for_each_op(combine.body, [&](TileOp& o) {
    if (o.kind != OpKind::Broadcast) return;
    ++broadcasts;
    EXPECT_EQ(find_def(combine.body, o.args[0])->buffer, "m.rf") << tile::to_string(p);
  });
  EXPECT_EQ(broadcasts, 1) << tile::to_string(p);
}
