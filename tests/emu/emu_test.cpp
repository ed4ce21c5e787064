// \file emu_test.cpp
// The CUDA kernels of every example (and of programs under tests/ that exercise a feature the
// examples lack), as generated for the GPU, run on the CPU emulator (Emulator.h) and verified
// against the exact reference interpreter: default sizes, odd sizes
// (tails in every tiled axis) and fully masked leading tiles, as tests/gpu/run_examples.sh runs
// them on a GPU, long split-K reductions, the benchmark's head size, and tied scores. A kernel
// the emulator cannot complete fails the test with its reason.
#include <gtest/gtest.h>

#include <random>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "Emulator.h"
#include "driver/Driver.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "runtime/Runner.h"
#include "support/Error.h"
#include "support/Hash.h"
#include "te/Lower.h"
#include "te/Program.h"
#include "tile/TileIR.h"
#include "tile/Translate.h"

using namespace kintsugi;

namespace {

struct Case {
  std::string example;     // under examples/ (or the repository root, with from_root)
  runtime::SizeMap sizes;  // overrides of the example's sizes
  runtime::ParamMap params;
  int64_t chunk_tiles = 0;  // split-K chunks of this many key tiles; 0: chosen
  // Changes the seeded random inputs before the run (none: as drawn).
  std::function<void(std::map<std::string, runtime::Tensor>&)> adjust_inputs = nullptr;
  bool from_root = false;
  // Fallbacks a `# GAP:` line of a corpus program records: their warnings are not failures.
  std::set<driver::Requirement> gaps = {};
  double tolerance = 0;  // of every output's max relative error; 0: the output type's
  // Sizes the kernel runs at when they differ from those it is scheduled and generated for
  // (`sizes`): the sizes a Python kernel takes as dynamic.
  runtime::SizeMap run_sizes = {};
  int64_t whole_row_bytes = -1;  // rows held whole up to this many bytes; -1: the target's
  std::string arch = "sm_80";    // what the kernels are generated for (sm_90a: wgmma)
};

std::string describe(const Case& c) {
  std::string s = c.example;
  for (const auto& [k, v] : c.sizes) s += " " + k + "=" + std::to_string(v);
  for (const auto& [k, v] : c.params) s += " " + k + "=" + std::to_string(v);
  if (c.chunk_tiles) s += " chunk_tiles=" + std::to_string(c.chunk_tiles);
  for (const auto& [k, v] : c.run_sizes) s += " run at " + k + "=" + std::to_string(v);
  if (c.arch != "sm_80") s += " for " + c.arch;
  return s;
}

// The example's program and its sizes, scheduled and translated as `kintsugi run --target cuda`
// does.
struct Compiled {
  ir::LoopProgram program, scheduled;
  runtime::SizeMap sizes;
  tile::TileProgram tiles;
};
Compiled compile(const Case& c, std::vector<std::string>* warnings) {
  Compiled r;
  r.program = driver::load_file(std::string(KINTSUGI_SOURCE_DIR) +
                                (c.from_root ? "/" : "/examples/") + c.example);
  r.sizes = runtime::bind_sizes(r.program, c.sizes);
  driver::ScheduleOptions o;
  o.target = driver::Target::parse("cuda", c.arch);
  o.sizes = r.sizes;
  o.chunk_tiles = c.chunk_tiles;
  o.whole_row_bytes = c.whole_row_bytes;
  o.params = c.params;
  for (const auto& [name, value] : c.run_sizes) o.dynamic.insert(name);
  driver::Scheduled s = driver::schedule_program(r.program, o);
  for (const std::string& w : s.warnings) {
    bool known = false;
    for (const driver::Shortfall& f : s.shortfalls)
      known = known || (f.text == w && c.gaps.count(f.requirement));
    if (!known) warnings->push_back(w);
  }
  r.scheduled = s.program;
  r.tiles = driver::to_tiles(s, r.sizes, c.example);
  return r;
}

// Runs the emulated kernels on seeded random inputs and compares every output with the exact
// interpreter; returns what went wrong (a warning, an error, an output off), empty when nothing.
std::string check(const Case& c) {
  std::vector<std::string> failures;
  Compiled k;
  try {
    k = compile(c, &failures);
  } catch (const std::exception& e) {
    return std::string("does not compile: ") + e.what();
  }
  const ir::LoopProgram &p = k.program, &scheduled = k.scheduled;
  runtime::SizeMap sizes = k.sizes;
  for (const auto& [name, value] : c.run_sizes) sizes[name] = value;

  runtime::ParamMap params;  // the program's values, overridden by the case's
  for (const ir::Param& q : p.params) params[q.name] = q.value;
  for (const auto& [k, v] : c.params) params[k] = v;
  std::map<std::string, runtime::Tensor> inputs = runtime::random_inputs(p, sizes, 1, params);
  if (c.adjust_inputs) c.adjust_inputs(inputs);
  std::map<std::string, runtime::Tensor> outputs;
  std::vector<runtime::Tensor*> args;
  for (const ir::Buffer& b : scheduled.buffers) {
    if (b.role == ir::BufferRole::Input) args.push_back(&inputs.at(b.name));
    if (b.role == ir::BufferRole::Output)
      args.push_back(
          &outputs.emplace(b.name, runtime::Tensor(b.dtype, ir::eval_shape(b.shape, sizes, params)))
               .first->second);
  }
  try {
    emu::EmulatedCudaKernel kernel(k.tiles, cuda::CudaTarget::parse(c.arch));
    kernel.run(args, sizes, params);
  } catch (const std::exception& e) {
    failures.push_back(std::string("the kernel fails: ") + e.what());
    return failures.front();
  }

  std::map<std::string, const runtime::Tensor*> in;
  for (auto& [name, t] : inputs) in[name] = &t;
  ir::InterpResult ref = ir::interpret(p, ir::InterpMode::Exact, in, sizes, params);
  for (const ir::Buffer* b : p.outputs()) {
    runtime::OutputCheck result = runtime::compare_output(
        b->name, outputs.at(b->name), ref.outputs.at(b->name).values,
        c.tolerance > 0 ? c.tolerance : runtime::tolerance_for(p, b->dtype));
    if (!result.ok)
      failures.push_back(b->name + ": max rel err " + std::to_string(result.max_rel_err) +
                         " (tolerance " + std::to_string(result.tolerance) + ")" +
                         (result.special_values_match ? "" : ", NaN/Inf positions differ"));
  }
  std::string all;
  for (const std::string& f : failures) all += (all.empty() ? "" : "; ") + f;
  return all;
}

// KINTSUGI_EMU_CORPUS_PART=I/N (CI's pass with eager copies, tests/CMakeLists.txt): whether the
// element at place `at` of a list is in part I of N; unset, every one is.
bool in_part(size_t at) {
  const char* part = std::getenv("KINTSUGI_EMU_CORPUS_PART");
  if (!part || !*part) return true;
  unsigned i = 0, n = 1;
  if (std::sscanf(part, "%u/%u", &i, &n) != 2 || n == 0) return true;
  return at % n == i % n;
}

void skip_outside_part(const std::string& test) {
  GTEST_SKIP() << test << " is not in part " << std::getenv("KINTSUGI_EMU_CORPUS_PART")
               << " of this pass; every test: KINTSUGI_EMU_EAGER_COPIES=1 "
               << "build/tests/kintsugi_emu_tests";
}

// A test of these cases runs in the eager pass where its name falls in the pass's part, as the
// corpus's programs do (their place in the corpus, in_corpus_part).
void verify(const Case& c) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  if (!in_part(fnv1a(test))) {
    skip_outside_part(test);
    return;
  }
  EXPECT_EQ(check(c), "") << describe(c);
}

}  // namespace

