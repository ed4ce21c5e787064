// \file Lower.cpp
// te::Program -> ir::LoopProgram (see Lower.h).
#include "te/Lower.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "ir/Printer.h"
#include "ir/Visit.h"

namespace kintsugi::te {

namespace {

using ir::Expr;
using ir::Op;

// A definition in normal form: body has no Reduce, except that a reduction definition's
// `reduce` describes its top-level reduction.
struct NormalDef {
  std::string name;
  std::vector<ir::Axis> indices;
  DType dtype;
  ir::BufferRole role;
  bool is_reduction = false;
  ir::Reducer reducer = ir::Reducer::Sum;
  std::vector<ir::Axis> reduce_axes;
  Expr body;  // the term (for reductions) or the value
};

class Lowerer {
 public:
  explicit Lowerer(const Program& p) : p_(p) {}

  ir::LoopProgram run() {
    ir::LoopProgram out;
    out.name = p_.name;
    out.dims = p_.dims;
    out.size_hints = p_.size_hints;
    for (const auto& q : p_.params) out.params.push_back(ir::Param{q.name, q.dtype, q.value});
    for (const auto& in : p_.inputs)
      out.buffers.push_back(
          ir::Buffer{in.name, in.dtype, in.shape, ir::BufferRole::Input, "global"});
    for (const Definition& d : p_.defs) normalize(d);
    std::vector<ir::Stmt> nests;
    for (const NormalDef& d : defs_) {
      std::vector<Expr> shape;
      for (const auto& a : d.indices) shape.push_back(a.extent);
      out.buffers.push_back(ir::Buffer{d.name, d.dtype, shape, d.role, "global"});
      nests.push_back(loop_nest(d));
    }
    out.body = ir::make_seq(nests);
    return out;
  }

 private:
  const Program& p_;
  std::vector<NormalDef> defs_;
  std::map<std::string, std::string> hoisted_;         // reduction_key -> the hoisted definition
  std::map<std::string, std::string> copied_outputs_;  // output -> the reduction it copies

  static Expr axis_var(const ir::Axis& a) {
    return ir::make_var(a.name, ir::VarKind::Index, DType::Int);
  }

  // max(max[j](a), max[k](c)) over axes of one extent is max[j](max(a, c[k := j])) (and min
  // alike): one reduction, so that what reads the maximum fuses with it as with any other, where
  // a maximum of two running maxima would have no repair. (Sums are not merged: that would change
  // their rounding.)
  static Expr merge_joined_reductions(const Expr& e) {
    if (e->op != Op::Max && e->op != Op::Min) return e;
    const Expr a = merge_joined_reductions(e->args[0]), c = merge_joined_reductions(e->args[1]);
    const ir::Reducer r = e->op == Op::Max ? ir::Reducer::Max : ir::Reducer::Min;
    auto single = [&](const Expr& x) {
      return x->op == Op::Reduce && x->reducer == r && x->axes.size() == 1 && x->type == e->type;
    };
    if (!single(a) || !single(c) || !ir::equal(a->axes[0].extent, c->axes[0].extent))
      return a == e->args[0] && c == e->args[1] ? e : ir::with_args(e, {a, c});
    const Expr other = ir::substitute(c->args[0], {{c->axes[0].name, axis_var(a->axes[0])}});
    return ir::make_reduce(r, a->axes, ir::make_binary(e->op, a->args[0], other, e->loc), a->loc);
  }

