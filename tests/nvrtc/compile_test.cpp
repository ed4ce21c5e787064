// \file compile_test.cpp
// NVRTC compiles of the device header library, no GPU needed: a kernel that uses every primitive
// compiles for sm_80 and sm_90a without spills, each primitive reaches the PTX, ptxas' resource
// report is parsed, every header compiles on its own, spills are detected, and bad sources and
// architectures fail with errors that say why, and a compile past the time limit stops with one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "../emu/ring_cases.h"
#include "../emu/tma_cases.h"
#include "../emu/wgmma_cases.h"
#include "target/cuda/DeviceHeaders.h"
#include "target/cuda/Nvrtc.h"

using namespace kintsugi;
using namespace kintsugi::cuda;

namespace {

const std::vector<std::string> kArchs = {"sm_80", "sm_90a"};

// Test code, compiled but never run here (tests/gpu runs the primitives).
const char* kEveryPrimitive = R"(
#include "kintsugi/cp_async.cuh"
#include "kintsugi/ids.cuh"
#include "kintsugi/ldmatrix.cuh"
#include "kintsugi/math.cuh"
#include "kintsugi/mma.cuh"
#include "kintsugi/shuffle.cuh"
#include "kintsugi/types.cuh"
using namespace kintsugi::device;

extern "C" __global__ void every_primitive(const float* in, float* out, u32 n) {
  __shared__ alignas(16) float staging[256];
  __shared__ alignas(16) u16 tile[512];
  const u32 lane = lane_id(), warp = warp_id(), t = threadIdx.x;
  const u32 remaining = n > 4 * t ? 4 * (n - 4 * t) : 0;
  cp_async_cg16(smem_addr(&staging[4 * t]), in + 4 * t, remaining < 16 ? remaining : 16);
  cp_async_commit();
  cp_async_ca<4>(smem_addr(&staging[128 + t]), in + 256 + t, t < n ? 4 : 0);
  cp_async_ca<8>(smem_addr(&staging[192 + (t % 32) * 2]), in + 512 + 2 * t, 8);
  cp_async_commit();
  cp_async_wait_group<1>();
  cp_async_wait_group<0>();
  cp_async_wait_all();
  sync_threads();
  for (u32 i = t; i < 512; i += blockDim.x) tile[i] = f32_to_f16(staging[i % 256]);
  sync_threads();
  const u32 row = smem_addr(&tile[(lane % 32) * 8]);
  u32 a[4], at[4], b[2], bt[2], c[1], ct[1];
  ldmatrix_x4(a, row);
  ldmatrix_x4_trans(at, row);
  ldmatrix_x2(b, row);
  ldmatrix_x2_trans(bt, row);
  ldmatrix_x1(c, row);
  ldmatrix_x1_trans(ct, row);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  mma_m16n8k16_f16(acc, a, b);
  mma_m16n8k16_bf16(acc, at, bt);
  const float m = warp_max_xor<1, 2>(acc[0] + __uint_as_float(c[0] & ct[0]));
  const float s = warp_sum_xor<1, 2, 4, 8, 16>(acc[1]) + shfl_xor(acc[2], 4);
  const float e = ex2_approx(m - s) * rcp_approx(s) + fmin_nan(acc[3], m) + fmax_nan(acc[3], s);
  u16 lo, hi;
  split_b32(pack_f16x2(e, s) ^ pack_bf16x2(m, e), lo, hi);
  float v = f16_to_f32(lo) + bf16_to_f32(hi) + bf16_to_f32(f32_to_bf16(e));
  if (warp == 0) {
    bar_arrive(1, 64);
  } else {
    bar_sync(1, 64);
  }
  sync_warp();
  out[t] = v;
}
)";

// One PTX instruction per primitive: the compile must keep every one of them.
const std::vector<std::string> kPrimitivePtx = {
    "cp.async.cg.shared.global",
    "cp.async.ca.shared.global",
    "cp.async.commit_group",
    "cp.async.wait_group 1",
    "cp.async.wait_all",
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x1.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "shfl.sync.bfly.b32",
    "ex2.approx.ftz.f32",
    "rcp.approx.ftz.f32",
    "max.NaN.f32",
    "min.NaN.f32",
    "cvt.rn.f16x2.f32",
    "cvt.rn.bf16x2.f32",
    "cvt.rn.f16.f32",
    "cvt.rn.bf16.f32",
    "cvt.f32.f16",
    "%laneid",
    "bar.arrive",
    "bar.sync",
    "bar.warp.sync",
};

