// \file enqueue_test.cpp
// CudaKernel::enqueue on device memory the caller owns (the path of the Python module's
// target="cuda" with device tensors). On a GPU: the results equal run()'s bit for bit, on the
// default stream and on a named one, the inputs are left as they were, and every bad tensor
// (count, dtype, shape, strides, alignment, device, no memory) is refused before any launch with
// a message that names the buffer, so the caller's output is never touched (nor poisoned). The
// launches are asynchronous: a failed index check inside a kernel is reported by check() (once),
// or by enqueue itself when launches are checked; the workspace grows with the sizes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>

#include "GpuTest.h"
#include "driver/Driver.h"
#include "runtime/Runner.h"
#include "target/cuda/CudaBackend.h"
#include "te/Lower.h"
#include "te/Program.h"
#include "tile/Translate.h"

using namespace kintsugi;
using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;

namespace {

using Ref = CudaKernel::DeviceTensorRef;

const runtime::SizeMap kSizes = {{"M", 8}, {"N", 100}};

// examples/norm/softmax.te (X: f32[M, N] -> Y: f32[M, N]) in tile form at kSizes.
tile::TileProgram tiles(const std::string& path, const runtime::SizeMap& sizes) {
  ir::LoopProgram lp = driver::load_file(std::string(KINTSUGI_SOURCE_DIR) + "/" + path);
  driver::ScheduleOptions o;
  o.sizes = sizes;
  return driver::to_tiles(driver::schedule_program(lp, o), sizes, lp.name);
}

tile::TileProgram softmax() {
  return tiles("examples/norm/softmax.te", kSizes);
}

std::vector<uint8_t> bytes_of(const DeviceBuffer& b) {
  std::vector<uint8_t> out(b.size());
  b.download(out.data(), out.size());
  return out;
}

class RunDevice : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    kernel = std::make_unique<CudaKernel>(softmax(), device().arch());
    x = runtime::Tensor(DType::F32, {8, 100});
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 3.0 * std::sin(0.37 * static_cast<double>(i)));
    dx = DeviceBuffer(x.data.size());
    dx.upload(x.ptr(), x.data.size());
    dy = DeviceBuffer(x.data.size());
  }

  Ref input() const { return {DType::F32, {8, 100}, {}, dx.address(), device().ordinal}; }
  Ref output() const { return {DType::F32, {8, 100}, {100, 1}, dy.address(), device().ordinal}; }

  // The host path's result, for comparison.
  std::vector<uint8_t> expected() {
    runtime::Tensor host_x = x, host_y(DType::F32, {8, 100});
    kernel->run({&host_x, &host_y}, kSizes, {});
    return {host_y.data.begin(), host_y.data.end()};
  }

  std::unique_ptr<CudaKernel> kernel;
  runtime::Tensor x;
  DeviceBuffer dx, dy;
};

}  // namespace

TEST_F(RunDevice, MatchesRunWithoutCopies) {
  std::vector<uint8_t> want = expected();
  dy.fill(0x5a);  // an element no kernel writes stays 0x5a5a5a5a
  kernel->enqueue({input(), output()}, kSizes, {});
  EXPECT_EQ(bytes_of(dy), want);  // the copy waits for the legacy default stream
  EXPECT_EQ(bytes_of(dx),
            std::vector<uint8_t>(x.data.begin(), x.data.end()));  // inputs are read only

  dy.fill(0);
  void* legacy_stream = reinterpret_cast<void*>(uintptr_t{1});  // CU_STREAM_LEGACY
  kernel->enqueue({input(), output()}, kSizes, {}, legacy_stream);
  EXPECT_EQ(bytes_of(dy), want);
  kernel->check();  // nothing failed
}

// The host cost of a call: verified first, then batches of calls that never wait for the GPU (few
// enough that the launch queue never fills). Printed; a bound far above the target (5 us) catches
// a call path that synchronises or allocates.
TEST_F(RunDevice, HostCostPerCall) {
  std::vector<uint8_t> want = expected();
  kernel->enqueue({input(), output()}, kSizes, {});
  ASSERT_EQ(bytes_of(dy), want);
  std::vector<double> per_call;
  for (int batch = 0; batch < 25; ++batch) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) kernel->enqueue({input(), output()}, kSizes, {});
    per_call.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        200);
    synchronize();
  }
  std::sort(per_call.begin(), per_call.end());
  double median = per_call[per_call.size() / 2];
  std::cout << "enqueue host cost: " << median << " us per call (softmax 8x100, one launch)\n";
  EXPECT_LT(median, 50.0);
  kernel->check();
}

