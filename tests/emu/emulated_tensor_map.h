// \file emulated_tensor_map.h
// The emulator's tensor map: what the 128 opaque bytes of a CUtensorMap hold in tests/emu, where
// no driver encodes one. The host side of an emulated launch fills it from a cuda::TensorMapSpec
// (after tensor_map_unaddressable accepts the spec, as on a GPU); kintsugi_emu.h reads it when a
// kernel issues cp.async.bulk.tensor. Plain C++, no other header.
#pragma once

#include <cstdint>

namespace kemu_map {

constexpr uint32_t kMagic = 0x4b544d41;  // "KTMA": a map this emulator encoded

struct EmulatedTensorMap {
  uint32_t magic, rank, element_bytes, swizzle_bytes;  // swizzle: 0, 32, 64 or 128
  uint64_t address;
  uint64_t dims[5], strides[5];  // elements innermost first; bytes (strides[0]: the element)
  uint32_t box[5];
};
static_assert(sizeof(EmulatedTensorMap) <= 128, "a CUtensorMap is 128 bytes");

}  // namespace kemu_map
