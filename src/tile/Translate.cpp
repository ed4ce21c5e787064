// \file Translate.cpp
// Loop IR -> tile IR (see Translate.h for the rules).
//
// Invariant established: the tile program computes, for every element the loop program stores,
// the same value (up to the order of floating-point sums inside a tile), and stores nothing the
// loop program does not store.
#include "tile/Translate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

using ir::Expr;
using ir::Op;
using ir::Stmt;
using ir::StmtNode;

// A leaf nest's tile axes materialise at most this many elements (a contraction, which becomes a
// dot, materialises its operands and its result, not its iteration space), and a register at
// most kMaxRegisterElements: a whole row of a long sequence is not a tile.
constexpr int64_t kMaxTileElements = 1 << 20;
// The chunk of a leaf loop over an extent that is no tile extent (innermost_in_chunks).
constexpr int64_t kLeafChunk = 1024;
constexpr int64_t kMaxRegisterElements = 1 << 16;

[[noreturn]] void refuse(const std::string& why) {
  throw NotTileForm(why);
}

bool is_leaf_nest(const Stmt& s) {
  const StmtNode* n = s.get();
  while (n->kind == ir::StmtKind::For) n = n->body.get();
  return n->kind == ir::StmtKind::Block;
}

bool is_zero(const Expr& e) {
  return e->op == Op::IntImm && e->int_value == 0;
}

// Whether an integer is at least 0 at every size: literals, sizes, and what minima, maxima, sums,
// products, divisions and selects make of them (where a skipped tile's mask starts a loop:
// max(0, min(.., 3)), or one of two such starts).
bool provably_nonnegative(const Expr& e) {
  switch (e->op) {
    case Op::IntImm:
      return e->int_value >= 0;
    case Op::Var:
      return e->var_kind == ir::VarKind::Dim;
    case Op::Max:
      return provably_nonnegative(e->args[0]) || provably_nonnegative(e->args[1]);
    case Op::Select:
      return provably_nonnegative(e->args[1]) && provably_nonnegative(e->args[2]);
    case Op::Min:
    case Op::Add:
    case Op::Mul:
    case Op::Div:
      return provably_nonnegative(e->args[0]) && provably_nonnegative(e->args[1]);
    default:
      return false;
  }
}

Expr int_var(const std::string& name) {
  return ir::make_var(name, ir::VarKind::Index, DType::Int);
}

// Conjuncts of a predicate.
void conjuncts(const Expr& e, std::vector<Expr>* out) {
  if (!e) return;
  if (e->op == Op::And) {
    conjuncts(e->args[0], out);
    conjuncts(e->args[1], out);
    return;
  }
  out->push_back(e);
}

// The conjunction of a non-empty list of conditions.
Expr conjunction(const std::vector<Expr>& conds) {
  Expr out = conds.at(0);
  for (size_t k = 1; k < conds.size(); ++k) out = ir::make_binary(Op::And, out, conds[k]);
  return out;
}

bool has_load(const Expr& e) {
  bool found = false;
  ir::visit(e, [&](const Expr& x) {
    found = found || x->op == Op::Load;
    return !found;
  });
  return found;
}

// Program-wide facts the translation needs.
struct Context {
  const ir::LoopProgram* program = nullptr;
  std::map<std::string, int64_t> sizes;
  runtime::ParamMap params;             // every param's value (the given one, else the program's)
  std::set<std::string> specialisable;  // size expressions that may be tile extents, printed
  std::map<std::string, Specialisation>* specialised = nullptr;
  std::map<std::string, Divisibility>* divisible = nullptr;
  std::map<std::string, PartBound>* bounded = nullptr;
  std::set<std::string> dynamic;           // sizes that change from launch to launch
  std::set<std::string> registers;         // allocated buffers
  int64_t tile_budget = kMaxTileElements;  // elements a leaf nest's tile may materialise

  // The constant a tile extent takes, or -1 when `e` cannot be a tile extent.
  int64_t tile_extent(const Expr& e) const {
    if (e->op == Op::IntImm) return e->int_value;
    std::string text = ir::to_string(e);
    if (!specialisable.count(text)) return -1;
    int64_t value = 0;
    try {
      value = ir::eval_int(e, sizes, params);
    } catch (const UserError&) {
      return -1;  // a size not given
    }
    if (value < 1) return -1;  // an empty extent (a param's value): a loop that never runs
    (*specialised)[text] = Specialisation{e, value};
    return value;
  }
};

// Emits operations into a kernel body, numbering values.
class Emitter {
 public:
  explicit Emitter(Kernel* k) : kernel_(k), body_(&k->body) {}

  int emit(TileOp op) {
    if (op.kind != OpKind::Store && op.kind != OpKind::Write) op.result = kernel_->num_values++;
    TileStmt s;
    s.op = std::move(op);
    body_->push_back(std::move(s));
    return body_->back().op.result;
  }
  TileBody* body() const { return body_; }
  void set_body(TileBody* b) { body_ = b; }
  Kernel* kernel() const { return kernel_; }

 private:
  Kernel* kernel_;
  TileBody* body_;
};

struct TileAxis {
  std::string var;
  int64_t extent;
  Expr extent_expr;  // the loop's extent, before specialisation
};

struct Val {
  int id = -1;
  std::vector<std::string> axes;  // tile axes of the value, in its own order
  DType dtype = DType::F32;
};

// One leaf nest: its tile axes and the block, turned into operations.
class NestTranslator {
 public:
  // `serial`: the serial loops around the nest that start at 0, with their extents.
  NestTranslator(const Context& ctx, Emitter& em, std::vector<TileAxis> axes, const StmtNode& block,
                 const std::map<std::string, Expr>& serial)
      : ctx_(ctx), em_(em), axes_(std::move(axes)), block_(block), serial_(serial) {}

  void run() {
    std::map<std::string, Expr> bindings;
    std::set<std::string> tile_reduce;  // tile axes the block reduces over
    std::vector<Expr> first_conds;      // outer reduction iterations at their first value
    for (const ir::IterVar& iv : block_.iters) {
      bindings[iv.name] = iv.binding;
      if (iv.kind == ir::IterKind::Spatial) continue;
      std::vector<std::string> used = axes_in(iv.binding);
      if (used.empty()) {
        first_conds.push_back(ir::make_binary(Op::Eq, iv.binding, ir::make_int(0)));
        continue;
      }
      // A reduction over a tile axis `a` bound as `a` or as `x + a` (a split reduction loop: x
      // walks the tiles serially, and the tile holding the first iteration is the one at x = 0).
      const Expr& b = iv.binding;
      std::string axis;
      if (iv.kind != ir::IterKind::Scan && used.size() == 1) {
        if (b->op == Op::Var) axis = b->name;
        for (int k = 0; b->op == Op::Add && k < 2 && axis.empty(); ++k)
          if (b->args[k]->op == Op::Var && b->args[k]->name == used[0]) {
            axis = used[0];
            first_conds.push_back(ir::make_binary(Op::Eq, b->args[1 - k], ir::make_int(0)));
          }
      }
      if (axis.empty())
        refuse("block '" + block_.name + "' scans or reduces over a tile axis through '" +
               ir::to_string(iv.binding) + "'");
      tile_reduce.insert(axis);
    }
    const StmtNode& store = *block_.body;
    if (store.kind != ir::StmtKind::Store)
      refuse("block '" + block_.name + "' is not a single store");
    // Divisions by a tile axis's own extent fold: (q * E + v) / E = q for v in [0, E).
    std::map<std::string, Expr> ranges;
    for (const TileAxis& a : axes_) ranges[a.var] = a.extent_expr;
    auto in_loop_terms = [&](const Expr& e) {
      return ir::simplify_in_ranges(ir::substitute(e, bindings), ranges);
    };
    std::vector<Expr> target;
    for (const Expr& idx : store.indices) target.push_back(in_loop_terms(idx));
    std::vector<Expr> store_mask, reduce_mask;
    std::vector<Expr> pred;
    conjuncts(block_.predicate, &pred);
    for (const Expr& c : pred) {
      if (always_true(c)) continue;
      std::vector<std::string> used = axes_in(c);
      bool over_reduce = std::any_of(used.begin(), used.end(),
                                     [&](const std::string& a) { return tile_reduce.count(a); });
      (over_reduce ? reduce_mask : store_mask).push_back(c);
      live_.push_back(c);
    }
    Val value;
    if (tile_reduce.empty()) {
      // A reduction carried by an enclosing loop: the init runs in its first iteration.
      if (block_.init && block_.init->kind == ir::StmtKind::Store) {
        std::vector<Expr> init_target;
        for (const Expr& idx : block_.init->indices) init_target.push_back(in_loop_terms(idx));
        std::vector<Expr> conds = first_conds;
        conds.insert(conds.end(), store_mask.begin(), store_mask.end());
        Val mask;
        if (!conds.empty()) mask = expr(conjunction(conds));
        write(block_.init->buffer, init_target, expr(in_loop_terms(block_.init->value)), mask);
      }
      value = expr(in_loop_terms(store.value));
    } else {
      ir::Reducer reducer;
      Expr term;
      if (!schedule::match_reduction_update(store, &reducer, &term))
        refuse("block '" + block_.name +
               "' reduces over a tile axis but is not a reduction update");
      Val reduced = reduction(reducer, in_loop_terms(term), tile_reduce, reduce_mask);
      Val acc;
      Expr identity = ir::reducer_identity_expr(reducer, store.value->type);
      if (block_.init && block_.init->kind == ir::StmtKind::Store && first_conds.empty() &&
          ir::equal(ir::simplify(block_.init->value), identity)) {
        acc.id = -1;  // the reduction starts here from its identity
      } else if (block_.init && block_.init->kind == ir::StmtKind::Store) {
        Val init = expr(in_loop_terms(block_.init->value));
        acc = init;
        if (!first_conds.empty()) {
          acc = select(expr(conjunction(first_conds)), init,
                       access(store.buffer, target, store.value->type));
        }
      } else {
        acc = access(store.buffer, target, store.value->type);
      }
      value = acc.id < 0 ? reduced
                         : map(ir::combine(reducer, int_var("a"), int_var("b")), {acc, reduced},
                               store.value->type);
    }
    Val mask;
    if (!store_mask.empty()) mask = expr(conjunction(store_mask));
    write(store.buffer, target, value, mask);
  }

