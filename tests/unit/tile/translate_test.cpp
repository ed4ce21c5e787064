// Loop-to-tile translation and the tile passes: structure of the fused attention tile program
// (two dots, Q hoisted out of the key loop, K/V streamed), the verifier's register hazard check,
// and irregular reads as gathers.
#include <gtest/gtest.h>

#include "TileTestUtil.h"
#include "tile/Interpreter.h"

using namespace kintsugi;
using kintsugi::tile_test::tiled;

namespace {

int count_ops(const tile::TileBody& b, tile::OpKind kind, int depth, int* at_depth0) {
  int n = 0;
  for (const tile::TileStmt& s : b) {
    if (s.kind == tile::StmtKind::For) {
      n += count_ops(s.body, kind, depth + 1, at_depth0);
    } else if (s.op.kind == kind) {
      ++n;
      if (depth == 0 && at_depth0) ++*at_depth0;
    }
  }
  return n;
}

}  // namespace

TEST(TileTranslate, FusedAttentionStructure) {
  runtime::SizeMap sizes = {{"B", 1}, {"H", 2}, {"S", 100}, {"T", 70}, {"D", 16}};
  tile::TileProgram tp = tiled("attention/prefill_global.te", sizes);
  ASSERT_EQ(tp.kernels.size(), 1u);
  const tile::Kernel& k = tp.kernels[0];
  EXPECT_EQ(k.grid.size(), 3u);  // b, h, row tile
  EXPECT_EQ(tp.specialised.at("D").value, 16);
  EXPECT_EQ(count_ops(k.body, tile::OpKind::Dot, 0, nullptr), 2);  // QKᵀ and PV
  int loads_outside = 0;
  EXPECT_EQ(count_ops(k.body, tile::OpKind::Load, 0, &loads_outside), 3);  // Q, K, V
  EXPECT_EQ(loads_outside, 1);                                             // Q, hoisted
  int streams = 0;
  for (const tile::TileStmt& s : k.body)
    if (s.kind == tile::StmtKind::For) {
      EXPECT_EQ(s.pipeline_stages, 2);
      for (const tile::TileStmt& c : s.body)
        if (c.kind == tile::StmtKind::Op && c.op.kind == tile::OpKind::Load)
          streams += c.op.stream_loop == s.var;
    }
  EXPECT_EQ(streams, 2);  // K and V
}

TEST(TileTranslate, GroupedQueryDecodeReadsEachKeyTileOnceForTheGroup) {
  runtime::SizeMap sizes = {{"B", 1}, {"HQ", 8}, {"HK", 2}, {"S", 1}, {"T", 300}, {"D", 16}};
  tile::TileProgram tp = tiled("attention/decode_gqa.te", sizes);
  EXPECT_EQ(tp.specialised.at("HQ / HK").value, 4);
  const tile::Kernel& chunk = tp.kernels.at(0);
  EXPECT_EQ(chunk.grid.at(1).var, "h0");  // one grid instance per key/value head
  int dots = 0, partial_loads = 0;
  tile::for_each_op(chunk.body, [&](const tile::TileOp& o) {
    if (o.kind == tile::OpKind::Dot) {
      ++dots;
      EXPECT_EQ(o.type.shape.at(0), 4);  // the group's query heads are the rows
    }
    if (o.kind == tile::OpKind::Load) {
      EXPECT_TRUE(o.buffer == "Q" || o.buffer == "K" || o.buffer == "V") << o.buffer;
      partial_loads += o.buffer == "K" || o.buffer == "V";
    }
  });
  EXPECT_EQ(dots, 2);
  EXPECT_EQ(partial_loads, 2);  // K and V once; the chunk maximum is forwarded, not reloaded
  runtime::SizeMap other = sizes;
  other["HK"] = 4;
  try {
    tile::check_specialised(tp.specialised, "decode_gqa", other, {});
    FAIL();
  } catch (const RuntimeArgError& e) {
    EXPECT_EQ(std::string(e.what()),
              "kernel decode_gqa was generated for HQ / HK = 4 (a tile extent), got 2; compile it "
              "again for these sizes");
  }
  tile::check_specialised(tp.specialised, "decode_gqa", sizes, {});
  // At head_dim 128 the combine runs over blocks of 32 columns, the maximum and the sum
  // recomputed in each: one kernel, whose blocks the specialised D = 128 keeps untailed.
  sizes["D"] = 128;
  tile::TileProgram wide = tiled("attention/decode_gqa.te", sizes);
  ASSERT_EQ(wide.kernels.size(), 2u);
  EXPECT_EQ(wide.kernels[1].grid.size(), 4u);
  const tile::TileOp& out = tile_test::last_store(wide.kernels[1].body);
  EXPECT_EQ(out.buffer, "O");
  EXPECT_EQ(out.args.size(), 1u);  // no mask
  EXPECT_EQ(out.bounds_checked, (std::vector<bool>{false, false, false, false}));
}

