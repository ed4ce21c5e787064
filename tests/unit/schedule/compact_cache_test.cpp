// compact_buffer, cache_read, cache_write, recompute and the Allocate statement: printed IR,
// equivalence (exact interpreter before/after, tails included), the CPU back end on compacted
// programs (stack and heap allocations under OpenMP), structured errors and trace replay.
#include <unistd.h>
#include <filesystem>
#include <random>

#include "ScheduleTestUtil.h"
#include "schedule/Analysis.h"
#include "target/cpu/CpuBackend.h"

using namespace kintsugi;
using schedtest::expect_equivalent;
using schedule::LoopRef;
using schedule::Schedule;
using schedule::ScheduleError;

namespace {

const std::vector<runtime::SizeMap> kNorm = {
    {{"M", 4}, {"N", 9}}, {{"M", 5}, {"N", 17}}, {{"M", 1}, {"N", 1}}};
const std::vector<runtime::SizeMap> kAttn = {{{"B", 1}, {"H", 2}, {"S", 5}, {"T", 7}, {"D", 3}},
                                             {{"B", 1}, {"H", 1}, {"S", 3}, {"T", 40}, {"D", 2}},
                                             {{"B", 2}, {"H", 1}, {"S", 17}, {"T", 33}, {"D", 4}}};

// split + reverse_compute_at of s, c, m under the KV tile loop j0 (compute_at_test's schedule).
Schedule attention_tiles(const ir::LoopProgram& p, int64_t tile = 16) {
  Schedule s(p);
  auto j = s.split(LoopRef{"s.sum0", "j"}, tile);
  s.reverse_compute_at("s", j[0]);
  s.reverse_compute_at("c", j[0]);
  s.reverse_compute_at("m", j[0]);
  return s;
}

// Runs a program through the CPU back end and compares every output with the exact interpreter
// of `reference` on the same inputs.
void expect_cpu_matches(const ir::LoopProgram& reference, const ir::LoopProgram& compiled,
                        const runtime::SizeMap& shape) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kintsugi-compact-test-" + std::to_string(getpid()) +
                                              "-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  cpu::CompileOptions o;
  o.cache_dir = dir.string();
  auto kernel = cpu::compile(compiled, o);
  runtime::SizeMap sizes = runtime::bind_sizes(compiled, shape);
  auto inputs = runtime::random_inputs(compiled, sizes, 7);
  std::map<std::string, runtime::Tensor> outputs;
  std::vector<runtime::Tensor*> args;
  for (const ir::Buffer& b : compiled.buffers) {
    if (b.role == ir::BufferRole::Input) args.push_back(&inputs.at(b.name));
    if (b.role == ir::BufferRole::Output) {
      auto [it, _] =
          outputs.emplace(b.name, runtime::Tensor(b.dtype, ir::eval_shape(b.shape, sizes)));
      args.push_back(&it->second);
    }
  }
  kernel->run(args, sizes, {});
  std::map<std::string, const runtime::Tensor*> in;
  for (auto& [name, t] : inputs) in[name] = &t;
  auto ref = ir::interpret(reference, ir::InterpMode::Exact, in, sizes);
  for (const auto& [name, out] : outputs) {
    double tol = runtime::tolerance_for(reference, out.dtype);
    runtime::OutputCheck c = runtime::compare_output(name, out, ref.outputs.at(name).values, tol);
    EXPECT_TRUE(c.ok) << name << ": max_rel_err " << c.max_rel_err << "\n" << kernel->source();
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace

TEST(Allocate, PrintsAndInterprets) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  // Wrap the whole program in an allocation of e (trivially valid: it is the program's scope).
  ir::LoopProgram q = p;
  q.body = ir::make_allocate("e", p.body);
  std::string text = ir::to_string(q);
  EXPECT_NE(text.find("body:\n  alloc e: f32[M, N] global:\n    for i in range(M):"),
            std::string::npos)
      << text;
  expect_equivalent(p, q, kNorm);
  EXPECT_EQ(ir::to_string(ir::make_allocate("e", nullptr)), "alloc e:\n");
}

TEST(CompactBuffer, AttentionScoreTile) {
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  Schedule s = attention_tiles(p);
  s.compact_buffer();
  std::string text = ir::to_string(s.program());
  // s.sum0 and s live only inside one KV tile: a [1, 1, 1, 16] local buffer allocated under j0.
  EXPECT_NE(text.find("buffer s.sum0: f32[1, 1, 1, 16] local\n"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer s: f32[1, 1, 1, 16] local\n"), std::string::npos) << text;
  EXPECT_NE(text.find("for j0 in range((T + 15) / 16):\n          alloc s.sum0: f32[1, 1, 1, 16] "
                      "local:\n            alloc s: f32[1, 1, 1, 16] local:"),
            std::string::npos)
      << text;
  // c is also read by e after the j0 loop, and m accumulates across KV tiles: both stay global.
  EXPECT_NE(text.find("buffer c: f32[B, H, S, T] global\n"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer m: f32[B, H, S] global\n"), std::string::npos) << text;
  EXPECT_NE(text.find("s.sum0[0, 0, 0, j - s.sum0.base3] = "), std::string::npos) << text;
  expect_equivalent(p, s.program(), kAttn);
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
  // Idempotent.
  Schedule again(s.program());
  again.compact_buffer();
  EXPECT_EQ(ir::to_string(again.program()), text);
}

TEST(CompactBuffer, AttentionScoreTileAfterInliningTheScale) {
  // s inlined into c, tile 8 (a tail at every test shape): s.sum0 shrinks to the tile, while c
  // (read again by e after the tile loop) keeps its full size.
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  Schedule s(p);
  s.compute_inline("s");
  auto j = s.split(LoopRef{"s.sum0", "j"}, 8);
  s.reverse_compute_at("c", j[0]);
  s.compact_buffer();
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("buffer s.sum0: f32[1, 1, 1, 8] local\n"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer c: f32[B, H, S, T] global\n"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kAttn);
}

TEST(CompactBuffer, SoftmaxRowByRow) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  s.compute_at("l", LoopRef{"Y", "i"});
  s.compute_at("e", LoopRef{"Y", "i"});
  s.compute_at("m", LoopRef{"Y", "i"});
  s.compact_buffer();
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("buffer m: f32[1] local\n"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer e: f32[1, N] local\n"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer l: f32[1] local\n"), std::string::npos) << text;
  EXPECT_NE(text.find("for i in range(M):\n    alloc m: f32[1] local:\n      alloc e: f32[1, N] "
                      "local:\n        alloc l: f32[1] local:"),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
}

TEST(CompactBuffer, LeavesProgramWideBuffersAlone) {
  // Unscheduled softmax: every intermediate is produced and consumed by different root nests.
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  s.compact_buffer();
  EXPECT_EQ(ir::to_string(s.program()), ir::to_string(p));
  EXPECT_EQ(s.primitive_names(), std::vector<std::string>{"compact_buffer"});
}

TEST(CompactBuffer, ReductionAccumulatedAcrossTilesStaysOutside) {
  // Row max tiled over j and consumed inside the row loop: m accumulates across j0, so it may
  // not live inside j0; it is compacted to one element per row under i instead.
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  s.compute_at("m", LoopRef{"e", "i"});
  s.split(LoopRef{"m", "j_1"}, 4);
  s.compact_buffer();
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("buffer m: f32[1] local\n"), std::string::npos) << text;
  EXPECT_NE(text.find("for i in range(M):\n    alloc m: f32[1] local:"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kNorm);
}

TEST(CompactBuffer, CpuBackEndUnderOpenMP) {
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  Schedule s = attention_tiles(p);
  s.compact_buffer();
  const ir::LoopProgram& q = s.program();
  std::string src = cpu::generate_source(q);
  // The score tile is a stack array inside the parallel (b, h, i) loop, not a kernel-entry
  // allocation.
  EXPECT_NE(src.find("#pragma omp parallel for"), std::string::npos) << src;
  EXPECT_NE(src.find("// alloc s.sum0"), std::string::npos) << src;
  EXPECT_NE(src.find("alignas(64) float"), std::string::npos) << src;
  EXPECT_EQ(src.find("bx_s_2esum0 = (float*)ks_alloc"), std::string::npos) << src;
  expect_cpu_matches(p, q, {{"B", 1}, {"H", 2}, {"S", 19}, {"T", 37}, {"D", 8}});
}

TEST(CompactBuffer, CpuBackEndHeapAllocation) {
  // Softmax row by row: e becomes a [1, N] buffer of symbolic size, malloc'd per row.
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  s.compute_at("l", LoopRef{"Y", "i"});
  s.compute_at("e", LoopRef{"Y", "i"});
  s.compute_at("m", LoopRef{"Y", "i"});
  s.compact_buffer();
  std::string src = cpu::generate_source(s.program());
  EXPECT_NE(src.find("#pragma omp parallel for"), std::string::npos) << src;
  EXPECT_NE(src.find("KsFree"), std::string::npos) << src;
  expect_cpu_matches(p, s.program(), {{"M", 37}, {"N", 1000}});
}

TEST(CacheRead, SoftmaxInput) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  std::string c = s.cache_read("e", "X", "shared");
  EXPECT_EQ(c, "X.shared");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("  buffer X.shared: f32[M, N] shared\n"), std::string::npos) << text;
  EXPECT_NE(text.find("block X.shared(spatial ax0:M, spatial ax1:N):\n        X.shared[ax0, ax1] "
                      "= X[ax0, ax1]\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("e[i, j] = exp(X.shared[i, j] - m[i])"), std::string::npos) << text;
  EXPECT_NE(text.find("m[i] = max(m[i], X[i, j])"), std::string::npos) << text;  // unchanged
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
}

TEST(CacheRead, ThenComputeAtAndCompact) {
  // The row of X is staged once per row: cache_read + compute_at under the consumer's row loop,
  // then compact_buffer shrinks the staged copy to one row.
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  std::string c = s.cache_read("e", "X", "shared");
  s.compute_at(c, LoopRef{"e", "i"});
  expect_equivalent(p, s.program(), kNorm);
  s.compact_buffer();
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("buffer X.shared: f32[1, N] shared\n"), std::string::npos) << text;
  EXPECT_NE(text.find("alloc X.shared: f32[1, N] shared:"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kNorm);
  expect_cpu_matches(p, s.program(), {{"M", 9}, {"N", 33}});
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
}

TEST(CacheRead, AttentionQueryTile) {
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  Schedule s(p);
  std::string c = s.cache_read("s.sum0", "Q", "shared");
  auto i = s.split(LoopRef{"s.sum0", "i"}, 4);
  s.compute_at(c, i[0]);
  s.compact_buffer();
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("buffer Q.shared: f16[1, 1, 4, D] shared\n"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kAttn);
}

TEST(CacheWrite, SoftmaxReductionAndOutput) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  std::string m = s.cache_write("m", "local");
  EXPECT_EQ(m, "m.local");
  std::string y = s.cache_write("Y", "shared");
  EXPECT_EQ(y, "Y.shared");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("m.local[i] = max(m.local[i], X[i, j])"), std::string::npos) << text;
  EXPECT_NE(text.find("block m.local(spatial ax0:M):\n      m[ax0] = m.local[ax0]\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Y.shared[i, j] = e[i, j] / l[i]"), std::string::npos) << text;
  EXPECT_NE(text.find("Y[ax0_1, ax1] = Y.shared[ax0_1, ax1]"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
}

TEST(CacheWrite, ThenReverseComputeAtAndCompact) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  std::string y = s.cache_write("Y", "local");
  s.reverse_compute_at(y, LoopRef{"Y", "i"});
  expect_equivalent(p, s.program(), kNorm);
  s.compact_buffer();
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("buffer Y.local: f32[1, N] local\n"), std::string::npos) << text;
  expect_equivalent(p, s.program(), kNorm);
  expect_cpu_matches(p, s.program(), {{"M", 5}, {"N", 70}});
}

TEST(CacheRead, Errors) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  auto message = [&](auto f) {
    try {
      f();
    } catch (const ScheduleError& e) {
      EXPECT_EQ(e.primitive(), "cache_read");
      return std::string(e.what());
    }
    ADD_FAILURE() << "no ScheduleError";
    return std::string();
  };
  EXPECT_NE(message([&] { s.cache_read("e", "Z", "shared"); }).find("no buffer named 'Z'"),
            std::string::npos);
  EXPECT_NE(
      message([&] { s.cache_read("e", "l", "shared"); }).find("block 'e' does not read buffer 'l'"),
      std::string::npos);
  EXPECT_NE(
      message([&] { s.cache_read("e", "X", "texture"); }).find("unknown storage scope 'texture'"),
      std::string::npos);
  EXPECT_NE(message([&] { s.cache_read("nope", "X", "shared"); }).find("no block named 'nope'"),
            std::string::npos);
  // The consumer's nest writes the buffer itself (m accumulates into m).
  EXPECT_NE(message([&] { s.cache_read("m", "m", "local"); }).find("would be stale"),
            std::string::npos);
  EXPECT_TRUE(s.trace().empty());  // a failed primitive leaves the state unchanged
}

TEST(CacheWrite, Errors) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  auto message = [&](auto f) {
    try {
      f();
    } catch (const ScheduleError& e) {
      EXPECT_EQ(e.primitive(), "cache_write");
      return std::string(e.what());
    }
    ADD_FAILURE() << "no ScheduleError";
    return std::string();
  };
  EXPECT_NE(
      message([&] { s.cache_write("m", "registers"); }).find("unknown storage scope 'registers'"),
      std::string::npos);
  EXPECT_NE(message([&] { s.cache_write("nope", "local"); }).find("no block named 'nope'"),
            std::string::npos);
  // A second writer of the buffer (decompose_reduction's init block).
  Schedule t(p);
  t.decompose_reduction("m", LoopRef{"m", "j"});
  EXPECT_NE(message([&] { t.cache_write("m", "local"); }).find("must be its only writer"),
            std::string::npos);
  // A reader in the same nest (after compute_at of m under e's row loop, e reads m there).
  Schedule u(p);
  u.compute_at("m", LoopRef{"e", "i"});
  EXPECT_NE(message([&] { u.cache_write("m", "local"); }).find("before the copy back would run"),
            std::string::npos);
  EXPECT_TRUE(s.trace().empty());
}

TEST(CompactCache, TraceReplay) {
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  Schedule s(p);
  std::string c = s.cache_read("s.sum0", "K", "shared");
  auto j = s.split(LoopRef{"s.sum0", "j"}, 16);
  s.compute_at(c, j[0]);
  s.reverse_compute_at("s", j[0]);
  s.cache_write("l", "local");
  s.compact_buffer();
  Schedule r = schedule::replay(p, s.trace());
  EXPECT_EQ(ir::to_string(r.program()), ir::to_string(s.program()));
  EXPECT_EQ(r.primitive_names(),
            (std::vector<std::string>{"cache_read", "split", "compute_at", "reverse_compute_at",
                                      "cache_write", "compact_buffer"}));
  expect_equivalent(p, s.program(), kAttn);
}

TEST(Allocate, FreshStoragePerExecution) {
  // Allocating m (which accumulates across KV tiles) inside the tile loop is wrong; the
  // interpreter's fresh (NaN-poisoned) storage per execution must expose it.
  ir::LoopProgram p = schedtest::example("attention/prefill_causal.te");
  Schedule s = attention_tiles(p);
  ir::LoopProgram bad = s.program();
  schedule::StmtPath path = schedule::find_loop(bad.body, LoopRef{"m", "j0"}, "test");
  ir::StmtNode loop = *path.back();
  loop.body = ir::make_allocate("m", loop.body);
  bad.body = schedule::replace_at(path, std::make_shared<const ir::StmtNode>(std::move(loop)));
  runtime::SizeMap sizes = runtime::bind_sizes(p, {{"B", 1}, {"H", 1}, {"S", 3}, {"T", 40}});
  auto inputs = runtime::random_inputs(p, sizes, 3);
  std::map<std::string, const runtime::Tensor*> in;
  for (auto& [name, t] : inputs) in[name] = &t;
  auto good = ir::interpret(p, ir::InterpMode::Exact, in, sizes);
  auto out = ir::interpret(bad, ir::InterpMode::Exact, in, sizes);
  const auto& g = good.outputs.at("O").values;
  const auto& b = out.outputs.at("O").values;
  ASSERT_EQ(g.size(), b.size());
  size_t differ = 0;
  for (size_t k = 0; k < g.size(); ++k) differ += !(g[k] == b[k]);
  EXPECT_GT(differ, 0u);
}

// recompute: softmax's max and exponentials computed again for the output alone; the sum keeps
// the originals. The copies accumulate into their own buffers and read one another's.
TEST(Recompute, SoftmaxChainForTheOutput) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  std::vector<std::string> copies = s.recompute({"e", "m"}, {"Y"});
  EXPECT_EQ(copies, (std::vector<std::string>{"m.re", "e.re"}));
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("  buffer m.re: f32[M] global\n"), std::string::npos) << text;
  EXPECT_NE(text.find("m.re[i] = max(m.re[i], X[i, j])"), std::string::npos) << text;
  EXPECT_NE(text.find("e.re[i, j] = exp(X[i, j] - m.re[i])"), std::string::npos) << text;
  EXPECT_NE(text.find("Y[i, j] = e.re[i, j] / l[i]"), std::string::npos) << text;
  EXPECT_NE(text.find("l[i] = l[i] + e[i, j]"), std::string::npos) << text;  // unchanged
  expect_equivalent(p, s.program(), kNorm);
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
}