 private:
  // The range [lo, hi] of an integer made of literals, tile axes, grid indices and specialised
  // sizes (their values are checked at launch), by interval arithmetic; nullopt when unknown.
  std::optional<std::pair<int64_t, int64_t>> range_of(const Expr& e) const {
    using Range = std::pair<int64_t, int64_t>;
    switch (e->op) {
      case Op::IntImm:
        return Range{e->int_value, e->int_value};
      case Op::Var: {
        if (e->var_kind != ir::VarKind::Index) {
          int64_t v = e->var_kind == ir::VarKind::Dim ? ctx_.tile_extent(e) : specialised_value(e);
          if (v < 0) return std::nullopt;
          return Range{v, v};
        }
        for (const TileAxis& a : axes_)
          if (a.var == e->name) return Range{0, a.extent - 1};
        for (const GridAxis& g : em_.kernel()->grid)
          if (g.var == e->name) {
            auto n = range_of(g.extent);
            if (!n) return std::nullopt;
            return Range{0, n->second - 1};
          }
        if (auto it = serial_.find(e->name); it != serial_.end()) {
          auto n = upper_bound(it->second);
          if (!n) return std::nullopt;
          return Range{0, *n - 1};
        }
        return std::nullopt;
      }
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div: {
        auto a = range_of(e->args[0]), b = range_of(e->args[1]);
        if (!a || !b) return std::nullopt;
        if (e->op == Op::Add) return Range{a->first + b->first, a->second + b->second};
        if (e->op == Op::Sub) return Range{a->first - b->second, a->second - b->first};
        if (a->first < 0 || b->first < 0) return std::nullopt;
        if (e->op == Op::Mul) return Range{a->first * b->first, a->second * b->second};
        if (b->first == 0) return std::nullopt;
        return Range{a->first / b->second, a->second / b->first};
      }
      default:
        return std::nullopt;
    }
  }

  // An upper bound of an integer: range_of's, or through a minimum one side's alone and through
  // a select both sides' (a loop of at most 4 tiles that a mask's data-dependent end cuts short:
  // max(min(4, (LEN[b] - ..) / 64 + 1), 1)).
  std::optional<int64_t> upper_bound(const Expr& e) const {
    if (e->op == Op::Select) {
      auto a = upper_bound(e->args[1]), b = upper_bound(e->args[2]);
      return a && b ? std::optional<int64_t>(std::max(*a, *b)) : std::nullopt;
    }
    if (e->op == Op::Min || e->op == Op::Max) {
      auto a = upper_bound(e->args[0]), b = upper_bound(e->args[1]);
      if (e->op == Op::Max) return a && b ? std::optional<int64_t>(std::max(*a, *b)) : std::nullopt;
      if (a && b) return std::min(*a, *b);
      return a ? a : b;
    }
    auto r = range_of(e);
    if (!r) return std::nullopt;
    return r->second;
  }

  // Whether a predicate conjunct holds everywhere the nest runs (a tail test of a split by a
  // factor that divides a specialised size).
  bool always_true(const Expr& c) const {
    if (c->op == Op::And) return always_true(c->args[0]) && always_true(c->args[1]);
    if (c->op != Op::Lt && c->op != Op::Le && c->op != Op::Gt && c->op != Op::Ge) return false;
    auto a = range_of(c->args[0]), b = range_of(c->args[1]);
    if (!a || !b) return false;
    switch (c->op) {
      case Op::Lt:
        return a->second < b->first;
      case Op::Le:
        return a->second <= b->first;
      case Op::Gt:
        return a->first > b->second;
      default:
        return a->first >= b->second;
    }
  }

  std::vector<std::string> axes_in(const Expr& e) const {
    std::vector<std::string> out;
    for (const TileAxis& a : axes_)
      if (ir::uses_var(e, a.var)) out.push_back(a.var);
    return out;
  }

  int64_t extent_of(const std::string& axis) const {
    for (const TileAxis& a : axes_)
      if (a.var == axis) return a.extent;
    internal_error << "unknown tile axis " << axis;
    return 0;
  }

  // `axes` sorted into nest order.
  std::vector<std::string> nest_order(const std::set<std::string>& axes) const {
    std::vector<std::string> out;
    for (const TileAxis& a : axes_)
      if (axes.count(a.var)) out.push_back(a.var);
    return out;
  }

  TileType type_of(DType t, const std::vector<std::string>& axes) const {
    TileType out{t, {}};
    for (const std::string& a : axes) out.shape.push_back(extent_of(a));
    return out;
  }

  // v with its axes permuted and broadcast to exactly `target` (which holds all of v's axes).
  Val arrange(const Val& v, const std::vector<std::string>& target) {
    if (v.axes == target) return v;
    std::vector<std::string> ordered;  // v's axes in target order
    for (const std::string& a : target)
      if (std::find(v.axes.begin(), v.axes.end(), a) != v.axes.end()) ordered.push_back(a);
    internal_assert(ordered.size() == v.axes.size()) << "arrange: an axis is missing";
    Val cur = v;
    if (ordered != v.axes) {
      TileOp p;
      p.kind = OpKind::Permute;
      p.args = {v.id};
      for (const std::string& a : ordered)
        p.perm.push_back(
            static_cast<int>(std::find(v.axes.begin(), v.axes.end(), a) - v.axes.begin()));
      p.type = type_of(v.dtype, ordered);
      cur = Val{em_.emit(p), ordered, v.dtype};
    }
    if (ordered.size() == target.size()) return cur;
    TileOp b;
    b.kind = OpKind::Broadcast;
    b.args = {cur.id};
    for (const std::string& a : ordered)
      b.dims.push_back(
          static_cast<int>(std::find(target.begin(), target.end(), a) - target.begin()));
    b.type = type_of(v.dtype, target);
    return Val{em_.emit(b), target, v.dtype};
  }

  // An elementwise op: `pattern` is an ir op over variables standing for the operands. Scalar
  // operands stay scalars (a map broadcasts them); the result takes the axis order of an operand
  // that spans every axis, else the nest order.
  Val map(const Expr& pattern, const std::vector<Val>& args, DType type) {
    std::set<std::string> all;
    for (const Val& a : args) all.insert(a.axes.begin(), a.axes.end());
    std::vector<std::string> out = nest_order(all);
    for (const Val& a : args)
      if (a.axes.size() == all.size()) {
        out = a.axes;
        break;
      }
    TileOp o;
    o.kind = OpKind::Map;
    if (pattern->op == Op::Call) {
      o.is_call = true;
      o.fn = pattern->fn;
    } else {
      o.op = pattern->op;
    }
    for (const Val& a : args) o.args.push_back(a.axes.empty() ? a.id : arrange(a, out).id);
    o.type = type_of(type, out);
    return Val{em_.emit(o), out, type};
  }

  Val select(const Val& c, const Val& t, const Val& f) {
    return map(ir::make_select(int_var("c"), int_var("t"), int_var("f")), {c, t, f}, t.dtype);
  }

  // start, start + 1, ... along a tile axis.
  Val arange(const std::string& axis, const Expr& start) {
    TileOp o;
    o.kind = OpKind::Arange;
    o.axis = 0;
    o.scalar = start;
    o.type = TileType{DType::Int, {extent_of(axis)}};
    return Val{em_.emit(o), {axis}, DType::Int};
  }

  Val full(const Expr& scalar) {
    TileOp o;
    o.kind = OpKind::Full;
    o.scalar = scalar;
    o.type = TileType{scalar->type, {}};
    return Val{em_.emit(o), {}, scalar->type};
  }