// Reads that are not a region (a start plus one tile axis per dimension, each axis once) are
// element-wise gathers of the buffer: X[j / 2, j] (not one element per step along j), X[j, j]
// (one axis twice) and X[i, IDX[i]] (an index read from a buffer); the plain X[i, j] stays a
// region load.
TEST(TileTranslate, IrregularReadsAreGathers) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes N = 8
input X: f32[N, N]
input IDX: i32[N]
output y[i]: f32 = sum[j](X[i, j] * X[j / 2, j] + X[j, j]) + X[i, IDX[i]]
)");
  tile::TileProgram tp = tile::translate(p, p.size_hints);
  tile::optimize(tp);
  int gathers = 0, loads = 0;
  for (const tile::Kernel& k : tp.kernels)
    tile::for_each_op(k.body, [&](const tile::TileOp& o) {
      if (o.kind == tile::OpKind::Gather) {
        ++gathers;
        EXPECT_EQ(o.buffer, "X");
      }
      loads += o.kind == tile::OpKind::Load;
    });
  EXPECT_EQ(gathers, 3);
  EXPECT_EQ(loads, 2);  // X[i, j] and IDX[i]
}

TEST(TileVerify, RegisterReadUsedAfterWrite) {
  tile::TileProgram tp;
  tile::Kernel k;
  k.name = "k";
  k.registers.push_back({"r", tile::TileType{DType::F32, {4}}, ""});
  auto op = [&](tile::OpKind kind, std::vector<int> args, int result) {
    tile::TileStmt s;
    s.op.kind = kind;
    s.op.buffer = "r";
    s.op.args = std::move(args);
    s.op.result = result;
    s.op.type = tile::TileType{DType::F32, {4}};
    k.body.push_back(s);
  };
  op(tile::OpKind::Read, {}, 0);
  op(tile::OpKind::Write, {0}, -1);
  op(tile::OpKind::Write, {0}, -1);  // %0 aliases r, which the first write changed
  k.num_values = 1;
  tp.kernels.push_back(k);
  try {
    tile::verify(tp);
    FAIL() << "a stale register read was accepted";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("used after a write"), std::string::npos) << e.what();
  }
}

// A size that is a buffer's innermost extent is recorded with the power of two (up to 16) that
// divides it at the translation's sizes, for vector loads; a launch at a size it does not divide
// is refused.
TEST(TileTranslate, InnermostSizesRecordTheirPowerOfTwo) {
  runtime::SizeMap sizes = {{"M", 4096}, {"N", 8200}};
  tile::TileProgram tp = tiled("norm/layernorm.te", sizes);
  ASSERT_TRUE(tp.divisible.count("N"));
  EXPECT_EQ(tp.divisible.at("N").divisor, 8);
  EXPECT_FALSE(tp.divisible.count("M"));  // no buffer's innermost extent
  tile::check_divisible(tp.divisible, "layernorm", {{"M", 3}, {"N", 16}}, {});
  try {
    tile::check_divisible(tp.divisible, "layernorm", {{"M", 4096}, {"N", 8196}}, {});
    FAIL();
  } catch (const RuntimeArgError& e) {
    EXPECT_EQ(std::string(e.what()),
              "kernel layernorm was generated for N divisible by 8 (vector loads, or tiles within "
              "runs of it), got 8196; compile it again for these sizes and params");
  }
  EXPECT_TRUE(tiled("norm/layernorm.te", {{"M", 4096}, {"N", 8191}}).divisible.empty());
}

// An integer param that a load's start reads (a group's first column, g * G) is recorded with
// the power of two that divides the value the kernels are translated for (the given one, else
// the program's), and a launch with a value it does not divide is refused.
TEST(TileTranslate, ParamsInStartsRecordTheirPowerOfTwo) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes M = 4, N = 256
param OFF: i32 = 64
input X: f32[M, N]
output Y[r, c: N - OFF]: f32 = X[r, c + OFF] * 2.0
)");
  runtime::SizeMap sizes = {{"M", 4}, {"N", 256}};
  schedule::AutoScheduleOptions o;
  o.sizes = sizes;
  const ir::LoopProgram scheduled = schedule::auto_schedule(p, o, nullptr).program();
  tile::TileProgram own = tile::translate(scheduled, sizes);  // OFF = 64, the program's
  ASSERT_TRUE(own.divisible.count("OFF"));
  EXPECT_EQ(own.divisible.at("OFF").divisor, 16);
  EXPECT_EQ(tile::translate(scheduled, sizes, {}, 0, {{"OFF", 56}}).divisible.at("OFF").divisor, 8);
  EXPECT_FALSE(tile::translate(scheduled, sizes, {}, 0, {{"OFF", 7}}).divisible.count("OFF"));
  tile::check_divisible(own.divisible, "shifted", sizes, {{"OFF", 32}});
  try {
    tile::check_divisible(own.divisible, "shifted", sizes, {{"OFF", 56}});
    FAIL();
  } catch (const RuntimeArgError& e) {
    EXPECT_NE(std::string(e.what()).find("generated for OFF divisible by 16"), std::string::npos)
        << e.what();
  }
}

