// Register forwarding and redundant tail selects on hand-built tile programs: a register scoped
// to a loop disappears (its masked update is the new value, a stale read elsewhere is a zero
// tile), an instance-scoped register carried across iterations stays (only a read right after a
// write is forwarded; a write overwritten before any read goes), and a select of a load against
// zero goes exactly when the load's own bound check already masks it. Then the fused causal
// prefill as translated: only the state carried across key tiles is left in registers.
#include <gtest/gtest.h>

#include "TileTestUtil.h"
#include "tile/Passes.h"
#include "tile/passes/Walk.h"

using namespace kintsugi;
using tile::OpKind;
using tile::TileOp;
using tile::TileType;

using namespace kintsugi::tile_test;

namespace {

// A loop whose body updates register r (scoped to `scope`) under the row bound of the X tile x:
// r = select(mask, x, r), then stores exp of r read back. `stale_in_then` swaps the select's
// branches (the tests look only at the structure).
struct MaskedScratch {
  Builder b;
  int x = -1, mask = -1;
};

void masked_scratch(MaskedScratch* t, const std::string& scope, bool stale_in_then) {
  Builder& b = t->b;
  b.reg("r", f32({4, 8}), scope);
  b.open_loop("j");
  ir::Expr row = times(index("j"), 4);
  t->x = b.cast(b.load_x(row, true), f32({4, 8}));
  int rows = b.arange(row, 4);
  int in_bounds = b.map(ir::Op::Lt, {rows, b.full(dim("N"))}, TileType{DType::Bool, {4}});
  t->mask = b.broadcast(in_bounds, {0}, TileType{DType::Bool, {4, 8}});
  int old = b.read("r", f32({4, 8}));
  int updated = stale_in_then ? b.select(t->mask, old, t->x, f32({4, 8}))
                              : b.select(t->mask, t->x, old, f32({4, 8}));
  b.write("r", updated, f32({4, 8}));
  int now = b.read("r", f32({4, 8}));
  b.store_y(row, b.exp(now, f32({4, 8})));
  b.close_loop();
  tile::verify(b.program);
}

}  // namespace

TEST(TileForward, ScopedRegisterIsForwardedAndRemoved) {
  MaskedScratch t;
  masked_scratch(&t, "j", false);
  EXPECT_NE(tile::to_string(t.b.program).find("reg r : f32[4, 8] in j\n"), std::string::npos)
      << tile::to_string(t.b.program);
  tile::forward_registers(t.b.program);
  tile::verify(t.b.program);
  tile::Kernel& k = t.b.kernel();
  EXPECT_TRUE(k.registers.empty());
  EXPECT_EQ(count(k.body, OpKind::Read), 0);
  EXPECT_EQ(count(k.body, OpKind::Write), 0);
  EXPECT_EQ(count_selects(k.body), 0);  // select(mask, x, stale) is x
  const TileOp* e = find_def(k.body, last_store(k.body).args[0]);
  ASSERT_TRUE(e && e->is_call);
  EXPECT_EQ(e->args, std::vector<int>{t.x});
}

TEST(TileForward, StaleReadInThenBranchIsDropped) {
  MaskedScratch t;
  masked_scratch(&t, "j", true);
  tile::forward_registers(t.b.program);
  tile::verify(t.b.program);
  tile::Kernel& k = t.b.kernel();
  EXPECT_TRUE(k.registers.empty());
  EXPECT_EQ(count_selects(k.body), 0);  // select(mask, stale, x) is x
  EXPECT_EQ(find_def(k.body, last_store(k.body).args[0])->args, std::vector<int>{t.x});
}

TEST(TileForward, StaleReadUsedElsewhereIsZero) {
  Builder b;
  b.reg("acc", f32({4, 8}), "j");
  b.open_loop("j");
  ir::Expr row = times(index("j"), 4);
  int x = b.cast(b.load_x(row, true), f32({4, 8}));
  int old = b.read("acc", f32({4, 8}));
  int sum = b.map(ir::Op::Add, {old, x}, f32({4, 8}));
  b.write("acc", sum, f32({4, 8}));
  b.store_y(row, b.read("acc", f32({4, 8})));
  b.close_loop();
  tile::verify(b.program);
  tile::forward_registers(b.program);
  tile::verify(b.program);
  tile::Kernel& k = b.kernel();
  EXPECT_TRUE(k.registers.empty());
  EXPECT_EQ(last_store(k.body).args[0], sum);
  // The stale operand of the add is a zero tile: a broadcast of a scalar `full 0.0`.
  const TileOp* zero = find_def(k.body, find_def(k.body, sum)->args[0]);
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->kind, OpKind::Broadcast);
  EXPECT_EQ(zero->type.shape, (std::vector<int64_t>{4, 8}));
  const TileOp* scalar = find_def(k.body, zero->args[0]);
  ASSERT_TRUE(scalar);
  EXPECT_EQ(scalar->kind, OpKind::Full);
  EXPECT_TRUE(ir::equal(scalar->scalar, ir::make_float(0.0, DType::F32)));
}

