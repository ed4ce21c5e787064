// The auto-scheduler on the two chains that need more than a plain rolling update: Performer
// (complete producers of the chain placed after its head move before the tile loop) and layer
// norm (an augmented-state repair). Both paths, rolling update and split-K, are checked by
// running the interpreter before and after, at shapes with tails, and by replaying the trace.
#include <algorithm>

#include "ScheduleTestUtil.h"
#include "ir/Visit.h"
#include "schedule/AutoSchedule.h"

using namespace kintsugi;
using schedtest::expect_equivalent;
using schedule::Schedule;

namespace {

// Schedules with a small tile so that the shapes below have several tiles and a tail; rows
// below `split_k_below_rows` (at the source's sizes), and a decode step's instances below it, get
// split-K.
Schedule scheduled(const ir::LoopProgram& p, int64_t split_k_below_rows) {
  schedule::AutoScheduleOptions o;
  o.tile = 4;
  o.split_k_below_rows = o.split_k_below_instances = split_k_below_rows;
  std::vector<std::string> notes;
  Schedule s = schedule::auto_schedule(p, o, &notes);
  for (const std::string& n : notes) EXPECT_EQ(n.find("abandoned"), std::string::npos) << n;
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), ir::to_string(s.program()));
  return s;
}

int64_t count(const Schedule& s, const std::string& primitive) {
  std::vector<std::string> names = s.primitive_names();
  return std::count(names.begin(), names.end(), primitive);
}

}  // namespace

TEST(AutoSchedule, PerformerFusesAfterMovingCompleteProducers) {
  ir::LoopProgram p = schedtest::example("performer.te");
  const std::vector<runtime::SizeMap> shapes = {
      {{"B", 1}, {"H", 2}, {"S", 5}, {"T", 7}, {"D", 3}, {"R", 6}},
      {{"B", 1}, {"H", 1}, {"S", 9}, {"T", 3}, {"D", 2}, {"R", 9}},
      {{"B", 2}, {"H", 1}, {"S", 3}, {"T", 11}, {"D", 4}, {"R", 4}}};
  Schedule rolling = scheduled(p, 1);
  EXPECT_EQ(count(rolling, "rolling_update"), 3) << rolling.trace().dump(1);
  EXPECT_GT(count(rolling, "move_nest"), 0);
  expect_equivalent(p, rolling.program(), shapes);
  Schedule split_k = scheduled(p, 1000);
  EXPECT_EQ(count(split_k, "split_k_update"), 3) << split_k.trace().dump(1);
  expect_equivalent(p, split_k.program(), shapes);
}

TEST(AutoSchedule, LayerNormFusesWithAnAugmentedState) {
  ir::LoopProgram p = schedtest::example("norm/layernorm.te");
  const std::vector<runtime::SizeMap> shapes = {
      {{"M", 3}, {"N", 9}}, {{"M", 2}, {"N", 17}}, {{"M", 5}, {"N", 4}}, {{"M", 1}, {"N", 1}}};
  Schedule rolling = scheduled(p, 1);
  EXPECT_EQ(count(rolling, "rolling_update"), 2) << rolling.trace().dump(1);
  EXPECT_EQ(count(rolling, "split_scan_buffer"), 3);  // the mean and two statistics
  expect_equivalent(p, rolling.program(), shapes);
  Schedule split_k = scheduled(p, 1000);
  EXPECT_EQ(count(split_k, "split_k_update"), 2) << split_k.trace().dump(1);
  expect_equivalent(p, split_k.program(), shapes);
}