// The Hopper primitives (sm_90a only), compiled but never run here (tests/gpu and the emulator's
// self-tests run them). Three wgmma shapes, both operand types, both forms, both transposes.
const char* kEveryHopperPrimitive = R"(
#include "kintsugi/mbarrier.cuh"
#include "kintsugi/smem_desc.cuh"
#include "kintsugi/tma.cuh"
#include "kintsugi/warpgroup.cuh"
#include "kintsugi/wgmma.cuh"
using namespace kintsugi::device;

extern "C" __global__ void __launch_bounds__(128, 1)
    every_hopper_primitive(float* out, u32 parity, const __grid_constant__ TensorMap map) {
  extern __shared__ __align__(1024) unsigned char smem[];
  setmaxnreg_inc<240>();
  const u32 base = smem_addr(smem), bar = base + 65536;
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 128);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(bar, 3 * 4096);
    tma_load_2d(base, &map, bar, 0, 1);
    tma_load_3d(base + 4096, &map, bar, 0, 1, 2);
    tma_load_4d(base + 8192, &map, bar, 0, 1, 2, 3);
  } else {
    mbarrier_arrive(bar);
  }
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
  fence_proxy_async();
  const u64 a = smem_descriptor(base, 16, 1024, kSwizzle128B);
  const u64 b = smem_descriptor(base + 16384, 16, 1024, kSwizzle128B);
  float d64[32], d128[64], d256[128];
  for (int i = 0; i < 32; ++i) d64[i] = 0.f;
  u32 ra[4] = {threadIdx.x, parity, threadIdx.x ^ parity, 7u};
  // Two groups, so that at most 160 accumulators are live at once.
  wgmma_fence();
  wgmma_m64n64k16_f16_ss<0, 0>(d64, a, b, 1);
  wgmma_m64n128k16_bf16_ss<1, 1>(d128, a, b, 0);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  float s = 0.f;
  for (int i = 0; i < 64; ++i) s += d128[i];
  wgmma_fence();
  wgmma_m64n256k16_f16_rs<1>(d256, ra, b, 0);
  wgmma_commit_group();
  wgmma_wait_group<1>();
  wgmma_m64n64k16_bf16_rs<0>(d64, ra, b, 1);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  for (int i = 0; i < 32; ++i) s += d64[i];
  for (int i = 0; i < 128; ++i) s += d256[i];
  out[threadIdx.x] = s;
  setmaxnreg_dec<40>();  // the warpgroup's accumulators are dead here
  fence_proxy_async();
  if (elect_one()) {
    tma_store_2d(&map, base, 0, 1);
    bulk_commit_group();
    bulk_wait_group_read<0>();
    bulk_wait_group<0>();
  }
}
)";

const std::vector<std::string> kHopperPtx = {
    "mbarrier.init.shared::cta.b64",
    "fence.mbarrier_init.release.cluster",
    "mbarrier.arrive.shared::cta.b64",
    "mbarrier.arrive.expect_tx.shared::cta.b64",
    "mbarrier.try_wait.parity.shared::cta.b64",
    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
    "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
    "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
    "fence.proxy.async.shared::cta",
    "wgmma.fence.sync.aligned",
    "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
    "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
    "wgmma.commit_group.sync.aligned",
    "wgmma.wait_group.sync.aligned 0",
    "wgmma.wait_group.sync.aligned 1",
    "setmaxnreg.dec.sync.aligned.u32 40",
    "setmaxnreg.inc.sync.aligned.u32 240",
    "elect.sync",
    "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
    "cp.async.bulk.commit_group",
    "cp.async.bulk.wait_group.read 0",
    "cp.async.bulk.wait_group 0",
};

NvrtcOptions uncached() {
  NvrtcOptions o;
  o.use_cache = false;
  return o;
}

}  // namespace

TEST(Nvrtc, ReportsItsVersion) {
  EXPECT_TRUE(nvrtc_available());
  std::string v = nvrtc_version();
  ASSERT_NE(v.find('.'), std::string::npos) << v;
  EXPECT_GE(std::stoi(v), 12) << v;
}

TEST(Nvrtc, EveryPrimitiveCompilesWithoutSpills) {
  for (const std::string& arch : kArchs) {
    CompiledModule m = compile_cuda(kEveryPrimitive, "every_primitive.cu", arch, uncached());
    std::cout << "[ timing   ] every_primitive for " << arch << ": cold compile " << m.seconds * 1e3
              << " ms\n";
    EXPECT_FALSE(m.from_cache);
    EXPECT_FALSE(m.cubin.empty());
    EXPECT_NE(m.ptx.find(".target " + arch), std::string::npos) << m.ptx.substr(0, 400);
    for (const std::string& instruction : kPrimitivePtx)
      EXPECT_NE(m.ptx.find(instruction), std::string::npos) << arch << ": no " << instruction;
    const FunctionResources* k = m.resources.find("every_primitive");
    ASSERT_NE(k, nullptr) << m.log;
    EXPECT_TRUE(k->entry);
    EXPECT_GT(k->registers, 0) << m.log;
    EXPECT_EQ(k->spill_store_bytes, 0) << m.log;
    EXPECT_EQ(k->spill_load_bytes, 0) << m.log;
    EXPECT_EQ(k->stack_frame_bytes, 0) << m.log;
    EXPECT_EQ(k->static_shared_bytes, 256 * 4 + 512 * 2) << m.log;
    EXPECT_EQ(k->barriers, 2) << m.log;  // barrier 0 (sync_threads) and named barrier 1
    EXPECT_TRUE(m.resources.warnings.empty()) << m.log;
  }
}

