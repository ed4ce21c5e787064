// \file types.cuh
// Fixed-width integer types and the 32-bit shared-memory address, for device code compiled by
// NVRTC.
//
// NVRTC 13.0 provides neither <cstdint> nor cuda_fp16.h / cuda_bf16.h as built-in headers (their
// #include fails without a toolkit include path, which Kintsugi never passes), so the device
// library declares the few types it needs itself. f16 and bf16 values travel as bit patterns: a
// u16 for one value, a u32 for a packed pair (low half = first element), which is exactly what the
// tensor-core and conversion instructions take.
//
// Invariant established: the types below have the widths their names say (checked at compile
// time); every other device header takes its types from here.
#pragma once

namespace kintsugi::device {

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

static_assert(sizeof(i8) == 1 && sizeof(u8) == 1, "8-bit types");
static_assert(sizeof(i16) == 2 && sizeof(u16) == 2, "16-bit types");
static_assert(sizeof(i32) == 4 && sizeof(u32) == 4, "32-bit types");
static_assert(sizeof(i64) == 8 && sizeof(u64) == 8, "64-bit types");

// The address of a shared-memory object in the 32-bit shared window (cvta.to.shared), the form
// that ldmatrix and cp.async take.
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

}  // namespace kintsugi::device
