// \file mbarrier.cuh
// mbarrier init, arrive, expect_tx and try_wait.parity, with phases and transaction counts
// (kemu::mbarrier_*); a failed try_wait lets the other threads run.
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/mbarrier.cuh,
// same signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

inline void mbarrier_init(u32 bar, u32 arrivals) {
  ::kemu::mbarrier_init(bar, arrivals);
}
inline void fence_mbarrier_init() {}
inline void mbarrier_arrive(u32 bar) {
  ::kemu::mbarrier_arrive(bar);
}
inline void mbarrier_arrive_expect_tx(u32 bar, u32 bytes) {
  ::kemu::mbarrier_expect_tx(bar, bytes);
  ::kemu::mbarrier_arrive(bar);
}
inline bool mbarrier_try_wait_parity(u32 bar, u32 parity) {
  return ::kemu::mbarrier_try_wait_parity(bar, parity);
}

}  // namespace kintsugi::device