TEST(AutoSchedule, GroupedQueryDecodeGroupsHeadsAndSpreadsTheCombine) {
  ir::LoopProgram p = schedtest::example("attention/decode_gqa.te");
  schedule::AutoScheduleOptions o;
  o.tile = 4;
  o.combine_columns = 4;
  o.sizes = {{"B", 1}, {"HQ", 4}, {"HK", 2}, {"S", 1}, {"T", 9}, {"D", 6}};
  std::vector<std::string> notes;
  Schedule s = schedule::auto_schedule(p, o, &notes);
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), ir::to_string(s.program()));
  bool grouped = false;
  for (const nlohmann::json& e : s.trace())
    grouped =
        grouped || (e.at("primitive") == "distribute" &&
                    e.at("factor").dump() == R"({"args":[{"dim":"HQ"},{"dim":"HK"}],"op":"/"})");
  EXPECT_TRUE(grouped) << s.trace().dump(1);
  EXPECT_EQ(count(s, "reorder"), 1) << s.trace().dump(1);  // the output combine's columns
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("for d_10 in range((D + 3) / 4):"), std::string::npos) << text;
  expect_equivalent(p, s.program(),
                    {{{"B", 1}, {"HQ", 4}, {"HK", 2}, {"S", 1}, {"T", 9}, {"D", 6}},
                     {{"B", 2}, {"HQ", 6}, {"HK", 2}, {"S", 2}, {"T", 5}, {"D", 3}},
                     {{"B", 1}, {"HQ", 8}, {"HK", 1}, {"S", 1}, {"T", 13}, {"D", 9}},
                     {{"B", 1}, {"HQ", 2}, {"HK", 2}, {"S", 1}, {"T", 2}, {"D", 4}}});
}

// Split-K chunks of two tiles walked with the rolling update (FlashDecoding), on every decode
// variant: the trace replays, and the program computes what the unscheduled one does, also where
// the last chunk's second tile is empty (T = 5, 9 with tiles of 4).
TEST(AutoSchedule, DecodeChunksOfSeveralTilesWalkTheRollingUpdate) {
  for (const char* file : {"attention/decode_causal.te", "attention/decode_alibi.te",
                           "attention/decode_gqa.te", "attention/decode_softcap.te"}) {
    ir::LoopProgram p = schedtest::example(file);
    bool grouped = std::string(file).find("gqa") != std::string::npos ||
                   std::string(file).find("softcap") != std::string::npos;
    std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"S", 1}, {"T", 9}, {"D", 6}},
                                            {{"B", 2}, {"S", 2}, {"T", 5}, {"D", 3}},
                                            {{"B", 1}, {"S", 1}, {"T", 16}, {"D", 2}},
                                            {{"B", 1}, {"S", 1}, {"T", 1}, {"D", 4}}};
    for (auto& sh : shapes) {
      if (grouped) {
        sh["HQ"] = 4;
        sh["HK"] = 2;
      } else {
        sh["H"] = 2;
      }
    }
    schedule::AutoScheduleOptions o;
    o.tile = 4;
    o.chunk_tiles = 2;
    o.combine_columns = 4;
    o.sizes = shapes[0];
    std::vector<std::string> notes;
    Schedule s = schedule::auto_schedule(p, o, &notes);
    EXPECT_EQ(count(s, "split_k_update"), 3) << file << s.trace().dump(1);
    EXPECT_EQ(count(s, "rolling_update"), 3) << file << s.trace().dump(1);
    EXPECT_NE(std::find(notes.begin(), notes.end(),
                        "chunks of 2 tiles, each walked with the rolling update"),
              notes.end())
        << file;
    EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), ir::to_string(s.program()))
        << file;
    expect_equivalent(p, s.program(), shapes);
  }
}

