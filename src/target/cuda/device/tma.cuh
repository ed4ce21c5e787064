// \file tma.cuh
// Tensor copies between global and shared memory by the Tensor Memory Accelerator
// (cp.async.bulk.tensor, sm_90): one thread issues the copy of a whole box of a tensor, described
// by a tensor map the host encoded (TensorMap, a __grid_constant__ kernel parameter). A load
// signals its bytes to an mbarrier as they land (complete_tx); a store (the epilogue's) joins the
// issuing thread's bulk group, which bulk_commit_group closes and bulk_wait_group_read<N> waits on
// until its shared memory may be written again (bulk_wait_group<N>: until the stores are done).
// Shared memory that threads wrote is read by a store only after their fence_proxy_async.
//
// The box at element coordinates (c0 innermost, c1, ...) lands at the shared-window address
// `dst` densely, innermost dimension fastest, in the map's swizzle (16-byte cell c of 128-byte line
// l at cell c ^ (l mod (width / 16)), the pattern wgmma's descriptors read); elements outside the
// tensor land as zeros. `dst` is aligned to 128 bytes, and to the swizzle's repeat (1024, 512 or
// 256 bytes) when swizzled. The issuing thread announces the box's bytes on the mbarrier first
// (mbarrier_arrive_expect_tx); readers wait for the phase (mbarrier_try_wait_parity), after which
// the data is visible to threads and to wgmma alike.
//
// Invariant established: each function is exactly one instruction, ordered with the surrounding
// memory accesses (volatile, memory clobber), nothing else. (A store's box lies in shared memory
// as a load's lands.)
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

// The device's view of a host tensor map (CUtensorMap: 128 opaque bytes, 64-byte aligned).
struct alignas(64) TensorMap {
  u8 bytes[128];
};

// The 2-D box at (c0, c1) of `map` into `dst`, completing on mbarrier `bar`.
__device__ __forceinline__ void tma_load_2d(u32 dst, const TensorMap* map, u32 bar, i32 c0,
                                            i32 c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// The 3-D box at (c0, c1, c2).
__device__ __forceinline__ void tma_load_3d(u32 dst, const TensorMap* map, u32 bar, i32 c0, i32 c1,
                                            i32 c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%3, %4, %5}], [%2];" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// The 4-D box at (c0, c1, c2, c3).
__device__ __forceinline__ void tma_load_4d(u32 dst, const TensorMap* map, u32 bar, i32 c0, i32 c1,
                                            i32 c2, i32 c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%3, %4, %5, %6}], [%2];" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// The 2-D box at (c0, c1) of `map` from `src`, joining this thread's bulk group.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, u32 src, i32 c0, i32 c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
      "r"(src), "r"(c0), "r"(c1)
      : "memory");
}

// Closes this thread's bulk group of stores (cp.async.bulk.commit_group).
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until at most `Pending` of this thread's bulk groups still read shared memory.
template <int Pending>
__device__ __forceinline__ void bulk_wait_group_read() {
  static_assert(Pending >= 0, "a non-negative group count");
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(Pending) : "memory");
}

// Waits until at most `Pending` of this thread's bulk groups are incomplete.
template <int Pending>
__device__ __forceinline__ void bulk_wait_group() {
  static_assert(Pending >= 0, "a non-negative group count");
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(Pending) : "memory");
}

}  // namespace kintsugi::device
