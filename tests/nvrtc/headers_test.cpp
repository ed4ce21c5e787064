// \file headers_test.cpp
// The device header library is embedded byte for byte, and it is the only thing a CUDA source can
// include: NVRTC gets no include path, so neither the toolkit's headers nor unknown names resolve.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "target/cuda/DeviceHeaders.h"
#include "target/cuda/Nvrtc.h"

using namespace kintsugi::cuda;
namespace fs = std::filesystem;

namespace {

NvrtcOptions uncached() {
  NvrtcOptions o;
  o.use_cache = false;
  return o;
}

}  // namespace

TEST(DeviceHeaders, EmbedEverySourceHeaderExactly) {
  fs::path dir = fs::path(KINTSUGI_SOURCE_DIR) / "src/target/cuda/device";
  std::set<std::string> on_disk;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".cuh") on_disk.insert(entry.path().filename().string());
  std::set<std::string> embedded;
  std::string previous;
  for (const DeviceHeader& h : device_headers()) {
    std::string name(h.name);
    ASSERT_EQ(name.rfind("kintsugi/", 0), 0u) << name;
    EXPECT_LT(previous, name) << "headers are listed in name order";
    previous = name;
    std::string file = name.substr(std::string("kintsugi/").size());
    embedded.insert(file);
    std::ifstream in(dir / file, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    EXPECT_EQ(bytes.str(), h.contents) << name << " differs from " << (dir / file);
    EXPECT_EQ(h.contents.rfind("// \\file " + file, 0), 0u) << name << " lacks its header comment";
  }
  EXPECT_EQ(embedded, on_disk);
  EXPECT_EQ(embedded,
            (std::set<std::string>{"cp_async.cuh", "ids.cuh", "ldmatrix.cuh", "math.cuh",
                                   "mbarrier.cuh", "mma.cuh", "shuffle.cuh", "smem_desc.cuh",
                                   "tma.cuh", "types.cuh", "warpgroup.cuh", "wgmma.cuh"}));
}

TEST(DeviceHeaders, HashIsStableAndCoversTheHeaders) {
  EXPECT_NE(device_headers_hash(), 0u);
  EXPECT_EQ(device_headers_hash(), device_headers_hash());
}

TEST(DeviceHeaders, OnlyEmbeddedHeadersResolve) {
  const std::string kernel = "extern \"C\" __global__ void k(float* x) { x[0] = 1.f; }\n";
  EXPECT_NO_THROW(
      compile_cuda("#include \"kintsugi/mma.cuh\"\n" + kernel, "embedded.cu", "sm_80", uncached()));
  for (const char* include : {"#include \"kintsugi/not_a_header.cuh\"\n",
                              "#include <cuda_fp16.h>\n", "#include <cstdint>\n"}) {
    try {
      compile_cuda(include + kernel, "include.cu", "sm_80", uncached());
      FAIL() << include << "resolved without an include path";
    } catch (const CudaCompileError& e) {
      EXPECT_NE(e.log().find("open source file"), std::string::npos) << e.log();
    }
  }
}
