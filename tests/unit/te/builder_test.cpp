// The C++ builder API builds the same program as the .te source.
#include <gtest/gtest.h>

#include "ir/Printer.h"
#include "kintsugi/te.h"
#include "te/Lower.h"

using namespace kintsugi;

TEST(Builder, PrefillCausalMatchesTheParsedFile) {
  ProgramBuilder pb("prefill_causal");
  Expr B = pb.dim("B"), H = pb.dim("H"), S = pb.dim("S"), D = pb.dim("D"), T = pb.dim("T");
  Tensor Q = pb.input("Q", DType::F16, {B, H, S, D});
  Tensor K = pb.input("K", DType::F16, {B, H, T, D});
  Tensor V = pb.input("V", DType::F16, {B, H, T, D});
  Index b("b"), h("h"), i("i"), j("j"), d("d");
  Tensor s =
      pb.def("s", {b, h, i, j}, sum({d}, f32(Q(b, h, i, d)) * f32(K(b, h, j, d))) * rsqrt(f32(D)));
  Tensor c = pb.def("c", {b, h, i, j}, select(j <= i + T - S, s(b, h, i, j), -inf()));
  Tensor m = pb.def("m", {b, h, i}, max({j}, c(b, h, i, j)));
  Tensor e = pb.def("e", {b, h, i, j}, exp(c(b, h, i, j) - m(b, h, i)));
  Tensor l = pb.def("l", {b, h, i}, sum({j}, e(b, h, i, j)));
  Tensor o = pb.def("o", {b, h, i, d}, sum({j}, f32(f16(e(b, h, i, j))) * f32(V(b, h, j, d))));
  pb.output("O", {b, h, i, d}, DType::F16, select(l(b, h, i) > 0, o(b, h, i, d) / l(b, h, i), 0));
  for (auto [name, value] : {std::pair{"B", 1}, {"H", 2}, {"S", 64}, {"T", 64}, {"D", 32}})
    pb.size(name, value);
  te::Program built = pb.build();

  te::Program parsed = te::parse_file(KINTSUGI_SOURCE_DIR "/examples/attention/prefill_causal.te");
  te::check(parsed);
  EXPECT_EQ(ir::to_string(te::lower(built)), ir::to_string(te::lower(parsed)));
  EXPECT_EQ(te::to_string(built).substr(te::to_string(built).find('\n')),
            te::to_string(parsed).substr(te::to_string(parsed).find('\n')));
}

TEST(Builder, ErrorsAreCompileErrors) {
  ProgramBuilder pb("bad");
  Expr N = pb.dim("N");
  Tensor X = pb.input("X", DType::F16, {N});
  Tensor Y = pb.input("Y", DType::F32, {N});
  Index i("i");
  pb.output("Z", {i}, DType::F32, X(i) + Y(i));
  try {
    pb.build();
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("different types f16 and f32"), std::string::npos)
        << e.what();
  }
}
