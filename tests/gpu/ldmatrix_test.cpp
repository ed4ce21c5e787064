// \file ldmatrix_test.cpp
// ldmatrix.cuh on a GPU: x1, x2 and x4, plain and transposed, move exactly the 16-bit values the
// PTX ISA assigns to each lane and register (random bit patterns, compared bit for bit).
#include <random>

#include "GpuTest.h"

using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;

namespace {

const char* kSource = R"(
#include "kintsugi/ldmatrix.cuh"
using namespace kintsugi::device;

// Four 8x8 matrices of u16, matrix j row r at tile[j * 64 + r * 8]; lane l points at row l % 8 of
// matrix l / 8. out[variant * 128 + lane * 4 + register], unused registers 0.
extern "C" __global__ void ldmatrix_all(const u16* in, u32* out) {
  __shared__ alignas(16) u16 tile[4 * 64];
  const u32 lane = threadIdx.x;
  for (u32 i = lane; i < 4 * 64; i += 32) tile[i] = in[i];
  __syncwarp();
  const u32 row = smem_addr(&tile[(lane / 8) * 64 + (lane % 8) * 8]);
  u32 x1[1], x2[2], x4[4], t1[1], t2[2], t4[4];
  ldmatrix_x1(x1, row);
  ldmatrix_x2(x2, row);
  ldmatrix_x4(x4, row);
  ldmatrix_x1_trans(t1, row);
  ldmatrix_x2_trans(t2, row);
  ldmatrix_x4_trans(t4, row);
  auto put = [&](int variant, const u32* r, int n) {
    for (int j = 0; j < 4; ++j) out[variant * 128 + lane * 4 + j] = j < n ? r[j] : 0u;
  };
  put(0, x1, 1);
  put(1, x2, 2);
  put(2, x4, 4);
  put(3, t1, 1);
  put(4, t2, 2);
  put(5, t4, 4);
}
)";

}  // namespace

using Ldmatrix = GpuTest;

TEST_F(Ldmatrix, MovesTheDocumentedElements) {
  Module module = load(kSource, "ldmatrix_test.cu");
  std::mt19937 rng(7);
  std::vector<uint16_t> tile(4 * 64);
  for (uint16_t& x : tile) x = static_cast<uint16_t>(rng());
  DeviceBuffer in = to_device(tile), out(6 * 128 * sizeof(uint32_t));
  module.function("ldmatrix_all").launch({.grid = {1}, .block = {32}}, in.address(), out.address());
  std::vector<uint32_t> got = from_device<uint32_t>(out);
  auto element = [&](int matrix, int row, int col) -> uint32_t {
    return tile[matrix * 64 + row * 8 + col];
  };
  const char* names[6] = {"x1", "x2", "x4", "x1.trans", "x2.trans", "x4.trans"};
  for (int v = 0; v < 6; ++v) {
    const int count = 1 << (v % 3);
    const bool trans = v >= 3;
    for (int lane = 0; lane < 32; ++lane)
      for (int j = 0; j < 4; ++j) {
        uint32_t expected = 0;
        if (j < count) {
          const int a = lane / 4, b = 2 * (lane % 4);
          expected = trans ? element(j, b, a) | element(j, b + 1, a) << 16
                           : element(j, a, b) | element(j, a, b + 1) << 16;
        }
        ASSERT_EQ(got[v * 128 + lane * 4 + j], expected)
            << names[v] << ", lane " << lane << ", register " << j;
      }
  }
}
