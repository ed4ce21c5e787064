// \file ldmatrix.cuh
// Warp-level loads of 8x8 matrices of 16-bit elements from shared memory into fragments:
// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16 (sm_75 and later).
//
// All 32 lanes execute the call. Lane l supplies, in `row_addr` (a 32-bit shared-window address,
// see smem_addr), the address of row l % 8 of matrix l / 8; only lanes 0-7 (x1), 0-15 (x2) or all
// (x4) are read, and each row is 16 contiguous, 16-byte-aligned bytes. Register d[j] of lane l
// then holds row l / 4, elements 2 * (l % 4) and +1 of matrix j (low half first); the .trans forms
// deliver the transposed matrix (rows 2 * (l % 4) and +1 of column l / 4).
//
// Invariant established: each function is exactly one ldmatrix instruction; it is ordered with
// the surrounding shared-memory accesses (volatile, memory clobber), nothing else.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

#define KINTSUGI_LDMATRIX(SUFFIX, QUALIFIER)                                                     \
  __device__ __forceinline__ void ldmatrix_x1##SUFFIX(u32(&d)[1], u32 row_addr) {                \
    asm volatile("ldmatrix.sync.aligned.m8n8.x1" QUALIFIER ".shared.b16 {%0}, [%1];"             \
                 : "=r"(d[0])                                                                    \
                 : "r"(row_addr)                                                                 \
                 : "memory");                                                                    \
  }                                                                                              \
  __device__ __forceinline__ void ldmatrix_x2##SUFFIX(u32(&d)[2], u32 row_addr) {                \
    asm volatile("ldmatrix.sync.aligned.m8n8.x2" QUALIFIER ".shared.b16 {%0, %1}, [%2];"         \
                 : "=r"(d[0]), "=r"(d[1])                                                        \
                 : "r"(row_addr)                                                                 \
                 : "memory");                                                                    \
  }                                                                                              \
  __device__ __forceinline__ void ldmatrix_x4##SUFFIX(u32(&d)[4], u32 row_addr) {                \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4" QUALIFIER ".shared.b16 {%0, %1, %2, %3}, [%4];" \
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                \
                 : "r"(row_addr)                                                                 \
                 : "memory");                                                                    \
  }

// ldmatrix_x1, ldmatrix_x2, ldmatrix_x4: the matrices as stored.
KINTSUGI_LDMATRIX(, "")
// ldmatrix_x1_trans, ldmatrix_x2_trans, ldmatrix_x4_trans: the matrices transposed.
KINTSUGI_LDMATRIX(_trans, ".trans")

#undef KINTSUGI_LDMATRIX

}  // namespace kintsugi::device
