// \file warpgroup.cuh
// setmaxnreg (nothing to change here: the emulator has no register file) and elect.sync (the
// lowest lane, kemu::elect_one).
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/warpgroup.cuh,
// same signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

template <u32 N>
inline void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256, a multiple of 8");
}
template <u32 N>
inline void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256, a multiple of 8");
}
inline bool elect_one() {
  return ::kemu::elect_one();
}

}  // namespace kintsugi::device