  // sum[d]((a - b)^2), a squared distance between a row operand and a column operand (each reads
  // an index the other does not, both read every reduced axis, and they read different tensors:
  // queries and keys in L2 attention), is max(sum[d](a^2) - 2 sum[d](a b) + sum[d](b^2), 0), the
  // same value in exact arithmetic: a row vector, a column vector and a matrix product, which the
  // tensor cores run, where the distances of a tile of rows and columns would be computed element
  // by element. As in PyTorch's cdist for more than 25 rows, the expansion trades the relative
  // precision of distances much shorter than the vectors for that speed, and the clamp keeps a
  // rounded difference from going negative (a square root of it from NaN). A difference whose
  // operands do not separate so (x - mean in a variance, distances within one tensor) is kept.
  static Expr expand_distance(const Expr& e) {
    if (e->op != Op::Reduce || e->reducer != ir::Reducer::Sum || !is_float(e->type)) return e;
    const Expr& t = e->args[0];
    Expr diff;
    if (t->op == Op::Mul && ir::equal(t->args[0], t->args[1])) diff = t->args[0];
    if (t->op == Op::Call && t->fn == ir::MathFn::Pow && t->args[1]->op == Op::FloatImm &&
        t->args[1]->float_value == 2.0)
      diff = t->args[0];
    if (!diff || diff->op != Op::Sub) return e;
    const Expr &a = diff->args[0], &b = diff->args[1];
    // The names of x's index variables (`loads` false) or of the tensors it reads (true).
    auto names = [](const Expr& x, bool loads) {
      std::set<std::string> out;
      ir::visit(x, [&](const Expr& v) {
        if (loads ? v->op == Op::Load : v->op == Op::Var && v->var_kind == ir::VarKind::Index)
          out.insert(v->name);
        return true;
      });
      return out;
    };
    const std::set<std::string> ta = names(a, true), tb = names(b, true);
    if (ta.empty() || tb.empty() ||
        std::any_of(ta.begin(), ta.end(), [&](const std::string& x) { return tb.count(x) > 0; }))
      return e;
    const std::set<std::string> ia = names(a, false), ib = names(b, false);
    auto has_own = [&](const std::set<std::string>& x, const std::set<std::string>& y) {
      return std::any_of(x.begin(), x.end(), [&](const std::string& v) {
        return !y.count(v) && std::none_of(e->axes.begin(), e->axes.end(),
                                           [&](const ir::Axis& r) { return r.name == v; });
      });
    };
    for (const ir::Axis& r : e->axes)
      if (!ia.count(r.name) || !ib.count(r.name)) return e;
    if (!has_own(ia, ib) || !has_own(ib, ia)) return e;
    auto sum = [&](const Expr& x, const Expr& y) {
      return ir::make_reduce(ir::Reducer::Sum, e->axes, ir::make_binary(Op::Mul, x, y, t->loc),
                             e->loc);
    };
    const Expr cross =
        ir::make_binary(Op::Mul, ir::make_float(2.0, e->type, e->loc), sum(a, b), e->loc);
    const Expr expanded = ir::make_binary(
        Op::Add, ir::make_binary(Op::Sub, sum(a, a), cross, e->loc), sum(b, b), e->loc);
    return ir::make_binary(Op::Max, expanded, ir::make_float(0.0, e->type, e->loc), e->loc);
  }

  // Replaces every Reduce inside e by a load of a hoisted definition. `scope` holds the
  // indices visible at e (definition indices, then enclosing reduction axes).
  Expr hoist(const Expr& e0, const std::string& owner, std::vector<ir::Axis>& scope, int& counter) {
    const Expr e = expand_distance(merge_joined_reductions(e0));
    if (e->op != Op::Reduce) {
      if (e->args.empty()) return e;
      std::vector<Expr> args;
      for (const Expr& a : e->args) args.push_back(hoist(a, owner, scope, counter));
      return ir::with_args(e, args);
    }
    size_t base = scope.size();
    for (const auto& a : e->axes) scope.push_back(a);
    Expr body = hoist(e->args[0], owner, scope, counter);
    scope.resize(base);
    // The hoisted definition is indexed by the enclosing indices its body uses, in scope order.
    NormalDef d;
    d.name = owner + "." + ir::reducer_name(e->reducer) + std::to_string(counter++);
    for (const auto& a : scope)
      if (ir::uses_var(body, a.name)) d.indices.push_back(a);
    d.dtype = storage_type(e->type);
    d.role = ir::BufferRole::Intermediate;
    d.is_reduction = true;
    d.reducer = e->reducer;
    d.reduce_axes = e->axes;
    d.body = body;
    std::vector<Expr> idx;
    for (const auto& a : d.indices) idx.push_back(axis_var(a));
    // A reduction written again (a mean inline in a variance and in the output that reads it)
    // reads the first one: the same reducer over the same extents of the same term, its
    // variables renamed by position.
    const std::string key = reduction_key(d);
    if (auto same = hoisted_.find(key); same != hoisted_.end()) {
      --counter;
      return ir::make_load(same->second, e->type, idx);
    }
    hoisted_[key] = d.name;
    Expr load = ir::make_load(d.name, e->type, idx);
    defs_.push_back(d);
    return load;
  }

