// \file Stmt.h
// The loop IR: loops, blocks, stores, and the program that holds buffers.
//
// A Block is the unit of computation, as in TVM's TensorIR: it names iteration variables with a
// kind (spatial, reduce, scan), a domain [0, extent) and a binding (an expression over enclosing
// loop variables), an optional init statement (run when every reduce variable is at its first
// value) and a body. Inside a block only its iteration variables, dims and params are visible;
// loops outside it are seen through the bindings. This is what lets schedule primitives move loops
// while blocks keep their meaning.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/Expr.h"

namespace kintsugi::ir {

// Allocate: `buffer` lives only inside `body`; each execution of the node gets fresh storage (so
// one copy per iteration of an enclosing loop, per thread under a parallel loop).
enum class StmtKind : uint8_t { Seq, For, Block, Store, If, Allocate };
enum class ForKind : uint8_t { Serial, Parallel };
enum class IterKind : uint8_t { Spatial, Reduce, Scan };

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

struct IterVar {
  std::string name;
  Expr extent;
  IterKind kind = IterKind::Spatial;
  Expr binding;  // value of the iteration variable in terms of the enclosing loop variables
};

struct StmtNode {
  StmtKind kind = StmtKind::Seq;
  std::vector<Stmt> stmts;  // Seq
  // For: `for var in [min, min + extent)`
  std::string var;
  Expr min, extent;
  ForKind for_kind = ForKind::Serial;
  std::string annotation;  // For: the grid axis a loop is bound to ("grid.x"), empty if none
  Stmt body;               // For, Block, Allocate
  // Block
  std::string name;
  std::vector<IterVar> iters;
  Expr predicate;  // may be null (true); over enclosing loop variables, like the bindings: the
                   // block does nothing in iterations where it is false (tails of split loops)
  Stmt init;       // may be null
  // Store: buffer[indices] = value; Allocate: the buffer allocated for `body`
  std::string buffer;
  std::vector<Expr> indices;
  Expr value;
  // If
  Expr cond;
  Stmt then_case, else_case;  // else_case may be null
};

Stmt make_seq(std::vector<Stmt> stmts);
Stmt make_for(const std::string& var, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt make_block(const std::string& name, std::vector<IterVar> iters, Stmt init, Stmt body,
                Expr predicate = nullptr);
Stmt make_store(const std::string& buffer, std::vector<Expr> indices, Expr value);
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case = nullptr);
// `buffer` (declared in LoopProgram::buffers) is allocated afresh for each execution of body.
Stmt make_allocate(const std::string& buffer, Stmt body);

enum class BufferRole : uint8_t { Input, Output, Intermediate };

struct Buffer {
  std::string name;
  DType dtype = DType::F32;
  std::vector<Expr> shape;  // Int expressions over dims and params
  BufferRole role = BufferRole::Intermediate;
  std::string scope = "global";
};

struct Param {
  std::string name;
  DType dtype = DType::F32;
  double value = 0.0;  // params always have a value (the default written in the source)
};

// A whole program in loop form: what the interpreter and the back ends execute.
struct LoopProgram {
  std::string name;
  std::vector<std::string> dims;              // symbolic sizes, in declaration order
  std::map<std::string, int64_t> size_hints;  // default sizes written in the source
  std::vector<Param> params;
  std::vector<Buffer> buffers;  // inputs, then intermediates and outputs in definition order
  Stmt body;

  const Buffer* find_buffer(const std::string& name) const;
  std::vector<const Buffer*> inputs() const;
  std::vector<const Buffer*> outputs() const;
  // Every param's value: the given one, else the program's own.
  std::map<std::string, double> param_values(const std::map<std::string, double>& given) const;
};

}  // namespace kintsugi::ir
