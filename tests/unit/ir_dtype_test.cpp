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
