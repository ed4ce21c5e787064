// \file ids.cuh
// Lane and warp ids, barriers (named barriers counting their threads, kemu::named_barrier).
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
inline void bar_sync(u32 id, u32 nthreads) {
  ::kemu::named_barrier(id, nthreads, true);
}
inline void bar_arrive(u32 id, u32 nthreads) {
  ::kemu::named_barrier(id, nthreads, false);
}
inline void sync_threads() {
  __syncthreads();
}
inline void sync_warp() {
  __syncwarp();
}

}  // namespace kintsugi::device
