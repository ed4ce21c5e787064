// \file Expr.h
// Expressions shared by the tensor-expression front end and the loop IR.
//
// An Expr is an immutable, shared node. Every node carries its type once the type checker has run
// (front end) and always in the loop IR. A node is one struct with an opcode and operands, so
// that generic traversals (ir/Visit.h) need no per-node boilerplate. `Reduce` exists only in
// tensor expressions: lowering turns every reduction into a block of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/DType.h"
#include "support/Error.h"

namespace kintsugi::ir {

enum class Op : uint8_t {
  IntImm,    // int_value
  FloatImm,  // float_value; type Unknown while it is an untyped literal in the front end
  BoolImm,   // int_value 0 / 1
  Var,       // name, var_kind
  Load,      // name[args...]
  Neg,       // -a
  Not,       // !a
  Add,
  Sub,
  Mul,
  Div,
  Mod,  // a op b; Div and Mod floor for integers
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,  // comparisons, type Bool
  And,
  Or,  // Bool
  Min,
  Max,     // min(a, b), max(a, b)
  Call,    // fn(args...)
  Cast,    // type(args[0])
  Select,  // select(args[0], args[1], args[2])
  Reduce,  // reducer[axes...](args[0]), front end only
};

enum class VarKind : uint8_t { Index, Dim, Param };

// Sigmoid is 1 / (1 + exp(-x)); Erf the error function (GELU is x * (1 + erf(x / sqrt(2))) / 2).
enum class MathFn : uint8_t {
  Exp,
  Exp2,
  Log,
  Log2,
  Tanh,
  Sqrt,
  Rsqrt,
  Abs,
  Pow,
  Round,
  Clamp,
  Sigmoid,
  Erf
};

enum class Reducer : uint8_t { Sum, Max, Min, Prod };

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

// A named index with its extent: the index runs over [0, extent).
struct Axis {
  std::string name;
  Expr extent;  // an Int expression over dims and params; null while not yet inferred
  SourceLoc loc;
};

struct ExprNode {
  ExprNode() = default;
  ExprNode(const ExprNode&) = default;
  ExprNode(ExprNode&&) = default;
  ExprNode& operator=(const ExprNode&) = default;
  ExprNode& operator=(ExprNode&&) = default;
  // Releases the operands without recursion (see Expr.cpp), so that a tree of any depth is
  // destroyed in constant stack space.
  ~ExprNode();

  Op op = Op::IntImm;
  DType type = DType::Unknown;
  int64_t int_value = 0;
  double float_value = 0.0;
  std::string name;  // Var, Load
  VarKind var_kind = VarKind::Index;
  MathFn fn = MathFn::Exp;
  Reducer reducer = Reducer::Sum;
  std::vector<Expr> args;
  std::vector<Axis> axes;  // Reduce
  SourceLoc loc;
};

// --- Factories. They do not type-check: the front end's checker does that; these only compute
// the result type from already typed operands where it is unambiguous.
Expr make_int(int64_t v, SourceLoc loc = {});
Expr make_float(double v, DType type, SourceLoc loc = {});
Expr make_bool(bool v, SourceLoc loc = {});
Expr make_var(const std::string& name, VarKind kind, DType type, SourceLoc loc = {});
Expr make_load(const std::string& name, DType type, std::vector<Expr> indices, SourceLoc loc = {});
Expr make_unary(Op op, Expr a, SourceLoc loc = {});
Expr make_binary(Op op, Expr a, Expr b, SourceLoc loc = {});
Expr make_call(MathFn fn, std::vector<Expr> args, SourceLoc loc = {});
Expr make_cast(DType type, Expr a, SourceLoc loc = {});
Expr make_select(Expr c, Expr t, Expr f, SourceLoc loc = {});
Expr make_reduce(Reducer r, std::vector<Axis> axes, Expr body, SourceLoc loc = {});
// A copy of `e` with new operands (same op, type, names).
Expr with_args(const Expr& e, std::vector<Expr> args);

// Result type of a binary op on typed operands (comparisons give Bool; integer types merge to Int).
DType binary_result_type(Op op, DType a, DType b);

const char* op_symbol(Op op);  // "+", "<=", "&&", ...
const char* math_fn_name(MathFn fn);
bool math_fn_from_name(const std::string& name, MathFn* fn, int* arity);
std::vector<const char*> math_fn_names();  // every math function's name, in a fixed order
const char* reducer_name(Reducer r);
bool reducer_from_name(const std::string& name, Reducer* r);
// The identity of a reducer as a double (-inf for max, +inf for min).
double reducer_identity(Reducer r);
// The identity as a literal of type t (integer max/min use the i32 range).
Expr reducer_identity_expr(Reducer r, DType t);
// The same as a double: reducer_identity for a float type, the i32 bound for an integer one.
double reducer_identity(Reducer r, DType t);
// The combine step of a reducer: a + b, a * b, max(a, b), min(a, b).
Expr combine(Reducer r, const Expr& a, const Expr& b);

bool is_comparison(Op op);
bool is_arith(Op op);

// Structural equality (names, ops, values, types; locations ignored).
bool equal(const Expr& a, const Expr& b);

}  // namespace kintsugi::ir
