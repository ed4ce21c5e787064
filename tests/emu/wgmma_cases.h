// \file wgmma_cases.h
// One wgmma tile, D (64 x N) = A (64 x 16) B (16 x N) + C, for the emulator's self-test and for
// the gpu tier (tests/gpu/wgmma_test.cpp): the same device code on both, so that the H200 checks
// the layouts the emulator assumes. Each case places A and B in shared memory as the PTX ISA's
// shared-memory matrix layouts describe them (K-major or MN-major, without a swizzle or with the
// 128-, 64- or 32-byte one: 16-byte cell c of 128-byte line l moves to cell c ^ (l mod (width /
// 16))), builds their descriptors, and reads the accumulators back in the fragment layout of
// wgmma.h's comment. Inputs are small multiples of 1/8, so every sum is exact in f32 and the result
// does not depend on the order the tensor core adds in.
#pragma once

#include <string>
#include <vector>

namespace kintsugi::test::wgmma {

// A case: its kernel (KS_WGMMA_CASES) and its tile width N.
struct Case {
  const char* kernel;
  int n;
};

// Device code every case source starts with: the index in a row-major 64 x N matrix of
// accumulator i of thread t of a warpgroup (wgmma.cuh's fragment layout).
inline const char* kAccumulatorIndex = R"(
__device__ unsigned accumulator_index(unsigned t, unsigned i, unsigned n) {
  const unsigned w = (t % 128) / 32, g = (t % 32) / 4, q = t % 4;
  return (16 * w + g + 8 * ((i >> 1) & 1)) * n + 8 * (i >> 2) + 2 * q + (i & 1);
}
)";

// Device code: wgmma_case<...>(A, B, C, D, flags), A row-major 64 x 16, B row-major 16 x N (k, n),
// C and D row-major 64 x N; flags bit 0: place the operands without their swizzle (a broken
// layout), bit 1: leave out the proxy fence between the threads' shared-memory writes and the
// wgmma, bit 2: D = A B, the accumulators' C not added (wgmma's scale-d false). One warpgroup;
// kSharedBytes of dynamic shared memory (A and B at the first 1024-byte boundary and 8 KiB after
// it). KS_WGMMA_CASES(X) calls X(kernel name, template arguments) for each case: a harness defines
// its own __global__ wrapper X and appends KS_WGMMA_CASES(X).
inline const char* kSource = R"(
#include "kintsugi/math.cuh"
#include "kintsugi/smem_desc.cuh"
#include "kintsugi/wgmma.cuh"
using namespace kintsugi::device;

// Byte offset of element (row, k) of a 16-bit operand (row: along M for A, N for B).
__device__ u32 place(u32 swizzle, u32 mn_major, u32 leading, u32 stride, u32 row, u32 k,
                     bool broken) {
  const u32 width = swizzle == 1 ? 128 : swizzle == 2 ? 64 : swizzle == 3 ? 32 : 0;
  u32 o;
  if (!mn_major) {
    o = width ? (row / 8) * stride + (row % 8) * width + k * 2
              : (row / 8) * stride + (k / 8) * leading + (row % 8) * 16 + (k % 8) * 2;
  } else {
    const u32 span = width ? width / 2 : 8;
    o = width ? (row % span) * 2 + (row / span) * leading + (k % 8) * width + (k / 8) * stride
              : (row % 8) * 2 + (row / 8) * stride + (k % 8) * 16 + (k / 8) * leading;
  }
  if (!width || broken) return o;
  const u32 line = o / 128, cell = (o % 128) / 16;
  return line * 128 + (cell ^ (line % (width / 16))) * 16 + o % 16;
}

template <bool kBf16>
__device__ u16 half_of(float x) {
  return kBf16 ? f32_to_bf16(x) : f32_to_f16(x);
}

