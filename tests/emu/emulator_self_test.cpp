// \file emulator_self_test.cpp
// The emulator itself (kintsugi_emu.h): the mma against a CPU matmul with fragments placed as the
// PTX ISA documents them, a cp.async that lands only at its wait, and the launches it refuses
// with a reason instead of hanging (a barrier some threads never reach, a partial-mask shuffle,
// a shared access outside the CTA's dynamic shared memory).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "Emulator.h"
#include "support/Error.h"

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
};
using namespace kintsugi::device;
)";

cuda::KsArgs args_of(std::vector<void*> buffers) {
  cuda::KsArgs a;
  std::memset(&a, 0, sizeof(a));
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

TEST(EmulatorSelf, PartialMaskShuffleIsRefused) {
  std::string why = complaint(R"(
extern "C" __global__ void k(KsArgs, int*) {
  float v = __shfl_xor_sync(0xffffu, 1.0f, 1);
  (void)v;
}
)",
                              "k", 32, 0);
  EXPECT_NE(why.find("partial mask is not emulated"), std::string::npos) << why;
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