TEST_F(RunDevice, RefusesBadTensorsBeforeAnyLaunch) {
  dy.fill(0x5a);
  auto refused = [&](std::vector<Ref> args, const std::vector<std::string>& parts) {
    try {
      kernel->enqueue(args, kSizes, {});
      ADD_FAILURE() << "ran with a bad tensor (expected: " << parts.front() << ")";
    } catch (const RuntimeArgError& e) {
      std::string what = e.what();
      for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
    }
  };
  refused({input()}, {"takes 2 tensors", "X, Y", "got 1"});

  Ref bad = input();
  bad.dtype = DType::F16;
  refused({bad, output()}, {"input X has dtype f16, expected f32"});

  bad = input();
  bad.shape = {8, 99};
  refused({bad, output()}, {"input X has shape [8, 99], expected [M, N] = [8, 100]"});

  bad = output();
  bad.strides = {1, 8};
  refused({input(), bad}, {"output Y is not contiguous row-major", "strides [1, 8]"});

  bad = input();
  bad.address += 4;
  refused({bad, output()}, {"input X starts at device address 0x", "16 bytes"});

  bad = input();
  bad.device = device().ordinal + 1;
  refused({bad, output()}, {"input X is on CUDA device", "x.to('cuda:"});

  bad = output();
  bad.address = 0;
  refused({input(), bad}, {"output Y has no device memory"});

  for (uint8_t b : bytes_of(dy)) ASSERT_EQ(b, 0x5a) << "the output was written";
}

// A target id outside the vocabulary (tests/generality/cross_entropy.te gathers X[r, TGT[r]]):
// the call returns, check() reports the failed check once; a kernel whose launches are checked
// reports it from the call.
TEST(Enqueue, FailedChecksAreReportedByCheck) {
  if (!driver_available()) GTEST_SKIP() << "no GPU";
  const runtime::SizeMap sizes = {{"M", 5}, {"N", 100}};
  CudaKernel kernel(tiles("tests/generality/cross_entropy.te", sizes), device().arch());
  std::vector<float> x(500, 0.5f);
  std::vector<int32_t> target = {0, 1, 2, 100, 4};
  DeviceBuffer dx = to_device(x), dt = to_device(target), dloss(5 * sizeof(float));
  std::vector<Ref> args = {{DType::F32, {5, 100}, {}, dx.address(), device().ordinal},
                           {DType::I32, {5}, {}, dt.address(), device().ordinal},
                           {DType::F32, {5}, {}, dloss.address(), device().ordinal}};
  kernel.enqueue(args, sizes, {});  // returns: the failure is on the device
  try {
    kernel.check();
    ADD_FAILURE() << "an out-of-range target id passed check()";
  } catch (const RuntimeArgError& e) {
    EXPECT_NE(std::string(e.what()).find("failed at X"), std::string::npos) << e.what();
  }
  kernel.check();  // reported once

  kernel.set_check_each_launch(true);
  EXPECT_THROW(kernel.enqueue(args, sizes, {}), RuntimeArgError);
  target[3] = 3;
  dt.upload(target.data(), target.size() * sizeof(int32_t));
  kernel.enqueue(args, sizes, {});
  std::vector<float> loss = from_device<float>(dloss);
  for (float l : loss) EXPECT_NEAR(l, std::log(100.0f), 1e-4f);  // equal logits: log N
}

// Split-K decode keeps its partials in the workspace: one kernel run at a longer T needs more,
// which that call allocates; results equal run()'s at every size, shorter again after longer.
TEST(Enqueue, WorkspaceGrowsWithTheSizes) {
  if (!driver_available()) GTEST_SKIP() << "no GPU";
  const std::string path = "examples/attention/decode_causal.te";
  auto sizes_at = [](int64_t t) {
    return runtime::SizeMap{{"B", 1}, {"H", 2}, {"S", 1}, {"T", t}, {"D", 64}};
  };
  tile::TileProgram program = tiles(path, sizes_at(3000));
  CudaKernel kernel(program, device().arch());
  ir::LoopProgram source = driver::load_file(std::string(KINTSUGI_SOURCE_DIR) + "/" + path);
  for (int64_t t : {1000, 3000, 9000, 2000}) {
    runtime::SizeMap sizes = sizes_at(t);
    std::map<std::string, runtime::Tensor> in = runtime::random_inputs(source, sizes, 7);
    std::vector<runtime::Tensor> outs;
    std::vector<runtime::Tensor*> host;
    std::vector<DeviceBuffer> memory;
    std::vector<Ref> args;
    outs.reserve(program.source.buffers.size());
    for (const ir::Buffer& b : program.source.buffers) {
      if (b.role == ir::BufferRole::Intermediate) continue;
      runtime::Tensor& h = b.role == ir::BufferRole::Input
                               ? in.at(b.name)
                               : outs.emplace_back(b.dtype, ir::eval_shape(b.shape, sizes, {}));
      host.push_back(&h);
      DeviceBuffer& d = memory.emplace_back(h.data.size());
      d.upload(h.ptr(), h.data.size());
      args.push_back({h.dtype, h.shape, {}, d.address(), device().ordinal});
    }
    kernel.run(host, sizes, {});  // the host path, into the host outputs
    kernel.enqueue(args, sizes, {});
    std::vector<uint8_t> got(host.back()->data.size());
    memory.back().download(got.data(), got.size());
    EXPECT_EQ(got, std::vector<uint8_t>(host.back()->data.begin(), host.back()->data.end()))
        << "T=" << t;
  }
  kernel.check();
}