// wgmma is serialised (ptxas warning C7511) when its accumulators do not stay in registers: the
// report must have no warning.
TEST(Nvrtc, EveryHopperPrimitiveCompilesForSm90aWithoutSpills) {
  CompiledModule m =
      compile_cuda(kEveryHopperPrimitive, "every_hopper_primitive.cu", "sm_90a", uncached());
  for (const std::string& instruction : kHopperPtx)
    EXPECT_NE(m.ptx.find(instruction), std::string::npos) << "no " << instruction;
  const FunctionResources* k = m.resources.find("every_hopper_primitive");
  ASSERT_NE(k, nullptr) << m.log;
  EXPECT_EQ(k->spill_store_bytes, 0) << m.log;
  EXPECT_EQ(k->spill_load_bytes, 0) << m.log;
  EXPECT_TRUE(m.resources.warnings.empty()) << m.log;
  EXPECT_EQ(m.log.find("wgmma.mma_async instructions are serialized"), std::string::npos) << m.log;
  EXPECT_EQ(m.log.find("setmaxnreg' ignored"), std::string::npos) << m.log;
  // Hopper-only instructions for an Ampere target: ptxas says which.
  try {
    compile_cuda(kEveryHopperPrimitive, "every_hopper_primitive.cu", "sm_80", uncached());
    FAIL() << "wgmma compiled for sm_80";
  } catch (const CudaCompileError& e) {
    EXPECT_NE(e.log().find("wgmma"), std::string::npos) << e.log();
  }
}

// The wgmma tiles the gpu tier runs on a Hopper GPU (tests/emu/wgmma_cases.h) compile for sm_90a
// with their accumulators in registers.
TEST(Nvrtc, WgmmaCasesCompileForSm90a) {
  CompiledModule m =
      compile_cuda(test::wgmma::device_source(), "wgmma_cases.cu", "sm_90a", uncached());
  for (const test::wgmma::Case& c : test::wgmma::cases()) {
    const FunctionResources* k = m.resources.find(c.kernel);
    ASSERT_NE(k, nullptr) << c.kernel << "\n" << m.log;
    EXPECT_EQ(k->spill_store_bytes, 0) << c.kernel << "\n" << m.log;
  }
  EXPECT_EQ(m.log.find("wgmma.mma_async instructions are serialized"), std::string::npos) << m.log;
}

// The TMA scores tile the gpu tier runs (tests/emu/tma_cases.h) compiles for sm_90a: the 2-D
// tensor load reaches the PTX, the accumulators stay in registers.
TEST(Nvrtc, TmaCaseCompilesForSm90a) {
  CompiledModule m = compile_cuda(test::tma::device_source(), "tma_cases.cu", "sm_90a", uncached());
  EXPECT_NE(m.ptx.find("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx"
                       "::bytes"),
            std::string::npos);
  const FunctionResources* k = m.resources.find("tma_scores_kernel");
  ASSERT_NE(k, nullptr) << m.log;
  EXPECT_EQ(k->spill_store_bytes, 0) << m.log;
  EXPECT_EQ(m.log.find("wgmma.mma_async instructions are serialized"), std::string::npos) << m.log;
}

// The warp-specialised pipeline the gpu tier runs (tests/emu/ring_cases.h) compiles for sm_90a
// without spills, setmaxnreg taking effect (the kernel's register count is known).
TEST(Nvrtc, RingPipelineCompilesForSm90a) {
  CompiledModule m =
      compile_cuda(test::ring::device_source(), "ring_cases.cu", "sm_90a", uncached());
  const FunctionResources* k = m.resources.find("ring_gemm_kernel");
  ASSERT_NE(k, nullptr) << m.log;
  EXPECT_EQ(k->spill_store_bytes, 0) << m.log;
  EXPECT_EQ(m.log.find("setmaxnreg' ignored"), std::string::npos) << m.log;
  EXPECT_EQ(m.log.find("wgmma.mma_async instructions are serialized"), std::string::npos) << m.log;
}

