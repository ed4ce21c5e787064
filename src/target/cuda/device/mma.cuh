// \file mma.cuh
// Warp-level tensor-core matrix multiply-accumulate: mma.sync.aligned.m16n8k16.row.col with f32
// accumulators and f16 or bf16 operands, and mma.sync.aligned.m16n8k32.row.col with s32
// accumulators and s8 operands (sm_80 and later).
//
// One call is one instruction executed by all 32 lanes of a warp: acc (16x8, f32) += A (16x16,
// row) * B (16x8, col). Operands are the per-lane fragments of the PTX ISA layout ("Matrix
// Fragments for mma.m16n8k16"): with g = lane / 4 and t = lane % 4, register a[i] holds the two
// A elements (row g + 8 * (i % 2), cols 2t + 8 * (i / 2) and +1), b[i] the two B elements (rows
// 2t + 8i and +1, col g), acc[i] the C element (row g + 8 * (i / 2), col 2t + i % 2). Packed
// pairs keep the lower-indexed element in the low 16 bits. The s8 form covers 32 values of K with
// the same registers: a[i] holds four A elements (row g + 8 * (i % 2), cols 4t + 16 * (i / 2) to
// + 3), b[i] four B elements (rows 4t + 16i to + 3, col g), the lowest-indexed in the low byte:
// byte for byte the 16-bit layout, so that ldmatrix loads both.
//
// Invariant established: each function is exactly one mma.sync instruction, nothing else; which
// element lives in which lane is the caller's (the compiler's layout) business.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

#define KINTSUGI_MMA_M16N8K16(NAME, TYPE)                                                    \
  __device__ __forceinline__ void NAME(float(&acc)[4], const u32(&a)[4], const u32(&b)[2]) { \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE                               \
        ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"               \
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])                             \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                 \
  }

// acc += A * B with f16 operands.
KINTSUGI_MMA_M16N8K16(mma_m16n8k16_f16, "f16")
// acc += A * B with bf16 operands.
KINTSUGI_MMA_M16N8K16(mma_m16n8k16_bf16, "bf16")

#undef KINTSUGI_MMA_M16N8K16

// acc += A * B with s8 operands, summed exactly in s32 (no saturation: the sums of a tile's K
// stay far below 2^31).
__device__ __forceinline__ void mma_m16n8k32_s8(int (&acc)[4], const u32 (&a)[4],
                                                const u32 (&b)[2]) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace kintsugi::device
