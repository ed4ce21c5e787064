// \file Interpreter.h
// The reference interpreter: runs any loop IR program on host tensors.
//
// Exact mode is the definition of Kintsugi's semantics: every float value is a double, float
// casts and float stores are the identity, and only integer conversions (casts to i8/i32,
// stores into integer tensors) round. Typed mode honours every type: each f32 operation is
// rounded to f32, each f16/bf16 operation to f16/bf16, and every cast and store rounds to its
// type, as compiled code does.
//
// Every load and store is bounds-checked, every integer division checked for zero and every
// integer +, -, *, negation and abs checked for 64-bit overflow (the reference never wraps): a
// violation is a RuntimeArgError naming the access or the expression, never a crash.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/Stmt.h"
#include "runtime/Tensor.h"

namespace kintsugi::ir {

enum class InterpMode { Exact, Typed };

// A buffer of the interpreter: values as doubles, with its shape.
struct InterpBuffer {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

struct InterpResult {
  std::map<std::string, InterpBuffer> outputs;
};

// Runs `program`. `inputs` maps every input buffer name to a tensor of the right dtype and
// shape; `sizes` binds every dim; `params` may override param values.
InterpResult interpret(const LoopProgram& program, InterpMode mode,
                       const std::map<std::string, const runtime::Tensor*>& inputs,
                       const runtime::SizeMap& sizes, const runtime::ParamMap& params = {});

// Scalar expressions without loads, compiled once and evaluated many times with the
// interpreter's semantics (rounding by mode, NaN-propagating min and max, checked integer
// arithmetic): the tile interpreter's starts, extents, fills and elementwise operations.
// Variables are slots declared by name; the program's params take their values (or `params`'),
// checked as `interpret` checks them.
class ScalarEval {
 public:
  ScalarEval(const LoopProgram& program, InterpMode mode, const runtime::ParamMap& params);
  ~ScalarEval();
  ScalarEval(const ScalarEval&) = delete;
  ScalarEval& operator=(const ScalarEval&) = delete;

  // A new variable `name` (shadowing an earlier one of that name in later compiles): its slot.
  int declare_int(const std::string& name);
  int declare_float(const std::string& name);
  void set_int(int slot, int64_t value);
  void set_float(int slot, double value);
  // Compiles `e` over the variables declared so far: a handle for `eval`.
  int compile(const Expr& e);
  // The value of compiled expression `handle` (an integer or bool one converted to double).
  double eval(int handle);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Evaluates an integer expression over dims and params (shapes, extents).
int64_t eval_int(const Expr& e, const runtime::SizeMap& sizes,
                 const runtime::ParamMap& params = {});
std::vector<int64_t> eval_shape(const std::vector<Expr>& shape, const runtime::SizeMap& sizes,
                                const runtime::ParamMap& params = {});

// Floor division and modulo of integers (b != 0).
int64_t floor_div(int64_t a, int64_t b);
int64_t floor_mod(int64_t a, int64_t b);

}  // namespace kintsugi::ir