// One kernel for every length: generated for sizes as a dynamic size is scheduled (32768), run
// at others, from one row or key to a few tiles, tails included.
TEST(Emulator, OneKernelForEveryLength) {
  for (int64_t t : {1, 63, 4099, 9000}) {
    verify({"attention/decode_causal.te",
            {{"B", 1}, {"H", 2}, {"T", 32768}, {"D", 64}},
            {},
            0,
            nullptr,
            false,
            {},
            0,
            {{"T", t}}});
    verify({"attention/decode_gqa.te",
            {{"HQ", 8}, {"HK", 2}, {"T", 32768}, {"D", 128}},
            {},
            0,
            nullptr,
            false,
            {},
            0,
            {{"T", t}}});
  }
  for (int64_t n : {1, 37, 130})
    verify({"attention/prefill_causal.te",
            {{"H", 1}, {"S", 32768}, {"T", 32768}, {"D", 64}},
            {},
            0,
            nullptr,
            false,
            {},
            0,
            {{"S", n}, {"T", n + 24}}});
  for (int64_t m : {1, 3, 70})
    verify(
        {"norm/softmax.te", {{"M", 32768}, {"N", 1000}}, {}, 0, nullptr, false, {}, 0, {{"M", m}}});
}

TEST(Emulator, AttentionAtDefaultSizes) {
  for (const char* name : {"prefill_global", "prefill_causal", "prefill_causal_bf16",
                           "prefill_alibi", "prefill_gqa", "prefill_softcap", "prefill_windowed",
                           "decode_causal", "decode_alibi", "decode_gqa", "decode_softcap"})
    verify({std::string("attention/") + name + ".te", {}, {}});
}

// Tails in every tiled axis, causal with S != T (bottom-right aligned), decode over a length that
// is no multiple of the key tile, in chunks of four key tiles (the last chunk's last tile empty),
// grouped decode at the benchmark's head size (eight query heads a chunk's rows), and fully
// masked leading key tiles.
TEST(Emulator, AttentionAtOddSizes) {
  verify({"attention/prefill_causal.te", {{"S", 200}, {"T", 330}}, {}});
  verify({"attention/prefill_causal.te", {{"S", 330}, {"T", 200}}, {}});
  for (const char* name : {"decode_causal", "decode_alibi", "decode_gqa", "decode_softcap"}) {
    verify({std::string("attention/") + name + ".te", {{"T", 1000}}, {}});
    verify({std::string("attention/") + name + ".te", {{"T", 1000}}, {}, 4});
  }
  verify({"attention/decode_gqa.te", {{"HQ", 8}, {"HK", 1}, {"D", 128}, {"T", 1000}}, {}});
  verify({"attention/prefill_windowed.te", {{"S", 48}, {"T", 80}}, {{"W", 16}}});
}

// A row factor of the scores (cosine attention's reciprocal query norm times its temperature)
// folded into the softmax's maximum and exponentials: positive, and negative (a negative
// temperature), where the maximum is taken of the scaled scores. The maximum is an output (a
// softmax alone would not show a wrong one), and 256 rows of 300 keys reach the kernel's version
// for whole tiles, where the factor is folded.
TEST(Emulator, RowFactorFoldedIntoTheSoftmax) {
  for (const char* arch : {"sm_80", "sm_90a"})
    for (double tau : {0.1, -0.1}) {
      Case c{"tests/emu/cosine_row_max.te", {{"S", 256}, {"T", 300}}, {{"TAU", tau}}};
      c.from_root = true;
      c.arch = arch;
      verify(c);
    }
}

// Integer scores off the tensor cores (int8 queries, i32 keys: tests/lit/tile_integer_dot.te):
// the element-cyclic writer sums the products exactly in the integer type, at a tail of rows and
// of keys. (int8 both: tests/generality/int8_scores_attention.te, on the tensor cores.)
TEST(Emulator, IntegerDotsOffTheTensorCores) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Case c{"tests/lit/tile_integer_dot.te", {{"S", 77}, {"T", 100}}, {}};
    c.from_root = true;
    c.arch = arch;
    c.gaps = {driver::Requirement::TensorCore};
    verify(c);
  }
}

