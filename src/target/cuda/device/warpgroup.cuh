// \file warpgroup.cuh
// What warp-specialised kernels need of a warpgroup (sm_90a): moving registers between the
// warpgroups of a CTA (setmaxnreg), and electing one lane of a warp to issue for it (elect.sync).
//
// setmaxnreg_dec<N> lowers the calling warpgroup's registers a thread to N, returning the rest to
// the CTA's pool (a producer that only issues copies); setmaxnreg_inc<N> raises them to N,
// waiting until the pool has them (the consumers that hold the accumulators). N is 24 to 256, a
// multiple of 8; every warp of the warpgroup executes the same call; the kernel must have a known
// register count (__launch_bounds__). elect_one() is true in exactly one lane of the warp; all 32
// lanes execute it.
//
// Invariant established: each function is exactly one instruction (elect_one: one instruction and
// the select of its predicate), nothing else.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

template <u32 N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256, a multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

template <u32 N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256, a multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

// True in one lane of the warp, the same lane every time (elect.sync over the full warp).
__device__ __forceinline__ bool elect_one() {
  u32 elected;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "elect.sync _|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}"
      : "=r"(elected));
  return elected != 0;
}

}  // namespace kintsugi::device
