// \file TileTestUtil.h
// Hand-built tile programs for the tile pass tests: a one-kernel program over the buffers
// X: f16[N, 8] (input) and Y: f32[N, 8] (output), built operation by operation with loops
// opened and closed around them; examples translated as the compiler does; and queries over the
// result.
#pragma once

#include <gtest/gtest.h>

#include "../schedule/ScheduleTestUtil.h"
#include "schedule/AutoSchedule.h"
#include "tile/Passes.h"
#include "tile/TileIR.h"
#include "tile/Translate.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile_test {

using tile::OpKind;
using tile::TileOp;
using tile::TileType;

inline ir::Expr dim(const std::string& n) {
  return ir::make_var(n, ir::VarKind::Dim, DType::Int);
}
inline ir::Expr index(const std::string& n) {
  return ir::make_var(n, ir::VarKind::Index, DType::Int);
}
inline ir::Expr times(const ir::Expr& a, int64_t b) {
  return ir::make_binary(ir::Op::Mul, a, ir::make_int(b));
}

inline TileType f32(std::vector<int64_t> shape) {
  return TileType{DType::F32, std::move(shape)};
}

// Emits operations into one kernel of a program whose source declares the buffers X: f16[N, 8]
// and Y: f32[N, 8], with loops opened and closed around them.
class Builder {
 public:
  Builder() {
    ir::Buffer x;
    x.name = "X";
    x.dtype = DType::F16;
    x.shape = {dim("N"), ir::make_int(8)};
    x.role = ir::BufferRole::Input;
    ir::Buffer y = x;
    y.name = "Y";
    y.dtype = DType::F32;
    y.role = ir::BufferRole::Output;
    program.source.name = "test";
    program.source.dims = {"N", "M"};
    program.source.buffers = {x, y};
    program.kernels.resize(1);
    kernel().name = "test.0";
    bodies_.push_back(&kernel().body);
  }

  tile::Kernel& kernel() { return program.kernels[0]; }

  void reg(const std::string& name, TileType t, const std::string& scope_loop) {
    kernel().registers.push_back(tile::Register{name, std::move(t), scope_loop});
  }

  int emit(TileOp o) {
    if (o.kind != OpKind::Store && o.kind != OpKind::Write) o.result = kernel().num_values++;
    tile::TileStmt s;
    s.op = std::move(o);
    bodies_.back()->push_back(std::move(s));
    return bodies_.back()->back().op.result;
  }

  // A loop over N iterations, or `extent` when given.
  void open_loop(const std::string& var, ir::Expr extent = nullptr) {
    tile::TileStmt s;
    s.kind = tile::StmtKind::For;
    s.var = var;
    s.min = ir::make_int(0);
    s.extent = extent ? extent : dim("N");
    bodies_.back()->push_back(std::move(s));
    bodies_.push_back(&bodies_.back()->back().body);
  }
  void close_loop() { bodies_.pop_back(); }

  int full(ir::Expr v) {
    TileOp o;
    o.kind = OpKind::Full;
    o.type = TileType{v->type, {}};
    o.scalar = std::move(v);
    return emit(o);
  }
  int arange(ir::Expr start, int64_t n) {
    TileOp o;
    o.kind = OpKind::Arange;
    o.scalar = std::move(start);
    o.type = TileType{DType::Int, {n}};
    return emit(o);
  }
  int map(ir::Op op, std::vector<int> args, TileType t) {
    TileOp o;
    o.kind = OpKind::Map;
    o.op = op;
    o.args = std::move(args);
    o.type = std::move(t);
    return emit(o);
  }
  int exp(int a, TileType t) {
    TileOp o;
    o.kind = OpKind::Map;
    o.is_call = true;
    o.fn = ir::MathFn::Exp;
    o.args = {a};
    o.type = std::move(t);
    return emit(o);
  }
  int select(int c, int a, int b, TileType t) { return map(ir::Op::Select, {c, a, b}, t); }
  // An operation of `kind` on `a` giving `t`.
  static TileOp unary(OpKind kind, int a, TileType t) {
    TileOp o;
    o.kind = kind;
    o.args = {a};
    o.type = std::move(t);
    return o;
  }
  int cast(int a, TileType t) { return emit(unary(OpKind::Cast, a, std::move(t))); }
  int broadcast(int a, std::vector<int> dims, TileType t) {
    TileOp o = unary(OpKind::Broadcast, a, std::move(t));
    o.dims = std::move(dims);
    return emit(o);
  }
  int permute(int a, std::vector<int> perm, TileType t) {
    TileOp o = unary(OpKind::Permute, a, std::move(t));
    o.perm = std::move(perm);
    return emit(o);
  }
  int read(const std::string& r, TileType t) {
    TileOp o;
    o.kind = OpKind::Read;
    o.buffer = r;
    o.type = std::move(t);
    return emit(o);
  }
  void write(const std::string& r, int v, TileType t) {
    TileOp o;
    o.kind = OpKind::Write;
    o.buffer = r;
    o.args = {v};
    o.type = std::move(t);
    emit(o);
  }
  // X or Y [row:+4(?), 0:+8] as a [4, 8] tile.
  static TileOp region(const std::string& buffer, ir::Expr row, bool tail) {
    TileOp o;
    o.buffer = buffer;
    o.starts = {std::move(row), ir::make_int(0)};
    o.axis_of_dim = {0, 1};
    o.bounds_checked = {tail, false};
    return o;
  }
  int load_x(ir::Expr row, bool tail) {
    TileOp o = region("X", std::move(row), tail);
    o.kind = OpKind::Load;
    o.type = TileType{DType::F16, {4, 8}};
    return emit(o);
  }
  int load_y(ir::Expr row, bool tail) {
    TileOp o = region("Y", std::move(row), tail);
    o.kind = OpKind::Load;
    o.type = f32({4, 8});
    return emit(o);
  }
  void store_y(ir::Expr row, int v, bool tail = true) {
    TileOp o = region("Y", std::move(row), tail);
    o.kind = OpKind::Store;
    o.args = {v};
    o.type = f32({4, 8});
    emit(o);
  }

  tile::TileProgram program;

 private:
  std::vector<tile::TileBody*> bodies_;
};

// An example, auto-scheduled, translated at `sizes` and optimised.
inline tile::TileProgram tiled(const std::string& example, const runtime::SizeMap& sizes) {
  ir::LoopProgram p = schedtest::example(example);
  schedule::AutoScheduleOptions o;
  o.sizes = sizes;
  std::vector<std::string> notes;
  tile::TileProgram tp = tile::translate(schedule::auto_schedule(p, o, &notes).program(), sizes);
  tile::optimize(tp);
  return tp;
}

inline const TileOp* find_def(tile::TileBody& b, int id) {
  const TileOp* out = nullptr;
  tile::for_each_op(b, [&](TileOp& o) {
    if (o.result == id) out = &o;
  });
  return out;
}

inline int count(tile::TileBody& b, OpKind kind) {
  int n = 0;
  tile::for_each_op(b, [&](TileOp& o) { n += o.kind == kind; });
  return n;
}

inline int count_selects(tile::TileBody& b) {
  int n = 0;
  tile::for_each_op(
      b, [&](TileOp& o) { n += o.kind == OpKind::Map && !o.is_call && o.op == ir::Op::Select; });
  return n;
}

inline const TileOp& last_store(tile::TileBody& b) {
  const TileOp* out = nullptr;
  tile::for_each_op(b, [&](TileOp& o) {
    if (o.kind == OpKind::Store) out = &o;
  });
  return *out;
}

}  // namespace kintsugi::tile_test
