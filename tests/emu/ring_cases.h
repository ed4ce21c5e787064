// \file ring_cases.h
// A warp-specialised pipeline of the primitives (the shape of a Hopper kernel's main loop): a
// producer warpgroup whose elected thread streams 8 pairs of 64 x 64 f16 tiles (A_s, B_s) by TMA
// into a 2-stage ring guarded by full and empty mbarriers, and a consumer warpgroup that waits for
// each stage, accumulates A_s B_s^T with wgmma (four k-steps along the 128-byte swizzled rows) and
// hands the stage back; setmaxnreg moves registers from the producer to the consumer. D = C +
// sum_s A_s B_s^T, exact (multiples of 1/8, sums below 2^9). The same device code runs on the
// emulator (its self-test) and on a Hopper GPU (the gpu tier). Flags: bit 0 makes the producer
// wait on the empty barriers with the wrong phase bit (the pipeline must fail on the emulator).
#pragma once

#include <string>
#include <vector>

#include "tma_cases.h"

namespace kintsugi::test::ring {

constexpr unsigned kStages = 2, kTiles = 8, kRows = 64 * kTiles;
constexpr unsigned kSharedBytes = kStages * 16384 + 64 + 1024;

inline const char* kSource = R"(
#include "kintsugi/ids.cuh"
#include "kintsugi/mbarrier.cuh"
#include "kintsugi/smem_desc.cuh"
#include "kintsugi/tma.cuh"
#include "kintsugi/warpgroup.cuh"
#include "kintsugi/wgmma.cuh"
using namespace kintsugi::device;

__device__ void ring_gemm(const TensorMap* ma, const TensorMap* mb, const float* C, float* D,
                          u32 flags) {
  extern __shared__ __align__(128) unsigned char ks_smem[];
  const u32 base = smem_addr(ks_smem) + (1024 - smem_addr(ks_smem) % 1024) % 1024;
  const u32 bars = base + 2 * 16384;  // full[0], full[1], empty[0], empty[1]
  const u32 t = threadIdx.x;
  if (t == 0) {
    for (u32 s = 0; s < 2; ++s) {
      mbarrier_init(bars + 8 * s, 1);
      mbarrier_init(bars + 16 + 8 * s, 128);
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (t < 128) {  // the producer warpgroup
    setmaxnreg_dec<40>();
    if (t < 32 && elect_one()) {
      for (u32 it = 0; it < 8; ++it) {
        const u32 s = it % 2, phase = (it / 2) % 2;
        while (!mbarrier_try_wait_parity(bars + 16 + 8 * s, (phase ^ 1u) ^ (flags & 1u))) {
        }
        mbarrier_arrive_expect_tx(bars + 8 * s, 2 * 64 * 64 * 2);
        tma_load_2d(base + s * 16384, ma, bars + 8 * s, 0, i32(it * 64));
        tma_load_2d(base + s * 16384 + 8192, mb, bars + 8 * s, 0, i32(it * 64));
      }
    }
    return;
  }
  setmaxnreg_inc<232>();  // the consumer warpgroup
  float d[32];
  for (u32 i = 0; i < 32; ++i)
    d[i] = C[accumulator_index(t, i, 64)];
  for (u32 it = 0; it < 8; ++it) {
    const u32 s = it % 2, phase = (it / 2) % 2, sa = base + s * 16384, sb = sa + 8192;
    while (!mbarrier_try_wait_parity(bars + 8 * s, phase)) {
    }
    wgmma_fence();
    for (u32 kk = 0; kk < 4; ++kk)
      wgmma_m64n64k16_f16_ss<0, 0>(d, smem_descriptor(sa + 32 * kk, 16, 1024, kSwizzle128B),
                                   smem_descriptor(sb + 32 * kk, 16, 1024, kSwizzle128B), 1);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    mbarrier_arrive(bars + 16 + 8 * s);
  }
  for (u32 i = 0; i < 32; ++i)
    D[accumulator_index(t, i, 64)] = d[i];
}
)";

// The kernel in the GPU's ABI: ring_gemm_kernel(ma, mb, C, D, flags), the maps by value; 256
// threads.
inline std::string device_source() {
  return std::string(wgmma::kAccumulatorIndex) + kSource + R"(
extern "C" __global__ void __launch_bounds__(256, 1)
    ring_gemm_kernel(const __grid_constant__ TensorMap ma, const __grid_constant__ TensorMap mb,
                     const float* C, float* D, u32 flags) {
  ring_gemm(&ma, &mb, C, D, flags);
}
)";
}

struct Inputs {
  std::vector<float> a, b, c;            // A, B (kRows x 64), C (64 x 64)
  std::vector<unsigned short> a16, b16;  // A and B in f16
};
inline Inputs inputs() {
  tma::Inputs q = tma::inputs();  // its f16 conversion of multiples of 1/8
  Inputs in{std::vector<float>(kRows * 64), std::vector<float>(kRows * 64), q.c, {}, {}};
  for (size_t i = 0; i < in.a.size(); ++i) in.a[i] = float(int(i * 7 % 17) - 8) / 8;
  for (size_t i = 0; i < in.b.size(); ++i) in.b[i] = float(int(i * 5 % 13) - 6) / 8;
  in.a16 = tma::to_f16(in.a);
  in.b16 = tma::to_f16(in.b);
  return in;
}

// D = C + sum_s A_s B_s^T, exact.
inline std::vector<float> reference(const Inputs& in) {
  std::vector<float> d(in.c);
  for (unsigned s = 0; s < kTiles; ++s)
    for (unsigned r = 0; r < 64; ++r)
      for (unsigned n = 0; n < 64; ++n)
        for (unsigned k = 0; k < 64; ++k)
          d[r * 64 + n] += in.a[(s * 64 + r) * 64 + k] * in.b[(s * 64 + n) * 64 + k];
  return d;
}

}  // namespace kintsugi::test::ring
