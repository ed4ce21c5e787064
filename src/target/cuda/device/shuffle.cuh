// \file shuffle.cuh
// Warp shuffles: one xor exchange, and butterfly max / sum over a set of lane-xor distances fixed
// at compile time.
//
// warp_max_xor<1, 2>(v) combines the values of the four lanes that differ only in lane bits 0 and
// 1 (the lanes that hold one row of an m16n8 accumulator); warp_sum_xor<1, 2, 4, 8, 16>(v) sums
// the whole warp. Which lane bits span a row is decided by the compiler's layout, never here.
// Every lane of the group ends with the same bits (the combining operations are commutative). All
// 32 lanes must execute the call (full-warp mask). The max propagates NaN (fmax_nan).
//
// Invariant established: a butterfly is exactly one shuffle and one combining instruction per
// mask, in the order given; the masks are distinct powers of two below 32 (checked at compile
// time).
#pragma once

#include "kintsugi/math.cuh"
#include "kintsugi/types.cuh"

namespace kintsugi::device {

// The value of lane (lane_id ^ lane_mask), all 32 lanes participating.
__device__ __forceinline__ float shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}

// True when the masks are distinct powers of two below 32 (distinct: their sum equals their or).
template <int... XorMasks>
__device__ constexpr bool valid_xor_masks() {
  return sizeof...(XorMasks) > 0 && ((XorMasks > 0 && XorMasks < 32) && ...) &&
         (((XorMasks & (XorMasks - 1)) == 0) && ...) && (XorMasks | ...) == (XorMasks + ...);
}

// The NaN-propagating max over the lanes reachable through the given xor distances.
template <int... XorMasks>
__device__ __forceinline__ float warp_max_xor(float v) {
  static_assert(valid_xor_masks<XorMasks...>(), "xor masks must be distinct powers of two < 32");
  ((v = fmax_nan(v, shfl_xor(v, XorMasks))), ...);
  return v;
}

// The sum over the lanes reachable through the given xor distances.
template <int... XorMasks>
__device__ __forceinline__ float warp_sum_xor(float v) {
  static_assert(valid_xor_masks<XorMasks...>(), "xor masks must be distinct powers of two < 32");
  ((v += shfl_xor(v, XorMasks)), ...);
  return v;
}

}  // namespace kintsugi::device