TEST(TileForward, InstanceScopedRegisterIsKept) {
  MaskedScratch t;
  masked_scratch(&t, "", false);
  tile::Kernel& k = t.b.kernel();
  // After the loop: the register's last value, stored once more.
  int final_value = t.b.read("r", f32({4, 8}));
  t.b.store_y(ir::make_int(0), final_value);
  tile::verify(t.b.program);
  tile::forward_registers(t.b.program);
  tile::verify(t.b.program);
  // The loop carries r: its read at the top of the loop and the write stay, as does the read
  // after the loop; only the read right after the write is forwarded.
  ASSERT_EQ(k.registers.size(), 1u);
  EXPECT_EQ(k.registers[0].name, "r");
  EXPECT_EQ(count(k.body, OpKind::Read), 2);
  EXPECT_EQ(count(k.body, OpKind::Write), 1);
  EXPECT_EQ(count_selects(k.body), 1);
  const tile::TileStmt& loop = k.body.at(0);
  ASSERT_EQ(loop.kind, tile::StmtKind::For);
  int stored_in_loop = -1, written = -1;
  for (const tile::TileStmt& s : loop.body) {
    if (s.op.kind == OpKind::Write) written = s.op.args[0];
    if (s.op.kind == OpKind::Map && s.op.is_call) stored_in_loop = s.op.args[0];
  }
  EXPECT_EQ(stored_in_loop, written);
}

// A write that the same code overwrites before any read is dropped; the one a loop reads stays.
TEST(TileForward, OverwrittenWriteIsDropped) {
  Builder b;
  TileType t = f32({4, 8});
  b.reg("r", t, "");
  int x = b.cast(b.load_x(ir::make_int(0), false), t);
  b.write("r", x, t);
  b.write("r", b.exp(x, t), t);
  b.open_loop("j");
  int carried = b.read("r", t);
  b.store_y(times(index("j"), 4), carried);
  b.write("r", b.exp(carried, t), t);
  b.close_loop();
  tile::verify(b.program);
  tile::forward_registers(b.program);
  tile::verify(b.program);
  tile::Kernel& k = b.kernel();
  ASSERT_EQ(k.registers.size(), 1u);
  int writes_before_loop = 0;
  for (const tile::TileStmt& s : k.body)
    writes_before_loop += s.kind == tile::StmtKind::Op && s.op.kind == OpKind::Write;
  EXPECT_EQ(writes_before_loop, 1);
  EXPECT_EQ(count(k.body, OpKind::Write), 2);
}

TEST(TileForward, InstanceRegisterStartsZero) {
  Builder b;
  b.reg("m", f32({4, 8}), "");
  int first = b.read("m", f32({4, 8}));
  b.store_y(ir::make_int(0), first);
  tile::verify(b.program);
  tile::forward_registers(b.program);
  tile::verify(b.program);
  EXPECT_TRUE(b.kernel().registers.empty());
  const TileOp* zero = find_def(b.kernel().body, last_store(b.kernel().body).args[0]);
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->kind, OpKind::Broadcast);
}

TEST(TileVerify, ScopedRegisterOutsideItsLoop) {
  Builder b;
  b.reg("r", f32({4}), "j");
  b.read("r", f32({4}));
  try {
    tile::verify(b.program);
    FAIL() << "a read outside the register's loop was accepted";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("outside its loop j"), std::string::npos) << e.what();
  }
}

namespace {

// select(lt(arange(start) along the tile's rows, full(extent)), f32(load X[j * 4:+4?, 0:+8]), 0)
// stored to Y; returns the number of selects left after drop_redundant_tail_selects.
int selects_left(const ir::Expr& start, const ir::Expr& extent, bool tail = true) {
  Builder b;
  b.open_loop("j");
  ir::Expr row = times(index("j"), 4);
  int x = b.cast(b.load_x(row, tail), f32({4, 8}));
  int rows = b.arange(start, 4);
  int in_bounds = b.map(ir::Op::Lt, {rows, b.full(extent)}, TileType{DType::Bool, {4}});
  int mask = b.broadcast(in_bounds, {0}, TileType{DType::Bool, {4, 8}});
  int zero = b.full(ir::make_float(0.0, DType::F32));
  b.store_y(row, b.select(mask, x, zero, f32({4, 8})));
  b.close_loop();
  tile::verify(b.program);
  tile::drop_redundant_tail_selects(b.program);
  tile::verify(b.program);
  int left = count_selects(b.kernel().body);
  if (left == 0) {
    EXPECT_EQ(last_store(b.kernel().body).args[0], x);
  }
  return left;
}

}  // namespace

