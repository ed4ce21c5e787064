// \file Tensor.h
// A host tensor: dtype, shape and contiguous row-major storage in the dtype's own bit layout
// (f16 and bf16 as 16-bit patterns). Used for inputs and outputs of the interpreter and the CPU
// back end, for random inputs and for verification.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/DType.h"

namespace kintsugi::runtime {

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> shape);  // zero-filled

  int64_t numel() const;
  void* ptr() { return data.data(); }
  const void* ptr() const { return data.data(); }
  // Element i (row-major) as a double, and a store that rounds to the dtype.
  double get(int64_t i) const;
  void set(int64_t i, double v);
};

// Sizes of the symbolic dims and values of the params, by name.
using SizeMap = std::map<std::string, int64_t>;
using ParamMap = std::map<std::string, double>;

// Checked product of a shape: throws RuntimeArgError on a negative size or overflow past 2^62.
int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what);

// A shape (or strides) as messages print it: "[2, 3, 4]".
std::string shape_string(const std::vector<int64_t>& shape);

// Whether elements laid out with `strides` (in elements, one per dimension) are compact and
// row-major; a dimension of extent 1 may carry any stride, and a shape with no element is always
// row-major. Empty strides mean row-major.
bool is_row_major(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);

}  // namespace kintsugi::runtime
