// \file UniformSums.cpp
// Sums of uniform factors, taken out of the tile:
//   - `reduce sum(select(m, u, 0))`, u a scalar and m a tail mask `lt(arange(start), full(E))`
//     of a rank-one tile of W elements, is `u * count`, count = clamp(E - start, 0, W): the
//     number of elements m holds, known without touching them (a rolling update's statistic
//     that sums a constant, such as N^-2, over a strip's valid columns);
//   - `reduce sum(x * u)`, `reduce sum(u * x)` and `reduce sum(x / u)`, u a scalar, possibly
//     under `select(m, ..., 0)`, is `reduce sum(x) * u` (or `/ u`), the select kept on x (the
//     scaled sum `sum(x / N)` of a statistic, which is then the producer's own `sum(x)` once
//     the tail select on x is found redundant and the two reductions are computed once);
//   - `dot(a * u, b)`, `dot(a / u, b)` and `dot(a, b * u)`, u a scalar, is `dot(a, b) * u` (or
//     `/ u`), also where an operand is the transpose of such a product: queries or keys scaled
//     before their product (`f32(Q) * rsqrt(D)` inside the sum over d), whose dot operand is then
//     the loaded f16 or bf16 tile that the tensor cores take as it is, the scale applied to the
//     scores.
// Each sum is an element-wise pass and a block-wide reduction less a strip on a GPU. Equal in exact
// arithmetic; in floating point the sums round in another order (as a reassociation does). Only
// a factor proven finite and nonzero (literals, sizes, and their products, quotients and square
// roots, within the float range) is taken out, and a masked scalar only when proven finite: a
// zero divisor makes each term of `sum(x / u)` an infinity or 0 / 0, which one quotient of the
// sum is not (a row's min |x| of 0 made its sum of x / min |x| NaN, the factored sum inf), and an
// infinite u times a mask that holds no element is 0 / 0 rather than 0.
//
// Invariant established: no floating-point sum reduces a tile that is a scalar factor times a
// tile, or a masked scalar, of rank one; no dot operand is a tile times or over a scalar.
#include <cmath>
#include <optional>

#include "ir/Simplify.h"
#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

bool is_zero_literal(const ir::Expr& e) {
  return (e->op == ir::Op::FloatImm && e->float_value == 0.0) ||
         (e->op == ir::Op::IntImm && e->int_value == 0);
}

// Bounds on the magnitude of a value: lo <= |v| <= hi. (A root or power of a negative value is
// NaN, as harmless a factor outside the sum as inside: every term is NaN, and so is the sum.)
struct Magnitude {
  double lo = 0.0, hi = 0.0;
};

// Int64 values cast to f32 are below 2^63; a normal f32 is above 2^-126 and below 2^128.
constexpr double kIntMax = 9.3e18, kTiny = 1.2e-38, kHuge = 3.4e38;

// `m` as an f32 value has it: nullopt where it may overflow, a lower bound of 0 where it may
// underflow.
std::optional<Magnitude> within_float_range(Magnitude m) {
  if (!(m.hi < kHuge)) return std::nullopt;
  if (!(m.lo > kTiny)) m.lo = 0.0;
  return m;
}

// The magnitude of a product or quotient (`op`), or of a square root, reciprocal square root or
// power by literal `exponent` (`fn` of a call) of values of magnitudes `a`; nullopt for another
// operation.
std::optional<Magnitude> combine(bool call, ir::Op op, ir::MathFn fn,
                                 const std::vector<Magnitude>& a, double exponent = 1.0) {
  if (call) {
    if (a.empty()) return std::nullopt;
    const double lo = a[0].lo, hi = a[0].hi;
    if (fn == ir::MathFn::Sqrt) return within_float_range({std::sqrt(lo), std::sqrt(hi)});
    if (fn == ir::MathFn::Rsqrt)
      return within_float_range({1.0 / std::sqrt(hi), 1.0 / std::sqrt(lo)});
    if (fn != ir::MathFn::Pow) return std::nullopt;
    const double x = std::pow(lo, exponent), y = std::pow(hi, exponent);
    return within_float_range({std::min(x, y), std::max(x, y)});
  }
  if (a.size() != 2 || (op != ir::Op::Mul && op != ir::Op::Div)) return std::nullopt;
  if (op == ir::Op::Mul) return within_float_range({a[0].lo * a[1].lo, a[0].hi * a[1].hi});
  return within_float_range({a[0].lo / a[1].hi, a[0].hi / a[1].lo});
}