template <int N, bool kBf16, bool kRs, int kTransA, int kTransB>
__device__ void wgmma_tile(float (&d)[N / 2], const u32 (&ra)[4], u64 da, u64 db, u32 acc) {
  if constexpr (N == 64 && !kBf16 && !kRs) wgmma_m64n64k16_f16_ss<kTransA, kTransB>(d, da, db, acc);
  if constexpr (N == 64 && kBf16 && !kRs) wgmma_m64n64k16_bf16_ss<kTransA, kTransB>(d, da, db, acc);
  if constexpr (N == 128 && !kBf16 && !kRs) wgmma_m64n128k16_f16_ss<kTransA, kTransB>(d, da, db, acc);
  if constexpr (N == 128 && kBf16 && !kRs) wgmma_m64n128k16_bf16_ss<kTransA, kTransB>(d, da, db, acc);
  if constexpr (N == 256 && !kBf16 && kRs) wgmma_m64n256k16_f16_rs<kTransB>(d, ra, db, acc);
  if constexpr (N == 64 && kBf16 && kRs) wgmma_m64n64k16_bf16_rs<kTransB>(d, ra, db, acc);
  if constexpr (N == 80 && !kBf16 && kRs) wgmma_m64n80k16_f16_rs<kTransB>(d, ra, db, acc);
  if constexpr (N == 96 && kBf16 && !kRs) wgmma_m64n96k16_bf16_ss<kTransA, kTransB>(d, da, db, acc);
}

template <int N, bool kBf16, bool kRs, u32 kSwA, u32 kMnA, u32 kLboA, u32 kSboA, u32 kSwB,
          u32 kMnB, u32 kLboB, u32 kSboB>
__device__ void wgmma_case(const float* A, const float* B, const float* C, float* D, u32 flags) {
  extern __shared__ __align__(128) unsigned char ks_smem[];
  unsigned char* smem = ks_smem + (1024 - smem_addr(ks_smem) % 1024) % 1024;
  const u32 t = threadIdx.x, w = t / 32, g = (t % 32) / 4, q = t % 4;
  const bool broken = flags & 1u;
  for (u32 i = t; i < 16384 / 4; i += 128) reinterpret_cast<u32*>(smem)[i] = 0;
  __syncthreads();
  u16* sa = reinterpret_cast<u16*>(smem);
  u16* sb = reinterpret_cast<u16*>(smem + 8192);
  for (u32 i = t; i < 64 * 16; i += 128)
    sa[place(kSwA, kMnA, kLboA, kSboA, i / 16, i % 16, broken) / 2] = half_of<kBf16>(A[i]);
  for (u32 i = t; i < 16 * N; i += 128)
    sb[place(kSwB, kMnB, kLboB, kSboB, i % N, i / N, broken) / 2] = half_of<kBf16>(B[i]);
  if (!(flags & 2u)) fence_proxy_async();
  __syncthreads();
  u32 ra[4];
  for (u32 j = 0; j < 4; ++j) {
    const u32 r = 16 * w + g + 8 * (j & 1), k = 2 * q + 8 * (j >> 1);
    ra[j] = kBf16 ? pack_bf16x2(A[r * 16 + k], A[r * 16 + k + 1])
                  : pack_f16x2(A[r * 16 + k], A[r * 16 + k + 1]);
  }
  float d[N / 2];
  for (u32 i = 0; i < N / 2; ++i)
    d[i] = C[accumulator_index(t, i, N)];
  const u32 base = smem_addr(smem);
  wgmma_fence();
  wgmma_tile<N, kBf16, kRs, kMnA, kMnB>(d, ra, smem_descriptor(base, kLboA, kSboA, kSwA),
                                        smem_descriptor(base + 8192, kLboB, kSboB, kSwB),
                                        (flags & 4u) ? 0u : 1u);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  for (u32 i = 0; i < N / 2; ++i)
    D[accumulator_index(t, i, N)] = d[i];
}

