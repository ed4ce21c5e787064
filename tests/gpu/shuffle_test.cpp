// \file shuffle_test.cpp
// shuffle.cuh on a GPU: xor exchange, and butterfly max and sum over quads (xor 1, 2), over lanes
// with equal lane % 4 (xor 4, 8, 16) and over the whole warp, with NaN propagating through max.
// Inputs are small integers, so sums are exact in any order.
#include <cmath>
#include <random>

#include "GpuTest.h"

using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;

namespace {

const char* kSource = R"(
#include "kintsugi/ids.cuh"
#include "kintsugi/shuffle.cuh"
using namespace kintsugi::device;

extern "C" __global__ void butterflies(const float* in, float* out) {
  const u32 lane = lane_id();
  const float v = in[lane];
  out[0 * 32 + lane] = warp_max_xor<1, 2>(v);
  out[1 * 32 + lane] = warp_sum_xor<1, 2>(v);
  out[2 * 32 + lane] = warp_max_xor<4, 8, 16>(v);
  out[3 * 32 + lane] = warp_sum_xor<4, 8, 16>(v);
  out[4 * 32 + lane] = warp_max_xor<16, 1, 8, 2, 4>(v);
  out[5 * 32 + lane] = warp_sum_xor<1, 2, 4, 8, 16>(v);
  out[6 * 32 + lane] = shfl_xor(v, 5);
}
)";

struct Case {
  const char* name;
  unsigned lane_bits;  // the lane bits the butterfly spans
  bool max;
};
const Case kCases[] = {{"max<1,2>", 3, true},         {"sum<1,2>", 3, false},
                       {"max<4,8,16>", 28, true},     {"sum<4,8,16>", 28, false},
                       {"max<16,1,8,2,4>", 31, true}, {"sum<1,2,4,8,16>", 31, false}};

void check(const std::vector<float>& in, const std::vector<float>& out) {
  for (int c = 0; c < 6; ++c) {
    const Case& k = kCases[c];
    for (unsigned lane = 0; lane < 32; ++lane) {
      float expected = k.max ? -INFINITY : 0.f;
      for (unsigned other = 0; other < 32; ++other) {
        if ((other & ~k.lane_bits) != (lane & ~k.lane_bits)) continue;
        float v = in[other];
        expected = k.max ? (std::isnan(v) || std::isnan(expected) ? NAN : std::max(expected, v))
                         : expected + v;
      }
      float got = out[c * 32 + lane];
      if (std::isnan(expected))
        EXPECT_TRUE(std::isnan(got)) << k.name << ", lane " << lane << ": " << got;
      else
        EXPECT_EQ(got, expected) << k.name << ", lane " << lane;
    }
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    float expected = in[lane ^ 5], got = out[6 * 32 + lane];
    if (std::isnan(expected))
      EXPECT_TRUE(std::isnan(got)) << "shfl_xor 5, lane " << lane;
    else
      EXPECT_EQ(got, expected) << "shfl_xor 5, lane " << lane;
  }
}

}  // namespace

using Shuffle = GpuTest;

TEST_F(Shuffle, ButterfliesCombineTheRightLanes) {
  Module module = load(kSource, "shuffle_test.cu");
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> d(-100, 100);
  std::vector<float> in(32);
  for (float& x : in) x = static_cast<float>(d(rng));
  for (bool with_nan : {false, true}) {
    if (with_nan) in[6] = NAN;
    DeviceBuffer din = to_device(in), dout(7 * 32 * sizeof(float));
    module.function("butterflies")
        .launch({.grid = {1}, .block = {32}}, din.address(), dout.address());
    check(in, from_device<float>(dout));
  }
}
