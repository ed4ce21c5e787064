// \file Tensor.h
// A host tensor: dtype, shape and contiguous row-major storage in the dtype's own bit layout
// (f16 and bf16 as 16-bit patterns, f8e4m3 and f8e5m2 as 8-bit ones). Used for inputs and outputs
// of the interpreter and the CPU back end, for random inputs and for verification.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/DType.h"
#include "runtime/HostStorage.h"

namespace kintsugi::runtime {

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  Storage data;  // 64-byte aligned; zero when allocated, but for for_output (HostStorage.h)

  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> shape);  // zero-filled
  // Zero-filled; `what` names the tensor in the error raised when its size overflows or its
  // memory cannot be allocated (a RuntimeArgError with the shape and the byte count).
  Tensor(DType dtype, std::vector<int64_t> shape, const std::string& what);
  // Not filled: for an output that a kernel (or a copy) is about to write whole. Errors as above.
  static Tensor for_output(DType dtype, std::vector<int64_t> shape, const std::string& what);

  int64_t numel() const;
  void* ptr() { return data.data(); }
  const void* ptr() const { return data.data(); }
  // Element i (row-major) as a double, and a store that rounds to the dtype.
  double get(int64_t i) const;
  void set(int64_t i, double v);

 private:
  Tensor(DType dtype, std::vector<int64_t> shape, const std::string& what, bool zeroed);
};

// A tensor's memory seen without owning it (an array of the caller's, used in place): dtype,
// shape, the first element and the bytes there. A default one (dtype Unknown) is no tensor.
struct TensorRef {
  DType dtype = DType::Unknown;
  std::vector<int64_t> shape;
  void* data = nullptr;
  size_t bytes = 0;

  TensorRef() = default;
  TensorRef(DType dtype, std::vector<int64_t> shape, void* data, size_t bytes)
      : dtype(dtype), shape(std::move(shape)), data(data), bytes(bytes) {}
  explicit TensorRef(Tensor& t) : TensorRef(t.dtype, t.shape, t.ptr(), t.data.size()) {}
};

// Sizes of the symbolic dims and values of the params, by name.
using SizeMap = std::map<std::string, int64_t>;
using ParamMap = std::map<std::string, double>;

// The largest element count or byte count of any tensor, buffer or launch: 2^62 (a byte count
// of a 2^62-element f32 tensor would already wrap 64 bits).
constexpr int64_t kMaxTensorBytes = int64_t{1} << 62;

// Checked product of a shape: throws RuntimeArgError on a negative size or an element count
// above kMaxTensorBytes.
int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what);
// Checked byte count of a shape of elements of `elem_bytes` bytes: throws RuntimeArgError
// naming `what`, its shape and the count when the bytes exceed kMaxTensorBytes.
int64_t checked_bytes(const std::vector<int64_t>& shape, int64_t elem_bytes,
                      const std::string& what);

// A shape (or strides) as messages print it: "[2, 3, 4]".
std::string shape_string(const std::vector<int64_t>& shape);

// Whether elements laid out with `strides` (in elements, one per dimension) are compact and
// row-major; a dimension of extent 1 may carry any stride, and a shape with no element is always
// row-major. Empty strides mean row-major.
bool is_row_major(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);

}  // namespace kintsugi::runtime