// The magnitude of a scalar expression built from literals and sizes (every size is at least 1)
// by products, quotients, powers by a literal, square roots and casts; nullopt for anything else
// (a param, an index) or a value that may overflow f32.
std::optional<Magnitude> magnitude(const ir::Expr& e) {
  switch (e->op) {
    case ir::Op::FloatImm:
    case ir::Op::IntImm: {
      const double v = std::fabs(e->op == ir::Op::FloatImm ? e->float_value : double(e->int_value));
      return std::isfinite(v) ? within_float_range({v, v}) : std::nullopt;
    }
    case ir::Op::Var:
      if (e->var_kind == ir::VarKind::Dim) return Magnitude{1.0, kIntMax};
      return std::nullopt;
    case ir::Op::Cast:
      if (e->type == DType::F32 || is_int(e->type)) return magnitude(e->args[0]);
      return std::nullopt;
    default:
      break;
  }
  // Integer floor division reaches 0; an integer product is bounded by the range proof.
  if (is_int(e->type) && e->op != ir::Op::Mul) return std::nullopt;
  const bool call = e->op == ir::Op::Call;
  double exponent = 1.0;
  size_t operands = e->args.size();
  if (call && e->fn == ir::MathFn::Pow) {
    if (operands != 2 || e->args[1]->op != ir::Op::FloatImm) return std::nullopt;
    exponent = e->args[1]->float_value;
    operands = 1;  // the exponent is a literal, not a magnitude
  }
  std::vector<Magnitude> args;
  for (size_t k = 0; k < operands; ++k) {
    const std::optional<Magnitude> m = magnitude(e->args[k]);
    if (!m) return std::nullopt;
    args.push_back(*m);
  }
  std::optional<Magnitude> m = combine(call, e->op, e->fn, args, exponent);
  if (m && is_int(e->type)) m->hi = std::min(m->hi, kIntMax);
  return m;
}

class UniformSums : public OpRewriter {
 public:
  using OpRewriter::OpRewriter;

 protected:
  void rewrite(TileOp& o, TileBody& out) override {
    if (is_float_sum(o)) factor(o, out);
    if (o.kind == OpKind::Dot) factor_dot(o, out);
  }

 private:
  bool is_scalar(int id) const {
    const TileOp* d = def(id);
    return d && d->type.shape.empty();
  }
  bool is_map(const TileOp* d, ir::Op op, size_t arity) const {
    return d && d->kind == OpKind::Map && !d->is_call && d->op == op && d->args.size() == arity;
  }
  // The magnitude of scalar value `id`: a full of a literal-and-size expression, a cast of one,
  // or a product, quotient or square root of such values.
  std::optional<Magnitude> scalar_magnitude(int id) const {
    const TileOp* d = def(id);
    if (!d || !d->type.shape.empty()) return std::nullopt;
    if (d->kind == OpKind::Full) return magnitude(d->scalar);
    if (d->kind == OpKind::Cast && d->type.dtype == DType::F32 && d->args.size() == 1)
      return scalar_magnitude(d->args[0]);
    if (d->kind != OpKind::Map) return std::nullopt;
    std::vector<Magnitude> args;
    for (int a : d->args) {
      const std::optional<Magnitude> m = scalar_magnitude(a);
      if (!m) return std::nullopt;
      args.push_back(*m);
    }
    return combine(d->is_call, d->op, d->fn, args);
  }
  bool finite_nonzero(int id) const {
    const std::optional<Magnitude> m = scalar_magnitude(id);
    return m && m->lo > 0.0;
  }
  bool is_zero_value(int id) const {
    const TileOp* d = def(id);
    return d && d->kind == OpKind::Full && is_zero_literal(d->scalar);
  }
  static bool is_float_sum(const TileOp& o) {
    return o.kind == OpKind::Reduce && o.reducer == ir::Reducer::Sum && o.type.dtype == DType::F32;
  }

  // The number of elements tail mask `id` holds in a rank-one tile of `width` elements, or
  // null when `id` is not such a mask.
  ir::Expr count_of_mask(int id, int64_t width) const {
    const TileOp* m = def(id);
    if (!is_map(m, ir::Op::Lt, 2) || m->type.shape.size() != 1) return nullptr;
    const TileOp* index = def(m->args[0]);
    const TileOp* extent = def(m->args[1]);
    if (!index || index->kind != OpKind::Arange || index->type.shape != m->type.shape || !extent ||
        extent->kind != OpKind::Full)
      return nullptr;
    ir::Expr left = ir::make_binary(ir::Op::Sub, extent->scalar, index->scalar);
    ir::Expr clamped = ir::make_binary(
        ir::Op::Max, ir::make_binary(ir::Op::Min, left, ir::make_int(width)), ir::make_int(0));
    return ir::simplify(clamped);
  }