  Val expr(const Expr& e) {
    std::vector<std::string> used = axes_in(e);
    if (used.empty() && !has_load(e)) return full(e);
    if (used.size() == 1 && e->type == DType::Int && !has_load(e)) {
      Expr start = ir::simplify(ir::substitute(e, {{used[0], ir::make_int(0)}}));
      if (ir::provably_equal(e, ir::make_binary(Op::Add, start, int_var(used[0]))))
        return arange(used[0], start);
    }
    switch (e->op) {
      case Op::Var:
        return arange(e->name, ir::make_int(0));
      case Op::Load:
        return access(e->name, e->args, e->type);
      case Op::Cast: {
        Val a = expr(e->args[0]);
        TileOp o;
        o.kind = OpKind::Cast;
        o.args = {a.id};
        o.type = type_of(e->type, a.axes);
        return Val{em_.emit(o), a.axes, e->type};
      }
      case Op::Neg:
      case Op::Not:
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Mod:
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
      case Op::Eq:
      case Op::Ne:
      case Op::And:
      case Op::Or:
      case Op::Min:
      case Op::Max:
      case Op::Call: {
        std::vector<Val> args;
        for (const Expr& a : e->args) args.push_back(expr(a));
        return map(e, args, e->type);
      }
      case Op::Select: {
        // A branch's reads happen only where it is taken (see guards_).
        Val cond = expr(e->args[0]);
        guards_.push_back(e->args[0]);
        Val then = expr(e->args[1]);
        guards_.back() = ir::make_unary(Op::Not, e->args[0]);
        Val otherwise = expr(e->args[2]);
        guards_.pop_back();
        return map(e, {cond, then, otherwise}, e->type);
      }
      default:
        break;
    }
    refuse("expression '" + ir::to_string(e) + "' has no tile form");
  }

  // Where a buffer dimension's index lands in the tile: a start and at most one axis.
  struct DimAccess {
    Expr start;
    std::string axis;  // empty: squeezed
  };

  DimAccess dim_access(const Expr& index) const {
    Expr idx = ir::simplify(index);
    std::vector<std::string> used = axes_in(idx);
    if (used.empty()) return {idx, ""};
    if (used.size() > 1) refuse("index '" + ir::to_string(idx) + "' moves along two tile axes");
    Expr start = ir::simplify(ir::substitute(idx, {{used[0], ir::make_int(0)}}));
    if (!ir::provably_equal(idx, ir::make_binary(Op::Add, start, int_var(used[0]))))
      refuse("index '" + ir::to_string(idx) + "' does not step by one along tile axis " + used[0]);
    return {start, used[0]};
  }

  // The register's dims of extent > 1, as tile dims.
  std::vector<int64_t> register_dims(const ir::Buffer& b, std::vector<size_t>* which) const {
    std::vector<int64_t> out;
    for (size_t d = 0; d < b.shape.size(); ++d) {
      int64_t n = ctx_.tile_extent(b.shape[d]);
      if (n < 0) refuse("register '" + b.name + "' has a dimension that is not a tile extent");
      if (n == 1) continue;
      out.push_back(n);
      if (which) which->push_back(d);
    }
    return out;
  }

  // The axes (in register order) through which a register is accessed by `indices`.
  std::vector<std::string> register_axes(const ir::Buffer& b, const std::vector<Expr>& indices) {
    std::vector<size_t> dims;
    std::vector<int64_t> shape = register_dims(b, &dims);
    std::vector<std::string> axes;
    for (size_t k = 0; k < dims.size(); ++k) {
      Expr idx = ir::simplify(indices[dims[k]]);
      if (idx->op != Op::Var || extent_of_or(idx->name) != shape[k])
        refuse("register '" + b.name + "' is not accessed whole (index '" + ir::to_string(idx) +
               "')");
      axes.push_back(idx->name);
    }
    return axes;
  }

  int64_t extent_of_or(const std::string& axis) const {
    for (const TileAxis& a : axes_)
      if (a.var == axis) return a.extent;
    return -1;
  }

  Val access(const std::string& buffer, const std::vector<Expr>& indices, DType type) {
    const ir::Buffer* b = ctx_.program->find_buffer(buffer);
    internal_assert(b) << "unknown buffer " << buffer;
    if (ctx_.registers.count(buffer)) {
      std::vector<std::string> axes = register_axes(*b, indices);
      TileOp o;
      o.kind = OpKind::Read;
      o.buffer = buffer;
      o.type = TileType{b->dtype, register_dims(*b, nullptr)};
      return Val{em_.emit(o), axes, b->dtype};
    }
    if (std::optional<std::vector<Expr>> runs = within_runs(indices))
      return access(buffer, *runs, type);
    std::set<std::string> seen;
    for (size_t d = 0; d < indices.size(); ++d) {
      const Expr& i = indices[d];
      std::vector<std::string> used = axes_in(i);
      bool again = !used.empty() && !seen.insert(used[0]).second;
      bool guarded = used.empty() && bounded_by_guard(i) && !squeezed_in_bounds(i, b->shape[d]);
      if (guarded) return gather(*b, indices);
      if (!again && region_index(i)) {
        if (region_leaves_buffer(*b, d, i)) return gather(*b, indices);
        continue;
      }
      if (std::optional<Val> v = piecewise(*b, indices)) return *v;
      return gather(*b, indices);
    }
    TileOp o;
    o.kind = OpKind::Load;
    o.buffer = buffer;
    std::vector<std::string> axes;
    region(*b, indices, &o, &axes);
    o.type = type_of(b->dtype, axes);
    return Val{em_.emit(o), axes, b->dtype};
  }

  // A read whose one irregular index is (s + x) % C, for tile axis x, a constant start s and a
  // constant C that the dimension's extent covers (rotary embedding's half-split d % (D / 2)):
  // the index is s + x - k C on the k-th run of C positions, so the read is a select over one
  // region load per run (their starts shifted by k C; what a run's load reads outside the buffer
  // is 0 and never selected). nullopt when the index is not of that form or needs more than
  // kMaxPieces runs.
  std::optional<Val> piecewise(const ir::Buffer& b, const std::vector<Expr>& indices) {
    constexpr int64_t kMaxPieces = 4;
    std::optional<size_t> dim;
    std::set<std::string> seen;
    for (size_t d = 0; d < indices.size(); ++d) {
      Expr idx = ir::simplify(indices[d]);
      std::vector<std::string> used = axes_in(idx);
      if (!used.empty() && !seen.insert(used[0]).second) return std::nullopt;
      if (region_index(idx)) continue;
      if (dim || idx->op != Op::Mod || !region_index(idx->args[0]) || used.size() != 1)
        return std::nullopt;
      dim = d;
    }
    if (!dim) return std::nullopt;
    const Expr& mod = ir::simplify(indices[*dim]);
    const Expr& e = mod->args[0];
    std::string x = axes_in(e).at(0);
    Expr start = ir::simplify(ir::substitute(e, {{x, ir::make_int(0)}}));
    auto s = range_of(start), c = range_of(mod->args[1]), extent = range_of(b.shape[*dim]);
    if (!s || !c || !extent || s->first != s->second || c->first != c->second || c->first <= 0 ||
        s->first < 0 || extent->first < c->first)
      return std::nullopt;
    int64_t C = c->first, first = s->first / C, last = (s->first + extent_of(x) - 1) / C;
    if (last - first + 1 > kMaxPieces) return std::nullopt;
    std::optional<Val> out;
    for (int64_t k = last; k >= first; --k) {
      std::vector<Expr> shifted = indices;
      shifted[*dim] = ir::simplify(ir::make_binary(Op::Sub, e, ir::make_int(k * C)));
      TileOp o;
      o.kind = OpKind::Load;
      o.buffer = b.name;
      std::vector<std::string> axes;
      region(b, shifted, &o, &axes);
      o.type = type_of(b.dtype, axes);
      Val piece{em_.emit(o), axes, b.dtype};
      if (!out) {
        out = piece;
        continue;
      }
      Expr below = ir::make_binary(Op::Lt, e, ir::make_int((k + 1) * C));
      out = select(expr(below), piece, *out);
    }
    return out;
  }

  // An index (s + x) / E or (s + x) % E, for a tile axis x of extent T from a start s that T
  // divides, and a size E that T divides: the tile lies within one run of E positions, so the
  // quotient is s / E over the whole tile and the remainder s % E + x, a squeezed index and a
  // region's (a position over two dimensions flattened into one, read at (r / W, r % W), in
  // tiles of r). nullopt for any other index.
  std::optional<Expr> within_run(const Expr& index) const {
    const Expr i = ir::simplify(index);
    if ((i->op != Op::Div && i->op != Op::Mod) || has_load(i)) return std::nullopt;
    const Expr& e = i->args[0];
    const Expr& E = i->args[1];
    const std::vector<std::string> used = axes_in(e);
    if (used.size() != 1 || !axes_in(E).empty() || !ir::over_sizes(E) || !region_index(e))
      return std::nullopt;
    const int64_t T = extent_of(used[0]);
    const Expr start = ir::simplify(ir::substitute(e, {{used[0], ir::make_int(0)}}));
    if (T < 2 || !ir::provably_divides(ir::make_int(T), start) || !divides(E, T))
      return std::nullopt;
    if (i->op == Op::Div) return ir::simplify(ir::make_binary(Op::Div, start, E));
    return ir::simplify(
        ir::make_binary(Op::Add, ir::make_binary(Op::Mod, start, E), int_var(used[0])));
  }

  // `indices` with each index that lies within a run (within_run) rewritten; nullopt when none.
  std::optional<std::vector<Expr>> within_runs(const std::vector<Expr>& indices) const {
    std::vector<Expr> out = indices;
    bool any = false;
    for (Expr& i : out)
      if (std::optional<Expr> r = within_run(i)) i = *r, any = true;
    if (!any) return std::nullopt;
    return out;
  }

