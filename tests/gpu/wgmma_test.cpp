// \file wgmma_test.cpp
// wgmma.cuh and smem_desc.cuh on a Hopper GPU: the tiles of tests/emu/wgmma_cases.h (every shape,
// operand type, swizzle and major-ness the emulator's self-test runs, from the same device code)
// against a CPU matmul, exactly. The emulator's model of the shared-memory layouts and of the
// fragments is right where these pass on the H200. Skipped on GPUs before sm_90.
#include "../emu/wgmma_cases.h"
#include "GpuTest.h"

using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;
namespace cases = kintsugi::test::wgmma;

using Wgmma = GpuTest;

TEST_F(Wgmma, TilesMatchTheCpuExactly) {
  if (device().cc_major < 9) GTEST_SKIP() << "wgmma needs sm_90a";
  Module module = load(cases::device_source(), "wgmma_test.cu");
  for (const cases::Case& c : cases::cases())
    for (unsigned flags : {0u, 4u}) {  // D = A B + C, and A B alone (scale-d false)
      cases::Inputs in = cases::inputs(c.n);
      DeviceBuffer dA = to_device(in.a), dB = to_device(in.b), dC = to_device(in.c),
                   dD = to_device(std::vector<float>(size_t(64 * c.n), -1.f));
      module.function(c.kernel).launch(
          {.grid = {1}, .block = {128}, .dynamic_shared_bytes = cases::kSharedBytes}, dA.address(),
          dB.address(), dC.address(), dD.address(), flags);
      std::vector<float> want = cases::reference(in, c.n, flags == 0), got = from_device<float>(dD);
      EXPECT_EQ(cases::mismatches(got, want), 0) << c.kernel << " flags " << flags;
    }
}
