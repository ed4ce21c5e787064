// \file emulator_self_test.cpp
// The emulator itself (kintsugi_emu.h): the mma against a CPU matmul with fragments placed as the
// PTX ISA documents them, a cp.async that lands only at its wait, and the launches it refuses
// with a reason instead of hanging (a barrier some threads never reach, a partial-mask shuffle,
// a shared access outside the CTA's dynamic shared memory). Hopper: wgmma tiles of every shape,
// swizzle and operand form against a CPU matmul (the device code the gpu tier runs on the H200,
// wgmma_cases.h), a tile of scores loaded by TMA (tma_cases.h), a warp-specialised two-stage
// pipeline (ring_cases.h), and the mistakes they must expose: operands placed without their
// swizzle, a missing proxy fence, an mbarrier waited on with the wrong phase bit, bytes not
// announced to it, a wait nothing completes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "Emulator.h"
#include "ir/DType.h"
#include "ring_cases.h"
#include "support/Error.h"
#include "tma_cases.h"
#include "wgmma_cases.h"

using namespace kintsugi;

namespace {

const char* kPreamble = R"(
#include "kintsugi/cp_async.cuh"
#include "kintsugi/ldmatrix.cuh"
#include "kintsugi/math.cuh"
#include "kintsugi/mma.cuh"
#include "kintsugi/shuffle.cuh"
struct KsArgs {
  unsigned long long bufs[32];
  long long sizes[32];
  double params[16];
  alignas(128) unsigned char maps[4][128];
};
using namespace kintsugi::device;
)";

cuda::KsArgs args_of(std::vector<void*> buffers) {
  cuda::KsArgs a{};
  for (size_t i = 0; i < buffers.size(); ++i) a.bufs[i] = reinterpret_cast<uintptr_t>(buffers[i]);
  return a;
}

// Runs `kernel` of `body` on one CTA and returns the emulator's complaint ("" when none).
std::string complaint(const std::string& body, const std::string& kernel, unsigned threads,
                      unsigned smem_bytes, std::vector<void*> buffers = {}) {
  emu::EmulatedModule m(kPreamble + body);
  cuda::KsArgs a = args_of(buffers);
  int err = 0;
  try {
    m.launch(kernel, a, &err, 1, threads, smem_bytes);
  } catch (const InternalError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// D = C + A B for a 16 x 16 A and a 16 x 8 B of small multiples of 1/8 (every sum exact), the
// fragments placed lane by lane as the PTX ISA gives them for mma.m16n8k16 (g = lane / 4,
// t = lane % 4).
TEST(EmulatorSelf, MmaMatchesAMatmul) {
  std::vector<float> A(16 * 16), B(16 * 8), C(16 * 8), D(16 * 8);
  for (size_t i = 0; i < A.size(); ++i) A[i] = float(int(i * 7 % 17) - 8) / 8;
  for (size_t i = 0; i < B.size(); ++i) B[i] = float(int(i * 5 % 13) - 6) / 8;
  for (size_t i = 0; i < C.size(); ++i) C[i] = float(i % 5);
  std::string body = R"(
extern "C" __global__ void mma(KsArgs a, int*) {
  const float* A = (const float*)a.bufs[0];
  const float* B = (const float*)a.bufs[1];
  const float* C = (const float*)a.bufs[2];
  float* D = (float*)a.bufs[3];
  unsigned g = threadIdx.x / 4, t = threadIdx.x % 4;
  u32 fa[4], fb[2];
  for (int i = 0; i < 4; ++i) {
    unsigned r = g + 8 * (i % 2), c = 2 * t + 8 * (i / 2);
    fa[i] = pack_f16x2(A[r * 16 + c], A[r * 16 + c + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    unsigned k = 2 * t + 8 * i;
    fb[i] = pack_f16x2(B[k * 8 + g], B[(k + 1) * 8 + g]);
  }
  float acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
  mma_m16n8k16_f16(acc, fa, fb);
  for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
}
)";
  EXPECT_EQ(complaint(body, "mma", 32, 0, {A.data(), B.data(), C.data(), D.data()}), "");
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      float want = C[size_t(r * 8 + n)];
      for (int k = 0; k < 16; ++k) want += A[size_t(r * 16 + k)] * B[size_t(k * 8 + n)];
      EXPECT_EQ(D[size_t(r * 8 + n)], want) << "D[" << r << "][" << n << "]";
    }
}

// The e4m3 pair conversion (cvt.rn.satfinite.e4m3x2.f32) against the interpreter's rounding
// (ir/DType.h) on every 4099th float and the ties and edges: ties to even, subnormals, 448 and
// beyond saturated, infinities to +-448; NaN to 0x7f (the generated code's ks_f2e4m3 asks no
// more of the instruction).
TEST(EmulatorSelf, E4m3PairRoundsAsTheInterpreterDoes) {
  std::vector<float> x;
  for (uint64_t u = 0; u < 0x100000000ull; u += 4099)
    x.push_back(std::bit_cast<float>(uint32_t(u)));
  for (float f : {464.0f, 465.0f, 448.0f, 447.0f, 1.0625f, 1.1875f, 1.125f, 0x1p-10f, 0x3p-11f,
                  0x1p-9f, 0x1p-6f, INFINITY, -INFINITY, NAN, -0.0f})
    x.push_back(f);
  std::vector<uint16_t> pairs(x.size());
  uint32_t n = uint32_t(x.size());
  const std::string body = R"(
extern "C" __global__ void e4m3(KsArgs a, int*) {
  const float* x = (const float*)a.bufs[0];
  u16* pairs = (u16*)a.bufs[1];
  for (unsigned long long i = 0; i < a.sizes[0]; ++i) pairs[i] = pack_e4m3x2(x[i], -x[i]);
}
)";
  emu::EmulatedModule m(kPreamble + body);
  cuda::KsArgs a = args_of({x.data(), pairs.data()});
  a.sizes[0] = n;
  int err = 0;
  m.launch("e4m3", a, &err, 1, 1, 0);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t want =
        double_to_e4m3_bits(double(x[i])) | uint32_t(double_to_e4m3_bits(-double(x[i]))) << 8;
    ASSERT_EQ(pairs[i], want) << "pack_e4m3x2 of " << x[i] << " (bits 0x" << std::hex
                              << std::bit_cast<uint32_t>(x[i]) << ")";
  }
}