  // Whether T divides the size E at every launch: a literal multiple of T, or a size that is one
  // at the sizes generated for and is not dynamic, which the launch then checks
  // (TileProgram::divisible).
  bool divides(const Expr& E, int64_t T) const {
    if (std::optional<int64_t> c = ir::as_const_int(E)) return *c > 0 && *c % T == 0;
    for (const std::string& d : ctx_.dynamic)
      if (ir::uses_var(E, d)) return false;
    int64_t value = 0;
    try {
      value = ir::eval_int(E, ctx_.sizes);
    } catch (const UserError&) {
      return false;  // a size not given
    }
    if (value <= 0 || value % T != 0) return false;
    Divisibility& d = (*ctx_.divisible)[ir::to_string(E)];
    d.extent = E;
    d.divisor = std::lcm(std::max<int64_t>(d.divisor, 1), T);
    return true;
  }

  // Whether a buffer index is a region's: a start plus at most one tile axis, read from no
  // buffer.
  bool region_index(const Expr& index) const {
    Expr idx = ir::simplify(index);
    if (has_load(idx)) return false;
    std::vector<std::string> used = axes_in(idx);
    if (used.empty()) return true;
    if (used.size() > 1) return false;
    Expr start = ir::simplify(ir::substitute(idx, {{used[0], ir::make_int(0)}}));
    return ir::provably_equal(idx, ir::make_binary(Op::Add, start, int_var(used[0])));
  }

  // Whether `offset` is g * R for a grid index g over extent / R groups: a group of R positions
  // from there ends by (extent / R) * R, within the extent.
  bool whole_groups(const Expr& offset, const Expr& r, const Expr& extent) const {
    if (offset->op != Op::Mul) return false;
    for (int k = 0; k < 2; ++k) {
      const Expr& g = offset->args[k];
      if (g->op != Op::Var || !ir::provably_equal(offset->args[1 - k], r)) continue;
      for (const GridAxis& a : em_.kernel()->grid)
        if (a.var == g->name && ir::provably_equal(a.extent, ir::make_binary(Op::Div, extent, r)))
          return true;
    }
    return false;
  }

  // The value of a literal or of an extent already specialised, else -1.
  int64_t specialised_value(const Expr& e) const {
    if (e->op == Op::IntImm) return e->int_value;
    auto sp = ctx_.specialised->find(ir::to_string(e));
    return sp != ctx_.specialised->end() ? sp->second.value : -1;
  }

  // Whether a region of n positions from `start` lies within one group of a specialised extent R:
  // start = g * R + o for a grid index g over extent / R groups (whole_groups) and 0 <= o with
  // o + n <= R (a group of G columns read whole, g * G, or in chunks, g * G + k_outer * 1024).
  bool within_group(const Expr& start, int64_t n, const Expr& extent) const {
    std::vector<std::pair<Expr, Expr>> splits;  // (g * R, o)
    if (start->op == Op::Mul) splits.push_back({start, ir::make_int(0)});
    if (start->op == Op::Add)
      for (int k = 0; k < 2; ++k) splits.push_back({start->args[k], start->args[1 - k]});
    for (const auto& [group, offset] : splits) {
      if (group->op != Op::Mul) continue;
      const auto o = range_of(offset);
      if (!o || o->first < 0) continue;
      for (const Expr& r : group->args) {
        const int64_t size = specialised_value(r);
        if (size >= n && o->second + n <= size && whole_groups(group, r, extent)) return true;
      }
    }
    return false;
  }

  // Whether a window of n positions from grid index j ends within `extent`: j runs over E
  // positions, so the window ends by E - 1 + n, provably at most the extent once the specialised
  // sizes and params are their values (a sliding window of W over N - W + 1 positions).
  bool window_inside(const Expr& start, int64_t n, const Expr& extent) const {
    if (start->op != Op::Var) return false;
    for (const GridAxis& g : em_.kernel()->grid) {
      if (g.var != start->name) continue;
      std::map<std::string, Expr> values;
      for (const auto& [text, sp] : *ctx_.specialised)
        if (sp.extent->op == Op::Var) values[text] = ir::make_int(sp.value);
      const Expr end = ir::make_binary(Op::Add, g.extent, ir::make_int(n - 1));
      const std::optional<int64_t> room = ir::as_const_int(
          ir::simplify(ir::substitute(ir::make_binary(Op::Sub, extent, end), values)));
      return room && *room >= 0;
    }
    return false;
  }

  // Whether a region along tile axis a.axis stays inside dimension `d` of the buffer, needing no
  // check: it starts at 0 and spans a specialised dimension exactly, it lies within a group of a
  // specialised extent (within_group) or is a window that its grid index keeps inside
  // (window_inside), or the grid's ranges keep it inside.
  bool region_inside(const ir::Buffer& b, size_t d, const DimAccess& a) const {
    const int64_t n = extent_of(a.axis);
    if (is_zero(a.start) && ctx_.tile_extent(b.shape[d]) == n) return true;
    if (within_group(a.start, n, b.shape[d]) || window_inside(a.start, n, b.shape[d])) return true;
    // A run's remainder s % E over a tile that E and s are multiples of (within_run) ends by E.
    if (a.start->op == Op::Mod && ir::provably_equal(a.start->args[1], b.shape[d]) &&
        ir::provably_divides(ir::make_int(n), a.start->args[0]) && divides(a.start->args[1], n))
      return true;
    const auto start = range_of(a.start), extent = range_of(b.shape[d]);
    return start && extent && start->first >= 0 && start->second + n <= extent->first;
  }

  // Whether the region that index `index` of dimension `d` spans along a tile axis may pass the
  // buffer's end at an element the block computes. A region that may run past the end reads 0
  // there, which is right for a tail that the block's predicate masks (`j0 * 64 + j1 < T` for a
  // dimension of T) or a select's guard leaves untaken, and a silent wrong read where the block
  // computes (`X[i + 1]` at i = N - 1, which the loop program reports): there the read is a
  // gather, checked element by element wherever the block computes. (A region that a proof here
  // misses is a gather too: correct, slower.)
  bool region_leaves_buffer(const ir::Buffer& b, size_t d, const Expr& index) const {
    if (!guards_.empty()) return false;
    const DimAccess a = dim_access(index);
    if (a.axis.empty()) return false;
    if (region_inside(b, d, a)) return false;
    // A conjunct L < R of the predicate with the index L + o (o free of tile axes) bounds it
    // where o + R is the dimension's extent (a table read at i + T - S for rows i < S), or where
    // o is g * R for a grid index g over extent / R groups (a group of R columns, g * G + k for
    // k < G: at most (extent / R) * R).
    // Else, where o + R is a size expression (the first L of a cache's TMAX positions, read by
    // an index given the extent L), it bounds the index at launch: the kernels assume
    // o + R <= extent (TileProgram::bounded), which every launch checks.
    const Expr idx = ir::simplify(index);
    for (const Expr& c : live_) {
      if (c->op != Op::Lt) continue;
      const Expr offset = ir::simplify(ir::make_binary(Op::Sub, idx, c->args[0]));
      if (!axes_in(offset).empty()) continue;
      const Expr end = ir::simplify(ir::make_binary(Op::Add, offset, c->args[1]));
      if (ir::provably_equal(end, b.shape[d]) || whole_groups(offset, c->args[1], b.shape[d]))
        return false;
      // (Not where it always passes the end, X[i, j + 1] for j < N: that read stays a gather,
      // whose failure names the first index outside.)
      std::optional<int64_t> past =
          ir::as_const_int(ir::simplify(ir::make_binary(Op::Sub, end, b.shape[d])));
      if (ir::over_sizes_and_params(end) && ir::over_sizes_and_params(b.shape[d]) &&
          !(past && *past > 0)) {
        const std::string text = ir::to_string(end) + " <= " + ir::to_string(b.shape[d]);
        ctx_.bounded->emplace(text, PartBound{end, b.shape[d], b.name, d});
        return false;
      }
    }
    return true;
  }

  // Whether a select branch being translated is taken under an integer inequality over a
  // variable of `index` (`d < D / 2` for X[s, d + D / 2]): the guards that can keep an index in
  // range. (Others, such as the first-chunk test `c == 0` of a combine, leave its reads to the
  // loop program's own bounds.)
  bool bounded_by_guard(const Expr& index) const {
    bool found = false;
    for (const Expr& g : guards_)
      ir::visit(g, [&](const Expr& n) {
        if (found) return false;
        if (n->op == Op::Lt || n->op == Op::Le || n->op == Op::Gt || n->op == Op::Ge) {
          if (n->args[0]->type == DType::Int)
            ir::visit(n, [&](const Expr& v) {
              found = found || (v->op == Op::Var && v->var_kind == ir::VarKind::Index &&
                                ir::uses_var(index, v->name));
              return !found;
            });
          return false;
        }
        return true;
      });
    return found;
  }

