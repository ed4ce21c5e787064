// \file tma_cases.h
// Scores of one tile loaded by TMA: D (64 x 64) = Q[row0 : row0 + 64, :] K^T + C with a head
// dimension of 64, Q and K boxes of 64 x 64 f16 landing in the 128-byte swizzle on one mbarrier,
// then four wgmma k-steps that advance their descriptors 32 bytes along each swizzled row. Q has
// 80 rows and the box starts at row 64, so 48 of its rows lie outside the tensor and land as
// zeros. The same device code runs on the emulator (its self-test) and on a Hopper GPU (the gpu
// tier), which checks there the TMA layout, the zero fill and the descriptor steps the emulator
// assumes. D leaves through shared memory and a TMA store (the epilogue's path). Flags: bit 0
// waits on the wrong phase bit, bit 1 arrives without announcing the bytes, bit 2 stores D
// without the proxy fence after the threads wrote it (each must give a wrong D on the emulator).
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "encode_tensor_map.h"
#include "ir/DType.h"
#include "target/cuda/Driver.h"
#include "wgmma_cases.h"

namespace kintsugi::test::tma {

constexpr unsigned kQRows = 80, kRow0 = 64, kKeys = 64, kDim = 64;
constexpr unsigned kSharedBytes = 32768 + 64 + 1024;

// Device code: tma_scores(mq, mk, md, C, row0, flags), D through md. A harness adds its
// __global__ wrapper.
inline const char* kSource = R"(
#include "kintsugi/math.cuh"
#include "kintsugi/mbarrier.cuh"
#include "kintsugi/smem_desc.cuh"
#include "kintsugi/tma.cuh"
#include "kintsugi/wgmma.cuh"
using namespace kintsugi::device;

__device__ void tma_scores(const TensorMap* mq, const TensorMap* mk, const TensorMap* md,
                           const float* C, u32 row0, u32 flags) {
  extern __shared__ __align__(128) unsigned char ks_smem[];
  const u32 base = smem_addr(ks_smem) + (1024 - smem_addr(ks_smem) % 1024) % 1024;
  const u32 sq = base, sk = base + 8192, sd = base + 16384, bar = base + 32768;
  const u32 t = threadIdx.x;
  if (t == 0) {
    mbarrier_init(bar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (t == 0) {
    if (flags & 2u) {
      mbarrier_arrive(bar);
    } else {
      mbarrier_arrive_expect_tx(bar, 2 * 64 * 64 * 2);
    }
    tma_load_2d(sq, mq, bar, 0, i32(row0));
    tma_load_2d(sk, mk, bar, 0, 0);
  }
  while (!mbarrier_try_wait_parity(bar, flags & 1u)) {
  }
  float d[32];
  for (u32 i = 0; i < 32; ++i)
    d[i] = C[accumulator_index(t, i, 64)];
  wgmma_fence();
  for (u32 kk = 0; kk < 4; ++kk)
    wgmma_m64n64k16_f16_ss<0, 0>(d, smem_descriptor(sq + 32 * kk, 16, 1024, kSwizzle128B),
                                 smem_descriptor(sk + 32 * kk, 16, 1024, kSwizzle128B), 1);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  float* D = reinterpret_cast<float*>(ks_smem + (sd - smem_addr(ks_smem)));
  for (u32 i = 0; i < 32; ++i)
    D[accumulator_index(t, i, 64)] = d[i];
  if (!(flags & 4u)) fence_proxy_async();
  __syncthreads();
  if (t == 0) {
    tma_store_2d(md, sd, 0, 0);
    bulk_commit_group();
    bulk_wait_group_read<0>();
  }
}
)";

// The kernel in the GPU's ABI: tma_scores_kernel(mq, mk, md, C, row0, flags), the maps by value.
inline std::string device_source() {
  return std::string(wgmma::kAccumulatorIndex) + kSource + R"(
extern "C" __global__ void tma_scores_kernel(const __grid_constant__ TensorMap mq,
                                             const __grid_constant__ TensorMap mk,
                                             const __grid_constant__ TensorMap md, const float* C,
                                             u32 row0, u32 flags) {
  tma_scores(&mq, &mk, &md, C, row0, flags);
}
)";
}

// The tensor map of a row-major f16 matrix of `rows` x kDim at `address`, boxes of 64 x kDim in
// the 128-byte swizzle.
inline cuda::TensorMapSpec spec(const void* address, unsigned rows) {
  cuda::TensorMapSpec s;
  s.element = DType::F16;
  s.address = reinterpret_cast<uintptr_t>(address);
  s.dims = {kDim, rows};
  s.strides = {kDim * 2};
  s.box = {kDim, 64};
  s.swizzle = cuda::TensorMapSwizzle::B128;
  return s;
}

// The tensor map of D, 64 x 64 f32, one box, unswizzled.
inline cuda::TensorMapSpec output_spec(const void* address) {
  cuda::TensorMapSpec s;
  s.element = DType::F32;
  s.address = reinterpret_cast<uintptr_t>(address);
  s.dims = {64, 64};
  s.strides = {64 * 4};
  s.box = {64, 64};
  return s;
}

// `xs` as f16 bits.
inline std::vector<unsigned short> to_f16(const std::vector<float>& xs) {
  std::vector<unsigned short> out;
  for (float x : xs) out.push_back(double_to_f16_bits(x));
  return out;
}

struct Inputs {
  std::vector<float> q, k, c;            // Q (kQRows x kDim), K (kKeys x kDim), C (64 x 64)
  std::vector<unsigned short> q16, k16;  // Q and K in f16
};
inline Inputs inputs() {
  Inputs in{std::vector<float>(kQRows * kDim),
            std::vector<float>(kKeys * kDim),
            std::vector<float>(64 * 64),
            {},
            {}};
  for (size_t i = 0; i < in.q.size(); ++i) in.q[i] = float(int(i * 7 % 17) - 8) / 8;
  for (size_t i = 0; i < in.k.size(); ++i) in.k[i] = float(int(i * 5 % 13) - 6) / 8;
  for (size_t i = 0; i < in.c.size(); ++i) in.c[i] = float(i % 5);
  in.q16 = to_f16(in.q);
  in.k16 = to_f16(in.k);
  return in;
}

// D = Q[kRow0 : kRow0 + 64] K^T + C, the rows of Q past its end zero; exact.
inline std::vector<float> reference(const Inputs& in) {
  std::vector<float> d(in.c);
  for (unsigned r = 0; r < 64 && kRow0 + r < kQRows; ++r)
    for (unsigned c = 0; c < 64; ++c)
      for (unsigned k = 0; k < kDim; ++k)
        d[r * 64 + c] += in.q[(kRow0 + r) * kDim + k] * in.k[c * kDim + k];
  return d;
}

}  // namespace kintsugi::test::tma
