// \file smem_desc.cuh
// The device library's own smem_desc.cuh, compiled as it is (plain bit packing); found through
// the include path the emulator passes (src/target/cuda).
#pragma once

#include "device/smem_desc.cuh"