  // Whether the squeezed index `i` of a dimension of extent `extent` stays inside it: a grid
  // or serial loop variable over that extent, or a value whose range is known to.
  bool squeezed_in_bounds(const Expr& index, const Expr& extent) const {
    Expr i = ir::simplify(index);
    if (i->op == Op::Var) {
      for (const GridAxis& g : em_.kernel()->grid)
        if (g.var == i->name && ir::provably_equal(g.extent, extent)) return true;
      if (auto it = serial_.find(i->name);
          it != serial_.end() && ir::provably_equal(it->second, extent))
        return true;
    }
    auto r = range_of(i), n = range_of(extent);
    return r && n && r->first >= 0 && r->second < n->first;
  }

  // A gather index the buffer's extent provably contains, so no element needs its check: an
  // index squeezed_in_bounds takes, or a clamp to [lo, hi] with lo >= 0 and extent - 1 - hi >= 0
  // (a table lookup at a clamped position, T5's bucket of j - i).
  bool gather_index_in_bounds(const Expr& index, const Expr& extent) const {
    if (squeezed_in_bounds(index, extent)) return true;
    Expr i = ir::simplify(index);
    if (i->op != Op::Call || i->fn != ir::MathFn::Clamp) return false;
    auto nonnegative = [&](const Expr& e) {
      Expr s = ir::simplify(e);
      if (s->op == Op::IntImm) return s->int_value >= 0;
      auto r = range_of(s);
      return r && r->first >= 0;
    };
    return nonnegative(i->args[1]) &&
           nonnegative(ir::make_binary(Op::Sub, ir::make_binary(Op::Sub, extent, ir::make_int(1)),
                                       i->args[2]));
  }

  // An element-wise load: every element's indices computed as tiles (a lookup by an index
  // tensor, an index along two tile axes or through a modulo), checked against the buffer where
  // the block's predicate holds (the elements the loop program reads).
  Val gather(const ir::Buffer& b, const std::vector<Expr>& indices) {
    std::vector<Val> idx;
    std::set<std::string> all;
    for (const Expr& i : indices) {
      idx.push_back(expr(ir::simplify(i)));
      all.insert(idx.back().axes.begin(), idx.back().axes.end());
    }
    std::vector<std::string> out = nest_order(all);
    std::vector<Expr> live;
    std::vector<Expr> conditions = live_;
    conditions.insert(conditions.end(), guards_.begin(), guards_.end());
    for (const Expr& c : conditions) {
      std::vector<std::string> used = axes_in(c);
      if (std::all_of(used.begin(), used.end(), [&](const std::string& a) { return all.count(a); }))
        live.push_back(c);
    }
    // The same elements gathered before wherever these conditions hold, or more widely (a scale
    // tested, then divided by in the branch the test guards): that value serves.
    GatherMemo memo{b.name, {}, {}, {}};
    for (const Expr& i : indices) memo.indices.push_back(ir::to_string(ir::simplify(i)));
    for (const Expr& c : live) memo.conditions.insert(ir::to_string(c));
    for (const GatherMemo& g : gathered_)
      if (g.buffer == memo.buffer && g.indices == memo.indices &&
          std::includes(memo.conditions.begin(), memo.conditions.end(), g.conditions.begin(),
                        g.conditions.end()))
        return g.value;
    TileOp o;
    o.kind = OpKind::Gather;
    o.buffer = b.name;
    for (const Val& v : idx) o.args.push_back(v.axes.empty() ? v.id : arrange(v, out).id);
    for (size_t d = 0; d < indices.size(); ++d)
      o.index_in_bounds.push_back(gather_index_in_bounds(indices[d], b.shape[d]));
    if (!live.empty()) {
      // The mask itself is read unguarded: a select's condition is evaluated whichever branch
      // is taken (and a load in it, guarded again, would need this mask).
      std::vector<Expr> guards;
      guards.swap(guards_);
      Val m = expr(conjunction(live));
      guards.swap(guards_);
      o.args.push_back(m.axes.empty() ? m.id : arrange(m, out).id);
    }
    o.type = type_of(b.dtype, out);
    memo.value = Val{em_.emit(o), out, b.dtype};
    gathered_.push_back(memo);
    return memo.value;
  }

  void region(const ir::Buffer& b, const std::vector<Expr>& indices, TileOp* o,
              std::vector<std::string>* axes) const {
    for (size_t d = 0; d < indices.size(); ++d) {
      DimAccess a = dim_access(indices[d]);
      o->starts.push_back(a.start);
      if (a.axis.empty()) {
        o->axis_of_dim.push_back(-1);
        o->bounds_checked.push_back(false);
        continue;
      }
      if (std::find(axes->begin(), axes->end(), a.axis) != axes->end())
        refuse("buffer '" + b.name + "' is indexed twice by tile axis " + a.axis);
      o->axis_of_dim.push_back(static_cast<int>(axes->size()));
      axes->push_back(a.axis);
      o->bounds_checked.push_back(!region_inside(b, d, a));
    }
  }

  void write(const std::string& buffer, const std::vector<Expr>& indices, Val value,
             const Val& mask) {
    const ir::Buffer* b = ctx_.program->find_buffer(buffer);
    internal_assert(b) << "unknown buffer " << buffer;
    if (ctx_.registers.count(buffer)) {
      std::vector<std::string> axes = register_axes(*b, indices);
      if (mask.id >= 0) value = select(mask, value, access(buffer, indices, b->dtype));
      TileOp o;
      o.kind = OpKind::Write;
      o.buffer = buffer;
      o.args = {arrange(value, axes).id};
      o.type = TileType{b->dtype, register_dims(*b, nullptr)};
      em_.emit(o);
      return;
    }
    TileOp o;
    o.kind = OpKind::Store;
    o.buffer = buffer;
    std::vector<std::string> axes;
    region(*b, within_runs(indices).value_or(indices), &o, &axes);
    for (const std::string& a : value.axes)
      if (std::find(axes.begin(), axes.end(), a) == axes.end())
        refuse("block '" + block_.name + "' stores a value that varies along tile axis " + a +
               " into one element");
    o.args = {arrange(value, axes).id};
    if (mask.id >= 0) o.args.push_back(arrange(mask, axes).id);
    o.type = type_of(value.dtype, axes);
    em_.emit(o);
  }

  // The reduction of `term` over the tile axes `over`; `masks` are predicate conjuncts over them.
  Val reduction(ir::Reducer reducer, const Expr& term, const std::set<std::string>& over,
                const std::vector<Expr>& masks) {
    if (reducer == ir::Reducer::Sum && over.size() == 1 && term->op == Op::Mul) {
      Val d;
      if (try_dot(term, *over.begin(), masks, &d)) return d;
    }
    Val t = expr(term);
    for (const Expr& m : masks)
      t = select(expr(m), t, full(ir::reducer_identity_expr(reducer, term->type)));
    std::set<std::string> all(t.axes.begin(), t.axes.end());
    all.insert(over.begin(), over.end());
    t = arrange(t, nest_order(all));
    for (const std::string& a : over) {
      TileOp o;
      o.kind = OpKind::Reduce;
      o.reducer = reducer;
      o.args = {t.id};
      o.axis = static_cast<int>(std::find(t.axes.begin(), t.axes.end(), a) - t.axes.begin());
      std::vector<std::string> rest;
      for (const std::string& x : t.axes)
        if (x != a) rest.push_back(x);
      o.type = type_of(t.dtype, rest);
      t = Val{em_.emit(o), rest, t.dtype};
    }
    return t;
  }

  bool try_dot(const Expr& term, const std::string& k, const std::vector<Expr>& masks, Val* out) {
    // A dot accumulates floats in f32 and integers in their own type (i32: int8 products summed
    // exactly, as the integer tensor cores do); a sum of mixed products stays a reduction.
    const DType ta = term->args[0]->type, tb = term->args[1]->type;
    const bool integer = is_int(ta) && is_int(tb) && is_int(term->type);
    if (!integer && (!is_float(ta) || !is_float(tb))) return false;
    const DType acc = integer ? term->type : DType::F32;
    std::vector<std::string> a_axes = axes_in(term->args[0]), b_axes = axes_in(term->args[1]);
    auto other = [&](const std::vector<std::string>& axes, std::string* o) {
      if (axes.size() != 2 || std::find(axes.begin(), axes.end(), k) == axes.end()) return false;
      *o = axes[0] == k ? axes[1] : axes[0];
      return true;
    };
    std::string m, n;
    if (!other(a_axes, &m) || !other(b_axes, &n) || m == n) return false;
    // The product's rows are the nest's outer axis whichever factor is written first (keys
    // times queries, K^T[d, j] * Q[i, d], is the queries' row tile by the keys, as Q * K is).
    Expr first = term->args[0], second = term->args[1];
    if (nest_order({m, n}).front() != m) {
      std::swap(m, n);
      std::swap(a_axes, b_axes);
      std::swap(first, second);
    }
    auto within = [](const std::vector<std::string>& used, const std::vector<std::string>& axes) {
      return std::all_of(used.begin(), used.end(), [&](const std::string& u) {
        return std::find(axes.begin(), axes.end(), u) != axes.end();
      });
    };
    for (const Expr& c : masks)
      if (!within(axes_in(c), a_axes) && !within(axes_in(c), b_axes)) return false;
    Val a = expr(first), b = expr(second);
    Val zero = full(integer ? ir::make_int(0) : ir::make_float(0.0, DType::F32));
    for (const Expr& c : masks) {
      std::vector<std::string> used = axes_in(c);
      Val mv = expr(c);
      if (within(used, a_axes)) a = select(mv, a, cast_to(zero, a.dtype));
      if (within(used, b_axes)) b = select(mv, b, cast_to(zero, b.dtype));
    }
    TileOp o;
    o.kind = OpKind::Dot;
    o.args = {arrange(a, {m, k}).id, arrange(b, {k, n}).id};
    o.type = type_of(acc, {m, n});
    *out = Val{em_.emit(o), {m, n}, acc};
    return true;
  }