  TileOp map(ir::Op op, const TileType& type, std::vector<int> args) const {
    TileOp o;
    o.kind = OpKind::Map;
    o.op = op;
    o.type = type;
    o.args = std::move(args);
    return o;
  }

  static void replace(TileOp& o, TileOp by) {
    by.result = o.result;
    o = std::move(by);
  }

  // The tile and scalar factors (and * or /) of a product or quotient `id` of a tile and a
  // scalar of `dtype`; false when `id` is none.
  bool scaled_tile(int id, DType dtype, int* tile_factor, int* scalar_factor, ir::Op* scale) const {
    const TileOp* term = def(id);
    if (!is_map(term, ir::Op::Mul, 2) && !is_map(term, ir::Op::Div, 2)) return false;
    const int a = term->args[0], b = term->args[1];
    *scale = term->op;
    if (is_scalar(b) && !is_scalar(a))
      *tile_factor = a, *scalar_factor = b;
    else if (term->op == ir::Op::Mul && is_scalar(a) && !is_scalar(b))
      *tile_factor = b, *scalar_factor = a;
    else
      return false;
    const TileOp* tile = def(*tile_factor);
    return tile && tile->type.dtype == term->type.dtype && tile->type.shape == term->type.shape &&
           def(*scalar_factor)->type.dtype == dtype && finite_nonzero(*scalar_factor);
  }

  // Rewrites dot `o` as the dot of the unscaled operand times the scalar when an operand is a
  // tile times or over a scalar; the dot goes to `out` in front of `o`, which becomes the product.
  // An operand may be the transpose of a scaled tile (keys scaled before K^T): the transpose of
  // the unscaled tile is taken instead.
  void factor_dot(TileOp& o, TileBody& out) {
    for (size_t side = 0; side < 2; ++side) {
      const TileOp* transpose = def(o.args[side]);
      if (transpose && transpose->kind != OpKind::Permute) transpose = nullptr;
      int tile_factor = -1, scalar_factor = -1;
      ir::Op scale = ir::Op::Mul;
      if (!scaled_tile(transpose ? transpose->args[0] : o.args[side], o.type.dtype, &tile_factor,
                       &scalar_factor, &scale))
        continue;
      if (transpose) {
        TileOp unscaled = *transpose;
        unscaled.args = {tile_factor};
        tile_factor = append(unscaled, out);
      }
      TileOp dot = o;
      dot.args[side] = tile_factor;
      const int product = append(dot, out);
      replace(o, map(scale, o.type, {product, scalar_factor}));
      return;
    }
  }

  // Rewrites sum `o` as a scalar product or quotient when its operand has a scalar factor; the
  // new operations go to `out` in front of it, and `o` becomes the product (keeping its result).
  void factor(TileOp& o, TileBody& out) {
    const TileOp* operand = def(o.args[0]);
    if (!operand || operand->type.dtype != o.type.dtype) return;
    int mask = -1;
    const TileOp* term = operand;
    if (is_map(operand, ir::Op::Select, 3) && is_zero_value(operand->args[2])) {
      mask = operand->args[0];
      term = def(operand->args[1]);
    }
    if (!term) return;
    const TileType tile = operand->type;
    // A masked scalar: the scalar times the mask's count.
    if (mask >= 0 && term->type.shape.empty() && term->type.dtype == o.type.dtype &&
        tile.shape.size() == 1 && scalar_magnitude(term->result)) {
      ir::Expr count = count_of_mask(mask, tile.shape[0]);
      if (!count) return;
      TileOp n;
      n.kind = OpKind::Full;
      n.type = TileType{o.type.dtype, {}};
      n.scalar = ir::make_cast(o.type.dtype, count);
      int counted = append(n, out);
      replace(o, map(ir::Op::Mul, o.type, {term->result, counted}));
      return;
    }
    // A scalar factor of the tile: the sum of the other factor, scaled once.
    if (term->type.dtype != tile.dtype || term->type.shape != tile.shape) return;
    int tile_factor = -1, scalar_factor = -1;
    ir::Op scale = ir::Op::Mul;
    if (!scaled_tile(term->result, o.type.dtype, &tile_factor, &scalar_factor, &scale)) return;
    int summed = tile_factor;
    if (mask >= 0)
      summed = append(map(ir::Op::Select, tile, {mask, summed, operand->args[2]}), out);
    TileOp sum = o;
    sum.args = {summed};
    const int partial = append(sum, out);
    replace(o, map(scale, o.type, {partial, scalar_factor}));
  }
};

}  // namespace

void factor_uniform_sums(TileProgram& p) {
  for (Kernel& k : p.kernels) UniformSums(k).run();
}

}  // namespace kintsugi::tile
