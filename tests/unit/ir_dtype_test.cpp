#include <gtest/gtest.h>
#include <cmath>
#include <cstdint>
#include <random>
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

// The 16-bit formats against their definition: every code decodes and encodes back to itself;
// every exact midpoint between neighbours goes to the even code; random doubles across the whole
// range (and beyond it) go to the code whose value is nearest, found by bisection over the codes
// (non-negative codes are ordered as their values), ties to even; from the midpoint above the
// largest finite value, infinity.
void check_binary16(uint16_t (*encode)(double), double (*decode)(uint16_t), uint16_t largest,
                    int min_exp, int max_exp) {
  for (uint32_t c = 0; c <= largest; ++c) {
    const uint16_t code = static_cast<uint16_t>(c);
    ASSERT_EQ(encode(decode(code)), code) << c;
    ASSERT_EQ(encode(-decode(code)), code | 0x8000) << c;
    if (c < largest) {
      const double mid = (decode(code) + decode(static_cast<uint16_t>(c + 1))) / 2;
      ASSERT_EQ(encode(mid), c % 2 ? c + 1 : c) << "midpoint above " << c;
    }
  }
  const double top = decode(largest), over = top + (top - decode(largest - 1)) / 2;
  EXPECT_EQ(decode(encode(over)), INFINITY);
  EXPECT_EQ(decode(encode(std::nextafter(over, 0.0))), top);
  EXPECT_EQ(decode(encode(-INFINITY)), -INFINITY);
  EXPECT_TRUE(std::isnan(decode(encode(std::nan("")))));
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> exponent(min_exp, max_exp);
  std::uniform_real_distribution<double> fraction(1.0, 2.0);
  for (int k = 0; k < 200000; ++k) {
    const double x = std::ldexp(fraction(rng), exponent(rng));
    uint32_t lo = 0, hi = largest;  // the last code whose value is at most x
    while (lo < hi) {
      const uint32_t mid = (lo + hi + 1) / 2;
      if (decode(static_cast<uint16_t>(mid)) <= x)
        lo = mid;
      else
        hi = mid - 1;
    }
    uint16_t want = static_cast<uint16_t>(lo);
    if (x >= over) {
      EXPECT_EQ(decode(encode(x)), INFINITY) << x;
      continue;
    }
    if (lo < largest) {
      const double below = x - decode(want), above = decode(static_cast<uint16_t>(lo + 1)) - x;
      if (above < below || (above == below && lo % 2)) want = static_cast<uint16_t>(lo + 1);
    }
    ASSERT_EQ(encode(x), want) << std::hexfloat << x;
  }
}

TEST(DType, F16AndBf16Rounding) {
  check_binary16(double_to_f16_bits, f16_bits_to_double, 0x7bff, -30, 17);
  check_binary16(double_to_bf16_bits, bf16_bits_to_double, 0x7f7f, -140, 130);
  EXPECT_EQ(double_to_f16_bits(1e-300), 0);
  EXPECT_EQ(double_to_f16_bits(-1e-310), 0x8000);
  EXPECT_EQ(f16_bits_to_double(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(f16_bits_to_double(0xfbff), -65504.0);
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
