// \file Residues.cpp
// A divisibility test of a sum of per-axis integer terms is a comparison of per-axis residues:
// `(a[i] - b[j]) % n == 0` over a tile, with a[i] broadcast along the rows and b[j] along the
// columns and n a scalar, is `r(a)[i] == r(b)[j]`, where r(x) = ((x % n) + n) % n is computed on
// the vectors before the broadcasts. The strided pattern of a sparse attention
// (`(i - j) % STRIDE == 0`) or a checkerboard (`(i + j) % 2 == 0`) then costs a comparison an
// element instead of an integer division.
//
// Why it is exact: a - b is a multiple of n exactly when a and b are congruent modulo n, and r
// maps every integer to one representative of its class (for either sign of n, with the floor
// or the truncating remainder), so equal residues mean congruent values. The terms are the
// operands of additions and subtractions, each a broadcast of a vector along one axis or a
// scalar; scalars join the row side.
//
// Invariant established: no equality or inequality against 0 of a remainder by a scalar has a
// dividend that is a sum of broadcasts along two axes.
#include <algorithm>
#include <map>
#include <vector>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

struct Term {
  int value;     // a scalar, or the vector a broadcast reads
  int axis;      // the broadcast's axis of the tile; -1 for a scalar
  bool negated;  // subtracted
};

class Rewriter : public OpRewriter {
 public:
  using OpRewriter::OpRewriter;

 protected:
  void rewrite(TileOp& o, TileBody& out) override {
    if (o.kind != OpKind::Map || o.is_call || (o.op != ir::Op::Eq && o.op != ir::Op::Ne) ||
        o.args.size() != 2 || o.type.shape.size() != 2)
      return;
    const TileOp* mod = def(o.args[0]);
    if (!is_zero(o.args[1]) || !mod || mod->kind != OpKind::Map || mod->is_call ||
        mod->op != ir::Op::Mod || !is_int_scalar(mod->args[1]))
      return;
    std::vector<Term> terms;
    if (!collect(mod->args[0], false, mod->type.shape, &terms)) return;
    std::map<int, std::vector<Term>> by_axis;
    for (const Term& t : terms) by_axis[t.axis].push_back(t);
    by_axis.erase(-1);
    if (by_axis.size() != 2) return;
    const int rows = by_axis.begin()->first, cols = by_axis.rbegin()->first;
    // rows side: the row terms and the scalars; column side: the column terms, negated.
    std::vector<Term> left, right;
    for (const Term& t : terms) (t.axis == cols ? right : left).push_back(t);
    for (Term& t : right) t.negated = !t.negated;
    const int n = mod->args[1];
    int a = broadcast(residue(sum(left, o.type.shape[static_cast<size_t>(rows)], out), n, out),
                      rows, o.type.shape, out);
    int b = broadcast(residue(sum(right, o.type.shape[static_cast<size_t>(cols)], out), n, out),
                      cols, o.type.shape, out);
    o.args = {a, b};
  }

 private:
  bool is_zero(int id) const {
    const TileOp* d = def(id);
    return d && d->kind == OpKind::Full && d->type.shape.empty() &&
           d->scalar->op == ir::Op::IntImm && d->scalar->int_value == 0;
  }

  bool is_int_scalar(int id) const {
    const TileOp* d = def(id);
    return d && d->type.shape.empty() && d->type.dtype == DType::Int;
  }

  // The terms of `id`, an int tile of `shape`, through additions and subtractions; false when
  // a term is neither a scalar nor a broadcast of a vector along one axis.
  bool collect(int id, bool negated, const std::vector<int64_t>& shape,
               std::vector<Term>* out) const {
    const TileOp* d = def(id);
    if (!d || d->type.dtype != DType::Int) return false;
    if (d->type.shape.empty()) {
      out->push_back(Term{id, -1, negated});
      return true;
    }
    if (d->type.shape != shape) return false;
    if (d->kind == OpKind::Map && !d->is_call && (d->op == ir::Op::Add || d->op == ir::Op::Sub))
      return collect(d->args[0], negated, shape, out) &&
             collect(d->args[1], d->op == ir::Op::Sub ? !negated : negated, shape, out);
    if (d->kind != OpKind::Broadcast || d->dims.size() != 1) return false;
    out->push_back(Term{d->args[0], d->dims[0], negated});
    return true;
  }

  int map(ir::Op op, int a, int b, int64_t extent, TileBody& out) {
    TileOp m;
    m.kind = OpKind::Map;
    m.op = op;
    m.args = {a, b};
    m.type = TileType{DType::Int, {extent}};
    return append(m, out);
  }

  int sum(std::vector<Term> terms, int64_t extent, TileBody& out) {
    // The vector terms first, so that every partial sum is a vector.
    std::stable_partition(terms.begin(), terms.end(), [](const Term& t) { return t.axis >= 0; });
    int acc = -1;
    for (const Term& t : terms) {
      if (acc >= 0) {
        acc = map(t.negated ? ir::Op::Sub : ir::Op::Add, acc, t.value, extent, out);
      } else if (!t.negated) {
        acc = t.value;
      } else {
        TileOp zero;
        zero.kind = OpKind::Full;
        zero.scalar = ir::make_int(0);
        zero.type = TileType{DType::Int, {}};
        acc = map(ir::Op::Sub, append(zero, out), t.value, extent, out);
      }
    }
    return acc;
  }

  int residue(int x, int n, TileBody& out) {
    const int64_t extent = def(x)->type.shape[0];
    int r = map(ir::Op::Mod, x, n, extent, out);
    return map(ir::Op::Mod, map(ir::Op::Add, r, n, extent, out), n, extent, out);
  }

  int broadcast(int v, int axis, const std::vector<int64_t>& shape, TileBody& out) {
    TileOp b;
    b.kind = OpKind::Broadcast;
    b.args = {v};
    b.dims = {axis};
    b.type = TileType{DType::Int, shape};
    return append(b, out);
  }
};

}  // namespace

void residues_along_axes(TileProgram& p) {
  for (Kernel& k : p.kernels) Rewriter(k).run();
}

}  // namespace kintsugi::tile
