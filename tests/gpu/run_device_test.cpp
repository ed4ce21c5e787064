// \file run_device_test.cpp
// CudaKernel::run_device on device memory the caller owns (the path of the Python module's
// target="cuda" with device tensors). On a GPU: the results equal run()'s bit for bit, on the
// default stream and on a named one, the inputs are left as they were, and every bad tensor
// (count, dtype, shape, strides, alignment, device, no memory) is refused before any launch with
// a message that names the buffer, so the caller's output is never touched (nor poisoned).
#include <cmath>
#include <functional>

#include "GpuTest.h"
#include "driver/Driver.h"
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
tile::TileProgram softmax() {
  ir::LoopProgram lp =
      driver::load_file(std::string(KINTSUGI_SOURCE_DIR) + "/examples/norm/softmax.te");
  driver::ScheduleOptions o;
  o.sizes = kSizes;
  return driver::to_tiles(driver::schedule_program(lp, o), kSizes, "softmax");
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
  double ms = kernel->run_device({input(), output()}, kSizes, {});
  EXPECT_GE(ms, 0.0);
  EXPECT_EQ(bytes_of(dy), want);
  EXPECT_EQ(bytes_of(dx),
            std::vector<uint8_t>(x.data.begin(), x.data.end()));  // inputs are read only

  dy.fill(0);
  void* legacy_stream = reinterpret_cast<void*>(uintptr_t{1});  // CU_STREAM_LEGACY
  kernel->run_device({input(), output()}, kSizes, {}, legacy_stream);
  EXPECT_EQ(bytes_of(dy), want);
}

TEST_F(RunDevice, RefusesBadTensorsBeforeAnyLaunch) {
  dy.fill(0x5a);
  auto refused = [&](std::vector<Ref> args, const std::vector<std::string>& parts) {
    try {
      kernel->run_device(args, kSizes, {});
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
