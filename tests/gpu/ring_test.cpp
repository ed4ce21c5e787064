// \file ring_test.cpp
// The warp-specialised two-stage TMA / wgmma pipeline of tests/emu/ring_cases.h on a Hopper GPU,
// from the same device code the emulator's self-test runs: full and empty mbarriers, a producer
// warpgroup with fewer registers, D = C + sum of eight tile products, exactly. Skipped on GPUs
// before sm_90.
#include "../emu/ring_cases.h"
#include "../emu/wgmma_cases.h"
#include "GpuTest.h"

using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;
namespace ring = kintsugi::test::ring;

using Ring = GpuTest;

TEST_F(Ring, PipelineMatchesTheCpuExactly) {
  if (device().cc_major < 9) GTEST_SKIP() << "TMA, wgmma and setmaxnreg need sm_90a";
  Module module = load(ring::device_source(), "ring_test.cu");
  ring::Inputs in = ring::inputs();
  DeviceBuffer da = to_device(in.a16), db = to_device(in.b16), dc = to_device(in.c),
               dd = to_device(std::vector<float>(64 * 64, -1.f));
  const TensorMap ma = encode_tensor_map(kintsugi::test::tma::spec(
                      reinterpret_cast<void*>(da.address()), ring::kRows)),
                  mb = encode_tensor_map(kintsugi::test::tma::spec(
                      reinterpret_cast<void*>(db.address()), ring::kRows));
  module.function("ring_gemm_kernel")
      .launch({.grid = {1}, .block = {256}, .dynamic_shared_bytes = ring::kSharedBytes}, ma, mb,
              dc.address(), dd.address(), 0u);
  EXPECT_EQ(kintsugi::test::wgmma::mismatches(from_device<float>(dd), ring::reference(in)), 0);
}