TEST(Recompute, Refusals) {
  ir::LoopProgram p = schedtest::example("norm/softmax.te");
  Schedule s(p);
  schedtest::expect_refused([&] { s.recompute({"l"}, {"e"}); },
                            "recompute: reader 'e' does not come after block 'l'");
  schedtest::expect_refused([&] { s.recompute({"e"}, {}); },
                            "recompute: name the blocks to compute again and the blocks that read "
                            "the copies");
}

// recompute_point: a loss's logit at its target, read from the logits z, is computed again as a
// sum over the hidden size for the row alone; the chain over the vocabulary keeps reading z.
TEST(RecomputePoint, TargetLogit) {
  ir::LoopProgram p = schedtest::lowered(R"(
input H: f32[R, C]
input W: f32[C, V]
input TGT: i32[R]
z[r, v] = sum[c](H[r, c] * W[c, v])
m[r] = max[v](z[r, v])
output LOSS[r]: f32 = m[r] - z[r, TGT[r]]
)");
  Schedule s(p);
  EXPECT_EQ(s.recompute_point("z", "LOSS"), "z.at");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("  buffer z.at: f32[R] global\n"), std::string::npos) << text;
  EXPECT_NE(text.find("z.at[r] = z.at[r] + H[r, c] * W[c, TGT[r]]"), std::string::npos) << text;
  EXPECT_NE(text.find("LOSS[r] = m[r] - z.at[r]"), std::string::npos) << text;
  EXPECT_NE(text.find("m[r] = max(m[r], z[r, v])"), std::string::npos) << text;  // unchanged
  expect_equivalent(p, s.program(),
                    {{{"R", 3}, {"C", 5}, {"V", 7}}, {{"R", 1}, {"C", 1}, {"V", 2}}});
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
}

