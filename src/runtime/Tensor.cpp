// \file Tensor.cpp
// Host tensors (see Tensor.h).
//
// Invariant: every element and byte count formed here is checked against kMaxTensorBytes before
// it is used, and a failed allocation is a RuntimeArgError naming the tensor, never a bad_alloc.
#include "runtime/Tensor.h"

#include <cstring>
#include <new>
#include <stdexcept>

#include "support/Error.h"

namespace kintsugi::runtime {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t k = 0; k < shape.size(); ++k) out += (k ? ", " : "") + std::to_string(shape[k]);
  return out + "]";
}

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what) {
  for (int64_t d : shape)
    if (d < 0) arg_error << what << " has a negative size " << d;
  // A zero extent anywhere makes the product 0 whatever the other extents are.
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxTensorBytes)
      arg_error << what << " of shape " << shape_string(shape)
                << " is too large: its element count exceeds 2^62";
  }
  return n;
}

int64_t checked_bytes(const std::vector<int64_t>& shape, int64_t elem_bytes,
                      const std::string& what) {
  int64_t n = checked_numel(shape, what), bytes = 0;
  if (__builtin_mul_overflow(n, elem_bytes, &bytes) || bytes > kMaxTensorBytes)
    arg_error << what << " of shape " << shape_string(shape) << " is too large: " << n
              << " elements of " << elem_bytes << " bytes exceed 2^62 bytes";
  return bytes;
}

bool is_row_major(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  if (strides.empty()) return true;
  if (strides.size() != shape.size()) return false;
  int64_t expected = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 0) return true;  // no element is ever addressed
    if (shape[k] != 1 && strides[k] != expected) return false;
    expected *= shape[k];
  }
  return true;
}

Tensor::Tensor(DType dtype_, std::vector<int64_t> shape_)
    : Tensor(dtype_, std::move(shape_), "tensor") {}

Tensor::Tensor(DType dtype_, std::vector<int64_t> shape_, const std::string& what)
    : Tensor(dtype_, std::move(shape_), what, true) {}

Tensor Tensor::for_output(DType dtype, std::vector<int64_t> shape, const std::string& what) {
  return Tensor(dtype, std::move(shape), what, false);
}

Tensor::Tensor(DType dtype_, std::vector<int64_t> shape_, const std::string& what, bool zeroed)
    : dtype(dtype_), shape(std::move(shape_)) {
  internal_assert(is_storage(dtype)) << "tensor of non-storage type " << dtype_name(dtype);
  int64_t bytes = checked_bytes(shape, dtype_bytes(dtype), what);
  try {
    // As allocated: zero, or (an output) whatever the memory held; not written here.
    data = Storage(static_cast<size_t>(bytes), ZeroedAllocator<uint8_t>(zeroed));
  } catch (const std::bad_alloc&) {
    arg_error << "cannot allocate " << what << " " << dtype_name(dtype) << shape_string(shape)
              << ": " << bytes << " bytes of memory are not available";
  } catch (const std::length_error&) {
    arg_error << "cannot allocate " << what << " " << dtype_name(dtype) << shape_string(shape)
              << ": " << bytes << " bytes exceed what one allocation can hold";
  }
}

int64_t Tensor::numel() const {
  return dtype_bytes(dtype) ? static_cast<int64_t>(data.size()) / dtype_bytes(dtype) : 0;
}

double Tensor::get(int64_t i) const {
  const uint8_t* p = data.data() + i * dtype_bytes(dtype);
  switch (dtype) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::F16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return f16_bits_to_double(b);
    }
    case DType::BF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16_bits_to_double(b);
    }
    case DType::F8E4M3:
      return e4m3_bits_to_double(*p);
    case DType::F8E5M2:
      return e5m2_bits_to_double(*p);
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::I8:
      return static_cast<int8_t>(*p);
    default:
      internal_error << "get() on tensor of type " << dtype_name(dtype);
  }
  return 0.0;
}

void Tensor::set(int64_t i, double v) {
  uint8_t* p = data.data() + i * dtype_bytes(dtype);
  switch (dtype) {
    case DType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DType::F16: {
      uint16_t b = double_to_f16_bits(v);
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::BF16: {
      uint16_t b = double_to_bf16_bits(v);
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::F8E4M3:
      *p = double_to_e4m3_bits(v);
      break;
    case DType::F8E5M2:
      *p = double_to_e5m2_bits(v);
      break;
    case DType::I32: {
      int32_t x = static_cast<int32_t>(round_to_dtype(v, DType::I32));
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::I8:
      *p = static_cast<uint8_t>(static_cast<int8_t>(round_to_dtype(v, DType::I8)));
      break;
    default:
      internal_error << "set() on tensor of type " << dtype_name(dtype);
  }
}

}  // namespace kintsugi::runtime