// Split-K chunks of four key tiles skip the tiles a mask kills: each sequence's cache length read
// from a tensor (drawn in [-1000, 1000]: some sequences empty, some longer than a chunk), and a
// sliding window, with and without a sink logit. A chunk with no live tile runs none, unless its
// row has no live tile at all (then the first chunk runs one masked tile).
TEST(Emulator, SplitKChunksSkipMaskedTiles) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Case varlen{"tests/generality/varlen_decode.te", {{"B", 5}, {"T", 1000}}, {}, 4};
    varlen.from_root = true;
    varlen.arch = arch;
    std::vector<std::string> warnings;
    const std::string tiles = tile::to_string(compile(varlen, &warnings).tiles);
    EXPECT_NE(tiles.find("range(max(select(0 >= min((LEN[b] - 1) / 64 + 1, (T + 63) / 64) && j0 * "
                         "256 == 0, max(min(4, (LEN[b] - j0 * 256 - 1) / 64 + 1), 1), min(4, "
                         "(LEN[b] - j0 * 256 - 1) / 64 + 1)), 0))"),
              std::string::npos)
        << tiles;
    verify(varlen);
    Case window{"tests/generality/decode_bf16_window.te", {{"T", 1000}}, {{"W", 100}}, 4};
    window.from_root = true;
    window.arch = arch;
    window.gaps = {driver::Requirement::TensorCore};
    verify(window);
    // Grouped heads with a window: the walk starts past a chunk's first tile and stays inside
    // the chunk, so the values stay a plain tile for the tensor cores (no warning allowed).
    Case grouped{"tests/generality/decode_gqa_window.te",
                 {{"B", 1}, {"H", 16}, {"HK", 2}, {"T", 3000}, {"D", 128}},
                 {{"W", 300}},
                 4};
    grouped.from_root = true;
    grouped.arch = arch;
    verify(grouped);
    // A sink logit keeps every row's maximum finite: dead chunks run no tile at all.
    Case sinks{"tests/generality/sinks_window_gqa_decode.te", {{"T", 1000}}, {{"W", 100}}, 4};
    sinks.from_root = true;
    sinks.arch = arch;
    verify(sinks);
  }
}

// Long reductions split into chunks whose combine walks wide tiles on 256 or 512 threads (decode
// over 32768 keys, norms over 65536 columns). A lone reduction over a row longer than CUDA holds
// whole (l2norm's sum of squares, 33000 bytes of f16) is streamed too: split into chunks at 4
// rows, in strips at 130.
TEST(Emulator, SplitKAtLongLengths) {
  verify({"attention/decode_causal.te", {{"T", 32768}}, {}});
  verify({"norm/layernorm.te", {{"M", 4}, {"N", 65536}}, {}});
  verify({"norm/l2norm.te", {{"M", 4}, {"N", 20000}}, {}});
  verify({"norm/l2norm.te", {{"M", 130}, {"N", 16500}}, {}});
}

// Rows streamed in strips longer than the first (strip_tile_max): 130 rows of 16500 columns make
// strips of 8192, two whole and one partial a row, with the cp.async pipeline of the larger tiles.
TEST(Emulator, NormsInLongStrips) {
  for (const char* name : {"norm/softmax.te", "norm/rmsnorm_quant.te", "norm/layernorm.te"})
    verify({name, {{"M", 130}, {"N", 16500}}, {}});
}

// Rows kept in shared memory (CudaCodegen.cpp, loads staged): the later passes over a streamed
// row read its first strips from the slots its first pass copied them to. The whole row (softmax
// f32 at 20000 columns: 3 strips of 8192; layer norm f16 at 32768: 4), and part of it (softmax at
// 40000: 3 slots for 5 strips; rmsnorm_quant at 60000: 6 for 8), where the strips past the kept
// ones go through the last two slots in every pass.
TEST(Emulator, RowsKeptInSharedMemory) {
  struct Row {
    const char* example;
    int64_t n;
    const char* kept;  // the row kept, as the kernel declares it
  };
  for (const Row& r : {Row{"norm/softmax.te", 20000, "<= 3LL ? 3LL : 1LL;"},
                       Row{"norm/layernorm.te", 32768, "<= 4LL ? 4LL : 2LL;"},
                       Row{"norm/softmax.te", 40000, "<= 3LL ? 3LL : 1LL;"},
                       Row{"norm/rmsnorm_quant.te", 60000, "<= 6LL ? 6LL : 4LL;"}}) {
    Case c{r.example, {{"M", 128}, {"N", r.n}}, {}};
    std::vector<std::string> warnings;
    std::string code =
        cuda::generate_cuda_source(compile(c, &warnings).tiles, cuda::CudaTarget::parse(c.arch))
            .code;
    EXPECT_NE(code.find(std::string(r.kept) + "  // iterations read from the row kept"),
              std::string::npos)
        << describe(c);
    verify(c);
  }
}

TEST(Emulator, NormsAtDefaultAndOddSizes) {
  for (const char* name :
       {"norm/softmax.te", "norm/l2norm.te", "norm/rmsnorm_quant.te", "norm/layernorm.te"}) {
    verify({name, {}, {}});
    verify({name, {{"M", 37}, {"N", 1000}}, {}});
  }
}

// Short rows run on a few lanes of a warp each, several a CTA (instances_per_cta_for): with rows
// enough to fill a GPU, rows of 100 columns on 8 lanes (16 a CTA) and of 256 on 16 (8 a CTA), the
// last CTA holding one live row (8449 rows); with few rows, a warp a row (4 a CTA). Every norm at
// rows of 40, 100 and 256 columns, with a last CTA of a few live instances (1, 6 and 39 rows), and
// the rotated keys and queries of rotary attention (rows of 32 f16 at the corpus's sizes).
TEST(Emulator, ShortRowsOnFewLanes) {
  std::vector<std::string> warnings;
  for (auto [m, n, per_cta] :
       {std::tuple<int64_t, int64_t, int>{8449, 100, 16}, {8449, 256, 8}, {37, 100, 4}}) {
    Case c{"norm/softmax.te", {{"M", m}, {"N", n}}, {}};
    EXPECT_EQ(
        cuda::generate_cuda_source(compile(c, &warnings).tiles, cuda::CudaTarget::parse("sm_80"))
            .launches.at(0)
            .instances_per_cta,
        per_cta)
        << describe(c);
    if (m > 1000) verify(c);
  }
  verify({"norm/layernorm.te", {{"M", 8449}, {"N", 40}}, {}});
  // Block quantisation's groups, as many as fill a GPU, each a tile of G columns (the param's
  // value): on 8 lanes for G = 128 and 96 (16 a CTA; 96 in 12 chunks of 8 on 8 lanes), on 16 for
  // 256 and 160 (8 a CTA; 160 in 20 chunks); and G = 1920, a tile for a CTA of its own.
  for (auto [g, per_cta] :
       {std::pair<double, int>{128.0, 16}, {256.0, 8}, {96.0, 16}, {160.0, 8}, {1920.0, 1}}) {
    Case q{"tests/generality/block_quant_fp8.te", {{"M", 600}, {"N", 3840}}, {{"G", g}}};
    q.from_root = true;
    EXPECT_EQ(
        cuda::generate_cuda_source(compile(q, &warnings).tiles, cuda::CudaTarget::parse("sm_90a"))
            .launches.at(0)
            .instances_per_cta,
        per_cta)
        << describe(q);
    verify(q);
  }
  for (const char* name :
       {"norm/softmax.te", "norm/l2norm.te", "norm/rmsnorm_quant.te", "norm/layernorm.te"})
    for (int64_t m : {1, 6, 39})
      for (int64_t n : {40, 100, 256}) verify({name, {{"M", m}, {"N", n}}, {}});
  Case rotary{"tests/generality/rotary_attention.te", {{"H", 3}, {"S", 37}, {"T", 41}}, {}};
  rotary.from_root = true;
  verify(rotary);
}

