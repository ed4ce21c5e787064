// \file DType.h
// Scalar types of Kintsugi values and storage, and exact conversions to and from f16 and bf16.
//
// Expression types: Bool, Int (index arithmetic, 64-bit), I8, I32 (integer data, mix freely with
// Int), F16, BF16, F32. Storage types (tensors, params): I8, I32, F16, BF16, F32.
// Rounding to f16/bf16 is round-to-nearest-even, computed directly from double so that the typed
// interpreter never rounds twice.
#pragma once

#include <cstdint>
#include <string>

namespace kintsugi {

enum class DType : uint8_t { Unknown, Bool, Int, I8, I32, F16, BF16, F32 };

const char* dtype_name(DType t);
// Parses "f16", "bf16", "f32", "i32", "i8", "bool"; returns Unknown otherwise.
DType dtype_from_name(const std::string& name);

inline bool is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32;
}
inline bool is_int(DType t) {
  return t == DType::Int || t == DType::I8 || t == DType::I32;
}
inline bool is_storage(DType t) {
  return is_float(t) || t == DType::I8 || t == DType::I32;
}
// Bytes of one element in storage.
int dtype_bytes(DType t);
// Machine epsilon of a float type (2^-10 for f16, 2^-7 for bf16, 2^-23 for f32).
double dtype_epsilon(DType t);

// Bit-exact conversions. Rounding is to nearest, ties to even; overflow gives +-inf; NaN stays NaN.
uint16_t double_to_f16_bits(double x);
double f16_bits_to_double(uint16_t bits);
uint16_t double_to_bf16_bits(double x);
double bf16_bits_to_double(uint16_t bits);

// Rounds a value to what the storage type can hold (floats: nearest; ints: saturating, truncating
// toward zero, NaN -> 0). This is the semantics of casts and of stores in the typed interpreter.
double round_to_dtype(double x, DType t);

}  // namespace kintsugi