// A reader whose variables share a name with the reduction's reduce variable: the copy's reduce
// variable is renamed.
TEST(RecomputePoint, ReduceVariableRenamed) {
  ir::LoopProgram p = schedtest::lowered(R"(
input A: f32[N, K]
input IDX: i32[K]
z[n, k] = sum[j: K](A[n, j] * A[j % N, k])
s[n] = sum[k](z[n, k])
output Y[j: K]: f32 = z[j % N, IDX[j]]
)");
  Schedule s(p);
  EXPECT_EQ(s.recompute_point("z", "Y"), "z.at");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("z.at[j] = z.at[j] + A[j % N, j_1] * A[j_1 % N, IDX[j]]"), std::string::npos)
      << text;
  expect_equivalent(p, s.program(), {{{"N", 3}, {"K", 5}}});
}

// A map read at a point (a scaled score on the diagonal) is computed again there, reading its
// sum at the point; the sum is then computed again for the copy.
TEST(RecomputePoint, AMapAndThenItsSum) {
  ir::LoopProgram p = schedtest::lowered(R"(
input Q: f32[S, D]
input K: f32[S, D]
s[i, j] = sum[d](Q[i, d] * K[j, d]) * 0.5
m[i] = max[j](s[i, j])
output P[i]: f32 = s[i, i] - m[i]
)");
  Schedule s(p);
  EXPECT_EQ(s.recompute_point("s", "P"), "s.at");
  EXPECT_EQ(s.recompute_point("s.sum0", "s.at"), "s.sum0.at");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("s.at[i] = s.sum0.at[i] * 0.5"), std::string::npos) << text;
  EXPECT_NE(text.find("s.sum0.at[i] = s.sum0.at[i] + Q[i, d] * K[i, d]"), std::string::npos)
      << text;
  EXPECT_NE(text.find("P[i] = s.at[i] - m[i]"), std::string::npos) << text;
  expect_equivalent(p, s.program(), {{{"S", 5}, {"D", 3}}});
}