TEST(TileTailSelect, LoadBoundMaskIsDropped) {
  EXPECT_EQ(selects_left(times(index("j"), 4), dim("N")), 0);
}

TEST(TileTailSelect, OtherMasksAreKept) {
  // Another start, another extent, or a region that is not bounds-checked.
  EXPECT_EQ(
      selects_left(ir::make_binary(ir::Op::Add, times(index("j"), 4), ir::make_int(1)), dim("N")),
      1);
  EXPECT_EQ(selects_left(times(index("j"), 4), dim("M")), 1);
  EXPECT_EQ(selects_left(times(index("j"), 4), dim("N"), false), 1);
}

// The load's rows are the columns of its transpose (a key tile in front of the scores' dot): a
// mask along them is still the load's bound.
TEST(TileTailSelect, TransposedLoadBoundMaskIsDropped) {
  Builder b;
  b.open_loop("j");
  ir::Expr row = times(index("j"), 4);
  int x = b.cast(b.load_x(row, true), f32({4, 8}));
  int xt = b.permute(x, {1, 0}, f32({8, 4}));
  int rows = b.arange(row, 4);
  int in_bounds = b.map(ir::Op::Lt, {rows, b.full(dim("N"))}, TileType{DType::Bool, {4}});
  int mask = b.broadcast(in_bounds, {1}, TileType{DType::Bool, {8, 4}});
  int zero = b.full(ir::make_float(0.0, DType::F32));
  int masked = b.select(mask, xt, zero, f32({8, 4}));
  b.store_y(row, b.permute(masked, {1, 0}, f32({4, 8})));
  b.close_loop();
  tile::verify(b.program);
  tile::drop_redundant_tail_selects(b.program);
  tile::verify(b.program);
  EXPECT_EQ(count_selects(b.kernel().body), 0);
}

namespace {

// select(mask, broadcast(w) * f32(load X[j * 4:+4?]), 0) for the rows' weights w = exp(rows),
// masked by the same bound (select(in_bounds, w, 0)) or not: whether the product is stored as
// is after drop_redundant_tail_selects.
bool product_unmasked(bool masked_weights) {
  Builder b;
  b.open_loop("j");
  ir::Expr row = times(index("j"), 4);
  TileType t = f32({4, 8}), v = f32({4});
  int x = b.cast(b.load_x(row, true), t);
  int rows = b.arange(row, 4);
  int in_bounds = b.map(ir::Op::Lt, {rows, b.full(dim("N"))}, TileType{DType::Bool, {4}});
  int zero = b.full(ir::make_float(0.0, DType::F32));
  int w = b.exp(b.cast(rows, v), v);
  if (masked_weights) w = b.select(in_bounds, w, zero, v);
  int product = b.map(ir::Op::Mul, {b.broadcast(w, {0}, t), x}, t);
  int mask = b.broadcast(in_bounds, {0}, TileType{DType::Bool, {4, 8}});
  b.store_y(row, b.select(mask, product, zero, t));
  b.close_loop();
  tile::drop_redundant_tail_selects(b.program);
  tile::verify(b.program);
  return last_store(b.kernel().body).args[0] == product;
}

}  // namespace

// Both factors are 0 past the bound: the product is, and its select goes. With unmasked weights
// (an exponential may be infinite, and inf * 0 is NaN) it stays.
TEST(TileTailSelect, ProductOfMaskedFactorsIsNotMaskedAgain) {
  EXPECT_TRUE(product_unmasked(true));
  EXPECT_FALSE(product_unmasked(false));
}

TEST(TileForward, CausalPrefillKeepsOnlyCarriedState) {
  runtime::SizeMap sizes = {{"B", 1}, {"H", 2}, {"S", 100}, {"T", 100}, {"D", 16}};
  tile::TileProgram tp = tiled("attention/prefill_causal.te", sizes);
  ASSERT_EQ(tp.kernels.size(), 1u);
  tile::Kernel& k = tp.kernels[0];
  std::vector<std::string> names;
  for (const tile::Register& r : k.registers) {
    names.push_back(r.name);
    EXPECT_EQ(r.scope_loop, "");
  }
  EXPECT_EQ(names, (std::vector<std::string>{"l", "o", "m.prev", "m.next"}));
  // The PV dot takes the V tile as loaded (its load zero-fills past T; no select in between).
  int pv_dots = 0;
  tile::for_each_op(k.body, [&](TileOp& d) {
    if (d.kind != OpKind::Dot) return;
    const TileOp* v = find_def(k.body, d.args[1]);
    if (v && v->kind == OpKind::Cast) v = find_def(k.body, v->args[0]);
    pv_dots += v && v->kind == OpKind::Load && v->buffer == "V";
  });
  EXPECT_EQ(pv_dots, 1);
}
