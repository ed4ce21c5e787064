// \file ldmatrix.cuh
// ldmatrix x1, x2, x4, with and without .trans (kemu::ldmatrix).
// Emulated for tests/emu (kintsugi_emu.h): the functions of src/target/cuda/device/ldmatrix.cuh,
// same signatures, computing what the instructions compute.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

inline void ldmatrix_x1(u32 (&d)[1], u32 a) {
  ::kemu::ldmatrix(d, 1, a, false);
}
inline void ldmatrix_x2(u32 (&d)[2], u32 a) {
  ::kemu::ldmatrix(d, 2, a, false);
}
inline void ldmatrix_x4(u32 (&d)[4], u32 a) {
  ::kemu::ldmatrix(d, 4, a, false);
}
inline void ldmatrix_x1_trans(u32 (&d)[1], u32 a) {
  ::kemu::ldmatrix(d, 1, a, true);
}
inline void ldmatrix_x2_trans(u32 (&d)[2], u32 a) {
  ::kemu::ldmatrix(d, 2, a, true);
}
inline void ldmatrix_x4_trans(u32 (&d)[4], u32 a) {
  ::kemu::ldmatrix(d, 4, a, true);
}

}  // namespace kintsugi::device