// The chunk size chosen at the run's sizes (chunk_tiles = 0, the default): grouped decode, whose
// one-tile chunks write partial results of 13 % of what they read, walks chunks of 4 tiles;
// decode with one query head a key head (2 %) keeps one-tile chunks, and so does grouped decode
// when chunks of 2 tiles would leave fewer grid instances than wanted (T = 4096: 64 tiles of
// 4 groups). A choice above one tile schedules a program that computes what the source does.
TEST(AutoSchedule, ChunkSizeFollowsThePartialResultsAndTheParallelism) {
  auto chosen = [](const std::string& example, const runtime::SizeMap& sizes,
                   schedule::AutoScheduleOptions o = {}) {
    o.sizes = sizes;
    std::vector<std::string> notes;
    Schedule s = schedule::auto_schedule(schedtest::example(example), o, &notes);
    std::string choice = "one tile";
    for (const std::string& n : notes)
      if (n.rfind("chunks of ", 0) == 0 && n.find(" chosen") != std::string::npos)
        choice = n.substr(0, n.find(" chosen"));
    EXPECT_EQ(count(s, "rolling_update") > 0, choice != "one tile") << s.trace().dump(1);
    return std::make_pair(choice, s);
  };
  const runtime::SizeMap grouped = {{"B", 1}, {"HQ", 32}, {"HK", 4}, {"S", 1}, {"D", 128}};
  auto at = [](runtime::SizeMap sizes, int64_t t) {
    sizes["T"] = t;
    return sizes;
  };
  EXPECT_EQ(chosen("attention/decode_gqa.te", at(grouped, 32768)).first, "chunks of 4 tiles");
  EXPECT_EQ(chosen("attention/decode_gqa.te", at(grouped, 131072)).first, "chunks of 4 tiles");
  EXPECT_EQ(chosen("attention/decode_gqa.te", at(grouped, 4096)).first, "one tile");
  EXPECT_EQ(chosen("attention/decode_causal.te",
                   {{"B", 1}, {"H", 32}, {"S", 1}, {"D", 128}, {"T", 32768}})
                .first,
            "one tile");
  schedule::AutoScheduleOptions small;
  small.tile = 4;
  small.combine_columns = 4;
  small.min_chunk_instances = 2;
  const runtime::SizeMap tiny = {{"B", 1}, {"HQ", 4}, {"HK", 2}, {"S", 1}, {"T", 64}, {"D", 6}};
  auto [choice, s] = chosen("attention/decode_gqa.te", tiny, small);
  EXPECT_EQ(choice, "chunks of 8 tiles");
  ir::LoopProgram p = schedtest::example("attention/decode_gqa.te");
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), ir::to_string(s.program()));
  expect_equivalent(p, s.program(),
                    {tiny,
                     {{"B", 1}, {"HQ", 4}, {"HK", 2}, {"S", 1}, {"T", 37}, {"D", 6}},
                     {{"B", 2}, {"HQ", 6}, {"HK", 3}, {"S", 1}, {"T", 70}, {"D", 5}}});
}

// Each target's options: CUDA distributes the rows by 128 (four warps of two m16 blocks), the CPU
// by 64; the causal prefill scheduled with the CUDA rows computes what the source does at shapes
// with a partial row tile and a key tail.
TEST(AutoSchedule, TargetsChooseTheirRowTiles) {
  EXPECT_EQ(schedule::target_schedule_options("cuda").row_tile, 128);
  EXPECT_EQ(schedule::target_schedule_options("cpu").row_tile, 64);
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  schedule::AutoScheduleOptions o = schedule::target_schedule_options("cuda");
  o.tile = 16;
  o.sizes = {{"B", 1}, {"H", 1}, {"S", 200}, {"T", 200}, {"D", 4}};
  std::vector<std::string> notes;
  Schedule s = schedule::auto_schedule(p, o, &notes);
  EXPECT_NE(ir::to_string(s.program()).find("128"), std::string::npos)
      << ir::to_string(s.program());
  expect_equivalent(p, s.program(),
                    {{{"B", 1}, {"H", 1}, {"S", 130}, {"T", 140}, {"D", 4}},
                     {{"B", 1}, {"H", 2}, {"S", 37}, {"T", 50}, {"D", 3}}});
}

// A value derived from two reductions of the chain (a log-sum-exp style m + log(l)) read by a
// third: when split-K splits the third, the second's write-back reads both its own partial and
// its producer's partial by chunk, and the frontier must take its own (found by the chain
// fuzzer: the combine used one partial in place of the other).
TEST(AutoSchedule, SplitKFrontierTakesEachWriteBacksOwnPartial) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes M = 8, N = 200
input X: f32[M, N]
a0[i] = max[j](X[i, j]) / 2
a1[i] = max[j](exp(X[i, j] - a0[i]))
d1[i] = a0[i] + log(a1[i])
a2[i] = sum[j](X[i, j] - d1[i])
output S[i]: f32 = a2[i]
)");
  const std::vector<runtime::SizeMap> shapes = {
      {{"M", 3}, {"N", 9}}, {{"M", 2}, {"N", 17}}, {{"M", 5}, {"N", 64}}, {{"M", 1}, {"N", 1}}};
  Schedule split_k = scheduled(p, 1000);
  EXPECT_EQ(count(split_k, "split_k_update"), 3) << split_k.trace().dump(1);
  expect_equivalent(p, split_k.program(), shapes);
}

