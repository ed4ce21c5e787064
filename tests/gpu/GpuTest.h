// \file GpuTest.h
// The fixture of the gpu tier: skips (GTEST_SKIP, reported by CTest as "Skipped") where no CUDA
// driver or device is available, compiles kernels for the device's own architecture, and moves
// vectors to and from the device.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "target/cuda/Driver.h"
#include "target/cuda/Nvrtc.h"

namespace kintsugi::cuda::test {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!driver_available(&why)) GTEST_SKIP() << "no usable CUDA GPU: " << why;
  }

  // Compiles `source` with NVRTC for this device and loads the cubin.
  static Module load(const std::string& source, const std::string& name) {
    return Module(compile_cuda(source, name, device().arch()).cubin);
  }
};

template <typename T>
DeviceBuffer to_device(const std::vector<T>& host) {
  DeviceBuffer buffer(host.size() * sizeof(T));
  buffer.upload(host.data(), buffer.size());
  return buffer;
}

template <typename T>
std::vector<T> from_device(const DeviceBuffer& buffer) {
  std::vector<T> host(buffer.size() / sizeof(T));
  buffer.download(host.data(), host.size() * sizeof(T));
  return host;
}

}  // namespace kintsugi::cuda::test