  Val cast_to(const Val& v, DType t) {
    if (v.dtype == t) return v;
    TileOp o;
    o.kind = OpKind::Cast;
    o.args = {v.id};
    o.type = type_of(t, v.axes);
    return Val{em_.emit(o), v.axes, t};
  }

  const Context& ctx_;
  Emitter& em_;
  std::vector<TileAxis> axes_;
  std::vector<Expr> live_;  // the block's predicate conjuncts that the nest can fail
  // The conditions of the select branches being translated. A read there happens only where
  // they hold: the loop program (and the interpreter) evaluates the taken branch only, so an
  // index that leaves its buffer in the other (`X[s, d + D / 2]` where d >= D / 2) is no error.
  // Along a tile axis the region's bounds check zero-fills it; a squeezed index that may leave
  // the buffer makes the read a gather masked by these conditions.
  std::vector<Expr> guards_;
  // The gathers emitted for the block: buffer, indices and conditions (printed), and the value.
  struct GatherMemo {
    std::string buffer;
    std::vector<std::string> indices;
    std::set<std::string> conditions;
    Val value;
  };
  std::vector<GatherMemo> gathered_;
  const StmtNode& block_;
  const std::map<std::string, Expr>& serial_;
};

// Every block under `loop` binds its variable only to spatial iteration variables.
bool data_parallel(const StmtNode& loop) {
  for (const StmtNode* b : schedule::blocks_under(loop.body))
    for (const ir::IterVar& iv : b->iters)
      if (iv.kind != ir::IterKind::Spatial && ir::uses_var(iv.binding, loop.var)) return false;
  return true;
}

class KernelTranslator {
 public:
  KernelTranslator(Context& ctx, Kernel* k) : ctx_(ctx), em_(k) {}

  void stmt(const Stmt& s) {
    switch (s->kind) {
      case ir::StmtKind::Seq:
        for (const Stmt& c : s->stmts) stmt(c);
        return;
      case ir::StmtKind::Allocate: {
        const ir::Buffer* b = ctx_.program->find_buffer(s->buffer);
        internal_assert(b) << "allocation of unknown buffer " << s->buffer;
        ctx_.registers.insert(s->buffer);
        Register r{s->buffer, TileType{b->dtype, {}},
                   enclosing_loops_.empty() ? std::string() : enclosing_loops_.back()};
        for (const Expr& d : b->shape) {
          int64_t n = ctx_.tile_extent(d);
          if (n < 0)
            refuse("buffer '" + b->name + "' is allocated with a size that is not constant");
          if (n != 1) r.type.shape.push_back(n);
        }
        if (r.type.elements() > kMaxRegisterElements)
          refuse("register '" + b->name + "' is larger than a tile");
        em_.kernel()->registers.push_back(r);
        stmt(s->body);
        return;
      }
      case ir::StmtKind::For:
        if (is_leaf_nest(s)) {
          leaf_nest(s);
          return;
        }
        serial_loop(*s, s->extent, [&] { stmt(s->body); });
        return;
      case ir::StmtKind::Block:
        leaf_nest(s);
        return;
      default:
        refuse("a conditional statement has no tile form");
    }
  }

  // Peels the grid loops off a root statement; returns what remains.
  Stmt grid(Stmt s) {
    while (s->kind == ir::StmtKind::For && is_zero(s->min) && data_parallel(*s)) {
      if (is_leaf_nest(s) && all_tileable(s)) break;
      if (s->extent->op == Op::IntImm && s->body->kind == ir::StmtKind::For && is_leaf_nest(s))
        break;
      if (walks_a_group(*s)) break;
      em_.kernel()->grid.push_back(GridAxis{s->var, s->extent});
      s = s->body;
    }
    return s;
  }

 private:
  // A map's innermost loop over the elements of a group within a dimension, of an extent E the
  // tiles cannot hold whole (a param): the block stores at `q * E + v` for the loop's v (a map
  // cut into groups by split_groups, a scale per block of 128 columns). It is walked in chunks
  // within the group's grid instance (innermost_in_chunks), as the reduction over the same group
  // is, rather than spread one element an instance.
  bool walks_a_group(const StmtNode& loop) const {
    if (!loop.body || loop.body->kind != ir::StmtKind::Block || ctx_.tile_extent(loop.extent) >= 0)
      return false;
    const StmtNode& block = *loop.body;
    if (!block.body || block.body->kind != ir::StmtKind::Store) return false;
    std::map<std::string, Expr> bindings;
    for (const ir::IterVar& iv : block.iters) bindings[iv.name] = iv.binding;
    for (const Expr& index : block.body->indices) {
      Expr i = ir::simplify(ir::substitute(index, bindings));
      if (i->op != Op::Add) continue;
      for (int k = 0; k < 2; ++k) {
        const Expr& v = i->args[k];
        const Expr& q = i->args[1 - k];
        if (v->op == Op::Var && v->name == loop.var && q->op == Op::Mul &&
            (ir::equal(q->args[1], loop.extent) || ir::equal(q->args[0], loop.extent)))
          return true;
      }
    }
    return false;
  }

  bool all_tileable(const Stmt& s) const {
    int64_t elements = 1;
    for (const StmtNode* n = s.get(); n->kind == ir::StmtKind::For; n = n->body.get()) {
      int64_t e = ctx_.tile_extent(n->extent);
      if (e < 0 || !is_zero(n->min)) return false;
      elements *= e;
    }
    return elements <= kMaxTileElements;
  }

  // `extent`: the loop's trip count, at most the loop program's (see bound_by_predicate).
  template <typename F>
  void serial_loop(const StmtNode& loop, const Expr& extent, F&& body) {
    TileStmt f;
    f.kind = StmtKind::For;
    f.var = loop.var;
    f.min = loop.min;
    f.extent = extent;
    TileBody* saved = em_.body();
    saved->push_back(std::move(f));
    em_.set_body(&saved->back().body);
    enclosing_loops_.push_back(loop.var);
    // A loop that starts past 0 runs inside [0, its end): its end bounds it as an extent would.
    // A walk from a start to an end, `start + range(max(end - start, 0))`, runs below its end
    // whatever its start (a chunk's walk that skips masked tiles, whose start may lie past the
    // end: then it runs no iteration).
    const Expr& x = loop.extent;
    if (is_zero(loop.min))
      serial_[loop.var] = loop.extent;
    else if (provably_nonnegative(loop.min) && x->op == Op::Max && is_zero(x->args[1]) &&
             x->args[0]->op == Op::Sub && ir::equal(x->args[0]->args[1], loop.min))
      serial_[loop.var] = x->args[0]->args[0];
    else if (provably_nonnegative(loop.min))
      serial_[loop.var] = ir::simplify(ir::make_binary(Op::Add, loop.min, loop.extent));
    body();
    serial_.erase(loop.var);
    enclosing_loops_.pop_back();
    em_.set_body(saved);
  }

  // The elements the block materialises over the tile loops `tile`: its iteration space, or for
  // a sum of products whose factors each leave out a reduced loop (a contraction), the largest of
  // its factors and its result.
  int64_t materialised(const StmtNode& block, const std::vector<const StmtNode*>& tile) const {
    std::map<std::string, Expr> bindings;
    std::set<std::string> reduced;
    for (const ir::IterVar& iv : block.iters) {
      bindings[iv.name] = iv.binding;
      if (iv.kind != ir::IterKind::Spatial)
        for (const StmtNode* l : tile)
          if (ir::uses_var(iv.binding, l->var)) reduced.insert(l->var);
    }
    auto elements = [&](const std::function<bool(const StmtNode*)>& spans) {
      int64_t n = 1;
      for (const StmtNode* l : tile)
        if (spans(l)) n *= ctx_.tile_extent(l->extent);
      return n;
    };
    int64_t all = elements([](const StmtNode*) { return true; });
    ir::Reducer reducer;
    Expr term;
    if (reduced.empty() || block.body->kind != ir::StmtKind::Store ||
        !schedule::match_reduction_update(*block.body, &reducer, &term) ||
        reducer != ir::Reducer::Sum || term->op != Op::Mul)
      return all;
    int64_t out = elements([&](const StmtNode* l) { return !reduced.count(l->var); });
    for (const Expr& factor : term->args) {
      Expr f = ir::substitute(factor, bindings);
      bool contracted = true;
      for (const std::string& r : reduced) contracted = contracted && ir::uses_var(f, r);
      bool leaves_out = false;
      for (const StmtNode* l : tile)
        leaves_out = leaves_out || (!reduced.count(l->var) && !ir::uses_var(f, l->var));
      if (!contracted || !leaves_out) return all;
      out = std::max(out, elements([&](const StmtNode* l) { return ir::uses_var(f, l->var); }));
    }
    return out;
  }

