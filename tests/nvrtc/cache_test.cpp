// \file cache_test.cpp
// The disk cache of compiled modules: a second compile of the same inputs is a hit that returns
// the same PTX, cubin and log; any change of source, options or arch is a miss; a damaged entry is
// never used but rebuilt.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "support/DiskCache.h"
#include "target/cuda/Nvrtc.h"

using namespace kintsugi;
using namespace kintsugi::cuda;
namespace fs = std::filesystem;

namespace {

const char* kSource = R"(
#include "kintsugi/math.cuh"
extern "C" __global__ void scale(float* x, float s) {
  x[threadIdx.x] = kintsugi::device::ex2_approx(x[threadIdx.x] * s);
}
)";

class CudaCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kintsugi-cuda-cache-test-" + disk_cache::unique_tag());
    options_.cache_dir = dir_.string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  NvrtcOptions options_;
};

}  // namespace

TEST_F(CudaCache, SecondCompileIsAHit) {
  CompiledModule cold = compile_cuda(kSource, "scale.cu", "sm_90a", options_);
  CompiledModule warm = compile_cuda(kSource, "scale.cu", "sm_90a", options_);
  std::cout << "[ timing   ] scale for sm_90a: cold " << cold.seconds * 1e3 << " ms, cached "
            << warm.seconds * 1e3 << " ms\n";
  EXPECT_FALSE(cold.from_cache);
  EXPECT_TRUE(warm.from_cache);
  EXPECT_EQ(warm.cache_key, cold.cache_key);
  EXPECT_EQ(warm.ptx, cold.ptx);
  EXPECT_EQ(warm.cubin, cold.cubin);
  EXPECT_EQ(warm.log, cold.log);
  ASSERT_NE(warm.resources.find("scale"), nullptr);
  EXPECT_EQ(warm.resources.find("scale")->registers, cold.resources.find("scale")->registers);
  EXPECT_TRUE(fs::exists(dir_ / (cold.cache_key + ".cumodule")));
  EXPECT_TRUE(fs::exists(dir_ / (cold.cache_key + ".cumodule.meta")));
}

TEST_F(CudaCache, AnyInputChangeIsAMiss) {
  CompiledModule base = compile_cuda(kSource, "scale.cu", "sm_90a", options_);
  NvrtcOptions line_info = options_;
  line_info.line_info = true;
  std::vector<CompiledModule> variants;
  variants.push_back(compile_cuda(std::string(kSource) + "\n", "scale.cu", "sm_90a", options_));
  variants.push_back(compile_cuda(kSource, "scale2.cu", "sm_90a", options_));
  variants.push_back(compile_cuda(kSource, "scale.cu", "sm_80", options_));
  variants.push_back(compile_cuda(kSource, "scale.cu", "sm_90a", line_info));
  for (const CompiledModule& v : variants) {
    EXPECT_FALSE(v.from_cache);
    EXPECT_NE(v.cache_key, base.cache_key);
  }
}

TEST_F(CudaCache, DamagedEntryIsRebuilt) {
  CompiledModule cold = compile_cuda(kSource, "scale.cu", "sm_80", options_);
  fs::path payload = dir_ / (cold.cache_key + ".cumodule");
  // Same size, one byte changed: only the content hash can tell.
  std::string bytes;
  ASSERT_TRUE(disk_cache::read_file(payload, &bytes));
  bytes[bytes.size() / 2] ^= 0x5a;
  ASSERT_TRUE(disk_cache::write_atomic(payload, bytes));
  CompiledModule rebuilt = compile_cuda(kSource, "scale.cu", "sm_80", options_);
  EXPECT_FALSE(rebuilt.from_cache);
  EXPECT_EQ(rebuilt.cubin, cold.cubin);
  EXPECT_TRUE(compile_cuda(kSource, "scale.cu", "sm_80", options_).from_cache);
}

TEST_F(CudaCache, DisabledCacheWritesNothing) {
  NvrtcOptions off = options_;
  off.use_cache = false;
  compile_cuda(kSource, "scale.cu", "sm_80", off);
  EXPECT_FALSE(compile_cuda(kSource, "scale.cu", "sm_80", off).from_cache);
  EXPECT_TRUE(!fs::exists(dir_) || fs::is_empty(dir_));
}
