// \file wgmma.cuh
// wgmma.mma_async m64nNk16 (shared-memory and register A forms) and m64nNk32 s8 (shared-memory
// operands), its fence, commit and wait, and
// fence.proxy.async (kemu::wgmma_*): the product is computed when a wait retires its group, from
// shared memory as the asynchronous proxy sees it.
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/wgmma.cuh, same
// signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

inline void wgmma_fence() {}
inline void wgmma_commit_group() {
  ::kemu::wgmma_commit();
}
template <int Pending>
inline void wgmma_wait_group() {
  static_assert(Pending >= 0 && Pending <= 8, "wgmma.wait_group takes 0 to 8 pending groups");
  ::kemu::wgmma_wait(size_t(Pending));
}
inline void fence_proxy_async() {
  ::kemu::fence_proxy_async();
}

// NAME_ss<TransA, TransB>(d, desc_a, desc_b, accumulate) and NAME_rs<TransB>(d, a, desc_b,
// accumulate) for a 64 x N tile.
#define KINTSUGI_WGMMA(NAME, N, BF16)                                                     \
  template <int TransA, int TransB>                                                       \
  inline void NAME##_ss(float(&d)[N / 2], u64 desc_a, u64 desc_b, u32 accumulate) {       \
    ::kemu::WgmmaOp op;                                                                   \
    op.n = N;                                                                             \
    op.bf16 = BF16;                                                                       \
    op.trans_a = TransA != 0;                                                             \
    op.trans_b = TransB != 0;                                                             \
    op.desc_a = desc_a;                                                                   \
    op.desc_b = desc_b;                                                                   \
    op.accumulate = accumulate != 0;                                                      \
    ::kemu::wgmma_issue(op, d, nullptr);                                                  \
  }                                                                                       \
  template <int TransB>                                                                   \
  inline void NAME##_rs(float(&d)[N / 2], const u32(&a)[4], u64 desc_b, u32 accumulate) { \
    ::kemu::WgmmaOp op;                                                                   \
    op.n = N;                                                                             \
    op.bf16 = BF16;                                                                       \
    op.trans_b = TransB != 0;                                                             \
    op.a_in_registers = true;                                                             \
    op.desc_b = desc_b;                                                                   \
    op.accumulate = accumulate != 0;                                                      \
    ::kemu::wgmma_issue(op, d, a);                                                        \
  }

KINTSUGI_WGMMA(wgmma_m64n16k16_f16, 16, false)
KINTSUGI_WGMMA(wgmma_m64n16k16_bf16, 16, true)
KINTSUGI_WGMMA(wgmma_m64n32k16_f16, 32, false)
KINTSUGI_WGMMA(wgmma_m64n32k16_bf16, 32, true)
KINTSUGI_WGMMA(wgmma_m64n48k16_f16, 48, false)
KINTSUGI_WGMMA(wgmma_m64n48k16_bf16, 48, true)
KINTSUGI_WGMMA(wgmma_m64n64k16_f16, 64, false)
KINTSUGI_WGMMA(wgmma_m64n64k16_bf16, 64, true)
KINTSUGI_WGMMA(wgmma_m64n80k16_f16, 80, false)
KINTSUGI_WGMMA(wgmma_m64n80k16_bf16, 80, true)
KINTSUGI_WGMMA(wgmma_m64n96k16_f16, 96, false)
KINTSUGI_WGMMA(wgmma_m64n96k16_bf16, 96, true)
KINTSUGI_WGMMA(wgmma_m64n112k16_f16, 112, false)
KINTSUGI_WGMMA(wgmma_m64n112k16_bf16, 112, true)
KINTSUGI_WGMMA(wgmma_m64n128k16_f16, 128, false)
KINTSUGI_WGMMA(wgmma_m64n128k16_bf16, 128, true)
KINTSUGI_WGMMA(wgmma_m64n144k16_f16, 144, false)
KINTSUGI_WGMMA(wgmma_m64n144k16_bf16, 144, true)
KINTSUGI_WGMMA(wgmma_m64n160k16_f16, 160, false)
KINTSUGI_WGMMA(wgmma_m64n160k16_bf16, 160, true)
KINTSUGI_WGMMA(wgmma_m64n176k16_f16, 176, false)
KINTSUGI_WGMMA(wgmma_m64n176k16_bf16, 176, true)
KINTSUGI_WGMMA(wgmma_m64n192k16_f16, 192, false)
KINTSUGI_WGMMA(wgmma_m64n192k16_bf16, 192, true)
KINTSUGI_WGMMA(wgmma_m64n208k16_f16, 208, false)
KINTSUGI_WGMMA(wgmma_m64n208k16_bf16, 208, true)
KINTSUGI_WGMMA(wgmma_m64n224k16_f16, 224, false)
KINTSUGI_WGMMA(wgmma_m64n224k16_bf16, 224, true)
KINTSUGI_WGMMA(wgmma_m64n240k16_f16, 240, false)
KINTSUGI_WGMMA(wgmma_m64n240k16_bf16, 240, true)
KINTSUGI_WGMMA(wgmma_m64n256k16_f16, 256, false)
KINTSUGI_WGMMA(wgmma_m64n256k16_bf16, 256, true)
#undef KINTSUGI_WGMMA

// NAME(d, desc_a, desc_b, accumulate): s8 operands, s32 accumulators.
#define KINTSUGI_WGMMA_S8(NAME, N)                                           \
  inline void NAME(int(&d)[N / 2], u64 desc_a, u64 desc_b, u32 accumulate) { \
    ::kemu::WgmmaOp op;                                                      \
    op.n = N;                                                                \
    op.s8 = true;                                                            \
    op.desc_a = desc_a;                                                      \
    op.desc_b = desc_b;                                                      \
    op.accumulate = accumulate != 0;                                         \
    ::kemu::wgmma_issue(op, d, nullptr);                                     \
  }

KINTSUGI_WGMMA_S8(wgmma_m64n32k32_s8, 32)
KINTSUGI_WGMMA_S8(wgmma_m64n64k32_s8, 64)
KINTSUGI_WGMMA_S8(wgmma_m64n128k32_s8, 128)
KINTSUGI_WGMMA_S8(wgmma_m64n192k32_s8, 192)
KINTSUGI_WGMMA_S8(wgmma_m64n256k32_s8, 256)
#undef KINTSUGI_WGMMA_S8

}  // namespace kintsugi::device