// A cp.async's bytes reach shared memory when a wait retires its group, not before; a source
// shorter than the copy is zero-filled.
TEST(EmulatorSelf, CopyLandsAtItsWait) {
  alignas(16) unsigned char src[16];
  for (int i = 0; i < 16; ++i) src[i] = static_cast<unsigned char>(i + 1);
  unsigned char out[3] = {0xee, 0xee, 0xee};
  std::string body = R"(
extern "C" __global__ void copy(KsArgs a, int*) {
  extern __shared__ __align__(128) unsigned char ks_smem[];
  unsigned char* out = (unsigned char*)a.bufs[1];
  ks_smem[0] = 0; ks_smem[8] = 0xaa;
  cp_async_cg16(smem_addr(ks_smem), (const void*)a.bufs[0], 8);
  cp_async_commit();
  out[0] = ks_smem[0];
  cp_async_wait_group<0>();
  out[1] = ks_smem[0];
  out[2] = ks_smem[8];
}
)";
  EXPECT_EQ(complaint(body, "copy", 1, 16, {src, out}), "");
  // Before the wait: shared memory as it was, or the copied byte where copies land when issued.
  const char* eager = std::getenv("KINTSUGI_EMU_EAGER_COPIES");
  EXPECT_EQ(out[0], eager != nullptr && *eager != '\0' ? 1 : 0);
  EXPECT_EQ(out[1], 1);  // after it: the copied byte
  EXPECT_EQ(out[2], 0);  // past the source's 8 bytes: zero-filled
}

TEST(EmulatorSelf, BarrierNotAllThreadsReachIsReported) {
  std::string why = complaint(R"(
extern "C" __global__ void k(KsArgs, int*) {
  if (threadIdx.x < 64) __syncthreads();
}
)",
                              "k", 128, 0);
  EXPECT_NE(why.find("no barrier can complete"), std::string::npos) << why;
  EXPECT_NE(
      why.find("64 threads at __syncthreads (the first: 0), 64 threads exited (the first: 64)"),
      std::string::npos)
      << why;
}

