// \file math.cuh
// exp2 and reciprocal (exact here), NaN-propagating max and min, f16 / bf16 conversions
// rounding to nearest even, the saturating float to int conversion.
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/math.cuh, same
// signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

inline float ex2_approx(float x) {
  return std::exp2(x);
}
inline float rcp_approx(float x) {
  return 1.0f / x;
}
inline float fmax_nan(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? b : a);
}
inline float fmin_nan(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? NAN : (b < a ? b : a);
}
inline u16 f32_to_f16(float x) {
  return ks_f2h(x);
}
inline u16 f32_to_bf16(float x) {
  return ks_f2b(x);
}
inline float f16_to_f32(u16 h) {
  return ks_h2f(h);
}
inline float bf16_to_f32(u16 h) {
  return ks_b2f(h);
}
inline int f32_to_s32_sat(float x) {
  if (std::isnan(x)) return 0;
  if (x <= -2147483648.0f) return INT32_MIN;
  if (x >= 2147483648.0f) return INT32_MAX;
  return int(std::trunc(x));
}
inline u32 pack_f16x2(float lo, float hi) {
  return u32(f32_to_f16(lo)) | (u32(f32_to_f16(hi)) << 16);
}
inline u32 pack_bf16x2(float lo, float hi) {
  return u32(f32_to_bf16(lo)) | (u32(f32_to_bf16(hi)) << 16);
}
inline void split_b32(u32 x, u16& lo, u16& hi) {
  lo = u16(x & 0xffffu);
  hi = u16(x >> 16);
}

}  // namespace kintsugi::device
