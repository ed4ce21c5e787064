// \file math.cuh
// Scalar float instructions the generated code needs in a specific form: fast exp2 and
// reciprocal, NaN-propagating max and min, and conversions between f32 and f16 / bf16 bit
// patterns (single values and packed pairs), the saturating float to integer conversion (sm_80
// and later), and the saturating conversion of a pair to e4m3 (sm_89 and later).
//
// Accuracy: ex2_approx and rcp_approx are the hardware approximations (a few ulp; the gpu tests
// hold them to a relative error of 2^-21), flushing subnormal inputs and results to zero.
// Conversions to f16 / bf16 round to nearest even. fmax_nan and fmin_nan return NaN if either input
// is NaN, as the reference interpreter's max and min do (fmaxf would drop the NaN).
//
// f32_to_s32_sat truncates toward zero and clamps to the int range, NaN to 0, as the reference
// interpreter's cast to i32 does (a C++ cast of an out-of-range float is undefined).
//
// Invariant established: each function is one instruction (or one register move), nothing else.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

// 2^x, approximate (ex2.approx.ftz.f32).
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1 / x, approximate (rcp.approx.ftz.f32).
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// max(a, b), NaN if either is NaN (max.NaN.f32).
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

// min(a, b), NaN if either is NaN (min.NaN.f32).
__device__ __forceinline__ float fmin_nan(float a, float b) {
  float y;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

// The f16 pair {lo, hi} (lo in the low half), each rounded to nearest even.
__device__ __forceinline__ u32 pack_f16x2(float lo, float hi) {
  u32 d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// The bf16 pair {lo, hi} (lo in the low half), each rounded to nearest even.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// x rounded to f16 (nearest even).
__device__ __forceinline__ u16 f32_to_f16(float x) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}

// x rounded to bf16 (nearest even).
__device__ __forceinline__ u16 f32_to_bf16(float x) {
  u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
// The e4m3 pair {lo, hi} (lo in the low byte), each rounded to nearest even and saturated to
// +-448, infinities included (cvt.rn.satfinite.e4m3x2.f32, sm_89 and later).
__device__ __forceinline__ u16 pack_e4m3x2(float lo, float hi) {
  u16 d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
}
#endif

// The f16 value with bit pattern h (exact).
__device__ __forceinline__ float f16_to_f32(u16 h) {
  float x;
  asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(h));
  return x;
}

// The bf16 value with bit pattern h (exact: bf16 is the upper half of an f32).
__device__ __forceinline__ float bf16_to_f32(u16 h) {
  return __uint_as_float(static_cast<u32>(h) << 16);
}

// x truncated toward zero, clamped to [-2^31, 2^31 - 1]; NaN gives 0 (cvt.rzi.sat.s32.f32).
__device__ __forceinline__ int f32_to_s32_sat(float x) {
  int d;
  asm("cvt.rzi.sat.s32.f32 %0, %1;" : "=r"(d) : "f"(x));
  return d;
}

// The two halves of a packed pair (mov.b32 {lo, hi}).
__device__ __forceinline__ void split_b32(u32 x, u16& lo, u16& hi) {
  asm("mov.b32 {%0, %1}, %2;" : "=h"(lo), "=h"(hi) : "r"(x));
}

}  // namespace kintsugi::device