// Half-warps that diverge (one takes more steps) each fold their own lanes under their own
// member mask: what a warp running two instances of a kernel does.
TEST(EmulatorSelf, HalfWarpsFoldUnderTheirOwnMasks) {
  int out[32] = {};
  EXPECT_EQ(complaint(R"(
extern "C" __global__ void k(KsArgs a, int*) {
  const unsigned lanes = 0xffffu << (threadIdx.x & 16);
  int v = threadIdx.x;
  for (int step = 0; step < (threadIdx.x < 16 ? 1 : 3); ++step) {
    for (int m = 8; m > 0; m /= 2) v += __shfl_xor_sync(lanes, v, m);
    __syncwarp(lanes);
  }
  ((int*)a.bufs[0])[threadIdx.x] = v + (__all_sync(lanes, 1) ? 0 : 1000);
}
)",
                      "k", 32, 0, {out}),
            "");
  // Lanes 0..15 sum 0..15 once (120); lanes 16..31 sum 16..31 (376), then 16 times that, twice.
  for (int l = 0; l < 16; ++l) EXPECT_EQ(out[l], 120) << l;
  for (int l = 16; l < 32; ++l) EXPECT_EQ(out[l], 376 * 16 * 16) << l;
}

TEST(EmulatorSelf, MasksThatLeaveOutALaneAreRefused) {
  std::string own = complaint(R"(
extern "C" __global__ void k(KsArgs, int*) {
  float v = __shfl_xor_sync(0xffffu, 1.0f, 1);
  (void)v;
}
)",
                              "k", 32, 0);
  EXPECT_NE(own.find("with member mask 65535, which leaves the lane out"), std::string::npos)
      << own;
  std::string read = complaint(R"(
extern "C" __global__ void k(KsArgs, int*) {
  float v = __shfl_xor_sync(0xffffu << (threadIdx.x & 16), 1.0f, 16);
  (void)v;
}
)",
                               "k", 32, 0);
  EXPECT_NE(read.find("reads lane 16, outside its member mask 65535"), std::string::npos) << read;
  // Lane 5 exits: the other lanes of the mask wait for it forever.
  std::string exited = complaint(R"(
extern "C" __global__ void k(KsArgs, int*) {
  if (threadIdx.x == 5) return;
  if (threadIdx.x < 8) __syncwarp(0xffu);
}
)",
                                 "k", 32, 0);
  EXPECT_NE(exited.find("no barrier can complete"), std::string::npos) << exited;
}

// A 64-bit shuffle (an integer reduction's partials, long long in the generated code) moves
// both halves from the source lane: a butterfly sum of lane * 2^32 + lane over the warp.
TEST(EmulatorSelf, SixtyFourBitShufflesMoveBothHalves) {
  long long out[32] = {};
  EXPECT_EQ(complaint(R"(
extern "C" __global__ void k(KsArgs a, int*) {
  long long v = ((long long)threadIdx.x << 32) + threadIdx.x;
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  double d = __shfl_sync(0xffffffffu, (double)threadIdx.x + 0.5, 31 - threadIdx.x);
  ((long long*)a.bufs[0])[threadIdx.x] = v + (d == 31.5 - threadIdx.x ? 0 : 1);
}
)",
                      "k", 32, 0, {out}),
            "");
  for (int l = 0; l < 32; ++l) EXPECT_EQ(out[l], (496LL << 32) + 496) << "lane " << l;
}

TEST(EmulatorSelf, SharedAccessOutsideTheCtaIsReported) {
  std::string why = complaint(R"(
extern "C" __global__ void k(KsArgs, int*) {
  extern __shared__ __align__(128) unsigned char ks_smem[];
  u32 d[4];
  ldmatrix_x4(d, smem_addr(ks_smem) + 1024);
}
)",
                              "k", 32, 1024);
  EXPECT_NE(why.find("outside the CTA's 1024 bytes of dynamic shared memory"), std::string::npos)
      << why;
}

