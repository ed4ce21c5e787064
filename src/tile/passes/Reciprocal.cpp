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

  // Replaces division `o` by its product with the factors' reciprocals, their operations
  // appended to `out` in front of it.
  void replace_division(TileOp& o, const std::vector<const TileOp*>& factors, TileBody& out) {
    int product = o.args[0];
    for (const TileOp* f : factors) {
      // A scalar factor is its own source, an operand of the product as it is.
      const bool spread_out = !f->type.shape.empty();
      const int source = spread_out ? f->args[0] : f->result;
      const TileType type = def(source)->type;
      const std::vector<int> dims = f->dims;
      TileOp one;
      one.kind = OpKind::Full;
      one.scalar = ir::make_float(1.0, DType::F32);
      one.type = TileType{DType::F32, {}};
      int numerator = append(one, out);
      if (!type.shape.empty()) numerator = append(OpKind::Broadcast, type, {numerator}, out);
      int factor = append(OpKind::Map, type, {numerator, source}, out, ir::Op::Div);
      if (spread_out) factor = append(OpKind::Broadcast, o.type, {factor}, out, ir::Op::Add, dims);
      if (f == factors.back()) {
        // The last product takes the division's place (and its result id).
        o.op = ir::Op::Mul;
        o.args = {product, factor};
        return;
      }
      product = append(OpKind::Map, o.type, {product, factor}, out, ir::Op::Mul);
    }
  }
};

}  // namespace

void reciprocal_of_broadcast_divisors(TileProgram& p) {
  for (Kernel& k : p.kernels) Rewriter(k).run();
}

}  // namespace kintsugi::tile
