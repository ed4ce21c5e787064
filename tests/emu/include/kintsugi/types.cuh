// \file types.cuh
// The device library's own types.cuh, compiled as it is (it is plain C++ over the emulated
// built-ins); found through the include path the emulator passes (src/target/cuda).
#pragma once

#include "device/types.cuh"
