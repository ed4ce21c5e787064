// \file cuda_tensor_map_test.cpp
// The rules TMA puts on a tensor map (Driver.h, tensor_map_unaddressable): a spec that breaks one
// is refused with the rule it breaks, so that a caller falls back to copies by threads.
#include <gtest/gtest.h>

#include "target/cuda/Driver.h"

using namespace kintsugi;
using namespace kintsugi::cuda;

namespace {

// Rows of 64 f16 at a 16-byte aligned address, boxes of 64 x 64 in the 128-byte swizzle.
TensorMapSpec rows_of_64(uint64_t address) {
  TensorMapSpec s;
  s.element = DType::F16;
  s.address = address;
  s.dims = {64, 1000};
  s.strides = {128};
  s.box = {64, 64};
  s.swizzle = TensorMapSwizzle::B128;
  return s;
}

std::string why(const TensorMapSpec& s) {
  return tensor_map_unaddressable(s);
}

}  // namespace

TEST(TensorMap, AddressableSpecIsAccepted) {
  EXPECT_EQ(why(rows_of_64(4096)), "");
  TensorMapSpec s = rows_of_64(4096);
  s.element = DType::F8E4M3;  // a 1-byte type, copied as bytes
  s.box = {128, 64};
  EXPECT_EQ(why(s), "");
}

TEST(TensorMap, EachRuleIsNamed) {
  TensorMapSpec s = rows_of_64(4096);
  s.box[0] = 128;  // 256 bytes a row, wider than the 128-byte swizzle
  EXPECT_NE(why(s).find("256 bytes, exceeds the 128-byte swizzle"), std::string::npos) << why(s);
  EXPECT_NE(why(rows_of_64(4104)).find("address is not a multiple of 16 bytes"), std::string::npos);
  s = rows_of_64(4096);
  s.strides = {72};
  EXPECT_NE(why(s).find("stride 72 bytes of dimension 1"), std::string::npos) << why(s);
  s = rows_of_64(4096);
  s.box[1] = 512;
  EXPECT_NE(why(s).find("box extent 512 of dimension 1 is outside 1 to 256"), std::string::npos)
      << why(s);
  s = rows_of_64(4096);
  s.box[0] = 4;  // 8 bytes
  EXPECT_NE(why(s).find("innermost extent, 8 bytes, is not a multiple of 16"), std::string::npos)
      << why(s);
  s = rows_of_64(4096);
  s.dims = {64, 2, 2, 2, 2, 2};
  EXPECT_NE(why(s).find("1 to 5 dimensions, not 6"), std::string::npos) << why(s);
  s = rows_of_64(4096);
  s.element = DType::I32;
  EXPECT_NE(why(s).find("does not copy i32"), std::string::npos) << why(s);
}
