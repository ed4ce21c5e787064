// \file tma.cuh
// cp.async.bulk.tensor 2-D to 4-D loads (kemu::tma_load): a copy lands when every thread that
// waits spins and nothing else moves, then signals its bytes to its mbarrier; 2-D stores
// performed when a bulk wait retires their group (kemu::tma_store, bulk_commit, bulk_wait).
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/tma.cuh, same
// signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

struct alignas(64) TensorMap {
  u8 bytes[128];
};

inline void tma_load_2d(u32 dst, const TensorMap* map, u32 bar, i32 c0, i32 c1) {
  ::kemu::tma_load(dst, map, bar, {c0, c1});
}
inline void tma_load_3d(u32 dst, const TensorMap* map, u32 bar, i32 c0, i32 c1, i32 c2) {
  ::kemu::tma_load(dst, map, bar, {c0, c1, c2});
}
inline void tma_load_4d(u32 dst, const TensorMap* map, u32 bar, i32 c0, i32 c1, i32 c2, i32 c3) {
  ::kemu::tma_load(dst, map, bar, {c0, c1, c2, c3});
}

inline void tma_store_2d(const TensorMap* map, u32 src, i32 c0, i32 c1) {
  ::kemu::tma_store(map, src, {c0, c1});
}
inline void bulk_commit_group() {
  ::kemu::bulk_commit();
}
template <int Pending>
inline void bulk_wait_group_read() {
  static_assert(Pending >= 0, "a non-negative group count");
  ::kemu::bulk_wait(size_t(Pending));
}
template <int Pending>
inline void bulk_wait_group() {
  static_assert(Pending >= 0, "a non-negative group count");
  ::kemu::bulk_wait(size_t(Pending));
}

}  // namespace kintsugi::device