TEST(RecomputePoint, Refusals) {
  ir::LoopProgram p = schedtest::lowered(R"(
input X: f32[M, N]
input I: i32[M]
m[i] = max[j](X[i, j])
z[i, j] = sum[k: N](X[i, k] * X[k % M, j])
e[i, j] = exp(z[i, j] - m[i])
output Y[i]: f32 = z[i, I[i]] + z[i, I[(i + 1) % M]] + e[i, 0]
)");
  Schedule s(p);
  schedtest::expect_refused([&] { s.recompute_point("m", "Y"); },
                            "recompute_point: block 'Y' does not read 'm'");
  schedtest::expect_refused([&] { s.recompute_point("z", "Y"); },
                            "recompute_point: block 'Y' reads 'z' at several points");
  schedtest::expect_refused([&] { s.recompute_point("Y", "m"); },
                            "recompute_point: reader 'm' does not come after block 'Y'");
  Schedule split(p);
  split.split(LoopRef{"z", "k"}, 2);
  schedtest::expect_refused(
      [&] { split.recompute_point("z", "Y"); },
      "recompute_point: block 'z' runs under a predicate (its loops were split)");
}

// factor_group: a sum over a group's members e and the rows i, reading member g * E + e, becomes
// each member's sum over the rows, then the group's sum over its members; the outputs are the
// same at group sizes that divide the members and at one that leaves members over (HQ = 7).
TEST(FactorGroup, GroupedHeadsSummedPerMember) {
  ir::LoopProgram p = schedtest::lowered(R"(
input X: f32[HQ, S, N]
input Y: f32[HK, N]
output Z[g: HK, n]: f32 = sum[e: HQ / HK, i](X[g * (HQ / HK) + e, i, n]) * Y[g, n]
)");
  Schedule s(p);
  EXPECT_EQ(s.factor_group("Z.sum0"), "Z.sum0.grp");
  std::string text = ir::to_string(s.program());
  EXPECT_NE(text.find("  buffer Z.sum0.grp: f32[HQ, N] global\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Z.sum0.grp[e_member, n] = Z.sum0.grp[e_member, n] + X[e_member, i, n]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Z.sum0[g, n] = Z.sum0[g, n] + Z.sum0.grp[g * (HQ / HK) + e, n]"),
            std::string::npos)
      << text;
  expect_equivalent(p, s.program(),
                    {{{"HQ", 8}, {"HK", 2}, {"S", 5}, {"N", 3}},
                     {{"HQ", 7}, {"HK", 2}, {"S", 4}, {"N", 6}},
                     {{"HQ", 3}, {"HK", 3}, {"S", 9}, {"N", 1}}});
  EXPECT_EQ(ir::to_string(schedule::replay(p, s.trace()).program()), text);
}

TEST(FactorGroup, Refusals) {
  ir::LoopProgram p = schedtest::lowered(R"(
input X: f32[H, S, N]
input W: f32[H, N, M]
input U: f32[G]
output Y[s, m]: f32 = sum[h, n](X[h, s, n] * W[h, n, m])
output Z[g: G, n]: f32 = sum[e: H / G, i](X[g * (H / G) + e, i, n] + f32(e))
output R[n]: f32 = sum[i](X[0, i, n])
)");
  Schedule s(p);
  schedtest::expect_refused([&] { s.factor_group("Y"); },
                            "factor_group: block 'Y' reads its first reduced variable 'h' "
                            "other than as a member g * H + h of one group g");
  schedtest::expect_refused([&] { s.factor_group("Z"); },
                            "factor_group: block 'Z' reads its first reduced variable 'e' "
                            "other than as a member g * (H / G) + e of one group g");
  schedtest::expect_refused([&] { s.factor_group("R"); },
                            "factor_group: block 'R' does not reduce over several axes");
}