// Many rows: a row that fits in one tile computed whole (300 columns), and a longer one fused by
// the rolling update in strips of 1024 columns (8300), or for 4-byte rows at 128 rows or more,
// with tails in both axes.
TEST(Emulator, NormsAtManyRows) {
  for (const char* name :
       {"norm/softmax.te", "norm/l2norm.te", "norm/rmsnorm_quant.te", "norm/layernorm.te"}) {
    verify({name, {{"M", 200}, {"N", 300}}, {}});
    verify({name, {{"M", 130}, {"N", 8300}}, {}});
  }
}

// Layer norm on rows far from zero (1000 + N(0, 1): f16 resolves no more) and on constant rows,
// under split-K (8 rows), the rolling update (130 rows) and whole rows (1000 columns): within
// 1e-3 of the exact result on the same f16 inputs.
TEST(Emulator, StableLayerNormUnderEveryUpdate) {
  for (double offset : {1000.0, 100.0})
    for (int64_t rows : {8, 130})
      for (int64_t cols : {1000, 9000}) {
        Case c{"norm/layernorm.te", {{"M", rows}, {"N", cols}}, {}};
        c.tolerance = 1e-3;
        c.adjust_inputs = [offset](std::map<std::string, runtime::Tensor>& in) {
          runtime::Tensor& x = in.at("X");
          std::mt19937_64 rng(11);
          std::normal_distribution<double> noise(0.0, 1.0);
          for (int64_t e = 0; e < x.numel(); ++e)  // offset 100: constant rows
            x.set(e, offset + (offset == 100.0 ? 0.0 : noise(rng)));
        };
        verify(c);
      }
}

// The activations sigmoid and erf in the epilogue of a fused tensor-core kernel.
TEST(Emulator, ActivationsInAFusedKernel) {
  for (const runtime::SizeMap& sizes :
       {runtime::SizeMap{}, runtime::SizeMap{{"S", 100}, {"T", 130}}}) {
    Case c{"tests/emu/gated_attention.te", sizes, {}};
    c.from_root = true;
    verify(c);
  }
}

// Float to i8 and i32 casts saturate to the type's range, whether the value is stored or kept.
TEST(Emulator, SaturatingCasts) {
  for (const runtime::SizeMap& sizes :
       {runtime::SizeMap{}, runtime::SizeMap{{"M", 130}, {"N", 4100}}}) {
    Case c{"tests/emu/saturating_casts.te", sizes, {}};
    c.from_root = true;
    verify(c);
  }
}

// Stores to fp8 round as the interpreter does, bit for bit: floats across the whole range (every
// 262147th bit pattern), ties, subnormals, infinities and NaN, on sm_80 (codes in software) and
// sm_90a (e4m3 pairs by one instruction).
TEST(Emulator, Fp8StoresRoundAsTheInterpreter) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Case c{"tests/emu/fp8_stores.te", {}, {}};
    c.from_root = true;
    c.arch = arch;
    c.tolerance = 1e-300;
    c.adjust_inputs = [](std::map<std::string, runtime::Tensor>& in) {
      runtime::Tensor& x = in.at("X");
      const std::vector<float> specials = {464.0f,   465.0f,    448.0f,   61440.0f, 61439.0f,
                                           1.0625f,  1.1875f,   0x1p-10f, 0x3p-11f, 0x1p-17f,
                                           INFINITY, -INFINITY, NAN,      -NAN,     -0.0f};
      for (int64_t k = 0; k < x.numel(); ++k) {
        uint32_t bits = static_cast<uint32_t>(k * 262147u);
        float f;
        std::memcpy(&f, &bits, 4);
        x.set(k, k % 97 < static_cast<int64_t>(specials.size()) ? specials[k % 97] : f);
      }
    };
    verify(c);
  }
}

// Reductions over a param's extent, at several values of the param (each a kernel of its own):
// sliding windows of W columns, none, one, and more than a warp's 32 (window_sums.te), and a
// softmax in groups of G columns (group_softmax.te), on sm_80 and sm_90a.
TEST(Emulator, ParamExtents) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (double w : {24.0, 1.0, 100.0, 0.0}) {
      Case c{"tests/emu/window_sums.te", {{"M", 3}, {"N", 301}}, {{"W", w}}};
      c.from_root = true;
      c.arch = arch;
      verify(c);
    }
    for (double g : {96.0, 128.0}) {
      Case c{"tests/emu/group_softmax.te", {{"M", 5}, {"N", 384}}, {{"G", g}}};
      c.from_root = true;
      c.arch = arch;
      verify(c);
    }
  }
}

// Integer division by a param in 32 bits where the operands fit, in 64 where they do not: every
// sign of divisor and dividend, a divisor of -1, dividends beyond 2^31 (|O| * 2^20).
// A divisor that is a param is checked once at the kernel's start, the divisions by it then
// unchecked: a C of 0 is still reported by the launch.
TEST(Emulator, DivisionsByParams) {
  for (double c : {7.0, -7.0, -1.0})
    for (double o : {-1.0, 3000.0, -3000.0}) {
      Case d{"tests/emu/divisions_by_params.te", {}, {{"C", c}, {"O", o}}};
      d.from_root = true;
      verify(d);
    }
  Case zero{"tests/emu/divisions_by_params.te", {}, {}};
  zero.from_root = true;
  std::vector<std::string> warnings;
  Compiled k = compile(zero, &warnings);
  emu::EmulatedCudaKernel kernel(k.tiles, cuda::CudaTarget::parse("sm_80"));
  std::map<std::string, runtime::Tensor> in = runtime::random_inputs(k.program, k.sizes, 1);
  runtime::Tensor q(DType::F32, {8, 300}), r(DType::F32, {8, 300});
  kernel.run({&in.at("X"), &q, &r}, k.sizes, {{"C", 7.0}});
  try {
    kernel.run({&in.at("X"), &q, &r}, k.sizes, {{"C", 0.0}});
    ADD_FAILURE() << "a division by C = 0 ran";
  } catch (const RuntimeArgError& e) {
    EXPECT_NE(std::string(e.what()).find("division failed at /"), std::string::npos) << e.what();
  }
}