// An integer param that a whole reduction runs over (a quantisation group's G columns) is a tile
// extent at its value, as a head size is: the group is one tile, read once for its maximum and its
// codes, with no loop and no tail mask; a launch with another value is refused.
TEST(TileTranslate, ParamExtentsAreSpecialised) {
  ir::LoopProgram p = schedtest::example("../tests/generality/block_quant_fp8.te");
  runtime::SizeMap sizes = {{"M", 64}, {"N", 7168}};
  schedule::AutoScheduleOptions o;
  o.sizes = sizes;
  const ir::LoopProgram scheduled = schedule::auto_schedule(p, o, nullptr).program();
  tile::TileProgram own = tile::translate(scheduled, sizes);  // G = 128, the program's
  tile::optimize(own);
  EXPECT_EQ(own.specialised.at("G").value, 128);
  EXPECT_FALSE(own.divisible.count("G"));
  const tile::Kernel& k = own.kernels.at(0);
  int loads = 0;
  for (const tile::TileStmt& s : k.body) EXPECT_NE(s.kind, tile::StmtKind::For);
  tile::for_each_op(k.body, [&](const tile::TileOp& op) {
    if (op.kind != tile::OpKind::Load) return;
    ++loads;
    EXPECT_EQ(op.type.shape, (std::vector<int64_t>{128}));
    EXPECT_EQ(op.bounds_checked, (std::vector<bool>{false, false}));
  });
  EXPECT_EQ(loads, 1);
  EXPECT_EQ(tile::translate(scheduled, sizes, {}, 0, {{"G", 56}}).specialised.at("G").value, 56);
  tile::check_specialised(own.specialised, "block_quant", sizes, {{"G", 128}});
  try {
    tile::check_specialised(own.specialised, "block_quant", sizes, {{"G", 256}});
    FAIL();
  } catch (const RuntimeArgError& e) {
    EXPECT_EQ(std::string(e.what()),
              "kernel block_quant was generated for G = 128 (a tile extent), got 256; compile it "
              "again for these sizes and params");
  }
}

// A position over two dimensions flattened into one, read at (r / P, r % P) in tiles of r whose
// extent divides P, is a region a tile (the quotient squeezed, the remainder along the tile);
// P's divisibility by the tile is recorded, and the tile interpreter, like every back end,
// refuses a launch where it does not hold.
TEST(TileTranslate, FlattenedRunsAreRegions) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes M = 2, C = 8, P = 16
input X: f32[M, C, P]
output S[m]: f32 = sum[r: C * P](X[m, r / P, r % P])
)");
  runtime::SizeMap sizes = {{"M", 3}, {"C", 5}, {"P", 2048}};
  schedule::AutoScheduleOptions o;
  o.sizes = sizes;
  o.whole_row_bytes = 0;
  tile::TileProgram tp = tile::translate(schedule::auto_schedule(p, o, nullptr).program(), sizes);
  tile::optimize(tp);
  int loads = 0, gathers = 0;
  tile::for_each_op(tp.kernels.at(0).body, [&](const tile::TileOp& op) {
    if (op.buffer != "X") return;
    loads += op.kind == tile::OpKind::Load;
    gathers += op.kind == tile::OpKind::Gather;
    if (op.kind != tile::OpKind::Load) return;
    EXPECT_EQ(op.axis_of_dim, (std::vector<int>{-1, -1, 0}));
    EXPECT_EQ(ir::to_string(op.starts[2]).find("% P"), ir::to_string(op.starts[2]).size() - 3)
        << ir::to_string(op.starts[2]);
  });
  EXPECT_EQ(loads, 1);
  EXPECT_EQ(gathers, 0);
  ASSERT_TRUE(tp.divisible.count("P"));
  const int64_t tile = tp.divisible.at("P").divisor;
  EXPECT_GE(tile, 64);
  runtime::SizeMap odd = {{"M", 3}, {"C", 5}, {"P", 2048 + tile / 2}};
  auto inputs = runtime::random_inputs(p, odd, 1);
  std::map<std::string, const runtime::Tensor*> in;
  for (auto& [name, t] : inputs) in[name] = &t;
  EXPECT_THROW(tile::interpret(tp, ir::InterpMode::Exact, in, odd, {}), RuntimeArgError);
  // At a size the tile does not divide, the read stays a gather, element by element.
  runtime::SizeMap other = {{"M", 3}, {"C", 5}, {"P", 1000}};
  o.sizes = other;
  tile::TileProgram gathered =
      tile::translate(schedule::auto_schedule(p, o, nullptr).program(), other);
  EXPECT_FALSE(gathered.divisible.count("P") && gathered.divisible.at("P").divisor > 16);
}
