// \file mma_test.cpp
// mma.cuh on a GPU: one m16n8k16 tile with f16 and with bf16 operands, fragments loaded either
// element by element in the PTX ISA layout or with ldmatrix from row-major shared tiles, against
// a CPU matmul. Inputs are multiples of 1/8 with small magnitude, so every product and partial sum
// is exact in f32 and the comparison is exact whatever order the tensor core adds in.
#include <random>

#include "GpuTest.h"

using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;

namespace {

const char* kSource = R"(
#include "kintsugi/ids.cuh"
#include "kintsugi/ldmatrix.cuh"
#include "kintsugi/math.cuh"
#include "kintsugi/mma.cuh"
using namespace kintsugi::device;

template <bool kBf16>
__device__ u32 pack(float lo, float hi) {
  return kBf16 ? pack_bf16x2(lo, hi) : pack_f16x2(lo, hi);
}

template <bool kBf16>
__device__ void mma(float (&acc)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  if constexpr (kBf16) {
    mma_m16n8k16_bf16(acc, a, b);
  } else {
    mma_m16n8k16_f16(acc, a, b);
  }
}

// D (16x8, row-major, holds C on entry) += A (16x16, row-major) * B (16x8, row-major K x N).
template <bool kBf16>
__device__ void from_registers(const float* A, const float* B, float* D) {
  const u32 lane = lane_id(), g = lane / 4, t = lane % 4;
  u32 a[4], b[2];
  float acc[4];
  for (int i = 0; i < 4; ++i) {
    const u32 r = g + 8 * (i % 2), c = 2 * t + 8 * (i / 2);
    a[i] = pack<kBf16>(A[r * 16 + c], A[r * 16 + c + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    const u32 k = 2 * t + 8 * i;
    b[i] = pack<kBf16>(B[k * 8 + g], B[(k + 1) * 8 + g]);
  }
  for (int i = 0; i < 4; ++i) acc[i] = D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
  mma<kBf16>(acc, a, b);
  for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
}

// The same product with A and B staged row-major in shared memory and loaded with ldmatrix:
// x4 for A (matrix j = rows 8 * (j % 2), cols 8 * (j / 2)), x2.trans for B (matrix j = rows 8j).
template <bool kBf16>
__device__ void from_shared(const float* A, const float* B, float* D) {
  __shared__ alignas(16) u16 sa[16 * 16];
  __shared__ alignas(16) u16 sb[16 * 8];
  const u32 lane = lane_id(), g = lane / 4, t = lane % 4;
  for (u32 i = lane; i < 16 * 16; i += 32) sa[i] = kBf16 ? f32_to_bf16(A[i]) : f32_to_f16(A[i]);
  for (u32 i = lane; i < 16 * 8; i += 32) sb[i] = kBf16 ? f32_to_bf16(B[i]) : f32_to_f16(B[i]);
  sync_warp();
  u32 a[4], b[2];
  const u32 j = lane / 8;
  ldmatrix_x4(a, smem_addr(&sa[(lane % 8 + 8 * (j % 2)) * 16 + 8 * (j / 2)]));
  ldmatrix_x2_trans(b, smem_addr(&sb[(lane % 16) * 8]));
  float acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
  mma<kBf16>(acc, a, b);
  for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
}

extern "C" __global__ void mma_f16_registers(const float* A, const float* B, float* D) {
  from_registers<false>(A, B, D);
}
extern "C" __global__ void mma_bf16_registers(const float* A, const float* B, float* D) {
  from_registers<true>(A, B, D);
}
extern "C" __global__ void mma_f16_ldmatrix(const float* A, const float* B, float* D) {
  from_shared<false>(A, B, D);
}
extern "C" __global__ void mma_bf16_ldmatrix(const float* A, const float* B, float* D) {
  from_shared<true>(A, B, D);
}
)";

// Multiples of 1/8 in [-lim, lim]: exact in f16 and bf16.
std::vector<float> eighths(size_t n, int lim, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-8 * lim, 8 * lim);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(rng)) / 8.f;
  return v;
}

}  // namespace

using Mma = GpuTest;

TEST_F(Mma, M16N8K16MatchesTheCpuExactly) {
  Module module = load(kSource, "mma_test.cu");
  std::mt19937 rng(42);
  for (const char* kernel :
       {"mma_f16_registers", "mma_bf16_registers", "mma_f16_ldmatrix", "mma_bf16_ldmatrix"}) {
    std::vector<float> A = eighths(16 * 16, 2, rng), B = eighths(16 * 8, 2, rng),
                       C = eighths(16 * 8, 8, rng);
    std::vector<float> expected(16 * 8);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        double s = C[m * 8 + n];
        for (int k = 0; k < 16; ++k) s += double(A[m * 16 + k]) * B[k * 8 + n];
        expected[m * 8 + n] = static_cast<float>(s);
      }
    DeviceBuffer dA = to_device(A), dB = to_device(B), dD = to_device(C);
    module.function(kernel).launch({.grid = {1}, .block = {32}}, dA.address(), dB.address(),
                                   dD.address());
    std::vector<float> D = from_device<float>(dD);
    for (int i = 0; i < 16 * 8; ++i)
      ASSERT_EQ(D[i], expected[i]) << kernel << ": row " << i / 8 << ", col " << i % 8;
  }
}
