// \file encode_tensor_map.h
// The emulator's cuTensorMapEncodeTiled: a cuda::TensorMapSpec that tensor_map_unaddressable
// accepts, written into the 128 bytes of a cuda::TensorMap as kintsugi_emu.h reads them
// (emulated_tensor_map.h). The emulated launches of generated kernels (Emulator.cpp) and the
// self-tests' hand-written TMA kernels encode their maps with it.
//
// Invariant established: the map's magic, rank, element size, swizzle width, address, extents,
// byte strides (strides[0]: the element) and box are exactly the spec's.
#pragma once

#include <cstring>

#include "emulated_tensor_map.h"
#include "ir/DType.h"
#include "target/cuda/Driver.h"

namespace kintsugi::emu {

inline cuda::TensorMap emulated_tensor_map(const cuda::TensorMapSpec& s) {
  kemu_map::EmulatedTensorMap m{};
  m.magic = kemu_map::kMagic;
  m.rank = uint32_t(s.dims.size());
  m.element_bytes = uint32_t(dtype_bytes(s.element));
  m.swizzle_bytes = s.swizzle == cuda::TensorMapSwizzle::None ? 0 : 16u << int(s.swizzle);
  m.address = s.address;
  for (size_t d = 0; d < s.dims.size(); ++d) {
    m.dims[d] = s.dims[d];
    m.strides[d] = d == 0 ? m.element_bytes : s.strides[d - 1];
    m.box[d] = s.box[d];
  }
  cuda::TensorMap map;
  std::memcpy(map.bytes, &m, sizeof(m));
  return map;
}

}  // namespace kintsugi::emu