TEST(Emulator, PerformerAtDefaultAndOddSizes) {
  verify({"performer.te", {}, {}});
  verify({"performer.te", {{"S", 300}, {"T", 300}}, {}});
}

// The benchmark's head and feature sizes (D = 128, R = 256) at a few hundred keys, with a tail:
// the key side's nests outside the fused kernel hold more than a CUDA tile's budget of elements
// (the normaliser over every key and feature, R x D projections), and walk their long loops in
// chunks of a tile.
TEST(Emulator, PerformerAtTheBenchmarkFeatureSizes) {
  runtime::SizeMap sizes = {{"H", 1}, {"S", 130}, {"T", 300}, {"D", 128}, {"R", 256}};
  std::vector<std::string> warnings;
  std::string tiles = tile::to_string(compile({"performer.te", sizes, {}}, &warnings).tiles);
  EXPECT_NE(tiles.find("for j_outer in range("), std::string::npos) << tiles;
  verify({"performer.te", sizes, {}});
}

// Reductions outside any fused chain over more elements than a CUDA tile's budget (a maximum over
// two long axes, a masked sum down a column, a mean of squares along a long row), each with a
// tail: walked in chunks of a tile.
TEST(Emulator, LongReductionsOutsideChainsWalkChunks) {
  Case c{"tests/emu/long_reductions.te", {}, {}};
  c.from_root = true;
  std::vector<std::string> warnings;
  std::string tiles = tile::to_string(compile(c, &warnings).tiles);
  EXPECT_NE(tiles.find("for t_outer in range("), std::string::npos) << tiles;
  verify(c);
}

// The benchmark's head size: 128-row tiles of two m16 blocks a warp, the PV product by 16-column
// blocks, the interior loop version, and tails in both sequence axes.
TEST(Emulator, PrefillAtHeadDim128WithTails) {
  runtime::SizeMap one_head = {{"H", 1}, {"S", 300}, {"T", 300}, {"D", 128}};
  runtime::SizeMap grouped = {{"HQ", 2}, {"HK", 1}, {"S", 300}, {"T", 300}, {"D", 128}};
  for (const char* name :
       {"prefill_global", "prefill_causal", "prefill_causal_bf16", "prefill_alibi"})
    verify({std::string("attention/") + name + ".te", one_head, {}});
  for (const char* name : {"prefill_gqa", "prefill_softcap"})
    verify({std::string("attention/") + name + ".te", grouped, {}});
  verify({"attention/prefill_windowed.te", grouped, {{"W", 100}}});
}

// The kernels generated for sm_90a: the dots of row tiles of whole warpgroups as wgmma (A from
// the packed accumulator or a staged tile, B through swizzled descriptors, the copies fenced for
// the asynchronous proxy), the rest as on sm_80: every attention example at its default sizes,
// with tails in both sequence axes, and at the benchmark's head size 128 (128-row tiles on two
// warpgroups, the column-blocked operand tiles).
TEST(Emulator, HopperKernels) {
  auto hopper = [](Case c) {
    c.arch = "sm_90a";
    return c;
  };
  for (const char* name :
       {"prefill_global", "prefill_causal", "prefill_causal_bf16", "prefill_alibi", "prefill_gqa",
        "prefill_softcap", "prefill_windowed", "decode_causal", "decode_gqa"})
    verify(hopper({std::string("attention/") + name + ".te", {}, {}}));
  verify(hopper({"attention/prefill_causal.te", {{"S", 200}, {"T", 330}}, {}}));
  verify(hopper({"attention/prefill_windowed.te", {{"S", 48}, {"T", 80}}, {{"W", 16}}}));
  runtime::SizeMap one_head = {{"H", 1}, {"S", 300}, {"T", 300}, {"D", 128}};
  runtime::SizeMap grouped = {{"HQ", 2}, {"HK", 1}, {"S", 300}, {"T", 300}, {"D", 128}};
  for (const char* name : {"prefill_global", "prefill_causal_bf16"})
    verify(hopper({std::string("attention/") + name + ".te", one_head, {}}));
  verify(hopper({"attention/prefill_gqa.te", grouped, {}}));
}

// Few queries for the keys (split-K: B x H x S under 128 rows): each head's S queries are one row
// tile, of the next power of two rows with the tail masked (33 and 48 rows fit no warp layout;
// they fell back to the element-cyclic writer), with the mask tile read transposed too. On sm_90a,
// a mask tile staged beside Q, K and V at head size 128 leaves K one stage, so that two CTAs fit
// an SM.
TEST(Emulator, FewQueriesAndStagedMasks) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (int64_t s : {20, 33, 48}) {
      Case c{"attention/prefill_global.te", {{"H", 1}, {"S", s}, {"T", 200}}, {}};
      c.arch = arch;
      verify(c);
    }
    Case masked{"tests/generality/mask_key_major.te", {{"H", 1}, {"S", 70}, {"T", 132}}, {}};
    masked.from_root = true;
    masked.arch = arch;
    verify(masked);
  }
  Case staged{
      "tests/generality/mask_key_major.te", {{"H", 2}, {"S", 144}, {"T", 200}, {"D", 128}}, {}};
  staged.from_root = true;
  staged.arch = "sm_90a";
  verify(staged);
}

// Query-head groups that are no multiple of 16 (24 and 40 query heads a key/value head, decode
// and a prefill of one query): the rows run on the warps of the next power of two, the rows past
// the group never stored (they fell back to the element-cyclic writer). So do groups of 48 and
// 112, whose three and seven warps split neither a key tile's copies evenly nor its swizzle
// period.
TEST(Emulator, GroupsOfAnySize) {
  for (const char* arch : {"sm_80", "sm_90a"})
    for (int64_t hq : {48, 80, 96, 224}) {
      Case c{"attention/decode_gqa.te", {{"HQ", hq}, {"HK", 2}, {"T", 500}, {"D", 128}}, {}};
      c.arch = arch;
      verify(c);
      Case p{"attention/prefill_gqa.te", {{"HQ", hq}, {"HK", 2}, {"S", 1}, {"T", 300}}, {}};
      p.arch = arch;
      verify(p);
    }
}

