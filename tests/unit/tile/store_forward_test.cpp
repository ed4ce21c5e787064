// Store-to-load forwarding (tile/passes/StoreForward.cpp): a load of the region the same code
// stored whole, untailed and in the buffer's dtype is the stored value, also inside a loop that
// does not store to the buffer; a store masked by exactly its tail's bound is the load inside the
// buffer and 0 past it; another masked or tailed store, or a loop in between that stores to the
// buffer, keeps the load.
#include <gtest/gtest.h>

#include "TileTestUtil.h"
#include "tile/Passes.h"

using namespace kintsugi;
using namespace kintsugi::tile_test;

namespace {

enum class Variant { Whole, Tailed, Masked, BoundMasked, StoredInLoopBetween, LoadInLoop };

// Y[0] = f32(X[0]); ...; Y[4] = Y[0] (the variant's change in between), or, for LoadInLoop,
// Y[0] = f32(X[0]); for j: r = Y[0].
tile::TileProgram store_then_load(Variant v) {
  Builder b;
  TileType t = f32({4, 8});
  ir::Expr row = ir::make_int(0);
  int x = b.cast(b.load_x(row, false), t);
  if (v == Variant::Masked) {
    TileOp o = Builder::region("Y", row, false);
    o.kind = OpKind::Store;
    o.type = t;
    o.args = {x, b.broadcast(b.full(ir::make_bool(true)), {}, TileType{DType::Bool, {4, 8}})};
    b.emit(o);
  } else if (v == Variant::BoundMasked) {  // rows 0..3 of Y where row < N: the tail's bound
    TileOp o = Builder::region("Y", row, true);
    o.kind = OpKind::Store;
    o.type = t;
    TileType rows{DType::Bool, {4}};
    int inside = b.map(ir::Op::Lt, {b.arange(row, 4), b.full(dim("N"))}, rows);
    o.args = {x, b.broadcast(inside, {0}, TileType{DType::Bool, {4, 8}})};
    b.emit(o);
  } else {
    b.store_y(row, x, v == Variant::Tailed);
  }
  if (v == Variant::StoredInLoopBetween) {
    b.open_loop("j");
    b.store_y(row, x, false);
    b.close_loop();
  }
  if (v == Variant::LoadInLoop) {  // for j: r = Y[0]
    b.reg("r", t, "");
    b.open_loop("j");
    b.write("r", b.load_y(row, false), t);
    b.close_loop();
    return b.program;
  }
  b.store_y(ir::make_int(4), b.load_y(row, v == Variant::Tailed || v == Variant::BoundMasked),
            false);
  return b.program;
}

}  // namespace

TEST(TileStoreForward, WholeStoreIsTheLoadedValue) {
  for (Variant v : {Variant::Whole, Variant::LoadInLoop}) {
    tile::TileProgram p = store_then_load(v);
    tile::forward_stores(p);
    tile::eliminate_dead(p);
    tile::verify(p);
    tile::Kernel& k = p.kernels[0];
    EXPECT_EQ(count(k.body, OpKind::Load), 1) << static_cast<int>(v);  // X only
    int value = -1;
    tile::for_each_op(k.body, [&](TileOp& o) {
      if (o.kind == OpKind::Write || (o.kind == OpKind::Store && o.starts[0]->int_value == 4))
        value = o.args[0];
    });
    EXPECT_EQ(find_def(k.body, value)->kind, OpKind::Cast) << static_cast<int>(v);
  }
}

TEST(TileStoreForward, StoreMaskedByItsBoundIsTheLoadedValueInside) {
  tile::TileProgram p = store_then_load(Variant::BoundMasked);
  tile::forward_stores(p);
  tile::eliminate_dead(p);
  tile::verify(p);
  tile::Kernel& k = p.kernels[0];
  EXPECT_EQ(count(k.body, OpKind::Load), 1);  // X only
  const TileOp& select = *find_def(k.body, last_store(k.body).args[0]);
  ASSERT_EQ(select.kind, OpKind::Map);
  EXPECT_EQ(select.op, ir::Op::Select);                             // inside ? value : 0
  EXPECT_EQ(find_def(k.body, select.args[1])->kind, OpKind::Cast);  // the stored value
  EXPECT_EQ(find_def(k.body, select.args[2])->kind, OpKind::Full);  // 0 past the bound
}

TEST(TileStoreForward, PartialOrOverwrittenStoresKeepTheLoad) {
  for (Variant v : {Variant::Tailed, Variant::Masked, Variant::StoredInLoopBetween}) {
    tile::TileProgram p = store_then_load(v);
    tile::forward_stores(p);
    tile::verify(p);
    tile::Kernel& k = p.kernels[0];
    EXPECT_EQ(count(k.body, OpKind::Load), 2) << static_cast<int>(v);
    const TileOp& out = last_store(k.body);
    EXPECT_EQ(find_def(k.body, out.args[0])->kind, OpKind::Load) << static_cast<int>(v);
  }
}
