// \file ids.cuh
// Lane and warp ids, barriers (named barriers only over the whole CTA).
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/ids.cuh, same
// signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

inline u32 lane_id() {
  return ::kemu::lane();
}
inline u32 warp_id() {
  return threadIdx.x / 32;
}
inline void bar_sync(u32, u32 nthreads) {
  if (nthreads != blockDim.x) ::kemu::fail("bar.sync over part of the CTA is not emulated");
  __syncthreads();
}
inline void bar_arrive(u32, u32) {
  ::kemu::fail("bar.arrive is not emulated");
}
inline void sync_threads() {
  __syncthreads();
}
inline void sync_warp() {
  __syncwarp();
}

}  // namespace kintsugi::device
