// \file cp_async_test.cpp
// cp_async.cuh on a GPU: every copy size and cache mode copies the first `valid` bytes and
// zero-fills the rest of each chunk, for tails that end anywhere (inside a chunk, on a chunk
// boundary, before the first byte); wait_group<1> completes exactly the older of two groups.
#include <random>

#include "GpuTest.h"

using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;

namespace {

const char* kSource = R"(
#include "kintsugi/cp_async.cuh"
#include "kintsugi/ids.cuh"
using namespace kintsugi::device;

constexpr u32 kBytes = 1024;

// Copies src[0, kBytes) into shared memory (pre-filled with 0xee) in chunks of Bytes, reading
// only the first `valid` bytes, then writes the shared tile to dst.
template <int Bytes, bool kCg>
__device__ void copy_tail(const u8* src, u8* dst, u32 valid) {
  __shared__ alignas(16) u8 stage[kBytes];
  for (u32 i = threadIdx.x; i < kBytes; i += blockDim.x) stage[i] = 0xee;
  sync_threads();
  for (u32 start = threadIdx.x * Bytes; start < kBytes; start += blockDim.x * Bytes) {
    const u32 left = valid > start ? valid - start : 0;
    const u32 n = left < Bytes ? left : Bytes;
    if constexpr (kCg) {
      cp_async_cg16(smem_addr(stage + start), src + start, n);
    } else {
      cp_async_ca<Bytes>(smem_addr(stage + start), src + start, n);
    }
  }
  cp_async_commit();
  if constexpr (kCg) {
    cp_async_wait_group<0>();
  } else {
    cp_async_wait_all();
  }
  sync_threads();
  for (u32 i = threadIdx.x; i < kBytes; i += blockDim.x) dst[i] = stage[i];
}

extern "C" __global__ void copy_cg16(const u8* src, u8* dst, u32 valid) {
  copy_tail<16, true>(src, dst, valid);
}
extern "C" __global__ void copy_ca16(const u8* src, u8* dst, u32 valid) {
  copy_tail<16, false>(src, dst, valid);
}
extern "C" __global__ void copy_ca8(const u8* src, u8* dst, u32 valid) {
  copy_tail<8, false>(src, dst, valid);
}
extern "C" __global__ void copy_ca4(const u8* src, u8* dst, u32 valid) {
  copy_tail<4, false>(src, dst, valid);
}

// 64 threads: group 0 = the first kBytes, group 1 = the next kBytes, one 16-byte chunk each per
// thread. After wait_group<1> (and a barrier) the first half must be complete.
extern "C" __global__ void two_groups(const u8* src, u8* dst) {
  __shared__ alignas(16) u8 stage[2 * kBytes];
  const u32 at = threadIdx.x * 16;
  cp_async_cg16(smem_addr(stage + at), src + at, 16);
  cp_async_commit();
  cp_async_cg16(smem_addr(stage + kBytes + at), src + kBytes + at, 16);
  cp_async_commit();
  cp_async_wait_group<1>();
  sync_threads();
  for (u32 i = threadIdx.x; i < kBytes; i += blockDim.x) dst[i] = stage[i];
  cp_async_wait_group<0>();
  sync_threads();
  for (u32 i = threadIdx.x; i < kBytes; i += blockDim.x) dst[kBytes + i] = stage[kBytes + i];
}
)";

constexpr uint32_t kBytes = 1024;

std::vector<uint8_t> random_bytes(size_t n) {
  std::mt19937 rng(3);
  std::vector<uint8_t> v(n);
  // Never 0 or 0xee, so that zero-fill and untouched bytes are both visible.
  for (uint8_t& b : v) b = static_cast<uint8_t>(1 + rng() % 200);
  return v;
}

}  // namespace

using CpAsync = GpuTest;

TEST_F(CpAsync, CopiesAndZeroFillsTails) {
  Module module = load(kSource, "cp_async_test.cu");
  std::vector<uint8_t> src = random_bytes(kBytes);
  DeviceBuffer dsrc = to_device(src), ddst(kBytes);
  for (const char* kernel : {"copy_cg16", "copy_ca16", "copy_ca8", "copy_ca4"}) {
    for (uint32_t valid : {kBytes, 1000u, 512u, 17u, 5u, 1u, 0u}) {
      ddst.fill(0);
      module.function(kernel).launch({.grid = {1}, .block = {32}}, dsrc.address(), ddst.address(),
                                     valid);
      std::vector<uint8_t> dst = from_device<uint8_t>(ddst);
      for (uint32_t i = 0; i < kBytes; ++i)
        ASSERT_EQ(dst[i], i < valid ? src[i] : 0)
            << kernel << ", valid " << valid << ", byte " << i;
    }
  }
}

TEST_F(CpAsync, WaitGroupCompletesTheOlderGroup) {
  Module module = load(kSource, "cp_async_test.cu");
  std::vector<uint8_t> src = random_bytes(2 * kBytes);
  DeviceBuffer dsrc = to_device(src), ddst(2 * kBytes);
  module.function("two_groups")
      .launch({.grid = {1}, .block = {64}}, dsrc.address(), ddst.address());
  EXPECT_EQ(from_device<uint8_t>(ddst), src);
}
