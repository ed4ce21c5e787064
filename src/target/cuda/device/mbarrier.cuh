// \file mbarrier.cuh
// Shared-memory barriers with transaction counts (mbarrier, sm_90): the handshake between the
// copies of a pipeline stage and the threads that read it.
//
// An mbarrier is a 64-bit object in shared memory (8-byte aligned), addressed in the 32-bit shared
// window (smem_addr). mbarrier_init sets the number of arrivals that complete a phase; the phase
// completes when that many arrivals have been made and every byte announced with expect_tx has
// been delivered (a TMA copy's complete_tx). The phases alternate in parity, the first one 0:
// mbarrier_try_wait_parity(bar, p) is true once the phase of parity p has completed, so a
// consumer waits on stage s with the parity of the number of times it has gone round the ring.
// try_wait returns false after a time the hardware chooses; the caller loops.
//
// Invariant established: each function is exactly one instruction (try_wait: one instruction and
// the select of its predicate), ordered with the surrounding memory accesses (volatile, memory
// clobber), nothing else.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

// Initialises the mbarrier at `bar` for `arrivals` arrivals a phase (mbarrier.init).
__device__ __forceinline__ void mbarrier_init(u32 bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}

// Makes this thread's mbarrier_init visible to the other threads and to the asynchronous proxy
// (TMA) before they use the barrier (fence.mbarrier_init; a block barrier follows it).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival at `bar` (mbarrier.arrive, release semantics, the state token discarded).
__device__ __forceinline__ void mbarrier_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Announces `bytes` more bytes that copies will deliver to `bar`'s current phase, and arrives
// (mbarrier.arrive.expect_tx).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

// Whether the phase of parity `parity` (0 or 1) of `bar` has completed (mbarrier.try_wait.parity,
// acquire semantics: the completed phase's writes are visible after a true result).
__device__ __forceinline__ bool mbarrier_try_wait_parity(u32 bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

}  // namespace kintsugi::device