// An elementwise consumer of the scores placed in the row loop after the chain covers the whole
// tiles the scores were computed in; past the axis' end (a partial last tile) it must not run
// (found by the chain fuzzer: Z was written out of bounds at N = 9).
TEST(AutoSchedule, ConsumersOfATiledProducerStopAtTheAxisEnd) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes B = 1, H = 256, D = 128, N = 4096
param TEMP: f32 = 0.5
input A: bf16[B, H, D]
input Kt: f32[N, D]
s[b, h, j] = sum[d](f32(A[b, h, d]) * Kt[j, d])
t0[b, h, j] = s[b, h, j] / TEMP
a0[b, h] = max[j](t0[b, h, j]) / TEMP
a1[b, h] = sum[j](exp(s[b, h, j] - a0[b, h]))
d1[b, h] = a1[b, h] / TEMP
output Z[b, h, j]: f16 = s[b, h, j] * d1[b, h]
)");
  const std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"H", 5}, {"D", 3}, {"N", 9}},
                                                {{"B", 2}, {"H", 3}, {"D", 2}, {"N", 8}},
                                                {{"B", 1}, {"H", 2}, {"D", 1}, {"N", 1}}};
  Schedule rolling = scheduled(p, 1);
  EXPECT_EQ(count(rolling, "rolling_update"), 2) << rolling.trace().dump(1);
  expect_equivalent(p, rolling.program(), shapes);
}

// A masked sliding window narrows each row's tile loop to the tiles the window touches, so the
// scores of one row span a range that depends on the row; a buffer compacted to it would have a
// size that varies with the row loop, so that dimension keeps its whole extent (found by the
// chain fuzzer: "size 'i' has no value").
TEST(AutoSchedule, CompactedBuffersHaveSizesFreeOfLoopVariables) {
  ir::LoopProgram p = schedtest::lowered(R"(
sizes M = 4, N = 200, E = 64
param TEMP: f32 = 2.0
param WIN: i32 = 34
input X: f32[M, N]
input V: f32[N, E]
c0[i, j] = select(j <= i && i - j < WIN, X[i, j] / TEMP, -inf)
a0[i] = max[j](c0[i, j])
d0[i] = a0[i]
a1[i] = max[j](c0[i, j])
a2[i] = max[j](c0[i, j])
d2[i] = a2[i]
o[i, e] = sum[j](exp(c0[i, j] - d2[i]) * V[j, e])
output O[i, e]: f32 = o[i, e]
)");
  schedule::AutoScheduleOptions o;
  o.tile = 4;
  o.row_tile = 4;
  o.split_k_below_rows = o.split_k_below_instances = 0;
  std::vector<std::string> notes;
  Schedule s = schedule::auto_schedule(p, o, &notes);
  EXPECT_GT(count(s, "rolling_update"), 0) << s.trace().dump(1);
  for (const ir::Buffer& b : s.program().buffers)
    for (const ir::Expr& e : b.shape) EXPECT_FALSE(ir::uses_var(e, "i")) << ir::to_string(e);
  expect_equivalent(p, s.program(),
                    {{{"M", 60}, {"N", 50}, {"E", 3}}, {{"M", 7}, {"N", 9}, {"E", 2}}});
}

namespace {

ir::LoopProgram generality(const std::string& name) {
  return schedtest::example("../tests/generality/" + name);
}

// The chain fused: more than two of its reductions updated under the tile loop (the scores'
// maximum, the denominator and the output).
void expect_fused(const Schedule& s, const std::string& what) {
  EXPECT_GT(count(s, "rolling_update") + count(s, "split_k_update"), 2) << what << "\n"
                                                                        << s.trace().dump(1);
}

}  // namespace

