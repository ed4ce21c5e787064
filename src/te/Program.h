// \file Program.h
// A tensor-expression program: what a .te file or the C++ builder describes.
//
// Invariant after te::check(): every expression is typed, every index and reduction axis has an
// inferred extent, every load names an earlier tensor with the right rank, and untyped literals
// have taken the type of their context.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/Expr.h"

namespace kintsugi::te {

struct ParamDecl {
  std::string name;
  DType dtype = DType::F32;
  double value = 0.0;
  SourceLoc loc;
};

struct InputDecl {
  std::string name;
  DType dtype = DType::F32;
  std::vector<ir::Expr> shape;  // Int expressions over dims
  SourceLoc loc;
};

// `name[indices] = body` or `output name[indices]: dtype = body`.
struct Definition {
  std::string name;
  std::vector<ir::Axis> indices;  // extents filled in by the checker
  ir::Expr body;
  bool is_output = false;
  DType dtype = DType::Unknown;  // outputs: the declared storage type; others: the body's type
  std::optional<std::vector<ir::Expr>> declared_shape;  // `output O[...]: f16[B, H, S, D]`
  SourceLoc loc;
};

struct Program {
  std::string name;
  std::vector<std::string> dims;  // in order of first appearance
  std::map<std::string, SourceLoc> dim_locs;
  std::map<std::string, int64_t> size_hints;  // `sizes S = 128, ...`
  std::vector<ParamDecl> params;
  std::vector<InputDecl> inputs;
  std::vector<Definition> defs;
  std::shared_ptr<const SourceFile> source;  // null for programs built in C++

  const InputDecl* find_input(const std::string& name) const;
  const Definition* find_def(const std::string& name) const;
  const ParamDecl* find_param(const std::string& name) const;
  bool has_dim(const std::string& name) const;
};

// Parses a .te source. Throws CompileError with a location on any syntax error.
Program parse(const std::string& file_name, const std::string& text);
// Reads and parses a file (a missing file is a RuntimeArgError).
Program parse_file(const std::string& path);
// Resolves names, infers extents, types every expression; throws CompileError.
void check(Program& program);
// Source-like text of the program (after check: with inferred extents as comments).
std::string to_string(const Program& program);

}  // namespace kintsugi::te
