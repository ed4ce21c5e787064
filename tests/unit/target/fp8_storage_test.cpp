// fp8 storage on the CPU back end (the conversions of target/Fp8.h): a store rounds exactly as
// ir/DType.h does, bit for bit, for floats across the whole range, ties and subnormals included,
// in scalar loop code and in tile code; a load decodes every code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "driver/Driver.h"
#include "target/cpu/CpuBackend.h"
#include "te/Lower.h"
#include "te/Program.h"

using namespace kintsugi;

namespace {

ir::LoopProgram program(const std::string& src) {
  te::Program p = te::parse("fp8.te", src);
  te::check(p);
  return te::lower(p);
}

// Runs `p` (one input X, one output Y) on the CPU with `schedule` ("auto": tile code; "none":
// scalar loop code).
runtime::Tensor run(const ir::LoopProgram& p, const std::string& schedule, runtime::Tensor& x,
                    DType out) {
  runtime::SizeMap sizes = {{"N", x.numel()}};
  driver::ScheduleOptions o;
  o.schedule = schedule;
  o.sizes = sizes;
  driver::Scheduled s = driver::schedule_program(p, o);
  driver::Built b = driver::build_kernel(s, o.target, sizes);
  EXPECT_EQ(b.form, schedule == "auto" ? "tile" : "loop");
  runtime::Tensor y(out, {x.numel()});
  b.cpu->run({&x, &y}, sizes, {});
  return y;
}

}  // namespace

TEST(Fp8Storage, StoresRoundAsTheInterpreterDoes) {
  // Every 4099th float bit pattern, and the ties and edges of both types.
  std::vector<float> values;
  for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {
    uint32_t bits = static_cast<uint32_t>(u);
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  for (float f : {464.0f, 465.0f, 448.0f, 61440.0f, 61439.0f, 57344.0f, 1.0625f, 1.1875f, 1.125f,
                  0x1p-10f, 0x3p-11f, 0x1p-17f, 0x3p-18f, INFINITY, -INFINITY, NAN, -0.0f})
    values.push_back(f);
  runtime::Tensor x(DType::F32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) x.set(static_cast<int64_t>(i), values[i]);
  for (DType t : {DType::F8E4M3, DType::F8E5M2}) {
    ir::LoopProgram p =
        program(std::string("input X: f32[N]\noutput Y[i]: ") + dtype_name(t) + " = X[i]\n");
    for (const std::string schedule : {"auto", "none"}) {
      runtime::Tensor y = run(p, schedule, x, t);
      int bad = 0;
      for (size_t i = 0; i < values.size() && bad < 10; ++i) {
        uint8_t want =
            t == DType::F8E4M3 ? double_to_e4m3_bits(values[i]) : double_to_e5m2_bits(values[i]);
        if (y.data[i] != want)
          ADD_FAILURE() << dtype_name(t) << " " << schedule << ": " << values[i] << " stored as "
                        << int(y.data[i]) << ", not " << int(want) << (++bad, "");
      }
    }
  }
}

TEST(Fp8Storage, LoadsDecodeEveryCode) {
  for (DType t : {DType::F8E4M3, DType::F8E5M2}) {
    ir::LoopProgram p =
        program(std::string("input X: ") + dtype_name(t) + "[N]\noutput Y[i]: f32 = f32(X[i])\n");
    runtime::Tensor x(t, {256});
    for (int b = 0; b < 256; ++b) x.data[static_cast<size_t>(b)] = static_cast<uint8_t>(b);
    for (const std::string schedule : {"auto", "none"}) {
      runtime::Tensor y = run(p, schedule, x, DType::F32);
      for (int b = 0; b < 256; ++b) {
        double want = t == DType::F8E4M3 ? e4m3_bits_to_double(static_cast<uint8_t>(b))
                                         : e5m2_bits_to_double(static_cast<uint8_t>(b));
        double got = y.get(b);
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(got)) << dtype_name(t) << " " << schedule << " code " << b;
        else
          EXPECT_EQ(got, want) << dtype_name(t) << " " << schedule << " code " << b;
      }
    }
  }
}
