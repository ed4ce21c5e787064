// \file ids_test.cpp
// ids.cuh on a GPU: lane and warp ids of a 128-thread block, and named barriers handing data from
// a producer warp (bar_arrive) to a consumer warp (bar_sync) in two independent warp pairs.
#include "GpuTest.h"

using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;

namespace {

const char* kSource = R"(
#include "kintsugi/ids.cuh"
using namespace kintsugi::device;

// Warps 1 and 3 produce, warps 0 and 2 consume; pair p = warp / 2 uses barrier 1 + p.
extern "C" __global__ void ids_and_barriers(u32* ids, float* handed) {
  __shared__ float mailbox[2][32];
  const u32 lane = lane_id(), warp = warp_id(), pair = warp / 2;
  ids[threadIdx.x] = lane | warp << 8;
  if (warp % 2 == 1) {
    mailbox[pair][lane] = 100.f * pair + lane;
    bar_arrive(1 + pair, 64);
  } else {
    bar_sync(1 + pair, 64);
    handed[pair * 32 + lane] = mailbox[pair][lane];
  }
  sync_warp();
  sync_threads();
}
)";

}  // namespace

using Ids = GpuTest;

TEST_F(Ids, LaneWarpAndNamedBarriers) {
  Module module = load(kSource, "ids_test.cu");
  DeviceBuffer ids(128 * sizeof(uint32_t)), handed(64 * sizeof(float));
  module.function("ids_and_barriers")
      .launch({.grid = {1}, .block = {128}}, ids.address(), handed.address());
  std::vector<uint32_t> got = from_device<uint32_t>(ids);
  for (uint32_t t = 0; t < 128; ++t) EXPECT_EQ(got[t], (t % 32) | (t / 32) << 8) << "thread " << t;
  std::vector<float> values = from_device<float>(handed);
  for (int pair = 0; pair < 2; ++pair)
    for (int lane = 0; lane < 32; ++lane)
      EXPECT_EQ(values[pair * 32 + lane], 100.f * pair + lane)
          << "pair " << pair << ", lane " << lane;
}
