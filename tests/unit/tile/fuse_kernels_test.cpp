// Kernel fusion (tile/passes/FuseKernels.cpp): two kernels over the grid (i: N) where the second
// reads the row the first stored for the same i become one kernel (values renumbered, the result
// verifies); when the second reads rows of other instances, or the grids differ, they stay apart.
// Then decode's split-K combines and normalisation as translated: one kernel after the chunks'.
#include <gtest/gtest.h>

#include "TileTestUtil.h"
#include "tile/Passes.h"

using namespace kintsugi;
using namespace kintsugi::tile_test;

namespace {

enum class Variant { SameRow, OtherRows, OtherGrid };

// Names `b`'s kernel the second one, over grid axis `g`.
void as_second(Builder& b, tile::GridAxis g) {
  b.kernel().name = "test.1";
  b.kernel().grid = {std::move(g)};
}

// The program of `first`'s kernel followed by `second`'s.
tile::TileProgram joined(const Builder& first, Builder& second) {
  tile::TileProgram p = first.program;
  p.kernels.push_back(second.kernel());
  return p;
}

TileOp row_region(OpKind kind, ir::Expr row, bool squeezed) {
  TileOp o;
  o.kind = kind;
  o.buffer = "Y";
  o.starts = {std::move(row), ir::make_int(0)};
  o.axis_of_dim = squeezed ? std::vector<int>{-1, 0} : std::vector<int>{0, 1};
  o.bounds_checked = {!squeezed, false};
  o.type = squeezed ? f32({8}) : f32({4, 8});
  return o;
}

// Kernel 0: Y[i] = f32(X[i]) * 2. Kernel 1: Y[i] = Y[i] + 1, or (OtherRows) Y[i] = 1 after
// loading rows 0..3, or (OtherGrid) the same over the grid (i: M).
tile::TileProgram two_kernels(Variant v) {
  tile::GridAxis g{"i", dim("N")};
  Builder first;
  first.kernel().grid = {g};
  TileOp x = row_region(OpKind::Load, index("i"), true);
  x.buffer = "X";
  x.type = TileType{DType::F16, {8}};
  int two = first.full(ir::make_float(2.0, DType::F32));
  int doubled = first.map(ir::Op::Mul, {first.cast(first.emit(x), f32({8})), two}, f32({8}));
  TileOp st = row_region(OpKind::Store, index("i"), true);
  st.args = {doubled};
  first.emit(st);

  Builder second;
  as_second(second, v == Variant::OtherGrid ? tile::GridAxis{"i", dim("M")} : g);
  bool own_row = v != Variant::OtherRows;
  int y = second.emit(row_region(OpKind::Load, own_row ? index("i") : ir::make_int(0), own_row));
  int one = second.full(ir::make_float(1.0, DType::F32));
  TileOp out = row_region(OpKind::Store, index("i"), true);
  out.args = {own_row ? second.map(ir::Op::Add, {y, one}, f32({8}))
                      : second.broadcast(one, {}, f32({8}))};
  second.emit(out);
  return joined(first, second);
}

}  // namespace

TEST(TileFuseKernels, RowHandedOverInTheInstanceFuses) {
  tile::TileProgram p = two_kernels(Variant::SameRow);
  tile::verify(p);
  tile::fuse_kernels(p);
  tile::verify(p);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].name, "test.0");
  EXPECT_EQ(count(p.kernels[0].body, OpKind::Store), 2);
  // Forwarding then hands the row over without loading it back.
  tile::forward_stores(p);
  tile::eliminate_dead(p);
  EXPECT_EQ(count(p.kernels[0].body, OpKind::Load), 1);
}

TEST(TileFuseKernels, OtherInstancesRowsOrAnotherGridKeepTheKernelsApart) {
  for (Variant v : {Variant::OtherRows, Variant::OtherGrid}) {
    tile::TileProgram p = two_kernels(v);
    tile::verify(p);
    tile::fuse_kernels(p);
    EXPECT_EQ(p.kernels.size(), 2u) << static_cast<int>(v);
  }
}

TEST(TileFuseKernels, DecodeCombinesAreOneKernel) {
  runtime::SizeMap sizes = {{"B", 1}, {"H", 2}, {"S", 1}, {"T", 1000}, {"D", 16}};
  tile::TileProgram tp = tiled("attention/decode_causal.te", sizes);
  ASSERT_EQ(tp.kernels.size(), 2u);  // the chunks' partials, then everything over the rows
  EXPECT_EQ(tp.kernels[1].grid.size(), 3u);
  EXPECT_EQ(last_store(tp.kernels[1].body).buffer, "O");
}

namespace {

// Kernel 0 over (i: N) stores rows [i * 4, i * 4 + 4) of Y; kernel 1 over (k: N), the same grid
// named after another loop, adds 1 to rows [k * step, k * step + 4).
tile::TileProgram row_blocks(int64_t step) {
  Builder first;
  first.kernel().grid = {tile::GridAxis{"i", dim("N")}};
  TileOp st = row_region(OpKind::Store, times(index("i"), 4), false);
  st.bounds_checked = {false, false};
  st.args = {first.broadcast(first.full(ir::make_float(2.0, DType::F32)), {}, f32({4, 8}))};
  first.emit(st);
  Builder second;
  as_second(second, tile::GridAxis{"k", dim("N")});
  TileOp ld = row_region(OpKind::Load, times(index("k"), step), false);
  ld.bounds_checked = {false, false};
  int y = second.emit(ld);
  TileOp out = row_region(OpKind::Store, times(index("k"), step), false);
  out.bounds_checked = {false, false};
  out.args = {
      second.map(ir::Op::Add, {y, second.full(ir::make_float(1.0, DType::F32))}, f32({4, 8}))};
  second.emit(out);
  return joined(first, second);
}

}  // namespace

TEST(TileFuseKernels, BlocksOfRowsOverARenamedGridFuse) {
  tile::TileProgram p = row_blocks(4);
  tile::verify(p);
  tile::fuse_kernels(p);
  tile::verify(p);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(ir::to_string(last_store(p.kernels[0].body).starts[0]), "i * 4");
  // Blocks of 4 rows every 2 rows overlap the next instance's: apart.
  tile::TileProgram overlapping = row_blocks(2);
  tile::fuse_kernels(overlapping);
  EXPECT_EQ(overlapping.kernels.size(), 2u);
}