TEST(Nvrtc, EachDeviceHeaderCompilesAlone) {
  for (const DeviceHeader& h : device_headers()) {
    for (const std::string& arch : kArchs) {
      std::string source = "#include \"" + std::string(h.name) +
                           "\"\nextern \"C\" __global__ void k(float* x) { x[0] = 1.f; }\n";
      EXPECT_NO_THROW(compile_cuda(source, "alone.cu", arch, uncached())) << h.name << " " << arch;
    }
  }
}

TEST(Nvrtc, SpillsAreReported) {
  // 64 live accumulators cannot fit in 24 registers.
  const char* source = R"(
extern "C" __global__ void spills(float* out, const float* in) {
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = in[threadIdx.x + i * 32];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = acc[i] * acc[(i + j) % 64] + 1.f;
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += acc[i];
  out[threadIdx.x] = s;
}
)";
  NvrtcOptions o = uncached();
  o.extra = {"--maxrregcount=24"};
  CompiledModule m = compile_cuda(source, "spills.cu", "sm_80", o);
  const FunctionResources* k = m.resources.find("spills");
  ASSERT_NE(k, nullptr) << m.log;
  EXPECT_EQ(k->registers, 24) << m.log;
  EXPECT_GT(k->spill_store_bytes, 0) << m.log;
  EXPECT_GT(k->spill_load_bytes, 0) << m.log;
}

TEST(Nvrtc, SyntaxErrorCarriesTheLog) {
  const char* source = "extern \"C\" __global__ void broken(float* x) { x[0] = ; }\n";
  try {
    compile_cuda(source, "broken.cu", "sm_90a", uncached());
    FAIL() << "a syntax error compiled";
  } catch (const CudaCompileError& e) {
    EXPECT_NE(e.log().find("broken.cu(1): error"), std::string::npos) << e.log();
    std::string what = e.what();
    EXPECT_NE(what.find("NVRTC could not compile 'broken.cu' for sm_90a"), std::string::npos)
        << what;
    EXPECT_NE(what.find(e.log()), std::string::npos) << what;
  }
}

TEST(Nvrtc, PtxasErrorCarriesTheLog) {
  // A Hopper-only instruction for an Ampere target is rejected by ptxas, not the front end.
  const char* source = R"(
extern "C" __global__ void hopper_only() { asm volatile("fence.proxy.async.shared::cta;"); }
)";
  EXPECT_NO_THROW(compile_cuda(source, "hopper_only.cu", "sm_90a", uncached()));
  try {
    compile_cuda(source, "hopper_only.cu", "sm_80", uncached());
    FAIL() << "fence.proxy.async compiled for sm_80";
  } catch (const CudaCompileError& e) {
    EXPECT_NE(e.log().find("ptxas"), std::string::npos) << e.log();
    EXPECT_NE(e.log().find("sm_90"), std::string::npos) << e.log();
  }
}

TEST(Nvrtc, UnsupportedArchitectureIsAUserError) {
  for (const char* arch : {"sm_91", "compute_90", "sm_", "sm_90x", "90", "sm_90ab"}) {
    try {
      compile_cuda("__global__ void k() {}\n", "k.cu", arch, uncached());
      FAIL() << arch << " was accepted";
    } catch (const RuntimeArgError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find(std::string("unsupported CUDA architecture '") + arch + "'"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("sm_80"), std::string::npos) << what;
    }
  }
}

// NVRTC runs in a child process under KINTSUGI_COMPILE_TIMEOUT: a limit of a millisecond cannot
// be met (starting the compiler takes longer), so the compile stops with a user error that says
// how to raise the limit, and the next compile under the default limit works.
TEST(Nvrtc, CompileTimeLimitIsAUserError) {
  setenv("KINTSUGI_COMPILE_TIMEOUT", "0.001", 1);
  try {
    compile_cuda("extern \"C\" __global__ void k(float* x) { x[0] = 1.f; }\n", "k.cu", "sm_90a",
                 uncached());
    unsetenv("KINTSUGI_COMPILE_TIMEOUT");
    FAIL() << "a compile finished within a millisecond";
  } catch (const RuntimeArgError& e) {
    unsetenv("KINTSUGI_COMPILE_TIMEOUT");
    std::string what = e.what();
    EXPECT_NE(what.find("NVRTC exceeded the time limit of 0.001 s on 'k.cu'"), std::string::npos)
        << what;
    EXPECT_NE(what.find("KINTSUGI_COMPILE_TIMEOUT"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(compile_cuda("extern \"C\" __global__ void k(float* x) { x[0] = 2.f; }\n", "k.cu",
                               "sm_90a", uncached()));
}
