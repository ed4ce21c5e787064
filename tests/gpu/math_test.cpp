// \file math_test.cpp
// math.cuh on a GPU: ex2_approx and rcp_approx within 2^-21 relative error of the exact values
// (and right at 0, infinities and NaN), NaN-propagating max and min, and the f16 / bf16
// conversions bit for bit against the host's round-to-nearest-even (_Float16, and bf16 by bit
// arithmetic), including f16 subnormals and overflow, with the pair order of the packed forms; the
// e4m3 pair conversion on every float against the software encoder.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "GpuTest.h"
#include "target/Fp8.h"

using namespace kintsugi::cuda;
using namespace kintsugi::cuda::test;

namespace {

const char* kSource = R"(
#include "kintsugi/math.cuh"
using namespace kintsugi::device;

extern "C" __global__ void float_ops(const float* x, const float* y, float* out, u32 n) {
  const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[0 * n + i] = ex2_approx(x[i]);
  out[1 * n + i] = rcp_approx(x[i]);
  out[2 * n + i] = fmax_nan(x[i], y[i]);
  out[3 * n + i] = fmin_nan(x[i], y[i]);
}

extern "C" __global__ void conversions(const float* x, u32* out, u32 n) {
  const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  out[0 * n + i] = pack_f16x2(v, -v);
  out[1 * n + i] = pack_bf16x2(v, -v);
  out[2 * n + i] = f32_to_f16(v) | static_cast<u32>(f32_to_bf16(v)) << 16;
  out[3 * n + i] = __float_as_uint(f16_to_f32(f32_to_f16(v)));
  out[4 * n + i] = __float_as_uint(bf16_to_f32(f32_to_bf16(v)));
  u16 lo, hi;
  split_b32(__float_as_uint(v), lo, hi);
  out[5 * n + i] = hi | static_cast<u32>(lo) << 16;
}
)";

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}
uint32_t f16_bits(float x) {
  _Float16 h = static_cast<_Float16>(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float f16_value(uint32_t b) {
  uint16_t b16 = static_cast<uint16_t>(b);
  _Float16 h;
  std::memcpy(&h, &b16, 2);
  return static_cast<float>(h);
}
uint32_t bf16_bits(float x) {  // round to nearest even (inputs here are never NaN)
  uint32_t b = bits(x);
  return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

}  // namespace

using Math = GpuTest;

TEST_F(Math, FastMathAndNanPropagatingMinMax) {
  Module module = load(kSource, "math_test.cu");
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> range(-30.f, 30.f);
  std::vector<float> x = {0.f, -0.f, 1.f, -1.f, 0.5f, 126.f, -125.f, INFINITY, -INFINITY, NAN};
  std::vector<float> y(x.size(), 2.f);
  y[2] = NAN;  // max and min must be NaN at 2 (y is NaN) and 9 (x is NaN)
  while (x.size() < 1000) {
    x.push_back(range(rng));
    y.push_back(range(rng));
  }
  const uint32_t n = static_cast<uint32_t>(x.size());
  DeviceBuffer dx = to_device(x), dy = to_device(y), dout(4 * n * sizeof(float));
  module.function("float_ops")
      .launch({.grid = {(n + 127) / 128}, .block = {128}}, dx.address(), dy.address(),
              dout.address(), n);
  std::vector<float> out = from_device<float>(dout);
  const double tolerance = std::ldexp(1.0, -21);
  auto near = [&](float got, double exact, const char* what, float input) {
    if (std::isnan(exact)) {
      EXPECT_TRUE(std::isnan(got)) << what << "(" << input << ") = " << got;
    } else if (std::isinf(exact) || exact == 0.0) {
      EXPECT_EQ(got, exact) << what << "(" << input << ")";
    } else {
      EXPECT_LE(std::abs(got - exact) / std::abs(exact), tolerance)
          << what << "(" << input << ") = " << got << ", exact " << exact;
    }
  };
  for (uint32_t i = 0; i < n; ++i) {
    near(out[0 * n + i], std::exp2(double(x[i])), "ex2_approx", x[i]);
    near(out[1 * n + i], 1.0 / double(x[i]), "rcp_approx", x[i]);
    const bool nan = std::isnan(x[i]) || std::isnan(y[i]);
    if (nan) {
      EXPECT_TRUE(std::isnan(out[2 * n + i])) << "fmax_nan(" << x[i] << ", " << y[i] << ")";
      EXPECT_TRUE(std::isnan(out[3 * n + i])) << "fmin_nan(" << x[i] << ", " << y[i] << ")";
    } else {
      EXPECT_EQ(out[2 * n + i], std::max(x[i], y[i])) << "fmax_nan(" << x[i] << ", " << y[i];
      EXPECT_EQ(out[3 * n + i], std::min(x[i], y[i])) << "fmin_nan(" << x[i] << ", " << y[i];
    }
  }
}

TEST_F(Math, ConversionsRoundToNearestEven) {
  Module module = load(kSource, "math_test.cu");
  // Exact halfway cases of both formats, f16 subnormals, f16 overflow, then random magnitudes.
  std::vector<float> x = {1.f + 0x1p-11f,
                          1.f + 3 * 0x1p-11f,
                          1.f + 0x1p-8f,
                          1.f + 3 * 0x1p-8f,
                          1.5f,
                          -2.25f,
                          0x1p-20f,
                          3e-6f,
                          -6e-8f,
                          65504.f,
                          65520.f,
                          1e6f,
                          INFINITY,
                          -INFINITY,
                          0.f,
                          -0.f};
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> exponent(-30.f, 20.f), unit(-1.f, 1.f);
  while (x.size() < 1000) x.push_back(unit(rng) * std::exp2(exponent(rng)));
  const uint32_t n = static_cast<uint32_t>(x.size());
  DeviceBuffer dx = to_device(x), dout(6 * n * sizeof(uint32_t));
  module.function("conversions")
      .launch({.grid = {(n + 127) / 128}, .block = {128}}, dx.address(), dout.address(), n);
  std::vector<uint32_t> out = from_device<uint32_t>(dout);
  for (uint32_t i = 0; i < n; ++i) {
    const float v = x[i];
    EXPECT_EQ(out[0 * n + i], f16_bits(v) | f16_bits(-v) << 16) << "pack_f16x2(" << v << ")";
    EXPECT_EQ(out[1 * n + i], bf16_bits(v) | bf16_bits(-v) << 16) << "pack_bf16x2(" << v << ")";
    EXPECT_EQ(out[2 * n + i], f16_bits(v) | bf16_bits(v) << 16) << "f32_to_f16/bf16(" << v << ")";
    EXPECT_EQ(out[3 * n + i], bits(f16_value(f16_bits(v)))) << "f16_to_f32 of " << v;
    EXPECT_EQ(out[4 * n + i], bf16_bits(v) << 16) << "bf16_to_f32 of " << v;
    EXPECT_EQ(out[5 * n + i], bits(v) >> 16 | bits(v) << 16) << "split_b32(" << v << ")";
  }
  EXPECT_EQ(f16_bits(1.f + 0x1p-11f), 0x3c00u) << "the host reference rounds ties to even";
  EXPECT_EQ(bf16_bits(1.f + 3 * 0x1p-8f), 0x3f82u) << "the host reference rounds ties to even";
  EXPECT_EQ(from_bits(bf16_bits(-2.25f) << 16), -2.25f);
}

// pack_e4m3x2 (the instruction) against the software encoder of target/Fp8.h (held bit for bit
// to ir/DType.h by tests/unit) on every float but NaN, both bytes of the pair; the instruction's
// NaN codes are reported: the generated ks_f2e4m3 maps a NaN to 0x7f itself.
TEST_F(Math, E4m3PairMatchesTheSoftwareEncoderOnEveryFloat) {
  const std::string source =
      std::string(
          "#include \"kintsugi/math.cuh\"\nusing namespace kintsugi::device;\n"
          "#define KS_FP8_FN __device__ __forceinline__\n#define KS_FBITS __float_as_uint\n"
          "#define KS_BITSF __uint_as_float\n") +
      kintsugi::target::kFp8ToE4m3 + R"(
extern "C" __global__ void every_float(unsigned long long* mismatches, u32* first, u32* nan_codes) {
  const u32 stride = gridDim.x * blockDim.x;
  for (unsigned long long b = blockIdx.x * blockDim.x + threadIdx.x; b < (1ull << 32); b += stride) {
    const float f = __uint_as_float(static_cast<u32>(b));
    const u16 pair = pack_e4m3x2(f, -f);
    if (f != f) {
      if (b == 0x7fc00000u) nan_codes[0] = pair;
      continue;
    }
    const u32 want = ks_f2e4m3(f) | static_cast<u32>(ks_f2e4m3(-f)) << 8;
    if (pair != want) {
      atomicAdd(mismatches, 1ull);
      atomicCAS(first, 0xffffffffu, static_cast<u32>(b));
    }
  }
}
)";
  Module module = load(source, "e4m3_test.cu");
  DeviceBuffer count = to_device(std::vector<unsigned long long>{0}),
               first = to_device(std::vector<uint32_t>{0xffffffffu}),
               nan_codes = to_device(std::vector<uint32_t>{0});
  module.function("every_float")
      .launch({.grid = {132 * 16}, .block = {256}}, count.address(), first.address(),
              nan_codes.address());
  EXPECT_EQ(from_device<unsigned long long>(count)[0], 0u)
      << "first mismatch at float bits 0x" << std::hex << from_device<uint32_t>(first)[0];
  const uint32_t nan_pair = from_device<uint32_t>(nan_codes)[0];
  EXPECT_EQ(nan_pair & 0x7fu, 0x7fu) << "a NaN's code, 0x" << std::hex << nan_pair;
  EXPECT_EQ(nan_pair >> 8 & 0x7fu, 0x7fu) << "a NaN's code, 0x" << std::hex << nan_pair;
}
