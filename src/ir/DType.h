// \file DType.h
// Scalar types of Kintsugi values and storage, and exact conversions to and from f16 and bf16.
//
// Expression types: Bool, Int (index arithmetic, 64-bit), I8, I32 (integer data, mix freely with
// Int), F16, BF16, F32, F8E4M3, F8E5M2. Storage types (tensors, params): I8, I32, F16, BF16, F32,
// F8E4M3, F8E5M2.
// Rounding to f16/bf16/fp8 is round-to-nearest-even, computed directly from double so that the
// typed interpreter never rounds twice. The fp8 types are those of the OCP FP8 specification:
// e4m3 (E4M3FN: finite only, max 448; a conversion saturates to +-448, as the OCP saturating
// mode and PTX's .satfinite do) and e5m2 (IEEE-like: max 57344, overflow to +-inf, NaN).
#pragma once

#include <cstdint>
#include <string>

namespace kintsugi {

enum class DType : uint8_t { Unknown, Bool, Int, I8, I32, F16, BF16, F32, F8E4M3, F8E5M2 };

const char* dtype_name(DType t);
// Parses "f16", "bf16", "f32", "f8e4m3", "f8e5m2", "i32", "i8", "bool"; returns Unknown otherwise.
DType dtype_from_name(const std::string& name);

inline bool is_fp8(DType t) {
  return t == DType::F8E4M3 || t == DType::F8E5M2;
}
inline bool is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || is_fp8(t);
}
inline bool is_int(DType t) {
  return t == DType::Int || t == DType::I8 || t == DType::I32;
}
inline bool is_storage(DType t) {
  return is_float(t) || t == DType::I8 || t == DType::I32;
}
// Bytes of one element in storage.
int dtype_bytes(DType t);
// Machine epsilon of a float type (2^-10 for f16, 2^-7 for bf16, 2^-23 for f32, 2^-3 for e4m3,
// 2^-2 for e5m2).
double dtype_epsilon(DType t);
// The largest finite value of a float type (65504 for f16, 448 for e4m3); 0 for other types.
double dtype_max_finite(DType t);

// Bit-exact conversions. Rounding is to nearest, ties to even; overflow gives +-inf; NaN stays NaN.
uint16_t double_to_f16_bits(double x);
double f16_bits_to_double(uint16_t bits);
uint16_t double_to_bf16_bits(double x);
double bf16_bits_to_double(uint16_t bits);
// fp8: e4m3 saturates to +-448 (infinities too), NaN gives 0x7f; e5m2 overflows to +-inf, NaN
// gives 0x7f.
uint8_t double_to_e4m3_bits(double x);
double e4m3_bits_to_double(uint8_t bits);
uint8_t double_to_e5m2_bits(double x);
double e5m2_bits_to_double(uint8_t bits);

// Rounds a value to what the storage type can hold (floats: nearest; ints: saturating, truncating
// toward zero, NaN -> 0). This is the semantics of casts and of stores in the typed interpreter.
double round_to_dtype(double x, DType t);

}  // namespace kintsugi