// Self-attention over one length: rows and keys share the extent S, and the head's axis is the
// one the first reduction reduces over (found from the indices, not the extent).
TEST(AutoSchedule, SelfAttentionOverOneLengthFusesAlongTheKeys) {
  ir::LoopProgram p = generality("self_attention_one_length.te");
  const std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"H", 2}, {"S", 9}, {"D", 3}},
                                                {{"B", 2}, {"H", 1}, {"S", 6}, {"D", 2}}};
  Schedule rolling = scheduled(p, 1);
  expect_fused(rolling, "rolling");
  EXPECT_EQ(rolling.trace().at(0).at("loop"), "j") << rolling.trace().dump(1);
  expect_equivalent(p, rolling.program(), shapes);
  Schedule split_k = scheduled(p, 1000);
  expect_fused(split_k, "split-K");
  expect_equivalent(p, split_k.program(), shapes);
}

// A definition on the key side (keys rotated by position) is not the head: it runs along the
// keys only, and is computed per key tile inside the fused loop (compute_at). A plain copy of
// the keys is one input read: it is read where it is used (compute_inline), not computed.
TEST(AutoSchedule, KeySideDefinitionsAreComputedPerKeyTile) {
  const std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"H", 2}, {"S", 5}, {"T", 9}, {"D", 4}},
                                                {{"B", 1}, {"H", 1}, {"S", 9}, {"T", 6}, {"D", 2}}};
  for (const char* name : {"key_copy.te", "rotary_keys.te"}) {
    const bool copy = std::string(name) == "key_copy.te";
    ir::LoopProgram p = generality(name);
    for (int64_t below : {1, 1000}) {
      Schedule s = scheduled(p, below);
      expect_fused(s, name);
      EXPECT_EQ(count(s, "compute_at"), copy ? 0 : 1) << name << "\n" << s.trace().dump(1);
      EXPECT_EQ(count(s, "compute_inline"), copy ? 1 : 0) << name << "\n" << s.trace().dump(1);
      expect_equivalent(p, s.program(), shapes);
    }
  }
}

// A definition computed from positions (and inputs) alone over dims no operand spans together (a
// causal mask as an indicator [S, T]) is inlined, and its comparison with a constant folds to the
// mask's condition: fused, no S x T buffer left, and the rolling update's causal tiles skipped
// (propagate_mask). A table that an operand spans ([S, D], like a rotary angle) stays a buffer.
TEST(AutoSchedule, PositionDefinitionsAreInlined) {
  ir::LoopProgram p = generality("causal_mask_definition.te");
  const std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"H", 2}, {"S", 5}, {"T", 9}, {"D", 4}},
                                                {{"B", 1}, {"H", 1}, {"S", 9}, {"T", 6}, {"D", 2}}};
  for (int64_t below : {1, 1000}) {
    Schedule s = scheduled(p, below);
    expect_fused(s, "causal_mask_definition");
    EXPECT_EQ(s.primitive_names().front(), "compute_inline") << s.trace().dump(1);
    EXPECT_EQ(s.program().find_buffer("allowed"), nullptr);
    EXPECT_EQ(count(s, "propagate_mask"), below == 1 ? 1 : 0) << s.trace().dump(1);
    expect_equivalent(p, s.program(), shapes);
  }
  // Reading an input besides the positions (a learned slope) changes nothing.
  ir::LoopProgram scaled = generality("distance_bias_definition.te");
  Schedule inlined = scheduled(scaled, 1);
  expect_fused(inlined, "distance_bias_definition");
  EXPECT_EQ(inlined.program().find_buffer("bias"), nullptr) << inlined.trace().dump(1);
  expect_equivalent(scaled, inlined.program(), shapes);
  ir::LoopProgram table = schedtest::lowered(R"(
input Q: f32[S, D]
input K: f32[T, D]
angle[i: S, d: D] = f32(i) * f32(d + 1)
s[i, j] = sum[d](Q[i, d] * tanh(angle[i, d]) * K[j, d])
m[i] = max[j](s[i, j])
l[i] = sum[j](exp(s[i, j] - m[i]))
output L[i]: f32 = m[i] + log(l[i])
)");
  Schedule kept = scheduled(table, 1);
  EXPECT_EQ(count(kept, "compute_inline"), 0) << kept.trace().dump(1);
  EXPECT_NE(kept.program().find_buffer("angle"), nullptr);
}

