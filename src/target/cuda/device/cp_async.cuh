// \file cp_async.cuh
// Asynchronous global-to-shared copies (cp.async, sm_80 and later) and their group
// synchronisation.
//
// A copy reads `src_bytes` (0 up to the copy size) bytes at `gmem` and writes the full copy size at
// the shared-window address `smem` (see smem_addr), the bytes past `src_bytes` zero-filled: a tail
// tile copies its partial rows with src_bytes < size and its rows past the end with src_bytes = 0
// (nothing is read then). Both addresses must be aligned to the copy size. Copies issued by a
// thread since its last commit form one group; wait_group<N> blocks until at most N of the
// thread's groups are pending, wait_all until none is. Other threads see the data only after a
// barrier that follows the wait.
//
// Invariant established: each function is exactly one cp.async instruction, ordered with the
// surrounding memory accesses (volatile, memory clobber), nothing else.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

// 16 bytes, cached in L2 only (.cg: the streaming form for tiles read once per block).
__device__ __forceinline__ void cp_async_cg16(u32 smem, const void* gmem, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}

// 4, 8 or 16 bytes, cached in L1 and L2 (.ca).
template <int Bytes>
__device__ __forceinline__ void cp_async_ca(u32 smem, const void* gmem, u32 src_bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(smem), "l"(gmem), "n"(Bytes),
               "r"(src_bytes)
               : "memory");
}

// Closes the group of copies this thread issued since its last commit.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative group count");
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Waits until all of this thread's copies, committed or not, have completed.
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

}  // namespace kintsugi::device
