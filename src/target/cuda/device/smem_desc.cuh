// \file smem_desc.cuh
// The 64-bit shared-memory matrix descriptor that wgmma.mma_async takes for an operand in shared
// memory (sm_90a). Plain bit packing, no instruction.
//
// Fields (PTX ISA, "Matrix Descriptor Format"): the start address, the leading and the stride
// dimension byte offsets, each in bytes and a multiple of 16 (stored >> 4, 14 bits: addresses
// below 256 KiB), the base offset (0: every swizzle atom starts on its natural boundary, 1024,
// 512 or 256 bytes for the 128-, 64- and 32-byte swizzles) and the swizzle mode.
//
// What the offsets mean depends on the operand's major-ness and swizzle. K-major with a swizzle:
// the stride offset is the distance between groups of 8 rows (1024 bytes for dense 128-byte rows),
// the leading offset is unused. K-major without: the leading offset steps between 8 x 16-byte core
// matrices along K, the stride offset along M or N. MN-major with a swizzle: the leading offset
// steps between blocks of the swizzle's width along M or N, the stride offset between groups of
// 8 rows of K.
//
// Invariant established: the descriptor holds exactly the fields given, each masked to its width;
// the base offset is 0 (the compiler places every swizzled tile on its atom's boundary).
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

// Swizzle modes, as the descriptor encodes them.
enum : u32 { kSwizzleNone = 0, kSwizzle128B = 1, kSwizzle64B = 2, kSwizzle32B = 3 };

// The descriptor of an operand at shared-window address `start`.
__device__ __forceinline__ u64 smem_descriptor(u32 start, u32 leading_bytes, u32 stride_bytes,
                                               u32 swizzle) {
  return u64((start >> 4) & 0x3fffu) | (u64((leading_bytes >> 4) & 0x3fffu) << 16) |
         (u64((stride_bytes >> 4) & 0x3fffu) << 32) | (u64(swizzle & 3u) << 62);
}

}  // namespace kintsugi::device
