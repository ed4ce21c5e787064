// \file DType.cpp
// Scalar type names and exact f16 / bf16 rounding.
#include "ir/DType.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kintsugi {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Unknown:
      return "unknown";
    case DType::Bool:
      return "bool";
    case DType::Int:
      return "int";
    case DType::I8:
      return "i8";
    case DType::I32:
      return "i32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F32:
      return "f32";
    case DType::F8E4M3:
      return "f8e4m3";
    case DType::F8E5M2:
      return "f8e5m2";
  }
  return "unknown";
}

DType dtype_from_name(const std::string& name) {
  if (name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  if (name == "f32") return DType::F32;
  if (name == "f8e4m3") return DType::F8E4M3;
  if (name == "f8e5m2") return DType::F8E5M2;
  if (name == "i32") return DType::I32;
  if (name == "i8") return DType::I8;
  if (name == "bool") return DType::Bool;
  return DType::Unknown;
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::I8:
    case DType::Bool:
    case DType::F8E4M3:
    case DType::F8E5M2:
      return 1;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I32:
    case DType::F32:
      return 4;
    case DType::Int:
      return 8;
    case DType::Unknown:
      return 0;
  }
  return 0;
}

double dtype_epsilon(DType t) {
  switch (t) {
    case DType::F16:
      return std::ldexp(1.0, -10);
    case DType::BF16:
      return std::ldexp(1.0, -7);
    case DType::F32:
      return std::ldexp(1.0, -23);
    case DType::F8E4M3:
      return std::ldexp(1.0, -3);
    case DType::F8E5M2:
      return std::ldexp(1.0, -2);
    default:
      return 0.0;
  }
}

double dtype_max_finite(DType t) {
  switch (t) {
    case DType::F16:
      return 65504.0;
    case DType::BF16:
      return std::ldexp(255.0, 120);  // (2 - 2^-7) * 2^127
    case DType::F32:
      return std::ldexp(16777215.0, 104);  // (2 - 2^-23) * 2^127
    case DType::F8E4M3:
      return 448.0;
    case DType::F8E5M2:
      return 57344.0;
    default:
      return 0.0;
  }
}

namespace {
// Rounds |x| (finite, non-negative) to a binary float with `mant` explicit mantissa bits, minimum
// normal exponent `emin` and maximum finite value `maxv`; returns the rounded magnitude.
double round_magnitude(double ax, int mant, int emin, double maxv) {
  if (ax == 0.0) return 0.0;
  int e = std::ilogb(ax);
  if (e < emin) e = emin;  // subnormal range: fixed quantum
  double quantum = std::ldexp(1.0, e - mant);
  double r = std::nearbyint(ax / quantum) * quantum;  // default rounding mode: ties to even
  if (r > maxv) return std::numeric_limits<double>::infinity();
  return r;
}

// The bits of the 16-bit IEEE format with `mant` stored mantissa bits and `exp_bits` exponent
// bits (f16: 10 and 5, bf16: 7 and 8) nearest to x, ties to even, overflow to +-inf, NaN to the
// positive quiet NaN. Computed on the double's bits: the significand is shifted to the target's
// quantum at x's exponent (or at the least normal exponent, for subnormal results) and rounded
// from the bits shifted out, so no floating-point operation can round twice.
uint16_t double_to_binary16(double x, int mant, int exp_bits) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  const uint16_t sign = static_cast<uint16_t>((u >> 63) << 15);
  const uint16_t inf = static_cast<uint16_t>(((1u << exp_bits) - 1) << mant);
  const uint64_t magnitude = u & ~(uint64_t{1} << 63);
  const uint64_t double_inf = uint64_t{0x7ff} << 52;
  if (magnitude > double_inf) return inf | static_cast<uint16_t>(1u << (mant - 1));
  if (magnitude == double_inf) return sign | inf;
  // Doubles below 2^-1022 round to zero in both formats (their least subnormal is 2^-133 or more).
  if ((magnitude >> 52) == 0) return sign;
  const int e = static_cast<int>(magnitude >> 52) - 1023;
  const uint64_t significand = (magnitude & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int bias = (1 << (exp_bits - 1)) - 1, emin = 1 - bias;
  // Bits of the significand below the result's quantum 2^(max(e, emin) - mant).
  const int shift = 52 - mant + std::max(emin - e, 0);
  if (shift > 53) return sign;  // below half the least subnormal
  uint64_t q = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1),
                 half = uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (q & 1))) ++q;
  // A subnormal's q is its code; one rounded up to 2^mant is the least normal's code, 2^mant.
  if (e < emin) return sign | static_cast<uint16_t>(q);
  int field = e + bias;
  if (q == (uint64_t{2} << mant)) q >>= 1, ++field;  // rounded up to the next power of two
  if (field >= (1 << exp_bits) - 1) return sign | inf;
  return sign | static_cast<uint16_t>(field << mant) |
         static_cast<uint16_t>(q - (uint64_t{1} << mant));
}
}  // namespace