  // A leaf nest whose tile would materialise more than the target's budget (Context::
  // tile_budget): the loop where the budget runs out is split, its inner part (a power of two,
  // the largest the budget allows) a tile axis and its outer part a serial loop around the tile,
  // the tail masked by the block's predicate. A long reduction outside the fused chains (a
  // Performer's normaliser over every key and feature) is then walked in chunks rather than held
  // whole, which on CUDA is registers: 8192 elements a thread did not compile. Only a nest of
  // its own kernel (under the grid loops alone, no register read or written): the tiles of a
  // fused nest are the schedule's, its registers accessed whole.
  Stmt within_budget(const Stmt& s) const {
    std::vector<const StmtNode*> loops;
    const StmtNode* n = s.get();
    for (; n->kind == ir::StmtKind::For; n = n->body.get()) loops.push_back(n);
    const StmtNode& block = *n;
    const int64_t budget = budget_for(block);
    if (budget >= kMaxTileElements) return s;
    const size_t first = first_tile_axis(loops, block, budget);
    // The tile stops where a loop is no tile axis at all, or where the budget runs out.
    if (first == 0 || ctx_.tile_extent(loops[first - 1]->extent) < 0 ||
        !is_zero(loops[first - 1]->min))
      return s;
    const StmtNode& l = *loops[first - 1];
    const int64_t e = ctx_.tile_extent(l.extent);
    int64_t chunk = 1;
    while (2 * chunk < e) chunk *= 2;
    for (; chunk >= 2; chunk /= 2) {
      StmtNode probe = l;
      probe.extent = ir::make_int(chunk);
      std::vector<const StmtNode*> tile(loops.begin() + static_cast<long>(first), loops.end());
      tile.insert(tile.begin(), &probe);
      if (materialised(block, tile) <= budget) break;
    }
    if (chunk < 2) return s;
    return split_leaf_loop(loops, block, first - 1, chunk, e);
  }

  // A leaf nest with no tile axis whose innermost loop runs over an extent the tiles cannot hold
  // whole (not a specialisable size: N / G, H * W) would run one element a step: that
  // loop is split as within_budget splits, its inner part a tile axis of up to kLeafChunk
  // elements (a power of two, no more than the extent at the sizes generated for), the tail
  // masked by the block's predicate.
  Stmt innermost_in_chunks(const Stmt& s) const {
    std::vector<const StmtNode*> loops;
    const StmtNode* n = s.get();
    for (; n->kind == ir::StmtKind::For; n = n->body.get()) loops.push_back(n);
    if (loops.empty()) return s;
    const StmtNode& l = *loops.back();
    if (ir::as_const_int(l.extent) || ctx_.tile_extent(l.extent) >= 0 || !is_zero(l.min) ||
        first_tile_axis(loops, *n, budget_for(*n)) != loops.size())
      return s;
    int64_t chunk = kLeafChunk;
    try {
      const int64_t e = ir::eval_int(l.extent, ctx_.sizes, ctx_.params);
      while (chunk > 2 && chunk / 2 >= e) chunk /= 2;
    } catch (const UserError&) {
      // a size not given: chunks of kLeafChunk
    }
    return split_leaf_loop(loops, *n, loops.size() - 1, chunk, 0);
  }

  // Splits loops[k_split] of a leaf nest (a loop starting at 0) into an outer loop and an inner
  // one of `chunk` iterations, the tail masked by the block's predicate unless the loop's extent
  // at the sizes generated for, `e` (0: not known), is a multiple of the chunk.
  static Stmt split_leaf_loop(const std::vector<const StmtNode*>& loops, const StmtNode& block,
                              size_t k_split, int64_t chunk, int64_t e) {
    const StmtNode& l = *loops[k_split];
    const size_t first = k_split + 1;
    const std::string outer = l.var + "_outer", inner = l.var + "_inner";
    const Expr at = ir::make_binary(
        Op::Add, ir::make_binary(Op::Mul, int_var(outer), ir::make_int(chunk)), int_var(inner));
    const std::map<std::string, Expr> to{{l.var, at}};
    std::vector<ir::IterVar> iters = block.iters;
    for (ir::IterVar& iv : iters) iv.binding = ir::simplify(ir::substitute(iv.binding, to));
    std::vector<Expr> pred;
    if (block.predicate) pred.push_back(ir::simplify(ir::substitute(block.predicate, to)));
    if (e == 0 || e % chunk != 0) pred.push_back(ir::make_binary(Op::Lt, at, l.extent));
    Stmt nest = ir::make_block(block.name, std::move(iters), block.init, block.body,
                               pred.empty() ? nullptr : conjunction(pred));
    for (size_t k = loops.size(); k-- > first;)
      nest = ir::make_for(loops[k]->var, ir::simplify(ir::substitute(loops[k]->min, to)),
                          ir::simplify(ir::substitute(loops[k]->extent, to)), loops[k]->for_kind,
                          nest);
    nest = ir::make_for(inner, ir::make_int(0), ir::make_int(chunk), ir::ForKind::Serial, nest);
    nest = ir::make_for(outer, ir::make_int(0),
                        ir::simplify(ir::make_binary(
                            Op::Div, ir::make_binary(Op::Add, l.extent, ir::make_int(chunk - 1)),
                            ir::make_int(chunk))),
                        l.for_kind, nest);
    for (size_t k = first - 1; k-- > 0;)
      nest = ir::make_for(loops[k]->var, loops[k]->min, loops[k]->extent, loops[k]->for_kind, nest);
    return nest;
  }

  // The first of a leaf nest's `loops` that is a tile axis: the tile axes are the innermost loops
  // of tile extent (starting at 0) while the tile of `block` materialises at most `budget`.
  size_t first_tile_axis(const std::vector<const StmtNode*>& loops, const StmtNode& block,
                         int64_t budget) const {
    size_t first = loops.size();
    while (first > 0) {
      const StmtNode* l = loops[first - 1];
      if (ctx_.tile_extent(l->extent) < 0 || !is_zero(l->min)) break;
      std::vector<const StmtNode*> tile(loops.begin() + static_cast<long>(first) - 1, loops.end());
      if (materialised(block, tile) > budget) break;
      --first;
    }
    return first;
  }

  // The elements a tile of `block` may materialise: the target's budget in a nest of its own
  // kernel, kMaxTileElements in a fused one (see within_budget).
  int64_t budget_for(const StmtNode& block) const {
    return enclosing_loops_.empty() && !touches_register(block) ? ctx_.tile_budget
                                                                : kMaxTileElements;
  }

  bool touches_register(const StmtNode& block) const {
    bool found = false;
    ir::visit(block.body, [&](const Stmt& st) {
      if (st->kind != ir::StmtKind::Store) return true;
      found = found || ctx_.registers.count(st->buffer) > 0;
      ir::visit(st->value, [&](const Expr& e) {
        found = found || (e->op == Op::Load && ctx_.registers.count(e->name) > 0);
        return !found;
      });
      return !found;
    });
    return found;
  }

  void leaf_nest(const Stmt& whole) {
    const Stmt s = within_budget(innermost_in_chunks(whole));
    std::vector<const StmtNode*> loops;
    const StmtNode* n = s.get();
    for (; n->kind == ir::StmtKind::For; n = n->body.get()) loops.push_back(n);
    const StmtNode& block = *n;
    // Tile axes (loops of extent 1 are fixed at 0).
    const size_t first_tile = first_tile_axis(loops, block, budget_for(block));
    std::vector<TileAxis> axes;
    std::map<std::string, Expr> fixed;
    for (size_t k = first_tile; k < loops.size(); ++k) {
      int64_t e = ctx_.tile_extent(loops[k]->extent);
      if (e == 1)
        fixed[loops[k]->var] = ir::make_int(0);
      else
        axes.push_back(TileAxis{loops[k]->var, e, loops[k]->extent});
    }
    ir::StmtNode b = block;
    for (ir::IterVar& iv : b.iters) iv.binding = ir::simplify(ir::substitute(iv.binding, fixed));
    if (b.predicate) b.predicate = ir::simplify(ir::substitute(b.predicate, fixed));
    std::vector<Expr> extents;
    for (size_t k = 0; k < first_tile; ++k) extents.push_back(loops[k]->extent);
    if (b.predicate) {
      std::vector<Expr> pred, kept;
      conjuncts(b.predicate, &pred);
      for (const Expr& c : pred) {
        bool bounds = false;
        for (size_t k = 0; k < first_tile && !bounds; ++k)
          bounds = bound_by_predicate(c, loops, k, &extents[k]);
        if (!bounds) kept.push_back(c);
      }
      b.predicate = kept.empty() ? nullptr : conjunction(kept);
    }
    std::function<void(size_t)> emit_from = [&](size_t k) {
      if (k == first_tile) {
        NestTranslator(ctx_, em_, axes, b, serial_).run();
        return;
      }
      serial_loop(*loops[k], extents[k], [&] { emit_from(k + 1); });
    };
    emit_from(0);
  }

