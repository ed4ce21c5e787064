// \file Builder.cpp
// The C++ builder API (include/kintsugi/te.h): builds te::Program nodes exactly as the parser
// does, so that both front ends lower to identical loop IR.
#include <cmath>

#include "kintsugi/te.h"

namespace kintsugi {

namespace {
std::vector<ir::Axis> axes_of(const std::vector<Index>& indices) {
  std::vector<ir::Axis> out;
  for (const Index& i : indices) out.push_back(ir::Axis{i.name(), i.extent(), {}});
  return out;
}
}  // namespace

Index::Index(const std::string& name)
    : Expr(ir::make_var(name, ir::VarKind::Index, DType::Int)), name_(name) {}
Index::Index(const std::string& name, const Expr& extent) : Index(name) {
  extent_ = extent.node();
}

Expr Tensor::load(const std::vector<Expr>& indices) const {
  std::vector<ir::Expr> idx;
  for (const Expr& e : indices) idx.push_back(e.node());
  return ir::make_load(name_, DType::Unknown, idx);
}

ProgramBuilder::ProgramBuilder(std::string name) {
  program_.name = std::move(name);
}

Expr ProgramBuilder::dim(const std::string& name) {
  if (!program_.has_dim(name)) program_.dims.push_back(name);
  return ir::make_var(name, ir::VarKind::Dim, DType::Int);
}

Expr ProgramBuilder::param(const std::string& name, DType dtype, double value) {
  program_.params.push_back(te::ParamDecl{name, dtype, value, {}});
  return ir::make_var(name, ir::VarKind::Param, is_int(dtype) ? DType::Int : dtype);
}

Tensor ProgramBuilder::input(const std::string& name, DType dtype, const std::vector<Expr>& shape) {
  te::InputDecl d;
  d.name = name;
  d.dtype = dtype;
  for (const Expr& e : shape) d.shape.push_back(e.node());
  program_.inputs.push_back(d);
  return Tensor(name);
}

Tensor ProgramBuilder::def(const std::string& name, const std::vector<Index>& indices,
                           const Expr& body) {
  te::Definition d;
  d.name = name;
  d.indices = axes_of(indices);
  d.body = body.node();
  program_.defs.push_back(d);
  return Tensor(name);
}

Tensor ProgramBuilder::output(const std::string& name, const std::vector<Index>& indices,
                              DType dtype, const Expr& body) {
  te::Definition d;
  d.name = name;
  d.indices = axes_of(indices);
  d.body = body.node();
  d.is_output = true;
  d.dtype = dtype;
  program_.defs.push_back(d);
  return Tensor(name);
}

void ProgramBuilder::size(const std::string& dim, int64_t value) {
  program_.size_hints[dim] = value;
}

te::Program ProgramBuilder::build() const {
  te::Program p = program_;
  te::check(p);
  return p;
}

#define KINTSUGI_BINARY(sym, op)                            \
  Expr operator sym(const Expr& a, const Expr& b) {         \
    return ir::make_binary(ir::Op::op, a.node(), b.node()); \
  }
KINTSUGI_BINARY(+, Add)
KINTSUGI_BINARY(-, Sub)
KINTSUGI_BINARY(*, Mul)
KINTSUGI_BINARY(/, Div)
KINTSUGI_BINARY(%, Mod)
KINTSUGI_BINARY(<, Lt)
KINTSUGI_BINARY(<=, Le)
KINTSUGI_BINARY(>, Gt)
KINTSUGI_BINARY(>=, Ge)
KINTSUGI_BINARY(==, Eq)
KINTSUGI_BINARY(!=, Ne)
KINTSUGI_BINARY(&&, And)
KINTSUGI_BINARY(||, Or)
#undef KINTSUGI_BINARY

Expr operator-(const Expr& a) {
  // Negative literals stay literals, as in the parser.
  const ir::Expr& n = a.node();
  if (n->op == ir::Op::FloatImm) return ir::make_float(-n->float_value, n->type);
  if (n->op == ir::Op::IntImm) return ir::make_int(-n->int_value);
  return ir::make_unary(ir::Op::Neg, n);
}
Expr operator!(const Expr& a) {
  return ir::make_unary(ir::Op::Not, a.node());
}

Expr select(const Expr& c, const Expr& a, const Expr& b) {
  return ir::make_select(c.node(), a.node(), b.node());
}
Expr min(const Expr& a, const Expr& b) {
  return ir::make_binary(ir::Op::Min, a.node(), b.node());
}
Expr max(const Expr& a, const Expr& b) {
  return ir::make_binary(ir::Op::Max, a.node(), b.node());
}
Expr call(ir::MathFn fn, const std::vector<Expr>& args) {
  std::vector<ir::Expr> a;
  for (const Expr& e : args) a.push_back(e.node());
  return ir::make_call(fn, a);
}
Expr exp(const Expr& a) {
  return call(ir::MathFn::Exp, {a});
}
Expr log(const Expr& a) {
  return call(ir::MathFn::Log, {a});
}
Expr tanh(const Expr& a) {
  return call(ir::MathFn::Tanh, {a});
}
Expr sigmoid(const Expr& a) {
  return call(ir::MathFn::Sigmoid, {a});
}
Expr erf(const Expr& a) {
  return call(ir::MathFn::Erf, {a});
}
Expr sqrt(const Expr& a) {
  return call(ir::MathFn::Sqrt, {a});
}
Expr rsqrt(const Expr& a) {
  return call(ir::MathFn::Rsqrt, {a});
}
Expr abs(const Expr& a) {
  return call(ir::MathFn::Abs, {a});
}
Expr round(const Expr& a) {
  return call(ir::MathFn::Round, {a});
}
Expr cast(DType t, const Expr& a) {
  return ir::make_cast(t, a.node());
}
Expr inf() {
  return ir::make_float(INFINITY, DType::Unknown);
}

Expr reduce(ir::Reducer r, const std::vector<Index>& axes, const Expr& body) {
  return ir::make_reduce(r, axes_of(axes), body.node());
}

}  // namespace kintsugi