// An expression over the running max written inside the sum fuses as its named spelling does.
TEST(AutoSchedule, InlineTermFusesLikeItsNamedSpelling) {
  ir::LoopProgram p = generality("softmax_inlined_exp.te");
  const std::vector<runtime::SizeMap> shapes = {{{"M", 3}, {"N", 9}}, {{"M", 2}, {"N", 17}}};
  for (int64_t below : {1, 1000}) {
    Schedule s = scheduled(p, below);
    EXPECT_EQ(count(s, "name_term"), 1) << s.trace().dump(1);
    EXPECT_EQ(count(s, "rolling_update") + count(s, "split_k_update"), 2) << s.trace().dump(1);
    expect_equivalent(p, s.program(), shapes);
  }
}

// A sink logit joining the max and the denominator fuses (the algebra repairs max(m, SINK[h]))
// and keeps the causal tiles skipped.
TEST(AutoSchedule, SinkLogitJoiningTheMaxFuses) {
  ir::LoopProgram p = generality("attention_sink.te");
  const std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"H", 2}, {"S", 5}, {"T", 9}, {"D", 3}},
                                                {{"B", 1}, {"H", 1}, {"S", 9}, {"T", 7}, {"D", 2}}};
  Schedule rolling = scheduled(p, 1);
  expect_fused(rolling, "rolling");
  EXPECT_EQ(count(rolling, "propagate_mask"), 1) << rolling.trace().dump(1);
  expect_equivalent(p, rolling.program(), shapes);
  Schedule split_k = scheduled(p, 1000);
  expect_fused(split_k, "split-K");
  expect_equivalent(p, split_k.program(), shapes);
}

// A weighted sum with nothing to repair (ReLU and sigmoid attention) is a chain of one: its term
// reads a reduction (the score dot) that runs along its axis and rows, and nothing else reads it,
// so it fuses under that dot's key tiles with the identity repair.
TEST(AutoSchedule, ChainWithNothingToRepairFusesUnderItsDot) {
  const std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"H", 2}, {"S", 5}, {"T", 9}, {"D", 3}},
                                                {{"B", 1}, {"H", 1}, {"S", 9}, {"T", 6}, {"D", 2}}};
  for (const char* name : {"relu_attention.te", "sigmoid_attention.te"}) {
    ir::LoopProgram p = generality(name);
    for (int64_t below : {1, 1000}) {
      Schedule s = scheduled(p, below);
      EXPECT_EQ(count(s, below == 1 ? "rolling_update" : "split_k_update"), 1) << name << "\n"
                                                                               << s.trace().dump(1);
      EXPECT_EQ(s.trace().at(0).at("block"), "s.sum0") << name << "\n" << s.trace().dump(1);
      expect_equivalent(p, s.program(), shapes);
    }
  }
}

// With the CUDA target's options, a matrix product in front of the chain (the queries'
// projection, q = f16(x Wq)) is split by the row tile along its rows, and so is its rounding to
// f16: a tile of rows a grid instance, a dot. Rows fewer than a tile stay whole.
TEST(AutoSchedule, ProjectionInFrontOfAttentionIsTiledByRows) {
  ir::LoopProgram p = generality("projected_query_attention.te");
  const std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"H", 2}, {"S", 70}, {"C", 5}, {"D", 3}},
                                                {{"B", 1}, {"H", 1}, {"S", 9}, {"C", 3}, {"D", 2}}};
  for (int64_t s_len : {4096, 16}) {
    schedule::AutoScheduleOptions o = schedule::target_schedule_options("cuda");
    o.sizes = {{"B", 1}, {"H", 2}, {"S", s_len}, {"C", 128}, {"D", 64}};
    std::vector<std::string> notes;
    Schedule s = schedule::auto_schedule(p, o, &notes);
    std::vector<std::string> split;
    for (const auto& step : s.trace())
      if (step.at("primitive") == "split" && step.at("loop") == "i")
        split.push_back(step.at("block"));
    std::vector<std::string> want;
    if (s_len > o.row_tile) want = {"q.sum0", "q"};
    EXPECT_EQ(split, want) << s_len << "\n" << s.trace().dump(1);
    expect_equivalent(p, s.program(), shapes);
  }
}

