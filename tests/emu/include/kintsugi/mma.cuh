// \file mma.cuh
// mma.sync m16n8k16, f16 or bf16 operands, f32 accumulators (kemu::mma_m16n8k16); m16n8k32, s8
// operands, s32 accumulators (kemu::mma_m16n8k32_s8).
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/mma.cuh, same
// signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

inline void mma_m16n8k16_f16(float (&acc)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  ::kemu::mma_m16n8k16(acc, a, b, false);
}
inline void mma_m16n8k16_bf16(float (&acc)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  ::kemu::mma_m16n8k16(acc, a, b, true);
}
inline void mma_m16n8k32_s8(int (&acc)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  ::kemu::mma_m16n8k32_s8(acc, a, b);
}

}  // namespace kintsugi::device