// Scores' shape: A and B K-major in the 128-byte swizzle (Q and K rows of 64 f16). P.V's shape:
// B MN-major (V stored [keys, head dim]) in the 128-byte swizzle, A K-major in the 64-byte one.
// A from registers, B K-major in the 32-byte swizzle, the widest tile. No swizzle: A K-major, B
// MN-major, in 8 x 16-byte core matrices. A MN-major in the 128-byte swizzle, B MN-major in the
// 64-byte one. A from registers (bf16), B MN-major in the 128-byte swizzle. Head sizes whose
// tiles are column blocks of narrower atoms (80: five of 16 columns, 96: three of 32): A from
// registers, B MN-major in the 32-byte swizzle, its blocks 512 bytes apart; A K-major in the
// 32-byte swizzle, B MN-major in the 64-byte one, its blocks 1024 bytes apart.
#define KS_WGMMA_CASES(X)                                                  \
  X(n64_f16_k128, 64, false, false, 1, 0, 16, 1024, 1, 0, 16, 1024)        \
  X(n128_bf16_k64_mn128, 128, true, false, 2, 0, 16, 512, 1, 1, 2048, 1024) \
  X(n256_f16_rs_k32, 256, false, true, 0, 0, 0, 0, 3, 0, 16, 256)          \
  X(n64_bf16_none, 64, true, false, 0, 0, 128, 256, 0, 1, 1024, 128)       \
  X(n128_f16_mn128_mn64, 128, false, false, 1, 1, 2048, 1024, 2, 1, 1024, 512) \
  X(n64_bf16_rs_mn128, 64, true, true, 0, 0, 0, 0, 1, 1, 2048, 1024)       \
  X(n80_f16_rs_mn32, 80, false, true, 0, 0, 0, 0, 3, 1, 512, 256)          \
  X(n96_bf16_k32_mn64, 96, true, false, 3, 0, 16, 256, 2, 1, 1024, 512)
)";

// The cases as kernels of the GPU's ABI: NAME(A, B, C, D, flags).
inline std::string device_source() {
  return std::string(kAccumulatorIndex) + kSource + R"(
#define KS_DEVICE_CASE(NAME, ...)                                                           \
  extern "C" __global__ void NAME(const float* A, const float* B, const float* C, float* D, \
                                  u32 flags) {                                             \
    wgmma_case<__VA_ARGS__>(A, B, C, D, flags);                                            \
  }
KS_WGMMA_CASES(KS_DEVICE_CASE)
)";
}

inline const std::vector<Case>& cases() {
  static const std::vector<Case> all = {{"n64_f16_k128", 64},         {"n128_bf16_k64_mn128", 128},
                                        {"n256_f16_rs_k32", 256},     {"n64_bf16_none", 64},
                                        {"n128_f16_mn128_mn64", 128}, {"n64_bf16_rs_mn128", 64},
                                        {"n80_f16_rs_mn32", 80},      {"n96_bf16_k32_mn64", 96}};
  return all;
}

constexpr unsigned kSharedBytes = 16384 + 1024;

// Inputs of case width `n`: multiples of 1/8 in [-1, 1], C small integers.
struct Inputs {
  std::vector<float> a, b, c;
};
inline Inputs inputs(int n) {
  Inputs in{std::vector<float>(64 * 16), std::vector<float>(size_t(16 * n)),
            std::vector<float>(size_t(64 * n))};
  for (size_t i = 0; i < in.a.size(); ++i) in.a[i] = float(int(i * 7 % 17) - 8) / 8;
  for (size_t i = 0; i < in.b.size(); ++i) in.b[i] = float(int(i * 5 % 13) - 6) / 8;
  for (size_t i = 0; i < in.c.size(); ++i) in.c[i] = float(i % 5);
  return in;
}

// D = A B + C (or A B without `with_c`), exact.
inline std::vector<float> reference(const Inputs& in, int n, bool with_c = true) {
  std::vector<float> d = with_c ? in.c : std::vector<float>(in.c.size(), 0.f);
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < n; ++c)
      for (int k = 0; k < 16; ++k)
        d[size_t(r * n + c)] += in.a[size_t(r * 16 + k)] * in.b[size_t(k * n + c)];
  return d;
}

// How many elements of `got` differ from `want`.
inline int mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  int wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
  return wrong;
}

}  // namespace kintsugi::test::wgmma