// A per-column vector as long as the row tile (QK-norm's weights at a head size equal to the row
// tile: 64 on sm_90a, 128 on sm_80) is read along the columns, not taken for a row vector (its
// kernels fell back to the element-cyclic writer); cosine attention over a few queries alike.
TEST(Emulator, ColumnVectorsAsLongAsTheRowTile) {
  auto corpus = [](const char* name, runtime::SizeMap sizes, const char* arch) {
    Case c{std::string("tests/generality/") + name, std::move(sizes), {}};
    c.from_root = true;
    c.arch = arch;
    return c;
  };
  verify(corpus("qk_norm.te", {{"H", 2}, {"S", 96}, {"T", 96}, {"D", 64}}, "sm_90a"));
  verify(corpus("qk_norm.te", {{"H", 1}, {"S", 130}, {"T", 150}, {"D", 128}}, "sm_80"));
  for (const char* arch : {"sm_80", "sm_90a"})
    verify(corpus("cosine_attention.te", {{"H", 1}, {"S", 40}, {"T", 100}}, arch));
}

// Decoding steps at serving batches. At 128 rows or more the rolling update, its row strip the
// few queries there are (S = 1, 2, 3 at the sizes scheduled for); grouped query heads (8 or 16)
// share a row tile, one query an instance, where that makes 128 instances or more (B x HK x S),
// and take split-K, grouped alike, where it makes fewer.
TEST(Emulator, DecodeAtServingBatches) {
  verify({"attention/decode_causal.te", {{"B", 4}, {"H", 40}, {"S", 1}, {"T", 150}}, {}});
  verify({"attention/decode_gqa.te", {{"B", 16}, {"HQ", 64}, {"HK", 8}, {"S", 1}, {"T", 150}}, {}});
  verify({"attention/decode_gqa.te", {{"B", 6}, {"HQ", 16}, {"HK", 8}, {"S", 3}, {"T", 150}}, {}});
  verify({"attention/decode_gqa.te", {{"B", 32}, {"HQ", 64}, {"HK", 4}, {"S", 2}, {"T", 70}}, {}});
  for (int64_t s : {1, 3})
    verify(
        {"attention/decode_gqa.te", {{"B", 2}, {"HQ", 64}, {"HK", 8}, {"S", s}, {"T", 150}}, {}});
  verify({"attention/decode_gqa.te", {{"B", 4}, {"HQ", 64}, {"HK", 4}, {"S", 2}, {"T", 70}}, {}});
}

// Head sizes other than the powers of two up to 128: D=48 and D=96 (rows of 6 and 12 16-byte
// chunks, swizzled in spans of 2 and 4), D=192 and D=256, prefill (128-row tiles, on eight warps
// of one m16 block past D=128; tails in both sequence axes) and decode with many rows (rolling
// update).
TEST(Emulator, AttentionAtOtherHeadDims) {
  for (int64_t d : {48, 96, 192, 256}) {
    verify({"attention/prefill_causal.te", {{"H", 1}, {"S", 140}, {"T", 150}, {"D", d}}, {}});
    verify({"attention/decode_causal.te", {{"B", 2}, {"H", 64}, {"T", 100}, {"D", d}}, {}});
  }
}

// A mask that compares a value divided by a param (i / C == j / C) is tested per tile: a tile
// inside one chunk runs unmasked, for either sign of C (a floor division by a negative C is
// monotone too, decreasing), chunks wider than the tiles, narrower, and not dividing them.
TEST(Emulator, ChunkMaskPerTile) {
  for (double chunk : {200.0, -200.0, 7.0, 64.0}) {
    Case c{"tests/generality/chunked_local.te", {{"H", 1}, {"S", 600}, {"T", 600}}, {{"C", chunk}}};
    c.from_root = true;
    verify(c);
  }
}

// A bias looked up through two tables at j - i, which the tensor-core writer reads once a
// diagonal of a lane's elements: verified at full tiles and at tails whose rows and keys past the
// sequences index outside the first table (masked there, no error), and a bucket outside the
// second table where the mask holds is an error naming it.
TEST(Emulator, GathersAlongDiagonals) {
  const auto buckets = [](int64_t broken) {
    return [broken](std::map<std::string, runtime::Tensor>& in) {
      runtime::Tensor& rel = in.at("REL");
      for (int64_t k = 0; k < rel.numel(); ++k) rel.set(k, k == broken ? 16 : k % 16);
    };
  };
  for (const runtime::SizeMap& sizes : {runtime::SizeMap{}, runtime::SizeMap{{"S", 70}, {"T", 130}},
                                        runtime::SizeMap{{"S", 130}, {"T", 70}}}) {
    Case c{"tests/emu/relative_position_table.te", sizes, {}};
    c.from_root = true;
    c.adjust_inputs = buckets(-1);
    verify(c);
  }
  Case c{"tests/emu/relative_position_table.te", {{"S", 70}, {"T", 130}}, {}};
  c.from_root = true;
  c.adjust_inputs = buckets(70);  // j - i + S = 70 on the diagonal j = i
  EXPECT_NE(check(c).find("failed at BIAS"), std::string::npos) << check(c);
}

// A target id outside the vocabulary is a run-time error naming the buffer it indexes, as in the
// reference interpreter (the corpus, GeneralityCorpus, runs the gathers on valid ids).
TEST(Emulator, GatherOutOfRangeIsAnError) {
  Case c{"tests/generality/cross_entropy.te", {{"M", 5}, {"N", 100}}, {}};
  c.from_root = true;
  std::vector<std::string> warnings;
  Compiled k = compile(c, &warnings);
  EXPECT_TRUE(warnings.empty());
  emu::EmulatedCudaKernel kernel(k.tiles, cuda::CudaTarget::parse("sm_80"));
  std::map<std::string, runtime::Tensor> in = runtime::random_inputs(k.program, k.sizes, 1);
  runtime::Tensor loss(DType::F32, {5});
  for (int64_t i = 0; i < 5; ++i) in.at("TGT").set(i, i);
  kernel.run({&in.at("X"), &in.at("TGT"), &loss}, k.sizes, {});
  in.at("TGT").set(3, 100);
  try {
    kernel.run({&in.at("X"), &in.at("TGT"), &loss}, k.sizes, {});
    ADD_FAILURE() << "an out-of-range target id ran";
  } catch (const RuntimeArgError& e) {
    EXPECT_NE(std::string(e.what()).find("failed at X"), std::string::npos) << e.what();
  }
}