namespace {

// Runs wgmma case `c` on the emulator with `flags` (wgmma_cases.h); returns D.
std::vector<float> run_wgmma(const test::wgmma::Case& c, unsigned flags) {
  static const emu::EmulatedModule m(std::string(kPreamble) + test::wgmma::kAccumulatorIndex +
                                     test::wgmma::kSource + R"(
#define KS_EMULATED_CASE(NAME, ...)                                                      \
  extern "C" __global__ void NAME(KsArgs a, int*) {                                      \
    wgmma_case<__VA_ARGS__>((const float*)a.bufs[0], (const float*)a.bufs[1],              \
                            (const float*)a.bufs[2], (float*)a.bufs[3], (u32)a.sizes[0]); \
  }
KS_WGMMA_CASES(KS_EMULATED_CASE)
)");
  test::wgmma::Inputs in = test::wgmma::inputs(c.n);
  std::vector<float> d(size_t(64 * c.n), -1.f);
  cuda::KsArgs a = args_of({in.a.data(), in.b.data(), in.c.data(), d.data()});
  a.sizes[0] = flags;
  int err = 0;
  m.launch(c.kernel, a, &err, 1, 128, test::wgmma::kSharedBytes);
  return d;
}

}  // namespace

// Every shape, operand type, swizzle and major-ness of wgmma_cases.h gives A B + C exactly, and
// A B alone with scale-d false.
TEST(EmulatorSelf, WgmmaMatchesAMatmul) {
  for (const test::wgmma::Case& c : test::wgmma::cases()) {
    test::wgmma::Inputs in = test::wgmma::inputs(c.n);
    EXPECT_EQ(test::wgmma::mismatches(run_wgmma(c, 0), test::wgmma::reference(in, c.n)), 0)
        << c.kernel;
    EXPECT_EQ(test::wgmma::mismatches(run_wgmma(c, 4), test::wgmma::reference(in, c.n, false)), 0)
        << c.kernel;
  }
}

// Operands placed without their swizzle, or written without a proxy fence before the wgmma reads
// them, give wrong products: a kernel with either mistake fails its tests on the emulator. (The
// register-A cases read A from registers: only their B is misplaced.)
TEST(EmulatorSelf, WgmmaExposesABrokenSwizzleAndAMissingFence) {
  for (const test::wgmma::Case& c : test::wgmma::cases()) {
    test::wgmma::Inputs in = test::wgmma::inputs(c.n);
    const std::vector<float> want = test::wgmma::reference(in, c.n);
    if (std::string(c.kernel) != "n64_bf16_none") {  // no swizzle to break
      EXPECT_GT(test::wgmma::mismatches(run_wgmma(c, 1), want), 0) << c.kernel;
    }
    EXPECT_GT(test::wgmma::mismatches(run_wgmma(c, 2), want), 0) << c.kernel;
  }
}

namespace {

// A two-stage handshake over mbarriers, thread 0 producing a value a round and threads 1-63
// consuming it: the consumers wait on `full` with parity `round % 2` (or the wrong one, `round %
// 2 + 1` taken mod 2), read, and arrive on `empty`, which the producer waits on before the next
// round. out[t] sums what thread t read over 4 rounds.
const char* kHandshake = R"(
extern "C" __global__ void handshake(KsArgs a, int*) {
  extern __shared__ __align__(128) unsigned char ks_smem[];
  int* out = (int*)a.bufs[0];
  const u32 wrong = (u32)a.sizes[0];
  const u32 full = smem_addr(ks_smem), empty = full + 8;
  volatile int* value = (volatile int*)(ks_smem + 16);
  const u32 t = threadIdx.x;
  if (t == 0) {
    mbarrier_init(full, 1);
    mbarrier_init(empty, 63);
    fence_mbarrier_init();
    *value = 0;
  }
  __syncthreads();
  int seen = 0;
  for (u32 round = 0; round < 4; ++round) {
    if (t == 0) {
      if (round > 0)
        while (!mbarrier_try_wait_parity(empty, (round - 1) % 2)) {
        }
      *value = int(round + 1) * 10;
      mbarrier_arrive_expect_tx(full, 0);
    } else {
      while (!mbarrier_try_wait_parity(full, (round + wrong) % 2)) {
      }
      seen += *value;
      mbarrier_arrive(empty);
    }
  }
  out[t] = seen;
}
)";

}  // namespace

