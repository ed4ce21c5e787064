// \file Reciprocal.cpp
// In a serial loop (per-iteration work: a key loop's scores), an f32 division of a tile by a
// product of broadcasts (one of them not a scalar) is a product with their reciprocals:
// `x / (bcast(a) * bcast(b) * ...)` is `x * bcast(1 / a) * bcast(1 / b) * ...`, each reciprocal
// computed on its vector before the broadcast (a row's norm, a key's norm, a scalar temperature:
// cosine attention's scores). A division an element costs a reciprocal on the special-function
// unit that the exponentials of a softmax also need; the vectors hold one element a row or a
// column. Equal in exact arithmetic; in f32 within a few ulps of the division, which the back
// ends already compute with an approximate reciprocal.
//
// Divisions outside loops (an output normalised once by its row sum) and by scalars alone (the
// back ends compute one reciprocal) stay: rewriting them gains nothing.
//
// Invariant established: no f32 division of a tile of rank two or more in a loop has a divisor
// that is a product of broadcasts of lower rank, one of them not a scalar.
#include <algorithm>
#include <vector>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

class Rewriter : public OpRewriter {
 public:
  using OpRewriter::OpRewriter;

 protected:
  void rewrite(TileOp& o, TileBody& out) override {
    std::vector<const TileOp*> factors;
    if (depth() > 0 && divides_by_broadcasts(o, &factors)) replace_division(o, factors, out);
  }

 private:
  using OpRewriter::append;

  // The factors of `id`'s f32 value through products of its shape, each a scalar operand or a
  // broadcast of a value of lower rank; false when some factor is neither.
  bool broadcast_factors(int id, const std::vector<int64_t>& shape,
                         std::vector<const TileOp*>* out) const {
    const TileOp* d = def(id);
    if (!d || d->type.dtype != DType::F32) return false;
    if (d->type.shape.empty()) {
      out->push_back(d);
      return true;
    }
    if (d->type.shape != shape) return false;
    if (d->kind == OpKind::Map && !d->is_call && d->op == ir::Op::Mul)
      return broadcast_factors(d->args[0], shape, out) && broadcast_factors(d->args[1], shape, out);
    if (d->kind != OpKind::Broadcast || d->dims.size() >= shape.size()) return false;
    const TileOp* src = def(d->args[0]);
    if (!src || src->type.dtype != DType::F32) return false;
    out->push_back(d);
    return true;
  }

  bool divides_by_broadcasts(const TileOp& o, std::vector<const TileOp*>* factors) const {
    if (o.kind != OpKind::Map || o.is_call || o.op != ir::Op::Div || o.type.dtype != DType::F32 ||
        o.type.shape.size() < 2)
      return false;
    return broadcast_factors(o.args[1], o.type.shape, factors) &&
           std::any_of(factors->begin(), factors->end(),
                       [](const TileOp* f) { return !f->type.shape.empty(); });
  }

  // Appends a new operation of `kind` and `type` on `args` to `out`; returns its result.
  int append(OpKind kind, const TileType& type, std::vector<int> args, TileBody& out,
             ir::Op op = ir::Op::Add, std::vector<int> dims = {}) {
    TileOp o;
    o.kind = kind;
    o.type = type;
    o.args = std::move(args);
    o.op = op;
    o.dims = std::move(dims);
    return append(std::move(o), out);
  }

  // The reciprocal of factor `f` (a scalar, or a broadcast's source vector), appended to `out`.
  int reciprocal(const TileOp& f, TileBody& out) {
    const int source = f.type.shape.empty() ? f.result : f.args[0];
    const TileType type = def(source)->type;
    TileOp one;
    one.kind = OpKind::Full;
    one.scalar = ir::make_float(1.0, DType::F32);
    one.type = TileType{DType::F32, {}};
    int numerator = append(one, out);
    if (!type.shape.empty()) numerator = append(OpKind::Broadcast, type, {numerator}, out);
    return append(OpKind::Map, type, {numerator, source}, out, ir::Op::Div);
  }

  // Replaces division `o` by its product with the factors' reciprocals, their operations
  // appended to `out` in front of it. The factors that vary along the last axis (a key's norm)
  // come first, each broadcast on its own; those that do not (a row's norm, a scalar
  // temperature) are multiplied together on their row vector and broadcast once, last: the
  // product is then the scores times their column factors times one row factor, which the back
  // ends fold into a softmax's maximum and exponentials as they fold a scalar scale.
  void replace_division(TileOp& o, const std::vector<const TileOp*>& factors, TileBody& out) {
    const size_t last = o.type.shape.size() - 1;
    std::vector<const TileOp*> columns, rows, scalars;
    for (const TileOp* f : factors) {
      if (f->type.shape.empty())
        scalars.push_back(f);
      else if (std::find(f->dims.begin(), f->dims.end(), static_cast<int>(last)) != f->dims.end())
        columns.push_back(f);
      else
        rows.push_back(f);
    }
    // The row factors share one vector shape and broadcast (else each stays a factor of its own).
    for (const TileOp* f : rows)
      if (f->dims != rows.front()->dims ||
          def(f->args[0])->type.shape != def(rows.front()->args[0])->type.shape) {
        columns.insert(columns.end(), rows.begin(), rows.end());
        rows.clear();
        break;
      }
    int product = o.args[0];
    std::vector<int> finals;  // the last factors' values, each of o's shape or a scalar
    for (const TileOp* f : columns)
      finals.push_back(
          append(OpKind::Broadcast, o.type, {reciprocal(*f, out)}, out, ir::Op::Add, f->dims));
    int row = -1;  // the row factors and scalars multiplied together
    const TileType row_type =
        rows.empty() ? TileType{DType::F32, {}} : def(rows.front()->args[0])->type;
    for (const TileOp* f : rows)
      row = row < 0 ? reciprocal(*f, out)
                    : append(OpKind::Map, row_type, {row, reciprocal(*f, out)}, out, ir::Op::Mul);
    for (const TileOp* f : scalars) {
      int r = reciprocal(*f, out);
      if (!rows.empty()) r = append(OpKind::Broadcast, row_type, {r}, out);
      row = row < 0 ? r : append(OpKind::Map, row_type, {row, r}, out, ir::Op::Mul);
    }
    if (row >= 0)
      finals.push_back(rows.empty() ? row
                                    : append(OpKind::Broadcast, o.type, {row}, out, ir::Op::Add,
                                             rows.front()->dims));
    for (size_t k = 0; k + 1 < finals.size(); ++k)
      product = append(OpKind::Map, o.type, {product, finals[k]}, out, ir::Op::Mul);
    // The last product takes the division's place (and its result id).
    o.op = ir::Op::Mul;
    o.args = {product, finals.back()};
  }
};

}  // namespace

void reciprocal_of_broadcast_divisors(TileProgram& p) {
  for (Kernel& k : p.kernels) Rewriter(k).run();
}

}  // namespace kintsugi::tile
