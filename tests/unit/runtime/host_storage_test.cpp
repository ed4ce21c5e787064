// Host tensor memory (runtime/HostStorage.h): zero and 64-byte aligned when allocated, small and
// mapped blocks alike, including a mapped block reused after it was written and released.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "runtime/HostStorage.h"
#include "runtime/Tensor.h"

using namespace kintsugi;

namespace {

bool all_zero(const runtime::Storage& s) {
  return std::all_of(s.begin(), s.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

TEST(HostStorage, ZeroAndAlignedAtEverySize) {
  for (size_t bytes : {size_t{1}, size_t{1000}, size_t{2} << 20, (size_t{5} << 20) + 12345}) {
    SCOPED_TRACE(bytes);
    runtime::Storage s(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data()) % 64, 0u);
    EXPECT_TRUE(all_zero(s));
  }
}

TEST(HostStorage, AReusedBlockIsClearedAgain) {
  const size_t bytes = (size_t{6} << 20) + 100;
  for (int round = 0; round < 3; ++round) {
    runtime::Storage s(bytes);
    ASSERT_TRUE(all_zero(s)) << "round " << round;
    std::fill(s.begin(), s.end(), uint8_t{0x5a});  // released dirty: the next one must not be
  }
  runtime::Tensor t(DType::F32, {1024, 2048});
  EXPECT_TRUE(all_zero(t.data));
  EXPECT_EQ(t.data.size(), size_t{1024} * 2048 * 4);
}
