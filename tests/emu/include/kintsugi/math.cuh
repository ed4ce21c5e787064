// \file math.cuh
// exp2 and reciprocal (exact here), NaN-propagating max and min, f16 / bf16 conversions
// rounding to nearest even, the saturating float to int conversion, the saturating conversion of a
// pair to e4m3.
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
// Each value rounded to the nearest e4m3 value (ties to the even code), magnitudes beyond 448
// (infinities included) saturated to 448, NaN to 0x7f: the nearest of the 127 finite codes found
// by search, independently of the bit arithmetic of target/Fp8.h.
inline u8 f32_to_e4m3_satfinite(float x) {
  if (std::isnan(x)) return 0x7f;
  const double a = std::fabs(double(x));
  unsigned best = 0;
  double best_gap = a;
  for (unsigned code = 1; code < 0x7f; ++code) {
    const unsigned e = code >> 3, m = code & 7u;
    const double v = e == 0 ? m * 0x1p-9 : std::ldexp(1.0 + m / 8.0, int(e) - 7);
    const double gap = std::fabs(a - v);
    if (gap < best_gap || (gap == best_gap && (code & 1u) == 0)) best = code, best_gap = gap;
  }
  if (a >= 448.0) best = 0x7e;
  return u8(best | (std::signbit(x) ? 0x80u : 0u));
}
inline u16 pack_e4m3x2(float lo, float hi) {
  return u16(f32_to_e4m3_satfinite(lo) | (f32_to_e4m3_satfinite(hi) << 8));
}
inline void split_b32(u32 x, u16& lo, u16& hi) {
  lo = u16(x & 0xffffu);
  hi = u16(x >> 16);
}

}  // namespace kintsugi::device