// A reduction whose producer others read too is no chain of one: the producer is materialised
// anyway (a mean pooled over the tokens, then normalised and written out).
TEST(AutoSchedule, SharedProducerMakesNoChainOfOne) {
  Schedule s = scheduled(generality("masked_mean_pool.te"), 1);
  EXPECT_TRUE(s.primitive_names().empty()) << s.trace().dump(1);
}

// Two chains in one program that share no reduction (differential attention: two softmaxes over
// two score matrices) each fuse under the key tiles of their own score dot.
TEST(AutoSchedule, TwoIndependentChainsFuseEach) {
  ir::LoopProgram p = generality("differential_attention.te");
  const std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"H", 2}, {"S", 5}, {"T", 9}, {"D", 3}},
                                                {{"B", 1}, {"H", 1}, {"S", 9}, {"T", 6}, {"D", 2}}};
  for (int64_t below : {1, 1000}) {
    Schedule s = scheduled(p, below);
    EXPECT_EQ(count(s, below == 1 ? "rolling_update" : "split_k_update"), 6) << s.trace().dump(1);
    std::vector<std::string> heads;
    for (const auto& step : s.trace())
      if (step.at("primitive") == "split" && step.at("loop") == "j")
        heads.push_back(step.at("block"));
    EXPECT_EQ(heads, (std::vector<std::string>{"s1.sum0", "s2.sum0"})) << s.trace().dump(1);
    expect_equivalent(p, s.program(), shapes);
  }
}

// QK-norm: the chain over the head dimension (the norms and the score dot that reads them) is
// inner to the chain over the keys, which the dot heads; the keys' norm, a reduction over the head
// dimension, is computed per key tile with the normalised keys; the queries' norm once a row
// tile under the rolling update, once before the fused loop under split-K (whose chunks would
// compute it again).
TEST(AutoSchedule, KeyNormIsComputedPerKeyTile) {
  ir::LoopProgram p = generality("qk_norm.te");
  const std::vector<runtime::SizeMap> shapes = {{{"B", 1}, {"H", 2}, {"S", 5}, {"T", 9}, {"D", 3}},
                                                {{"B", 1}, {"H", 1}, {"S", 9}, {"T", 6}, {"D", 2}}};
  for (int64_t below : {1, 1000}) {
    Schedule s = scheduled(p, below);
    EXPECT_EQ(s.trace().at(0).at("block"), "s.sum0") << s.trace().dump(1);
    std::vector<std::string> per_tile;
    for (const auto& step : s.trace())
      if (step.at("primitive") == "compute_at") per_tile.push_back(step.at("block"));
    std::vector<std::string> expected = {"kn", "rk", "rk.sum0"};
    if (below == 1) expected.insert(expected.end(), {"qn", "rq", "rq.sum0"});
    EXPECT_EQ(per_tile, expected) << s.trace().dump(1);
    expect_equivalent(p, s.program(), shapes);
  }
}

// One key/value head written without a head axis (multi-query decode): the keys and values the
// chunk reads do not use the query head at all, so the query heads are grouped by their whole
// extent (a constant tile of the H = 8 heads at the sizes scheduled for, the tail masked at
// others), and each chunk reads its keys and values once for all of them.
TEST(AutoSchedule, QueryHeadsSharingUnindexedKeysAreGrouped) {
  ir::LoopProgram p = generality("mqa_no_head_axis.te");
  Schedule s = scheduled(p, 1000);
  bool grouped = false;
  for (const nlohmann::json& e : s.trace())
    grouped = grouped ||
              (e.at("primitive") == "distribute" && e.at("loop") == "h" && e.at("factor") == 8);
  EXPECT_TRUE(grouped) << s.trace().dump(1);
  expect_equivalent(p, s.program(),
                    {{{"B", 1}, {"H", 4}, {"S", 1}, {"T", 9}, {"D", 3}},
                     {{"B", 2}, {"H", 3}, {"S", 2}, {"T", 5}, {"D", 2}}});
}
