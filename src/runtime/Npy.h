// \file Npy.h
// Reading and writing NumPy .npy files (format version 1.0 and 2.0, little endian, C order).
//
// Element encodings: f16 as '<f2', f32 as '<f4', i32 as '<i4', i8 as '|i1', and bf16 and the fp8
// types, which NumPy has no type for, as their raw bit patterns '<u2' and '|u1' (the manifest of
// --save-io says so; ml_dtypes' bfloat16, float8_e4m3fn and float8_e5m2 view them). Reading
// validates everything it relies on: magic, version, header syntax, dtype, order, shape, and that
// the data is complete; a malformed file, or a path that is not a regular file (a directory, a
// device, a pipe), is a RuntimeArgError naming the file, never a crash. Writing is atomic
// (files::write_file_atomic): a symbolic link at the destination is replaced, never followed.
#pragma once

#include <string>
#include <vector>

#include "runtime/Tensor.h"

namespace kintsugi::runtime {

// The .npy descriptor of a storage type ("<f2", "<u2" for bf16, ...).
std::string npy_descr(DType t);
void write_npy(const std::string& path, const Tensor& t);
// Reads a tensor; `expected` is the dtype the caller needs (bf16 reads '<u2').
Tensor read_npy(const std::string& path, DType expected);
// Reads a float64 array ('<f8'), e.g. a reference computed elsewhere; sets its shape.
std::vector<double> read_npy_f64(const std::string& path, std::vector<int64_t>* shape);

}  // namespace kintsugi::runtime
