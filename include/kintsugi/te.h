// \file te.h
// The C++ builder API: builds the same tensor-expression programs as .te files.
//
//   kintsugi::ProgramBuilder pb("softmax");
//   auto M = pb.dim("M"), N = pb.dim("N");
//   auto X = pb.input("X", kintsugi::DType::F32, {M, N});
//   kintsugi::Index i("i"), j("j");
//   auto m = pb.def("m", {i}, kintsugi::max({j}, X(i, j)));
//   ...
//   kintsugi::te::Program program = pb.build();   // type-checked, ready for te::lower
//
// Literals convert implicitly (2.0 is an untyped float, 2 an integer); operators build
// expressions; errors are the same CompileErrors as for .te sources (without a location).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "ir/Expr.h"
#include "te/Program.h"

namespace kintsugi {

// An expression handle.
class Expr {
 public:
  Expr(ir::Expr node) : node_(std::move(node)) {}
  Expr(double v) : node_(ir::make_float(v, DType::Unknown)) {}
  Expr(int v) : node_(ir::make_int(v)) {}
  Expr(int64_t v) : node_(ir::make_int(v)) {}
  const ir::Expr& node() const { return node_; }

 private:
  ir::Expr node_;
};

// An index variable: a definition index or a reduction axis.
class Index : public Expr {
 public:
  explicit Index(const std::string& name);
  // With an explicit extent (otherwise inferred from uses).
  Index(const std::string& name, const Expr& extent);
  const std::string& name() const { return name_; }
  const ir::Expr& extent() const { return extent_; }

 private:
  std::string name_;
  ir::Expr extent_;
};

// A tensor (input or definition); calling it with indices reads it.
class Tensor {
 public:
  explicit Tensor(std::string name) : name_(std::move(name)) {}
  template <typename... Args>
  Expr operator()(const Args&... indices) const {
    return load({Expr(indices)...});
  }
  Expr load(const std::vector<Expr>& indices) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name);
  Expr dim(const std::string& name);
  Expr param(const std::string& name, DType dtype, double value);
  Tensor input(const std::string& name, DType dtype, const std::vector<Expr>& shape);
  Tensor def(const std::string& name, const std::vector<Index>& indices, const Expr& body);
  Tensor output(const std::string& name, const std::vector<Index>& indices, DType dtype,
                const Expr& body);
  void size(const std::string& dim, int64_t value);
  // Type-checks and returns the program (throws CompileError like the .te front end).
  te::Program build() const;

 private:
  te::Program program_;
};

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator/(const Expr& a, const Expr& b);
Expr operator%(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr operator<(const Expr& a, const Expr& b);
Expr operator<=(const Expr& a, const Expr& b);
Expr operator>(const Expr& a, const Expr& b);
Expr operator>=(const Expr& a, const Expr& b);
Expr operator==(const Expr& a, const Expr& b);
Expr operator!=(const Expr& a, const Expr& b);
Expr operator&&(const Expr& a, const Expr& b);
Expr operator||(const Expr& a, const Expr& b);
Expr operator!(const Expr& a);

Expr select(const Expr& c, const Expr& a, const Expr& b);
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);
Expr call(ir::MathFn fn, const std::vector<Expr>& args);
Expr exp(const Expr& a);
Expr log(const Expr& a);
Expr tanh(const Expr& a);
Expr sigmoid(const Expr& a);
Expr erf(const Expr& a);
Expr sqrt(const Expr& a);
Expr rsqrt(const Expr& a);
Expr abs(const Expr& a);
Expr round(const Expr& a);
Expr cast(DType t, const Expr& a);
inline Expr f16(const Expr& a) {
  return cast(DType::F16, a);
}
inline Expr bf16(const Expr& a) {
  return cast(DType::BF16, a);
}
inline Expr f32(const Expr& a) {
  return cast(DType::F32, a);
}
inline Expr i32(const Expr& a) {
  return cast(DType::I32, a);
}
inline Expr i8(const Expr& a) {
  return cast(DType::I8, a);
}
Expr inf();

Expr reduce(ir::Reducer r, const std::vector<Index>& axes, const Expr& body);
inline Expr sum(const std::vector<Index>& axes, const Expr& body) {
  return reduce(ir::Reducer::Sum, axes, body);
}
// `max({j}, e)` must mean the reduction, not the binary max of j and e: an initializer list of
// indices is an exact match, which overload resolution prefers to the Index -> Expr conversion.
inline Expr max(std::initializer_list<Index> axes, const Expr& body) {
  return reduce(ir::Reducer::Max, axes, body);
}
inline Expr min(std::initializer_list<Index> axes, const Expr& body) {
  return reduce(ir::Reducer::Min, axes, body);
}
inline Expr prod(const std::vector<Index>& axes, const Expr& body) {
  return reduce(ir::Reducer::Prod, axes, body);
}

}  // namespace kintsugi