TEST(EmulatorSelf, MbarrierPhasesOrderAHandshake) {
  std::vector<int> out(64, -1);
  EXPECT_EQ(complaint(std::string("#include \"kintsugi/mbarrier.cuh\"\n") + kHandshake, "handshake",
                      64, 64, {out.data()}),
            "");
  for (int t = 1; t < 64; ++t) EXPECT_EQ(out[size_t(t)], 10 + 20 + 30 + 40) << t;
}

// Waiting on the other parity passes a phase too early (the phase before the first counts as
// complete): the consumers read values before they are written, or the launch stops.
TEST(EmulatorSelf, MbarrierWrongPhaseBitIsExposed) {
  std::vector<int> out(64, -1);
  emu::EmulatedModule m(std::string(kPreamble) + "#include \"kintsugi/mbarrier.cuh\"\n" +
                        kHandshake);
  cuda::KsArgs a = args_of({out.data()});
  a.sizes[0] = 1;
  int err = 0;
  std::string why;
  try {
    m.launch("handshake", a, &err, 1, 64, 64);
  } catch (const InternalError& e) {
    why = e.what();
  }
  int right = 0;
  for (int t = 1; t < 64; ++t) right += out[size_t(t)] == 100;
  EXPECT_TRUE(!why.empty() || right < 63) << why;
}

TEST(EmulatorSelf, MbarrierWaitNothingCompletesIsReported) {
  std::string why = complaint(R"(
#include "kintsugi/mbarrier.cuh"
extern "C" __global__ void k(KsArgs, int*) {
  extern __shared__ __align__(128) unsigned char ks_smem[];
  const u32 bar = smem_addr(ks_smem);
  if (threadIdx.x == 0) mbarrier_init(bar, 64);
  __syncthreads();
  if (threadIdx.x < 32) mbarrier_arrive(bar);
  while (!mbarrier_try_wait_parity(bar, 0)) {
  }
}
)",
                              "k", 64, 64);
  EXPECT_NE(why.find("no barrier can complete: 64 threads waiting on an mbarrier"),
            std::string::npos)
      << why;
}

namespace {

// The TMA scores tile (tma_cases.h) on the emulator with `flags`; returns D, or the emulator's
// complaint in *why.
std::vector<float> run_tma(unsigned flags, std::string* why) {
  static const emu::EmulatedModule m(std::string(kPreamble) + test::wgmma::kAccumulatorIndex +
                                     test::tma::kSource + R"(
extern "C" __global__ void tma_scores_kernel(KsArgs a, int*) {
  tma_scores((const TensorMap*)a.bufs[0], (const TensorMap*)a.bufs[1], (const TensorMap*)a.bufs[2],
             (const float*)a.bufs[3], (u32)a.sizes[0], (u32)a.sizes[1]);
}
)");
  test::tma::Inputs in = test::tma::inputs();
  const cuda::TensorMapSpec q = test::tma::spec(in.q16.data(), test::tma::kQRows),
                            k = test::tma::spec(in.k16.data(), test::tma::kKeys);
  EXPECT_EQ(cuda::tensor_map_unaddressable(q), "");
  std::vector<float> d(64 * 64, -1.f);
  cuda::TensorMap mq = emu::emulated_tensor_map(q), mk = emu::emulated_tensor_map(k),
                  md = emu::emulated_tensor_map(test::tma::output_spec(d.data()));
  cuda::KsArgs a = args_of({&mq, &mk, &md, in.c.data()});
  a.sizes[0] = test::tma::kRow0;
  a.sizes[1] = flags;
  int err = 0;
  try {
    m.launch("tma_scores_kernel", a, &err, 1, 128, test::tma::kSharedBytes);
  } catch (const InternalError& e) {
    *why = e.what();
  }
  return d;
}

}  // namespace

TEST(EmulatorSelf, TmaLoadsFeedWgmma) {
  std::string why;
  std::vector<float> d = run_tma(0, &why);
  EXPECT_EQ(why, "");
  EXPECT_EQ(test::wgmma::mismatches(d, test::tma::reference(test::tma::inputs())), 0);
}

// A wait on the wrong phase bit, or an arrival that does not announce the copies' bytes, passes
// before the copies land: the tile is read stale. A store of a tile the threads wrote, without a
// proxy fence, stores it stale.
TEST(EmulatorSelf, TmaWrongPhaseBitBytesNotAnnouncedOrMissingFenceAreExposed) {
  const std::vector<float> want = test::tma::reference(test::tma::inputs());
  for (unsigned flags : {1u, 2u, 4u}) {
    std::string why;
    std::vector<float> d = run_tma(flags, &why);
    EXPECT_TRUE(!why.empty() || test::wgmma::mismatches(d, want) > 0) << flags;
  }
}