// T5's buckets computed from positions reach 31: a table of 16 biases a head is read past its
// end by keys after their query, in interior tiles (checked where the diagonal table is filled)
// and in tail tiles (checked at the elements), and the launch reports it. 32 a head run.
TEST(Emulator, DiagonalGatherOutOfRangeIsAnError) {
  Case c{"tests/generality/t5_log_buckets.te",
         {{"B", 1}, {"H", 1}, {"S", 140}, {"T", 150}, {"D", 32}, {"NB", 32}},
         {}};
  c.from_root = true;
  std::vector<std::string> warnings;
  Compiled k = compile(c, &warnings);
  EXPECT_TRUE(warnings.empty());
  emu::EmulatedCudaKernel kernel(k.tiles, cuda::CudaTarget::parse("sm_80"));
  for (int64_t buckets : {32, 16}) {
    runtime::SizeMap sizes = k.sizes;
    sizes["NB"] = buckets;
    std::map<std::string, runtime::Tensor> in = runtime::random_inputs(k.program, sizes, 1);
    runtime::Tensor out(DType::F16, {1, 1, 140, 32});
    std::vector<runtime::Tensor*> args{&in.at("Q"), &in.at("K"), &in.at("V"), &in.at("BIAS"), &out};
    if (buckets == 32) {
      kernel.run(args, sizes, {});
      continue;
    }
    try {
      kernel.run(args, sizes, {});
      ADD_FAILURE() << "a bucket past the bias table ran";
    } catch (const RuntimeArgError& e) {
      EXPECT_NE(std::string(e.what()).find("failed at BIAS"), std::string::npos) << e.what();
    }
  }
}

// A corpus row reduction over streamed rows (rows held whole never fuse), at few rows (split-K)
// and many (rolled): scheduled without a warning, its target reduction fused (a partial block
// `target`.rf), and verified.
static void verify_streamed_rows(const std::string& file, const std::string& target) {
  for (int64_t m : {37, 300}) {
    Case c{file, {{"M", m}, {"N", 3000}}, {}};
    c.from_root = true;
    c.whole_row_bytes = 0;
    std::vector<std::string> warnings;
    Compiled k = compile(c, &warnings);
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    EXPECT_NE(ir::to_string(k.scheduled).find(target + ".rf"), std::string::npos)
        << file << " M=" << m << ": not fused";
    verify(c);
  }
}

// The entropy of a softmax: its sum of p log p is repaired through the normaliser's running
// value (the "running sums" repair), and the repaired sum's scan feeds it.
TEST(Emulator, EntropyOfStreamedRows) {
  verify_streamed_rows("tests/generality/softmax_entropy.te", "H.sum0");
}

// KL divergence between two softmaxes of the same rows: the second softmax reads nothing of the
// first one's tile loop and is placed beside it (a sibling: by its axis' tile and the row loop
// of the same extent); KL's repair reads both normalisers' running values, its scale a ratio of
// running sums (at most 1).
TEST(Emulator, KlDivergenceOfStreamedRows) {
  verify_streamed_rows("tests/generality/kl_divergence_rows.te", "KL");
}

// A bias tile beside the scores (relative_bias_tensor: BIAS[h, i, j]) whose rows are whole
// aligned 16-byte chunks (T a multiple of 4) is copied ahead into shared memory, rows and key
// chunks past the buffer zero-filled; otherwise it is read from global memory at its uses,
// without per-element bounds tests in the loop version whose tiles lie inside the buffer and with
// them in the other. Interior and tail tiles of rows and keys in each run.
TEST(Emulator, BiasTilesInsideAndAcrossTheBufferEnd) {
  for (int64_t t : {200, 202}) {
    Case c{"tests/generality/relative_bias_tensor.te",
           {{"B", 1}, {"H", 1}, {"S", 300}, {"T", t}, {"D", 32}},
           {}};
    c.from_root = true;
    verify(c);
  }
}

// Masks given as tensors (a boolean i8 [B, S, T] tensor, an additive f16 [S, T] one) hide keys
// in patterns no tile test can see, and whole rows: a row that sees no key outputs 0, in tiles
// copied into shared memory (T a multiple of 16: the i8 mask in two stages, the f16 one at
// D=128 in one, reissued after its reader) and in tiles read at their uses (T = 150).
TEST(Emulator, MaskTensorsHideWholeRows) {
  // Mask `name` of `batches` x 140 x t elements: `off` where key j is hidden from query i of
  // sequence b, `on` where it is visible.
  auto masked = [](Case& c, const char* name, int64_t batches, int64_t t, double off, double on) {
    c.from_root = true;
    c.adjust_inputs = [=](std::map<std::string, runtime::Tensor>& in) {
      runtime::Tensor& m = in.at(name);
      for (int64_t b = 0; b < batches; ++b)
        for (int64_t i = 0; i < 140; ++i)
          for (int64_t j = 0; j < t; ++j) {
            const bool hidden = (i + b) % 9 == 4 || ((i + b) * 7 + j * 3) % 5 == 0;
            m.set((b * 140 + i) * t + j, hidden ? off : on);
          }
    };
  };
  for (int64_t t : {192, 150}) {
    Case flags{"tests/generality/attention_mask_tensor.te",
               {{"B", 2}, {"H", 1}, {"S", 140}, {"T", t}, {"D", 32}},
               {}};
    masked(flags, "MASK", 2, t, 0, 1);
    verify(flags);
    Case additive{"tests/generality/additive_mask_f16.te",
                  {{"B", 1}, {"H", 2}, {"S", 140}, {"T", t}, {"D", 128}},
                  {}};
    masked(additive, "AMASK", 1, t, -std::numeric_limits<double>::infinity(), 0.25);
    verify(additive);
  }
}

// Attention over the first L positions of a key/value cache of TMAX whose unfilled positions hold
// NaN (memory never written): the program never reads them, so neither may the kernels. The
// value tiles are staged with their rows past L zero-filled (a NaN there times a weight of 0
// would be NaN); keys past L are masked after the dot. Prefill and decode (split-K), the limit
// inside a tile and on its edge, mma.sync and wgmma.
TEST(Emulator, UnfilledCachePositionsAreNeverRead) {
  for (const std::string arch : {"sm_80", "sm_90a"})
    for (auto [s, filled] : {std::pair<int64_t, int64_t>{70, 130}, {1, 257}, {16, 128}}) {
      Case c{"tests/generality/static_cache_attention.te",
             {{"B", 1}, {"H", 2}, {"S", s}, {"TMAX", 300}, {"D", 64}},
             {{"L", static_cast<double>(filled)}}};
      c.from_root = true;
      c.arch = arch;
      c.adjust_inputs = [filled](std::map<std::string, runtime::Tensor>& in) {
        for (const char* name : {"K", "V"}) {
          runtime::Tensor& t = in.at(name);
          for (int64_t k = 0; k < t.numel(); ++k)
            if ((k / 64) % 300 >= filled) t.set(k, std::numeric_limits<double>::quiet_NaN());
        }
      };
      verify(c);
    }
}

