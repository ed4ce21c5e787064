// \file tma.cuh
// cp.async.bulk.tensor 2-D to 4-D loads (kemu::tma_load): a copy lands when every thread that
// waits spins and nothing else moves, then signals its bytes to its mbarrier.
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/tma.cuh, same
// signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

struct alignas(64) TensorMap {
  u8 bytes[128];
};

inline void tma_load_2d(u32 dst, const TensorMap* map, u32 bar, i32 c0, i32 c1) {
  ::kemu::tma_load(dst, map, bar, {c0, c1});
}
inline void tma_load_3d(u32 dst, const TensorMap* map, u32 bar, i32 c0, i32 c1, i32 c2) {
  ::kemu::tma_load(dst, map, bar, {c0, c1, c2});
}
inline void tma_load_4d(u32 dst, const TensorMap* map, u32 bar, i32 c0, i32 c1, i32 c2, i32 c3) {
  ::kemu::tma_load(dst, map, bar, {c0, c1, c2, c3});
}

}  // namespace kintsugi::device