// Named barriers count their threads: two warps hand values to the other two with bar.arrive /
// bar.sync over the whole CTA; a barrier over more threads than ever arrive is reported.
TEST(EmulatorSelf, NamedBarriersCountTheirThreads) {
  std::vector<int> out(128, -1);
  EXPECT_EQ(complaint(R"(
#include "kintsugi/ids.cuh"
#include "kintsugi/warpgroup.cuh"
extern "C" __global__ void k(KsArgs a, int*) {
  extern __shared__ __align__(128) unsigned char ks_smem[];
  volatile int* v = (volatile int*)ks_smem;
  int* out = (int*)a.bufs[0];
  const u32 t = threadIdx.x;
  if (t < 64) {
    v[t] = int(t) * 3;
    bar_arrive(1, 128);
  } else {
    bar_sync(1, 128);
    out[t] = v[t - 64];
  }
  if (t < 64) out[t] = elect_one() ? 1 : 0;
}
)",
                      "k", 128, 256, {out.data()}),
            "");
  for (int t = 64; t < 128; ++t) EXPECT_EQ(out[size_t(t)], (t - 64) * 3) << t;
  EXPECT_EQ(out[0] + out[1] + out[31], 1);    // one lane of warp 0
  EXPECT_EQ(out[32] + out[33] + out[63], 1);  // and of warp 1
  std::string why = complaint(R"(
#include "kintsugi/ids.cuh"
extern "C" __global__ void k(KsArgs, int*) {
  if (threadIdx.x < 64) bar_sync(2, 96);
}
)",
                              "k", 128, 0);
  EXPECT_NE(why.find("64 threads at a named barrier"), std::string::npos) << why;
}

namespace {

// The pipeline of ring_cases.h on the emulator with `flags`; returns D, or the complaint in *why.
std::vector<float> run_ring(unsigned flags, std::string* why) {
  static const emu::EmulatedModule m(std::string(kPreamble) + test::wgmma::kAccumulatorIndex +
                                     test::ring::kSource + R"(
extern "C" __global__ void ring_gemm_kernel(KsArgs a, int*) {
  ring_gemm((const TensorMap*)a.bufs[0], (const TensorMap*)a.bufs[1], (const float*)a.bufs[2],
            (float*)a.bufs[3], (u32)a.sizes[0]);
}
)");
  test::ring::Inputs in = test::ring::inputs();
  cuda::TensorMap ma = emu::emulated_tensor_map(test::tma::spec(in.a16.data(), test::ring::kRows)),
                  mb = emu::emulated_tensor_map(test::tma::spec(in.b16.data(), test::ring::kRows));
  std::vector<float> d(64 * 64, -1.f);
  cuda::KsArgs a = args_of({&ma, &mb, in.c.data(), d.data()});
  a.sizes[0] = flags;
  int err = 0;
  try {
    m.launch("ring_gemm_kernel", a, &err, 1, 256, test::ring::kSharedBytes);
  } catch (const InternalError& e) {
    *why = e.what();
  }
  return d;
}

}  // namespace

// Eight tiles through a two-stage ring: every stage is refilled only after the consumers handed
// it back, and read only after its copies landed.
TEST(EmulatorSelf, WarpSpecialisedRingPipeline) {
  std::string why;
  std::vector<float> d = run_ring(0, &why);
  EXPECT_EQ(why, "");
  EXPECT_EQ(test::wgmma::mismatches(d, test::ring::reference(test::ring::inputs())), 0);
}

// The producer waiting on the empty barriers with the wrong phase bit: the pipeline stalls or
// overwrites a stage in use, and the emulator shows it.
TEST(EmulatorSelf, RingWrongPhaseBitIsExposed) {
  std::string why;
  std::vector<float> d = run_ring(1, &why);
  EXPECT_TRUE(!why.empty() ||
              test::wgmma::mismatches(d, test::ring::reference(test::ring::inputs())) > 0)
      << why;
}
