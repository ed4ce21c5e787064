// rfactor, reduce_to_scan and rolling_update: equivalence on random inputs, and the repaired
// structure in the printed IR.
#include "ScheduleTestUtil.h"
#include "schedule/Analysis.h"

using namespace kintsugi;
using schedtest::expect_equivalent;
using schedule::LoopRef;
using schedule::Schedule;
using schedule::ScheduleError;

namespace {
const std::vector<runtime::SizeMap> kNorm = {
    {{"M", 3}, {"N", 9}}, {{"M", 2}, {"N", 17}}, {{"M", 1}, {"N", 4}}};
const std::vector<runtime::SizeMap> kAttn = {{{"B", 1}, {"H", 2}, {"S", 5}, {"T", 7}, {"D", 3}},
                                             {{"B", 1}, {"H", 1}, {"S", 9}, {"T", 9}, {"D", 2}},
                                             {{"B", 2}, {"H", 1}, {"S", 3}, {"T", 11}, {"D", 4}}};
}  // namespace

TEST(RFactor, RowSumPartials) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"l", "j"}, 4);
  std::string rf = s.rfactor("l", j[0]);
  EXPECT_EQ(rf, "l.rf");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(
      text.find(
          "block l.rf(spatial i:M, spatial j0:(N + 3) / 4, reduce j1:4) where j0 * 4 + j1 < N:"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("l.rf[i, j0] = l.rf[i, j0] + e[i, j0 * 4 + j1]"), std::string::npos) << text;
  EXPECT_NE(text.find("block l(spatial i:M, reduce j0:(N + 3) / 4):"), std::string::npos) << text;
  EXPECT_NE(text.find("l[i] = l[i] + l.rf[i, j0]"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_THROW(s.rfactor("l", LoopRef{"l", "i"}), ScheduleError);  // i drives a spatial variable
}

// The partials' axis placed first (factor_axis 0, as split-K places it), and an invalid position.
TEST(RFactor, FactorAxisFirst) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"l", "j"}, 4);
  EXPECT_THROW(s.rfactor("l", j[0], 2), ScheduleError);  // l has one dimension: positions 0, 1
  s.rfactor("l", j[0], 0);
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("buffer l.rf: f32[(N + 3) / 4, M]"), std::string::npos) << text;
  EXPECT_NE(text.find("l.rf[j0, i] = l.rf[j0, i] + e[i, j0 * 4 + j1]"), std::string::npos) << text;
  EXPECT_NE(text.find("l[i] = l[i] + l.rf[j0, i]"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kNorm);
  // The trace replays with the axis.
  EXPECT_EQ(s.trace().back().at("factor_axis").get<int>(), 0);
}

TEST(ReduceToScan, RunningMax) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"m", "j"}, 4);
  s.rfactor("m", j[0]);
  std::string scan = s.reduce_to_scan("m", j[0]);
  EXPECT_EQ(scan, "m.scan");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("m.scan[i, j0] = max(select(j0 > 0, m.scan[i, j0 - 1], -inf), m.rf[i, j0])"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("e[i, j] = exp(X[i, j] - m.scan[i, (N + 3) / 4 - 1])"), std::string::npos)
      << text;  // final value
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_THROW(s.reduce_to_scan("Y", LoopRef{"Y", "j"}), ScheduleError);  // not a reduction
}

TEST(RollingUpdate, OnlineSoftmax) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"m", "j"}, 4);
  s.rolling_update("m", j[0]);
  s.rolling_update("l", j[0]);
  std::string text = ir::to_string(s.program());
  // The sum is repaired with exp(m_prev - m_cur) when the running max moves, and restarts at
  // the tile where the running max leaves -inf (what the fully masked tiles before it gave).
  EXPECT_NE(text.find("l[i] = select(j0 > 0, select(m.scan[i, j0 - 1] == -inf && m.scan[i, j0] "
                      "!= -inf, 0.0, l[i] * select(m.scan[i, j0 - 1] == m.scan[i, j0], 1.0, "
                      "exp(m.scan[i, j0 - 1] - m.scan[i, j0]))), l[i]) + l.rf[i, j0]"),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_EQ(s.trace()[2].at("repair").get<std::string>(), "t * exp(m.scan - m.scan')");
}

