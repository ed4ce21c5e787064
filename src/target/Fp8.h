// \file Fp8.h
// The fp8 storage conversions as C source, shared by the CPU prelude (CpuPrelude.h), the CUDA
// preamble (KernelWriter.cpp) and so the CUDA emulator of the tests: float <-> e4m3 (OCP FP8
// E4M3FN: bias 7, finite only, max 448, NaN S.1111.111) and float <-> e5m2 (bias 15, IEEE-like:
// max 57344, inf and NaN). Conversions to fp8 round to nearest, ties to even; e4m3 saturates
// (a magnitude of 448 or more, infinities included, becomes +-448), e5m2 overflows to +-inf
// (from 61440, the midpoint above its largest finite value, on); NaN becomes 0x7f.
//
// Invariant established: the conversions agree bit for bit with double_to_e4m3_bits /
// double_to_e5m2_bits of ir/DType.h for every float input, and the decodings with
// e4m3_bits_to_double / e5m2_bits_to_double.
//
// kFp8ToE4m3 is the float -> e4m3 encoder alone, so that a target with a conversion instruction
// (sm_89 and later) can define ks_f2e4m3 by it instead; kFp8Conversions holds everything else.
//
// The code expects the macros KS_FP8_FN (the functions' qualifiers), KS_FBITS(float) -> unsigned
// and KS_BITSF(unsigned) -> float, and rintf.
#pragma once

namespace kintsugi::target {

inline constexpr const char* kFp8ToE4m3 = R"FP8(KS_FP8_FN unsigned char ks_f2e4m3(float f) {
  unsigned x = KS_FBITS(f);
  unsigned char sign = (unsigned char)((x >> 24) & 0x80u);
  unsigned ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7f;                  // NaN
  if (ax >= 0x43e00000u) return sign | 0x7e;          // 448 and more, inf: saturates to 448
  if (ax >= 0x3c800000u) {                            // normal (2^-6 and more)
    unsigned r = ax + 0x7ffffu + ((ax >> 20) & 1u);   // round to nearest even at bit 20
    return sign | (unsigned char)((r >> 20) - (120u << 3));
  }
  // subnormal: a multiple of 2^-9 (the scaling is exact, rintf rounds ties to even)
  return sign | (unsigned char)rintf(KS_BITSF(ax) * 512.0f);
}
)FP8";

inline constexpr const char* kFp8Conversions = R"FP8(KS_FP8_FN float ks_e4m32f(unsigned char b) {
  unsigned sign = (unsigned)(b & 0x80u) << 24;
  unsigned e = (b >> 3) & 0xfu, m = b & 7u;
  if (e == 0xfu && m == 7u) return KS_BITSF(0x7fc00000u);
  if (e == 0u) {
    float v = (float)m * 0.001953125f;  // 2^-9
    return sign ? -v : v;
  }
  return KS_BITSF(sign | ((e + 120u) << 23) | (m << 20));
}
KS_FP8_FN unsigned char ks_f2e5m2(float f) {
  unsigned x = KS_FBITS(f);
  unsigned char sign = (unsigned char)((x >> 24) & 0x80u);
  unsigned ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7f;                  // NaN
  if (ax >= 0x47700000u) return sign | 0x7c;          // 61440 and more rounds to inf
  if (ax >= 0x38800000u) {                            // normal (2^-14 and more)
    unsigned r = ax + 0xfffffu + ((ax >> 21) & 1u);   // round to nearest even at bit 21
    return sign | (unsigned char)((r >> 21) - (112u << 2));
  }
  // subnormal: a multiple of 2^-16
  return sign | (unsigned char)rintf(KS_BITSF(ax) * 65536.0f);
}
KS_FP8_FN float ks_e5m22f(unsigned char b) {
  unsigned sign = (unsigned)(b & 0x80u) << 24;
  unsigned e = (b >> 2) & 0x1fu, m = b & 3u;
  if (e == 0x1fu) return KS_BITSF(m ? 0x7fc00000u : (sign | 0x7f800000u));
  if (e == 0u) {
    float v = (float)m * 1.52587890625e-05f;  // 2^-16
    return sign ? -v : v;
  }
  return KS_BITSF(sign | ((e + 112u) << 23) | (m << 21));
}
KS_FP8_FN float ks_r8e4(float f) { return ks_e4m32f(ks_f2e4m3(f)); }
KS_FP8_FN float ks_r8e5(float f) { return ks_e5m22f(ks_f2e5m2(f)); }
)FP8";

}  // namespace kintsugi::target
