// \file ids.cuh
// Thread identity and synchronisation: lane and warp index, named barriers, block and warp
// barriers.
//
// Named barriers let warp groups synchronise without the whole block: bar_sync(id, n) waits until
// n threads (a multiple of 32) have arrived at barrier id, bar_arrive(id, n) signals arrival
// without waiting (a producer handing data to consumers). Barrier 0 is the one sync_threads uses;
// the ids 1-15 are free for the generated code to assign.
//
// Invariant established: each function is one instruction or one CUDA intrinsic; barriers are
// ordered with the surrounding memory accesses (volatile, memory clobber).
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

// This thread's lane in its warp, 0-31 (%laneid).
__device__ __forceinline__ u32 lane_id() {
  u32 l;
  asm("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}

// This thread's warp in a one-dimensional block (threadIdx.x / 32), broadcast from lane 0 so the
// compiler knows it is warp-uniform. All 32 lanes must execute the call.
__device__ __forceinline__ u32 warp_id() {
  return __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
}

// Waits at named barrier `id` until `nthreads` threads have arrived (bar.sync).
__device__ __forceinline__ void bar_sync(u32 id, u32 nthreads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
}

// Arrives at named barrier `id` (counting towards `nthreads`) without waiting (bar.arrive).
__device__ __forceinline__ void bar_arrive(u32 id, u32 nthreads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
}

// Block-wide barrier (barrier 0).
__device__ __forceinline__ void sync_threads() {
  __syncthreads();
}

// Warp-wide barrier over all 32 lanes.
__device__ __forceinline__ void sync_warp() {
  __syncwarp();
}

}  // namespace kintsugi::device