uint16_t double_to_f16_bits(double x) {
  return double_to_binary16(x, 10, 5);
}

double f16_bits_to_double(uint16_t bits) {
  const int exp = (bits >> 10) & 0x1f;
  const uint64_t mant = bits & 0x3ff;
  const double sign = bits & 0x8000 ? -1.0 : 1.0;
  if (exp == 0x1f) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * static_cast<double>(mant) * 0x1p-24;
  const uint64_t u =
      (uint64_t{bits & 0x8000u} << 48) | (uint64_t(exp - 15 + 1023) << 52) | (mant << 42);
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

uint16_t double_to_bf16_bits(double x) {
  return double_to_binary16(x, 7, 8);
}

double bf16_bits_to_double(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

namespace {
// The code of a magnitude r that the fp8 type with `mant` mantissa bits, minimum normal exponent
// `emin` and exponent bias `bias` represents exactly (sign bit clear).
uint8_t fp8_code(double r, int mant, int emin, int bias) {
  if (r == 0.0) return 0;
  int e = std::ilogb(r);
  if (e < emin) return static_cast<uint8_t>(std::lround(std::ldexp(r, mant - emin)));
  return static_cast<uint8_t>(((e + bias) << mant) |
                              (std::lround(std::ldexp(r, mant - e)) - (1 << mant)));
}
}  // namespace

uint8_t double_to_e4m3_bits(double x) {
  if (std::isnan(x)) return 0x7f;
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  double ax = std::fabs(x);
  double r = std::isinf(ax) ? ax : round_magnitude(ax, 3, -6, 448.0);
  if (std::isinf(r)) return sign | 0x7e;  // saturates to 448
  return sign | fp8_code(r, 3, -6, 7);
}

double e4m3_bits_to_double(uint8_t bits) {
  double sign = bits & 0x80 ? -1.0 : 1.0;
  int e = (bits >> 3) & 0xf, m = bits & 7;
  if (e == 0xf && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(m, -9);
  return sign * std::ldexp(8 + m, e - 10);
}

uint8_t double_to_e5m2_bits(double x) {
  if (std::isnan(x)) return 0x7f;
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  double ax = std::fabs(x);
  double r = std::isinf(ax) ? ax : round_magnitude(ax, 2, -14, 57344.0);
  if (std::isinf(r)) return sign | 0x7c;
  return sign | fp8_code(r, 2, -14, 15);
}

double e5m2_bits_to_double(uint8_t bits) {
  double sign = bits & 0x80 ? -1.0 : 1.0;
  int e = (bits >> 2) & 0x1f, m = bits & 3;
  if (e == 0x1f) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -16);
  return sign * std::ldexp(4 + m, e - 17);
}

double round_to_dtype(double x, DType t) {
  switch (t) {
    case DType::F16:
      return f16_bits_to_double(double_to_f16_bits(x));
    case DType::BF16:
      return bf16_bits_to_double(double_to_bf16_bits(x));
    case DType::F32:
      return static_cast<double>(static_cast<float>(x));
    case DType::F8E4M3:
      return e4m3_bits_to_double(double_to_e4m3_bits(x));
    case DType::F8E5M2:
      return e5m2_bits_to_double(double_to_e5m2_bits(x));
    case DType::I8:
    case DType::I32: {
      if (std::isnan(x)) return 0.0;
      double lo = t == DType::I8 ? -128.0 : -2147483648.0;
      double hi = t == DType::I8 ? 127.0 : 2147483647.0;
      double v = std::trunc(x);
      return v < lo ? lo : (v > hi ? hi : v);
    }
    case DType::Bool:
      return x != 0.0 ? 1.0 : 0.0;
    case DType::Int:
      return std::isnan(x) ? 0.0 : std::trunc(x);
    case DType::Unknown:
      break;
  }
  return x;
}

}  // namespace kintsugi