  // What makes two hoisted reductions compute the same values at the same positions: the
  // reducer, the result type, the extents of the indices and of the reduced axes in order, and
  // the term with those variables renamed by their position.
  static std::string reduction_key(const NormalDef& d) {
    std::map<std::string, Expr> renamed;
    std::string key = std::string(ir::reducer_name(d.reducer)) + " " + dtype_name(d.dtype);
    for (size_t k = 0; k < d.indices.size(); ++k) {
      renamed[d.indices[k].name] =
          ir::make_var("%i" + std::to_string(k), ir::VarKind::Index, DType::Int);
      key += " i:" + ir::to_string(d.indices[k].extent);
    }
    for (size_t k = 0; k < d.reduce_axes.size(); ++k) {
      renamed[d.reduce_axes[k].name] =
          ir::make_var("%r" + std::to_string(k), ir::VarKind::Index, DType::Int);
      key += " r:" + ir::to_string(d.reduce_axes[k].extent);
    }
    return key + " " + ir::to_string(ir::substitute(d.body, renamed));
  }

  static DType storage_type(DType t) { return is_int(t) && t != DType::I8 ? DType::I32 : t; }

  // Whether a definition after `def` reads it.
  bool read_later(const Definition& def) const {
    bool after = false, read = false;
    for (const Definition& d : p_.defs) {
      if (after)
        ir::visit(d.body, [&](const Expr& x) {
          read = read || (x->op == Op::Load && x->name == def.name);
          return !read;
        });
      after = after || &d == &def;
    }
    return read;
  }

  void normalize(const Definition& def) {
    std::vector<ir::Axis> scope = def.indices;
    int counter = 0;
    NormalDef d;
    d.name = def.name;
    d.indices = def.indices;
    d.dtype = def.dtype;
    d.role = def.is_output ? ir::BufferRole::Output : ir::BufferRole::Intermediate;
    // What earlier outputs hold is read from the intermediates they copy (below).
    const Expr body = expand_distance(ir::mutate(def.body, [&](const Expr& x) {
      auto it = x->op == Op::Load ? copied_outputs_.find(x->name) : copied_outputs_.end();
      return it == copied_outputs_.end() ? x : ir::make_load(it->second, x->type, x->args, x->loc);
    }));
    // An output reduction that later definitions read (a row's maximum, kept for a backward pass
    // and read by the softmax) is an intermediate reduction, which they read and which fusion
    // may turn into a running value, and an output that copies it once complete.
    const bool every_index = std::all_of(
        def.indices.begin(), def.indices.end(),
        [&](const ir::Axis& a) { return body->op == Op::Reduce && ir::uses_var(body, a.name); });
    if (def.is_output && body->op == Op::Reduce && storage_type(body->type) == def.dtype &&
        every_index && read_later(def)) {
      d.body = hoist(body, def.name, scope, counter);
      copied_outputs_[def.name] = d.body->name;
      defs_.push_back(d);
      return;
    }
    if (body->op == Op::Reduce && storage_type(body->type) == def.dtype) {
      d.is_reduction = true;
      d.reducer = body->reducer;
      d.reduce_axes = body->axes;
      std::vector<ir::Axis> inner = scope;
      for (const auto& a : body->axes) inner.push_back(a);
      d.body = hoist(body->args[0], def.name, inner, counter);
    } else {
      d.body = hoist(body, def.name, scope, counter);
    }
    defs_.push_back(d);
  }

  ir::Stmt loop_nest(const NormalDef& d) {
    std::vector<ir::IterVar> iters;
    std::vector<Expr> idx;
    for (const auto& a : d.indices) {
      iters.push_back(ir::IterVar{a.name, a.extent, ir::IterKind::Spatial, axis_var(a)});
      idx.push_back(axis_var(a));
    }
    ir::Stmt init, body;
    if (d.is_reduction) {
      for (const auto& a : d.reduce_axes)
        iters.push_back(ir::IterVar{a.name, a.extent, ir::IterKind::Reduce, axis_var(a)});
      DType t = d.body->type;
      init = ir::make_store(d.name, idx, ir::reducer_identity_expr(d.reducer, t));
      Expr acc = ir::make_load(d.name, is_int(t) ? DType::Int : t, idx);
      body = ir::make_store(d.name, idx, ir::combine(d.reducer, acc, d.body));
    } else {
      body = ir::make_store(d.name, idx, d.body);
    }
    ir::Stmt s = ir::make_block(d.name, iters, init, body);
    for (auto it = iters.rbegin(); it != iters.rend(); ++it)
      s = ir::make_for(it->name, ir::make_int(0), it->extent, ir::ForKind::Serial, s);
    return s;
  }
};

}  // namespace

ir::LoopProgram lower(const Program& program) {
  return Lowerer(program).run();
}

}  // namespace kintsugi::te