  // A predicate conjunct `v + rest < limit` (or <=, >, >=) over the variable v of the serial
  // loop loops[k] of a leaf nest and what is bound outside that loop (a split-K combine's
  // `j00 * 4 + j01 < (N + 63) / 64` at fewer chunks than the combine's tile) becomes the loop's
  // bound: *extent = min(*extent, max(0, limit - rest - min)). The block does nothing in the
  // iterations this drops, and their loads (a squeezed region has no tail to zero-fill) would
  // read past the buffer, as the loop program never does. True when `c` was used so.
  static bool bound_by_predicate(const Expr& c, const std::vector<const StmtNode*>& loops, size_t k,
                                 Expr* extent) {
    if (c->op != Op::Lt && c->op != Op::Le && c->op != Op::Gt && c->op != Op::Ge) return false;
    bool flip = c->op == Op::Gt || c->op == Op::Ge;
    Expr e = c->args[flip ? 1 : 0], limit = c->args[flip ? 0 : 1];
    if (c->op == Op::Le || c->op == Op::Ge)
      limit = ir::make_binary(Op::Add, limit, ir::make_int(1));
    const std::string& v = loops[k]->var;
    if (e->type != DType::Int || !ir::uses_var(e, v) || ir::uses_var(limit, v)) return false;
    for (size_t inner = k + 1; inner < loops.size(); ++inner)
      if (ir::uses_var(c, loops[inner]->var)) return false;
    Expr rest = ir::simplify(ir::substitute(e, {{v, ir::make_int(0)}}));
    if (ir::uses_var(rest, v) || !ir::provably_equal(e, ir::make_binary(Op::Add, rest, int_var(v))))
      return false;
    Expr trips = ir::make_binary(Op::Sub, ir::make_binary(Op::Sub, limit, rest), loops[k]->min);
    *extent = ir::simplify(
        ir::make_binary(Op::Min, *extent, ir::make_binary(Op::Max, ir::make_int(0), trips)));
    return true;
  }

  Context& ctx_;
  Emitter em_;
  std::vector<std::string> enclosing_loops_;  // serial loops around the current statement
  std::map<std::string, Expr> serial_;        // those starting at 0 or more, with their ends
};

// Size expressions the schedule keeps as one tile axis, printed: a dim that some loop runs over
// whole while driving a reduction (the head size of attention's dot products) or while a block
// reduces over a tile inside it, or over an axis a loop runs whole (the value head size, the
// columns of the PV product; a projection's columns beside the features it sums), and the
// extent E
// of a loop that steps through a group of a split by E (a block binds q * E + v to it: the query
// heads sharing a key/value head, HQ / HK).
std::set<std::string> specialisable_extents(const ir::LoopProgram& p) {
  std::set<std::string> out;
  // Loops that are no grid loops: nested in a loop of constant extent (a tile of rows), or past
  // the perfect nest of loops a kernel's root starts with (a loop beside others in a grid
  // instance: the value columns of a decode chunk, after its scores).
  std::set<const StmtNode*> in_tile;
  std::function<void(const Stmt&, bool, bool)> walk = [&](const Stmt& s, bool inside,
                                                          bool perfect) {
    if (!s) return;
    if (s->kind == ir::StmtKind::For) {
      if (inside || !perfect) in_tile.insert(s.get());
      inside = inside || ir::as_const_int(s->extent).has_value();
      walk(s->body, inside, perfect);
      return;
    }
    for (const Stmt& c : s->stmts) walk(c, inside, false);
    for (const Stmt* c : {&s->body, &s->then_case, &s->else_case}) walk(*c, inside, false);
  };
  if (p.body && p.body->kind == ir::StmtKind::Seq)
    for (const Stmt& root : p.body->stmts) walk(root, false, true);
  else
    walk(p.body, false, true);
  ir::visit(p.body, [&](const Stmt& s) {
    if (s->kind != ir::StmtKind::For || ir::as_const_int(s->extent) ||
        !ir::over_sizes_and_params(s->extent))
      return true;
    Expr v = int_var(s->var);
    for (const StmtNode* b : schedule::blocks_under(s->body)) {
      // (A reduced axis of a constant tile, or one a loop runs whole: a projection's features,
      // which the product's columns beside them make a dot of.)
      bool reduces_tile = in_tile.count(s.get()) &&
                          std::any_of(b->iters.begin(), b->iters.end(), [](const ir::IterVar& iv) {
                            return iv.kind == ir::IterKind::Reduce &&
                                   (ir::as_const_int(iv.extent) || iv.binding->op == Op::Var);
                          });
      for (const ir::IterVar& iv : b->iters) {
        bool whole = (iv.kind == ir::IterKind::Reduce ||
                      (iv.kind == ir::IterKind::Spatial && reduces_tile)) &&
                     iv.binding->op == Op::Var && iv.binding->name == s->var &&
                     s->extent->op == Op::Var;
        Expr rest = ir::simplify(ir::make_binary(Op::Sub, iv.binding, v));
        bool group = iv.kind == ir::IterKind::Spatial && ir::uses_var(iv.binding, s->var) &&
                     !ir::uses_var(rest, s->var) && !ir::as_const_int(rest) &&
                     ir::provably_divides(s->extent, rest);
        if (whole || group) out.insert(ir::to_string(s->extent));
      }
    }
    return true;
  });
  return out;
}

// The power of two, 2 to 16, that divides `value` (0 where it is odd or not positive).
int64_t power_of_two_divisor(int64_t value) {
  int64_t divisor = value > 0 ? std::min<int64_t>(16, value & -value) : 0;
  return divisor >= 2 ? divisor : 0;
}
void require_divisor(TileProgram& out, const std::string& text, const Expr& extent,
                     int64_t divisor) {
  Divisibility& d = out.divisible[text];  // a tile's run may have asked for more already
  d.extent = extent;
  d.divisor = std::lcm(std::max<int64_t>(d.divisor, 1), divisor);
}

// TileProgram::divisible: the innermost extent of every buffer in memory that is a size
// expression of no dynamic size, with the power of two (2 to 16) that divides it at `sizes`; and
// every integer param that a load or store's start reads (a group's first column, g * G), with
// the power of two that divides its value (`params` holds every param's: the given one, else the
// program's), so that a back end may read and write runs starting there in aligned vectors.
void record_divisibility(TileProgram& out, const std::map<std::string, int64_t>& sizes,
                         const std::set<std::string>& dynamic, const runtime::ParamMap& params) {
  for (const ir::Buffer& b : out.source.buffers) {
    if (b.shape.empty() || b.shape.back()->op == Op::IntImm || is_register(out, b.name)) continue;
    const Expr& extent = b.shape.back();
    if (std::any_of(dynamic.begin(), dynamic.end(),
                    [&](const std::string& d) { return ir::uses_var(extent, d); }))
      continue;
    std::string text = ir::to_string(extent);
    if (out.specialised.count(text)) continue;
    int64_t value = 0;
    try {
      value = ir::eval_int(extent, sizes);
    } catch (const UserError&) {
      continue;  // a size not given
    }
    if (int64_t divisor = power_of_two_divisor(value)) require_divisor(out, text, extent, divisor);
  }
  std::set<std::string> in_starts;
  for (const Kernel& k : out.kernels)
    for_each_op(k.body, [&](const TileOp& o) {
      if (o.kind != OpKind::Load && o.kind != OpKind::Store) return;
      for (const Expr& start : o.starts)
        ir::visit(start, [&](const Expr& x) {
          if (x->op == Op::Var && x->var_kind == ir::VarKind::Param) in_starts.insert(x->name);
          return true;
        });
    });
  for (const ir::Param& q : out.source.params) {
    if (!is_int(q.dtype) || !in_starts.count(q.name) || out.specialised.count(q.name)) continue;
    const double value = std::trunc(params.at(q.name));
    if (int64_t divisor = power_of_two_divisor(static_cast<int64_t>(value)))
      require_divisor(out, q.name, ir::make_var(q.name, ir::VarKind::Param, q.dtype), divisor);
  }
}

}  // namespace

TileProgram translate(const ir::LoopProgram& program, const std::map<std::string, int64_t>& sizes,
                      const std::set<std::string>& dynamic, int64_t tile_budget,
                      const runtime::ParamMap& params) {
  TileProgram out;
  out.source = program;
  Context ctx;
  if (tile_budget > 0) ctx.tile_budget = std::min(tile_budget, kMaxTileElements);
  ctx.program = &out.source;
  ctx.sizes = sizes;
  ctx.params = program.param_values(params);
  ctx.specialisable = specialisable_extents(program);
  ctx.specialised = &out.specialised;
  ctx.divisible = &out.divisible;
  ctx.bounded = &out.bounded;
  ctx.dynamic = dynamic;
  std::vector<Stmt> roots;
  if (program.body->kind == ir::StmtKind::Seq)
    roots = program.body->stmts;
  else
    roots = {program.body};
  for (size_t r = 0; r < roots.size(); ++r) {
    Kernel k;
    k.name = program.name + "." + std::to_string(r);
    KernelTranslator t(ctx, &k);
    Stmt body = t.grid(roots[r]);
    t.stmt(body);
    out.kernels.push_back(std::move(k));
  }
  record_divisibility(out, sizes, dynamic, ctx.params);
  for (const auto& [name, value] : sizes)
    if (!dynamic.count(name)) out.sizes[name] = value;
  out.params = ctx.params;
  verify(out);
  return out;
}

}  // namespace kintsugi::tile
