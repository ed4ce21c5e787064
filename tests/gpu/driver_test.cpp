// \file driver_test.cpp
// The dlopen'ed CUDA driver. On a GPU: buffers round trip, kernels launch with scalar and pointer
// arguments, function attributes agree with the ptxas report, dynamic shared memory above 48 KiB
// works once allowed, events time, and failing calls name themselves. Without one:
// driver_available() says why and using the driver is a user error that says what to do.
#include <cuda.h>  // only to check the enum values Driver.h declares itself

#include <cstring>

#include "GpuTest.h"

using namespace kintsugi;
using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;

static_assert(static_cast<int>(FunctionAttribute::MaxThreadsPerBlock) ==
              CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
static_assert(static_cast<int>(FunctionAttribute::SharedSizeBytes) ==
              CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
static_assert(static_cast<int>(FunctionAttribute::LocalSizeBytes) ==
              CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
static_assert(static_cast<int>(FunctionAttribute::NumRegs) == CU_FUNC_ATTRIBUTE_NUM_REGS);
static_assert(static_cast<int>(FunctionAttribute::MaxDynamicSharedSizeBytes) ==
              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
static_assert(static_cast<int>(TensorMapSwizzle::None) == CU_TENSOR_MAP_SWIZZLE_NONE);
static_assert(static_cast<int>(TensorMapSwizzle::B32) == CU_TENSOR_MAP_SWIZZLE_32B);
static_assert(static_cast<int>(TensorMapSwizzle::B64) == CU_TENSOR_MAP_SWIZZLE_64B);
static_assert(static_cast<int>(TensorMapSwizzle::B128) == CU_TENSOR_MAP_SWIZZLE_128B);
// The codes encode_tensor_map passes (Driver.cpp) and TensorMap's size and alignment.
static_assert(CU_TENSOR_MAP_DATA_TYPE_UINT8 == 0 && CU_TENSOR_MAP_DATA_TYPE_FLOAT16 == 6 &&
              CU_TENSOR_MAP_DATA_TYPE_FLOAT32 == 7 && CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == 9);
static_assert(CU_TENSOR_MAP_INTERLEAVE_NONE == 0 && CU_TENSOR_MAP_L2_PROMOTION_L2_128B == 2 &&
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE == 0);
static_assert(sizeof(TensorMap) == sizeof(CUtensorMap) &&
              alignof(TensorMap) == alignof(CUtensorMap));

namespace {

const char* kKernels = R"(
extern "C" __global__ void axpy(float a, const float* x, float* y, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void reverse_in_shared(const float* in, float* out, unsigned n) {
  extern __shared__ float dynamic[];
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) dynamic[i] = in[i];
  __syncthreads();
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = dynamic[n - 1 - i];
}

extern "C" __global__ void spin(float* out, unsigned iterations) {
  float v = threadIdx.x;
  for (unsigned i = 0; i < iterations; ++i) v = v * 0.999f + 1.f;
  out[threadIdx.x] = v;
}
)";

}  // namespace

TEST(DriverWithoutGpu, UsingItIsAUserErrorThatSaysWhy) {
  std::string why;
  if (driver_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why.empty());
  try {
    DeviceBuffer buffer(16);
    FAIL() << "allocated without a driver";
  } catch (const RuntimeArgError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(why), std::string::npos) << what;
    EXPECT_NE(what.find("--target cpu"), std::string::npos) << what;
  }
}

using Driver = GpuTest;

TEST_F(Driver, DescribesTheDevice) {
  const DeviceInfo& d = device();
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.cc_major, 8) << "the CUDA back end targets sm_80 and later";
  EXPECT_GT(d.multiprocessors, 0);
  EXPECT_GE(d.max_shared_bytes_per_block_optin, 48 * 1024);
  std::string arch = "sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
  EXPECT_EQ(d.arch(), d.cc_major >= 9 ? arch + "a" : arch);
  std::cout << "[ device   ] " << d.name << ", " << d.arch() << ", " << d.multiprocessors
            << " SMs\n";
}

TEST_F(Driver, BuffersRoundTrip) {
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f - 7.f;
  DeviceBuffer buffer = to_device(host);
  EXPECT_EQ(from_device<float>(buffer), host);
  buffer.fill(0xab);
  for (uint32_t bits : from_device<uint32_t>(buffer)) ASSERT_EQ(bits, 0xababababu);
  float four[4] = {1.f, 2.f, 3.f, 4.f};
  buffer.upload(four, sizeof(four), 16);
  float back[6];
  buffer.download(back, sizeof(back), 8);
  uint32_t filler;
  std::memcpy(&filler, &back[0], 4);
  EXPECT_EQ(filler, 0xababababu);
  EXPECT_EQ(back[2], 1.f);
  EXPECT_EQ(back[5], 4.f);
  EXPECT_THROW(buffer.upload(four, sizeof(four), buffer.size() - 8), RuntimeArgError);
  EXPECT_THROW(buffer.download(back, 8, buffer.size() + 1), RuntimeArgError);
  DeviceBuffer moved = std::move(buffer);
  EXPECT_EQ(moved.size(), 4000u);
  EXPECT_EQ(buffer.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from state is empty
  EXPECT_EQ(DeviceBuffer(0).address(), 0u);
}

TEST_F(Driver, LaunchesWithScalarAndPointerArguments) {
  CompiledModule compiled = compile_cuda(kKernels, "driver_kernels.cu", device().arch());
  Module module(compiled.cubin);
  Function axpy = module.function("axpy");
  const unsigned n = 1000;  // not a multiple of the block
  std::vector<float> x(n), y(n);
  for (unsigned i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.f;
  }
  DeviceBuffer dx = to_device(x), dy = to_device(y);
  axpy.launch({.grid = {(n + 127) / 128}, .block = {128}}, 2.f, dx.address(), dy.address(), n);
  std::vector<float> out = from_device<float>(dy);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(out[i], 2.f * x[i] + 1.f) << i;
  EXPECT_EQ(axpy.attribute(FunctionAttribute::NumRegs), compiled.resources.find("axpy")->registers);
  EXPECT_GE(axpy.attribute(FunctionAttribute::MaxThreadsPerBlock), 128);
}

TEST_F(Driver, DynamicSharedMemoryAbove48KiBOnceAllowed) {
  Module module = load(kKernels, "driver_kernels.cu");
  Function reverse = module.function("reverse_in_shared");
  const unsigned n = 16 * 1024;  // 64 KiB of floats
  std::vector<float> in(n);
  for (unsigned i = 0; i < n; ++i) in[i] = static_cast<float>(i);
  DeviceBuffer din = to_device(in), dout(n * sizeof(float));
  LaunchConfig config{.grid = {1}, .block = {256}, .dynamic_shared_bytes = n * sizeof(float)};
  try {
    reverse.launch(config, din.address(), dout.address(), n);
    FAIL() << "64 KiB of dynamic shared memory launched without opting in";
  } catch (const CudaDriverError& e) {
    EXPECT_NE(std::string(e.what()).find("cuLaunchKernel(reverse_in_shared)"), std::string::npos)
        << e.what();
  }
  reverse.set_max_dynamic_shared_bytes(static_cast<int>(n * sizeof(float)));
  reverse.launch(config, din.address(), dout.address(), n);
  std::vector<float> out = from_device<float>(dout);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(out[i], in[n - 1 - i]) << i;
}

TEST_F(Driver, MissingKernelNamesTheCall) {
  Module module = load(kKernels, "driver_kernels.cu");
  try {
    module.function("no_such_kernel");
    FAIL() << "found a kernel that does not exist";
  } catch (const CudaDriverError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("cuModuleGetFunction(no_such_kernel)"), std::string::npos) << what;
    EXPECT_NE(what.find("CUDA_ERROR_NOT_FOUND"), std::string::npos) << what;
    EXPECT_EQ(e.code(), CUDA_ERROR_NOT_FOUND);
  }
}

TEST_F(Driver, EventsTimeALaunch) {
  Module module = load(kKernels, "driver_kernels.cu");
  Function spin = module.function("spin");
  DeviceBuffer out(256 * sizeof(float));
  Event start, end;
  start.record();
  spin.launch({.grid = {1}, .block = {256}}, out.address(), 1u << 20);
  end.record();
  float ms = Event::elapsed_ms(start, end);
  EXPECT_GT(ms, 0.f);
  EXPECT_LT(ms, 10000.f);
  synchronize();
}