TEST(RollingUpdate, CausalAttentionFlashStructure) {
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"s.sum0", "j"}, 4);
  s.compute_inline("s");
  s.reverse_compute_at("c", j[0]);
  s.rolling_update("m", j[0]);
  s.rolling_update("l", j[0]);
  s.rolling_update("o", j[0]);
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("o[b, h, i, d] = select(j0 > 0, select(m.scan[b, h, i, j0 - 1] == -inf && "
                      "m.scan[b, h, i, j0] != -inf, 0.0, o[b, h, i, d] * select("),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(), kAttn);
}

TEST(SplitScanBuffer, RunningMaxBecomesALoopCarriedPair) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"m", "j"}, 4);
  s.rolling_update("m", j[0]);
  s.rolling_update("l", j[0]);
  s.split_scan_buffer("m", j[0]);
  std::string text = ir::to_string(s.program());
  EXPECT_EQ(text.find("m.scan"), std::string::npos) << text;
  EXPECT_NE(text.find("m.next[i] = max(select(j0 > 0, m.prev[i], -inf), m.rf[i, j0])"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("block m.prev.update(spatial i:M):\n        m.prev[i] = m.next[i]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("e[i, j] = exp(X[i, j] - m.prev[i])"), std::string::npos)
      << text;  // the final value
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_THROW(s.split_scan_buffer("l", j[0]), ScheduleError);  // not a scan
}

TEST(RollingUpdate, LeadingFullyMaskedTilesDoNotPoisonRows) {
  // Window of 3 keys with T > S: every row starts with fully masked key tiles (running max -inf).
  ir::LoopProgram p = schedtest::lowered(R"(
sizes S = 5, T = 11, D = 2
param W: i32 = 3
input Q: f32[S, D]
input K: f32[T, D]
input V: f32[T, D]
s[i, j] = sum[d](Q[i, d] * K[j, d])
c[i, j] = select(j <= i + T - S && i + T - S - j < W, s[i, j], -inf)
m[i] = max[j](c[i, j])
e[i, j] = exp(c[i, j] - m[i])
l[i] = sum[j](e[i, j])
o[i, d] = sum[j](e[i, j] * V[j, d])
output O[i, d]: f32 = select(l[i] > 0, o[i, d] / l[i], 0)
)");
  Schedule s(p);
  auto j = s.split(LoopRef{"s", "j"}, 2);
  s.reverse_compute_at("c", j[0]);
  s.rolling_update("m", j[0]);
  s.rolling_update("l", j[0]);
  s.rolling_update("o", j[0]);
  EXPECT_NE(ir::to_string(s.program())
                .find("select(m.scan[i, j0 - 1] == -inf && m.scan[i, j0] != -inf, 0.0, l[i] * "),
            std::string::npos)
      << ir::to_string(s.program());
  expect_equivalent(p, s.program(),
                    {{{"S", 5}, {"T", 11}, {"D", 2}}, {{"S", 7}, {"T", 7}, {"D", 1}}});
}

TEST(SplitKUpdate, DecodeChunksAndCombine) {
  ir::LoopProgram p = schedtest::example("attention/decode_causal.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"s.sum0", "j"}, 4);
  s.reverse_compute_at("s", j[0]);
  s.reverse_compute_at("c", j[0]);
  s.split_k_update("m", j[0]);
  s.split_k_update("l", j[0]);
  s.split_k_update("o", j[0]);
  std::string text = ir::to_string(s.program());
  // The chunk loop holds only partials (chunk axis first); combine nests follow it.
  EXPECT_NE(text.find("e[b, h, i, j] = exp(c[b, h, i, j] - m.rf[j0, b, h, i])"), std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "l[b, h, i] = l[b, h, i] + select(m.rf[j0, b, h, i] == -inf && m[b, h, i] != -inf, 0.0, "
          "l.rf[j0, b, h, i] * select(m.rf[j0, b, h, i] == m[b, h, i], 1.0, exp(m.rf[j0, b, h, i] "
          "- m[b, h, i])))"),
      std::string::npos)
      << text;
  expect_equivalent(p, s.program(),
                    {{{"B", 1}, {"H", 2}, {"S", 1}, {"T", 13}, {"D", 3}},
                     {{"B", 2}, {"H", 1}, {"S", 1}, {"T", 4}, {"D", 2}},
                     {{"B", 1}, {"H", 1}, {"S", 3}, {"T", 9}, {"D", 2}}});
  EXPECT_EQ(s.trace()[4].at("repair").get<std::string>(), "t * exp(m.rf - m.rf')");
}

TEST(PropagateMask, CausalAndWindowSkipDeadTiles) {
  for (const char* file : {"attention/prefill_causal.te", "attention/prefill_windowed.te"}) {
    ir::LoopProgram p = schedtest::example(file);
    Schedule s(p);
    auto j = s.split(LoopRef{"s.sum0", "j"}, 4);
    s.reverse_compute_at("s", j[0]);
    s.reverse_compute_at("c", j[0]);
    s.rolling_update("m", j[0]);
    s.rolling_update("l", j[0]);
    s.rolling_update("o", j[0]);
    EXPECT_THROW(s.propagate_mask("c", j[0]), ScheduleError);  // scans first
    s.split_scan_buffer("m", j[0]);
    s.propagate_mask("c", j[0]);
    std::string text = ir::to_string(s.program());
    EXPECT_NE(text.find("for j0 in "), std::string::npos) << text;
    std::vector<runtime::SizeMap> shapes = {{{"S", 5}, {"T", 7}, {"D", 3}},
                                            {{"S", 9}, {"T", 9}, {"D", 2}},
                                            {{"S", 11}, {"T", 6}, {"D", 2}}};
    for (auto& sh : shapes) {
      if (std::string(file).find("windowed") != std::string::npos) {
        sh["HQ"] = 2;
        sh["HK"] = 1;
      } else {
        sh["H"] = 1;
      }
      sh["B"] = 1;
    }
    expect_equivalent(p, s.program(), shapes);
  }
}

// Layer-norm variance with the mean as producer: no h(t, r, r') exists, the algebra engine
// derives an augmented state (sums of the terms' complete parts). rolling_update sums each
// statistic alongside the variance and scans it like the mean; the repair at tile j0 reads the
// statistics over the tiles before j0.
TEST(RollingUpdate, LayerNormVarianceWithAugmentedState) {
  ir::LoopProgram p = schedtest::example("norm/layernorm.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"mu.sum0", "j"}, 4);
  s.rolling_update("mu.sum0", j[0]);
  s.rolling_update("var.sum0", j[0]);
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("block var.sum0.S1.rf(spatial i:M, spatial j0:(N + 3) / 4, reduce j_1:4)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("var.sum0.S1.scan[i, j0] = select(j0 > 0, var.sum0.S1.scan[i, j0 - 1], "
                      "0.0) + var.sum0.S1.rf[i, j0]"),
            std::string::npos)
      << text;
  // Re-based about the running sum extrapolated to the whole row (sum * N / covered), as
  // t + (x' - x) * (-2 S1 + S0 (x + x')): no difference of large squares.
  EXPECT_NE(text.find("(mu.sum0.scan[i, j0] * (f32(N) / f32(max(min(j0 * 4 + 4, N), 1))) - "
                      "mu.sum0.scan[i, j0 - 1] * (f32(N) / f32(max(min(j0 * 4, N), 1)))) * "
                      "(-(2.0 * var.sum0.S1.scan[i, j0 - 1]) + var.sum0.S0.scan[i, j0 - 1] * ("),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(), kNorm);
  // The mean and both statistics become loop-carried pairs.
  for (const char* scan : {"mu.sum0", "var.sum0.S0", "var.sum0.S1"})
    s.split_scan_buffer(scan, LoopRef{scan, "j0"});
  text = ir::to_string(s.program());
  EXPECT_EQ(text.find(".scan"), std::string::npos) << text;
  EXPECT_NE(text.find("var.sum0.S1.prev[i] = var.sum0.S1.next[i]"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kNorm);
  Schedule r = schedule::replay(p, s.trace());
  EXPECT_EQ(ir::to_string(r.program()), text);
}

// The same with split-K: each chunk sums its statistics next to its partial variance, and the
// combine re-bases every chunk's partial from the chunk's own sum to the global one.
TEST(SplitKUpdate, LayerNormVarianceWithAugmentedState) {
  ir::LoopProgram p = schedtest::example("norm/layernorm.te");
  Schedule s(p);
  auto j = s.split(LoopRef{"mu.sum0", "j"}, 4);
  s.split_k_update("mu.sum0", j[0]);
  // The write-back of mu.sum0 left the chunk loop; name the loop through the partial block.
  s.split_k_update("var.sum0", LoopRef{"mu.sum0.rf", "j0"});
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("var.sum0.S1.rf[j0, i] = var.sum0.S1.rf[j0, i] + f32(X[i, j0 * 4 + j_1]) / "
                      "f32(N)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("block var.sum0(spatial i:M, reduce j0:(N + 3) / 4):"), std::string::npos)
      << text;
  // A chunk's sum extrapolated to the whole row (sum * N / the chunk's elements) is its old mean.
  EXPECT_NE(text.find("(mu.sum0[i] - mu.sum0.rf[j0, i] * (f32(N) / f32(max(min(j0 * 4 + 4, N) - "
                      "j0 * 4, 1)))) * (-(2.0 * var.sum0.S1.rf[j0, i]) + var.sum0.S0.rf[j0, i] * "),
            std::string::npos)
      << text;
  // Only the chunk partials of a statistic are kept.
  EXPECT_EQ(text.find("buffer var.sum0.S1:"), std::string::npos) << text;
  EXPECT_EQ(text.find("block var.sum0.S1("), std::string::npos) << text;
  expect_equivalent(p, s.program(), kNorm);
  expect_equivalent(p, s.program(), {{{"M", 2}, {"N", 1}}, {{"M", 1}, {"N", 30}}}, 7);
}

// FlashDecoding: split-K over chunks of two key tiles, and the rolling update over the tiles
// inside each chunk (the tiles of a chunk are a range of the axis that starts at the chunk's
// offset). Each chunk's partials are online-softmax states; the combine is split-K's. T = 4 and
// 9 leave the last chunk's second tile empty: its partials read as the reducers' identities.
TEST(SplitKUpdate, RollingUpdateOverTheTilesOfAChunk) {
  for (const char* file :
       {"attention/decode_causal.te", "attention/decode_softcap.te", "attention/decode_gqa.te"}) {
    ir::LoopProgram p = schedtest::example(file);
    Schedule s(p);
    auto j = s.split(LoopRef{"s.sum0", "j"}, 8);
    auto k = s.split(j[1], 4);
    // The elementwise blocks between the scores and the maximum.
    for (const ir::StmtNode* b : schedule::blocks_under(p.body)) {
      if (b->name == "m") break;
      if (b->name != "s.sum0") s.reverse_compute_at(b->name, k[0]);
    }
    for (const char* m : {"m", "l", "o"}) s.split_k_update(m, j[0]);
    for (const char* m : {"m.rf", "l.rf", "o.rf"}) s.rolling_update(m, k[0]);
    std::string text = ir::to_string(s.program());
    // The chunk's running maximum is a scan over its tiles; the chunk's sum is repaired with it.
    EXPECT_NE(text.find("block m.rf(spatial b:B, spatial h:"), std::string::npos) << file << text;
    EXPECT_NE(text.find("scan j10:2)"), std::string::npos) << file << text;
    EXPECT_NE(text.find("l.rf[j0, b, h, i] = select(j10 > 0, select(m.rf.scan[j0, b, h, i, j10 - "
                        "1] == -inf && m.rf.scan[j0, b, h, i, j10] != -inf, 0.0, l.rf[j0, b, h, "
                        "i] * "),
              std::string::npos)
        << file << text;
    std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"S", 1}, {"T", 13}, {"D", 3}},
                                            {{"B", 2}, {"S", 1}, {"T", 4}, {"D", 2}},
                                            {{"B", 1}, {"S", 1}, {"T", 16}, {"D", 2}},
                                            {{"B", 1}, {"S", 1}, {"T", 9}, {"D", 2}},
                                            {{"B", 1}, {"S", 2}, {"T", 1}, {"D", 2}}};
    for (auto& sh : shapes) {
      if (std::string(file).find("gqa") != std::string::npos ||
          std::string(file).find("softcap") != std::string::npos) {
        sh["HQ"] = 4;
        sh["HK"] = 2;
      } else {
        sh["H"] = 2;
      }
    }
    expect_equivalent(p, s.program(), shapes);
  }
}