// Every key scores the same (Q and K constant): each row's maximum is reached in its first key
// tile and never grows after it (the rescale factor of every later tile is exactly 1), and the
// output is the mean of V over the visible keys.
TEST(Emulator, PrefillWithTiedScores) {
  auto tie = [](std::map<std::string, runtime::Tensor>& in) {
    for (const char* name : {"Q", "K"})
      for (int64_t i = 0; i < in.at(name).numel(); ++i) in.at(name).set(i, 0.5);
  };
  for (const char* name : {"prefill_global", "prefill_causal"})
    verify({std::string("attention/") + name + ".te",
            {{"H", 1}, {"S", 300}, {"T", 300}, {"D", 128}},
            {},
            0,
            tie});
}

// The tensors of a run are checked before any launch (LaunchPlan.h, as on the GPU): count, dtype
// and shape, each message naming the buffer; the output is not written.
TEST(Emulator, RefusesBadTensorsBeforeAnyLaunch) {
  std::vector<std::string> warnings;
  Compiled k = compile({"norm/softmax.te", {{"M", 8}, {"N", 100}}, {}}, &warnings);
  emu::EmulatedCudaKernel kernel(k.tiles, cuda::CudaTarget::parse("sm_80"));
  runtime::Tensor x(DType::F32, {8, 100}), y(DType::F32, {8, 100});
  for (int64_t i = 0; i < y.numel(); ++i) y.set(i, 7.0);
  auto refused = [&](std::vector<runtime::Tensor*> args, const std::vector<std::string>& parts) {
    try {
      kernel.run(args, k.sizes, {});
      ADD_FAILURE() << "ran with a bad tensor (expected: " << parts.front() << ")";
    } catch (const RuntimeArgError& e) {
      std::string what = e.what();
      for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
    }
  };
  refused({&x}, {"takes 2 tensors", "X, Y", "got 1"});
  runtime::Tensor f16(DType::F16, {8, 100});
  refused({&f16, &y}, {"input X has dtype f16, expected f32"});
  runtime::Tensor narrow(DType::F32, {8, 99});
  refused({&narrow, &y}, {"input X has shape [8, 99], expected [M, N] = [8, 100]"});
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.get(i), 7.0) << "the output was written";
}

// The generality corpus (tests/generality/README.md): every program at every size of its
// `# SHAPES:` line, one test a program. A `# GAP: emulator <why>` line expects its CUDA kernel to
// fail (strictly: a gap that closes must lose its line).
namespace {

std::vector<std::string> corpus_files() {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const fs::directory_entry& e :
       fs::directory_iterator(fs::path(KINTSUGI_SOURCE_DIR) / "tests" / "generality"))
    if (e.path().extension() == ".te") files.push_back(e.path().stem().string());
  std::sort(files.begin(), files.end());
  return files;
}

class GeneralityCorpus : public ::testing::TestWithParam<std::string> {};

}  // namespace

// KINTSUGI_EMU_CORPUS_PART=I/N runs the programs whose place in the sorted corpus is I modulo N
// and skips the others (CI's pass with eager copies, tests/CMakeLists.txt); unset, all run.
bool in_corpus_part(const std::string& name) {
  const std::vector<std::string> all = corpus_files();
  return in_part(static_cast<size_t>(std::find(all.begin(), all.end(), name) - all.begin()));
}

TEST_P(GeneralityCorpus, VerifiesAtEverySize) {
  if (!in_corpus_part(GetParam()))
    GTEST_SKIP() << "not in part " << std::getenv("KINTSUGI_EMU_CORPUS_PART")
                 << " of the corpus; every program: KINTSUGI_EMU_CORPUS_PART= "
                 << "KINTSUGI_EMU_EAGER_COPIES=1 build/tests/kintsugi_emu_tests "
                 << "--gtest_filter='*GeneralityCorpus*'";
  std::string file = std::string(KINTSUGI_SOURCE_DIR) + "/tests/generality/" + GetParam() + ".te";
  std::ifstream in(file);
  std::string line, shapes, gap;
  std::set<driver::Requirement> gaps = {};
  while (std::getline(in, line)) {
    if (line.rfind("# SHAPES:", 0) == 0) shapes = line.substr(9);
    if (line.rfind("# GAP: emulator ", 0) == 0) gap = line.substr(16);
    for (driver::Requirement r : {driver::Requirement::Fused, driver::Requirement::Tile})
      if (line.rfind(std::string("# GAP: ") + driver::requirement_name(r) + " ", 0) == 0)
        gaps.insert(r);
  }
  ASSERT_FALSE(shapes.empty()) << file << " has no # SHAPES: line";
  std::set<std::string> params;
  for (const ir::Param& q : driver::load_file(file).params) params.insert(q.name);
  std::istringstream cases(shapes);
  std::string failures, token;
  while (cases >> token) {
    Case c{"tests/generality/" + GetParam() + ".te", {}, {}};
    c.from_root = true;
    c.gaps = gaps;
    if (token != "-") {
      std::istringstream items(token);
      for (std::string item; std::getline(items, item, ',');) {
        size_t eq = item.find('=');
        std::string name = item.substr(0, eq), value = item.substr(eq + 1);
        if (params.count(name))
          c.params[name] = std::stod(value);
        else
          c.sizes[name] = std::stoll(value);
      }
    }
    // For sm_80 (mma.sync) and for sm_90a (its own tiles, their dots as wgmma).
    for (const char* arch : {"sm_80", "sm_90a"}) {
      c.arch = arch;
      std::string failure = check(c);
      if (!failure.empty()) failures += "\n  " + describe(c) + ": " + failure;
    }
  }
  if (gap.empty())
    EXPECT_EQ(failures, "");
  else
    EXPECT_NE(failures, "") << "passes: remove its `# GAP: emulator` line (" << gap << ")";
}

INSTANTIATE_TEST_SUITE_P(Emulator, GeneralityCorpus, ::testing::ValuesIn(corpus_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
