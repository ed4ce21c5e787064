// \file kintsugi_emu.h
// A CUDA emulator for the kernels Kintsugi generates, so that CI (no GPU) executes them: the
// generated CUDA C++ is compiled by the host compiler with this file in front of it (the CUDA
// keywords and built-ins, over the runtime's entry points: kemu_runtime.h, defined once in the
// test executables by EmulatorRuntime.cpp) and the device headers of include/kintsugi/ (those of
// src/target/cuda/device/ whose instructions are written in PTX, emulated through the functions
// below; the plain C++ ones compiled as they are), and each CTA runs its threads as fibers on
// one OS thread, switched at every barrier and warp collective.
//
// What is modelled, instruction by instruction as the device headers document them: the
// m16n8k16 mma fragments (f16 and bf16 in, f32 accumulated), ldmatrix x1/x2/x4 with and without
// .trans, cp.async with zero-fill whose copies land only when a wait_group retires their group
// (a read before the wait sees the old shared memory, as it may on the GPU; with the environment
// variable KINTSUGI_EMU_EAGER_COPIES set they land when issued as well, as they also may: a copy
// into shared memory that other threads still read before the next barrier then changes what
// those threads read, since each CTA's threads run one after another between barriers), warp
// shuffles, votes and __syncwarp over a member mask (the lanes of the mask meet; a shuffle may
// read only a lane of its mask), __syncthreads, the 32-bit shared window (smem_addr), the
// conversions with round to nearest even (the CPU back end's exact ones, kHalfConversions, which
// the translation unit defines before this file). The mma sums in double and rounds once (a tensor
// core's order is unspecified); ex2.approx and rcp.approx are exact here.
//
// Hopper (sm_90a): mbarriers with phases and transaction counts (a try_wait that fails yields to
// the other threads; when every waiting thread spins and nothing else moves, the launch reports
// the waits instead of hanging); wgmma m64nNk16 issued by the 128 threads of a warpgroup, its
// operands read through the shared-memory descriptors (the swizzles on the shared-window
// address, as the hardware applies them) or from registers, computed when a wgmma.wait_group
// retires its group (so an operand overwritten before the wait, or an accumulator read before it,
// shows); and the asynchronous proxy: wgmma reads shared memory as it stood at the last
// fence.proxy.async, so a tile that threads wrote and did not fence is read stale. TMA tensor
// loads (the maps of emulated_tensor_map.h) land as late as they may: when every thread that
// waits spins and nothing else moves, the oldest copy lands and signals its bytes to its
// mbarrier, so a wait that passes before its copy (a wrong phase bit, bytes not announced) reads
// stale shared memory; a copy still in flight when its CTA ends is reported. TMA stores read
// shared memory as the asynchronous proxy sees it when a bulk wait retires their group (a store
// whose box threads wrote without a proxy fence, or rewrote before the wait, stores stale data).
// Named barriers (bar.sync / bar.arrive over part of the CTA) count their threads; elect.sync
// picks the lowest lane; setmaxnreg changes nothing here.
//
// Invariant established: a kernel either runs to completion with every thread reaching every
// barrier its CTA and warp reach, or the launch reports why not (a barrier some threads never
// reach, a warp collective whose mask leaves out its own lane or a lane it reads, or that the
// lanes of its mask do not all reach with that mask, a shared-memory access outside the CTA's
// dynamic shared memory, a misaligned cp.async) instead of hanging or touching other memory.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kemu_runtime.h"

#define __global__
#define __grid_constant__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// Static shared arrays: CTAs run one after another, so one static object per declaration serves
// every CTA (its contents are undefined at a CTA's start, as on the GPU).
#define __shared__ static

#define threadIdx (::kemu::thread_index())
#define blockIdx (::kemu::block_index())
#define blockDim (::kemu::block_dim())

// --- CUDA built-ins the generated code and the device headers use

struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

inline void __syncthreads() {
  ::kemu::block_at(::kemu::Wait::Cta);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::kemu::check_mask(mask, "__syncwarp");
  ::kemu::warp_meet(mask);
}

// A shuffle of a 32-bit value, or of a 64-bit one (long long, double) as the hardware does it:
// its two halves, each from the same source lane.
template <class T>
inline T kemu_shuffle(unsigned mask, T v, unsigned (*source)(unsigned, int), int arg) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "32-bit or 64-bit shuffles");
  constexpr int kWords = int(sizeof(T) / 4);
  ::kemu::check_mask(mask, "a shuffle");
  uint32_t in[kWords];
  std::memcpy(in, &v, sizeof(T));
  T out{};
  const unsigned from = source(::kemu::lane(), arg);
  ::kemu::check_shuffle_source(mask, from);
  ::kemu::collective(in, kWords, [&] { std::memcpy(&out, ::kemu::slot(from), sizeof(T)); }, mask);
  return out;
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int = 32) {
  return kemu_shuffle<T>(
      mask, v, [](unsigned l, int m) { return (l ^ unsigned(m)) & 31u; }, lane_mask);
}
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src_lane, int = 32) {
  return kemu_shuffle<T>(mask, v, [](unsigned, int src) { return unsigned(src) & 31u; }, src_lane);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  ::kemu::check_mask(mask, "a vote");
  uint32_t in[1] = {predicate ? 1u : 0u}, out = 0;
  ::kemu::collective(
      in, 1,
      [&] {
        for (unsigned l = 0; l < 32; ++l)
          if (mask >> l & 1u) out |= ::kemu::slot(l)[0] << l;
      },
      mask);
  return out;
}
inline int __any_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) != 0;
}
inline int __all_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) == mask;
}

inline int atomicCAS(int* address, int compare, int value) {  // fibers: one at a time
  int old = *address;
  if (old == compare) *address = value;
  return old;
}

inline float __int_as_float(int v) {
  return ::kemu::from_bits<float>(uint32_t(v));
}
inline float __uint_as_float(unsigned v) {
  return ::kemu::from_bits<float>(v);
}
inline int __float_as_int(float v) {
  return int(::kemu::bits(v));
}
inline unsigned __float_as_uint(float v) {
  return ::kemu::bits(v);
}
inline float __fdividef(float a, float b) {
  return a / b;
}
inline size_t __cvta_generic_to_shared(const void* p) {
  return ::kemu::shared_window_offset(p);
}

// CUDA's min and max: overloaded for every arithmetic type, the usual conversions between them.
template <class A, class B>
inline std::common_type_t<A, B> min(A a, B b) {
  using T = std::common_type_t<A, B>;
  return T(b) < T(a) ? T(b) : T(a);
}
template <class A, class B>
inline std::common_type_t<A, B> max(A a, B b) {
  using T = std::common_type_t<A, B>;
  return T(a) < T(b) ? T(b) : T(a);
}
