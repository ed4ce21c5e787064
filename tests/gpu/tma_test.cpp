// \file tma_test.cpp
// tma.cuh, mbarrier.cuh and encode_tensor_map on a Hopper GPU: the scores tile of
// tests/emu/tma_cases.h (Q and K boxes loaded by TMA in the 128-byte swizzle, rows past the
// tensor zero-filled, four wgmma k-steps, D stored by TMA) against a CPU matmul, exactly, from the
// same device code the emulator's self-test runs. Skipped on GPUs before sm_90.
#include "../emu/tma_cases.h"
#include "../emu/wgmma_cases.h"
#include "GpuTest.h"

using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;
namespace tma = kintsugi::test::tma;

using Tma = GpuTest;

TEST_F(Tma, ScoresTileMatchesTheCpuExactly) {
  if (device().cc_major < 9) GTEST_SKIP() << "TMA and wgmma need sm_90a";
  Module module = load(tma::device_source(), "tma_test.cu");
  tma::Inputs in = tma::inputs();
  DeviceBuffer dq = to_device(in.q16), dk = to_device(in.k16), dc = to_device(in.c),
               dd = to_device(std::vector<float>(64 * 64, -1.f));
  auto map = [](const TensorMapSpec& s) { return encode_tensor_map(s); };
  const TensorMap mq = map(tma::spec(reinterpret_cast<void*>(dq.address()), tma::kQRows)),
                  mk = map(tma::spec(reinterpret_cast<void*>(dk.address()), tma::kKeys)),
                  md = map(tma::output_spec(reinterpret_cast<void*>(dd.address())));
  module.function("tma_scores_kernel")
      .launch({.grid = {1}, .block = {128}, .dynamic_shared_bytes = tma::kSharedBytes}, mq, mk, md,
              dc.address(), tma::kRow0, 0u);
  EXPECT_EQ(kintsugi::test::wgmma::mismatches(from_device<float>(dd), tma::reference(in)), 0);
}
