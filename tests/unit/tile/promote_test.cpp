// Buffer promotion (tile/passes/Promote.cpp): a loop that loads and stores one loop-invariant,
// untailed region of a buffer keeps it in a register (loaded before the loop, or started at 0
// when the first iteration stores the region first; stored after);
// a loop whose loaded value outlives the next store, whose region moves with the loop, or whose
// region has a tail keeps its memory accesses. Then the split-K combine kernels of decode as
// translated: no store is left inside their loops.
#include <gtest/gtest.h>

#include "TileTestUtil.h"
#include "tile/Passes.h"

using namespace kintsugi;
using namespace kintsugi::tile_test;

namespace {

enum class Variant { Promotable, ValueOutlivesStore, RegionMoves, RegionHasTail, InitFirst };

// for j: y = Y[row]; Y[row] = y + f32(X[4j]) (or the variant's change: InitFirst first stores 0
// at j == 0, as a split-K chunk's rolling partial starts).
tile::TileProgram accumulate_into_y(Variant v, ir::Expr trips = nullptr) {
  Builder b;
  TileType t = f32({4, 8});
  b.open_loop("j", trips);
  if (v == Variant::InitFirst) {
    int zero = b.broadcast(b.full(ir::make_float(0.0, DType::F32)), {}, t);
    int first = b.broadcast(b.full(ir::make_binary(ir::Op::Eq, index("j"), ir::make_int(0))), {},
                            TileType{DType::Bool, {4, 8}});
    TileOp init = Builder::region("Y", ir::make_int(0), false);
    init.kind = OpKind::Store;
    init.args = {zero, first};
    init.type = t;
    b.emit(init);
  }
  ir::Expr row = v == Variant::RegionMoves ? times(index("j"), 4) : ir::make_int(0);
  bool tail = v == Variant::RegionHasTail;
  int y = b.load_y(row, tail);
  int x = b.cast(b.load_x(times(index("j"), 4), true), t);
  if (v == Variant::ValueOutlivesStore) b.store_y(row, x, tail);
  b.store_y(row, b.map(ir::Op::Add, {y, x}, t), tail);
  b.close_loop();
  return b.program;
}

int memory_accesses_in_loops(tile::TileBody& body, const std::string& buffer) {
  int n = 0;
  for (tile::TileStmt& s : body)
    if (s.kind == tile::StmtKind::For)
      tile::for_each_op(s.body, [&](TileOp& o) {
        n += (o.kind == OpKind::Load || o.kind == OpKind::Store) && o.buffer == buffer;
      });
  return n;
}

// Promotes, and checks that Y lives in one register for the loop.
tile::Kernel& promote_y(tile::TileProgram& p) {
  tile::promote_loop_buffers(p);
  tile::verify(p);
  tile::Kernel& k = p.kernels[0];
  EXPECT_EQ(k.registers.size(), 1u);
  EXPECT_EQ(memory_accesses_in_loops(k.body, "Y"), 0);
  return k;
}

}  // namespace

TEST(TilePromote, LoopInvariantRegionMovesToARegister) {
  tile::TileProgram p = accumulate_into_y(Variant::Promotable);
  tile::Kernel& k = promote_y(p);
  ASSERT_EQ(k.registers.size(), 1u);
  EXPECT_EQ(k.registers[0].name, "Y.promoted");
  // Loaded once in front of the loop, stored once after it.
  ASSERT_EQ(k.body.size(), 5u);
  EXPECT_EQ(k.body[0].op.kind, OpKind::Load);
  EXPECT_EQ(k.body[1].op.kind, OpKind::Write);
  EXPECT_EQ(k.body[2].kind, tile::StmtKind::For);
  EXPECT_EQ(k.body[3].op.kind, OpKind::Read);
  EXPECT_EQ(k.body[4].op.kind, OpKind::Store);
  EXPECT_EQ(count(k.body, OpKind::Write), 2);
}

// A loop of 3 iterations whose first iteration first stores the whole region starts its register
// at 0: the buffer is not loaded before the loop. Over N iterations (maybe none) it is loaded.
TEST(TilePromote, ARegionTheFirstIterationStoresStartsAtZero) {
  tile::TileProgram p = accumulate_into_y(Variant::InitFirst, ir::make_int(3));
  tile::Kernel& k = promote_y(p);
  EXPECT_EQ(k.body[0].op.kind, OpKind::Full) << tile::to_string(p);
  int loads_of_y = 0;
  tile::for_each_op(k.body,
                    [&](TileOp& o) { loads_of_y += o.kind == OpKind::Load && o.buffer == "Y"; });
  EXPECT_EQ(loads_of_y, 0) << tile::to_string(p);
  // The init stores what the register starts with: it is gone (one write in the loop).
  EXPECT_EQ(count(k.body, OpKind::Write), 2) << tile::to_string(p);
  // Without the init, or in a loop that may not run, the buffer is loaded first.
  tile::TileProgram q = accumulate_into_y(Variant::Promotable, ir::make_int(3));
  tile::promote_loop_buffers(q);
  EXPECT_EQ(q.kernels[0].body[0].op.kind, OpKind::Load);
  tile::TileProgram r = accumulate_into_y(Variant::InitFirst);
  tile::promote_loop_buffers(r);
  EXPECT_EQ(r.kernels[0].body[0].op.kind, OpKind::Load) << tile::to_string(r);
}

TEST(TilePromote, UnsafeLoopsKeepTheirMemoryAccesses) {
  for (Variant v : {Variant::ValueOutlivesStore, Variant::RegionMoves, Variant::RegionHasTail}) {
    tile::TileProgram p = accumulate_into_y(v);
    int before = memory_accesses_in_loops(p.kernels[0].body, "Y");
    tile::promote_loop_buffers(p);
    tile::verify(p);
    EXPECT_TRUE(p.kernels[0].registers.empty()) << static_cast<int>(v);
    EXPECT_EQ(memory_accesses_in_loops(p.kernels[0].body, "Y"), before) << static_cast<int>(v);
  }
}

TEST(TilePromote, DecodeCombineLoopsStoreNothing) {
  runtime::SizeMap sizes = {{"B", 1}, {"H", 2}, {"S", 1}, {"T", 1000}, {"D", 16}};
  tile::TileProgram tp = tiled("attention/decode_causal.te", sizes);
  int loops = 0, promoted = 0;
  for (tile::Kernel& k : tp.kernels) {
    for (tile::TileStmt& s : k.body) {
      if (s.kind != tile::StmtKind::For) continue;
      ++loops;
      EXPECT_EQ(count(s.body, OpKind::Store), 0) << k.name;
    }
    for (const tile::Register& r : k.registers) promoted += r.name.ends_with(".promoted");
  }
  EXPECT_EQ(loops, 3);  // the running max, sum and output of the split-K combine
  EXPECT_EQ(promoted, 3);
}
