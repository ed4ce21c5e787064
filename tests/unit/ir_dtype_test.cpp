#include <gtest/gtest.h>
#include <cmath>
#include "ir/DType.h"
using namespace kintsugi;
TEST(DType, F16RoundTrip) {
  EXPECT_EQ(double_to_f16_bits(1.0), 0x3c00);
  EXPECT_EQ(f16_bits_to_double(0x3c00), 1.0);
  EXPECT_EQ(round_to_dtype(65504.0, DType::F16), 65504.0);
  EXPECT_TRUE(std::isinf(round_to_dtype(65520.0, DType::F16)));
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -11), DType::F16), 1.0);  // tie to even
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -24), DType::F16), std::ldexp(1.0, -24));
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -8), DType::BF16), 1.0);
  EXPECT_EQ(round_to_dtype(-3.7, DType::I8), -3.0);
  EXPECT_EQ(round_to_dtype(300.0, DType::I8), 127.0);
}

// fp8 (OCP FP8): every code decodes and encodes back to itself (NaN to the canonical 0x7f), the
// extremes, ties to even, e4m3 saturation and e5m2 overflow to infinity.
TEST(DType, Fp8Codes) {
  for (int b = 0; b < 256; ++b) {
    double e4 = e4m3_bits_to_double(static_cast<uint8_t>(b));
    double e5 = e5m2_bits_to_double(static_cast<uint8_t>(b));
    if (std::isnan(e4))
      EXPECT_EQ(b & 0x7f, 0x7f) << b;
    else
      EXPECT_EQ(double_to_e4m3_bits(e4), b) << b;
    if (std::isnan(e5))
      EXPECT_GT(b & 0x7f, 0x7c) << b;
    else
      EXPECT_EQ(double_to_e5m2_bits(e5), b) << b;
  }
  EXPECT_EQ(e4m3_bits_to_double(0x7e), 448.0);
  EXPECT_EQ(e4m3_bits_to_double(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(e5m2_bits_to_double(0x7b), 57344.0);
  EXPECT_EQ(e5m2_bits_to_double(0x01), std::ldexp(1.0, -16));
  EXPECT_TRUE(std::isinf(e5m2_bits_to_double(0x7c)));
  EXPECT_EQ(double_to_e4m3_bits(std::nan("")), 0x7f);
  EXPECT_EQ(double_to_e5m2_bits(std::nan("")), 0x7f);
}

TEST(DType, Fp8Rounding) {
  // e4m3: 448 is the largest; 464 ties to the even 448, above saturates; so do infinities.
  EXPECT_EQ(round_to_dtype(464.0, DType::F8E4M3), 448.0);
  EXPECT_EQ(round_to_dtype(465.0, DType::F8E4M3), 448.0);
  EXPECT_EQ(round_to_dtype(1e9, DType::F8E4M3), 448.0);
  EXPECT_EQ(round_to_dtype(-INFINITY, DType::F8E4M3), -448.0);
  EXPECT_EQ(round_to_dtype(1.0 + 1.0 / 16, DType::F8E4M3), 1.0);        // tie to even
  EXPECT_EQ(round_to_dtype(1.0 + 3.0 / 16, DType::F8E4M3), 1.25);       // tie to even
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -10), DType::F8E4M3), 0.0);  // half the least: even
  EXPECT_EQ(round_to_dtype(std::ldexp(3.0, -11), DType::F8E4M3), std::ldexp(1.0, -9));
  EXPECT_TRUE(std::signbit(round_to_dtype(-1e-9, DType::F8E4M3)));
  // e5m2: 57344 is the largest; from 61440 (the midpoint, tied to the even infinity) on, inf.
  EXPECT_EQ(round_to_dtype(61439.0, DType::F8E5M2), 57344.0);
  EXPECT_TRUE(std::isinf(round_to_dtype(61440.0, DType::F8E5M2)));
  EXPECT_EQ(round_to_dtype(-INFINITY, DType::F8E5M2), -INFINITY);
  EXPECT_EQ(round_to_dtype(1.0 + 1.0 / 8, DType::F8E5M2), 1.0);  // tie to even
  EXPECT_EQ(dtype_from_name("f8e4m3"), DType::F8E4M3);
  EXPECT_EQ(dtype_from_name("f8e5m2"), DType::F8E5M2);
  EXPECT_EQ(dtype_bytes(DType::F8E4M3), 1);
}
