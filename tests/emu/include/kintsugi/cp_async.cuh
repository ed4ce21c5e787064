// \file cp_async.cuh
// cp.async (16 bytes .cg, 4 / 8 / 16 bytes .ca) with zero-fill, commit and wait: a copy
// lands when a wait retires its group.
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/cp_async.cuh,
// same signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

inline void cp_async_cg16(u32 smem, const void* gmem, u32 src_bytes) {
  ::kemu::cp_async(smem, gmem, 16, src_bytes);
}
template <int Bytes>
inline void cp_async_ca(u32 smem, const void* gmem, u32 src_bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
  ::kemu::cp_async(smem, gmem, Bytes, src_bytes);
}
inline void cp_async_commit() {
  ::kemu::cp_async_commit();
}
template <int N>
inline void cp_async_wait_group() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative group count");
  ::kemu::cp_async_retire(size_t(N));
}
inline void cp_async_wait_all() {
  cp_async_commit();
  ::kemu::cp_async_retire(0);
}

}  // namespace kintsugi::device
