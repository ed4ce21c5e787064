// \file Bound.cpp
// Stores masked by their own region's bound (see Bound.h).
#include "tile/passes/Bound.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

class BoundMask {
 public:
  explicit BoundMask(const Kernel& k) {
    for (const GridAxis& g : k.grid) grid_.insert(g.var);
    for_each_op(k.body, [&](const TileOp& o) {
      if (o.result >= 0) defs_[o.result] = &o;
    });
  }

  // Exactly (`exact`), or at most (other conjuncts allowed, which only narrow it). Conjuncts
  // that are uniform conditions true under `at` (a loop variable at its first value) count as
  // true.
  bool covers(const TileOp& store, const ir::Buffer& b, bool exact,
              const std::map<std::string, ir::Expr>& at = {}) const {
    std::vector<std::pair<int, int>> conjuncts;  // (value, axis of the stored tile it spans)
    if (!bound_conjuncts(store.args[1], {}, exact, at, &conjuncts)) return false;
    std::set<size_t> covered;
    for (auto [id, axis] : conjuncts) {
      const TileOp& lt = *defs_.at(id);
      const TileOp& lhs = *defs_.at(lt.args[0]);
      const TileOp& rhs = *defs_.at(lt.args[1]);
      bool matched = false;
      if (lhs.kind == OpKind::Arange && rhs.kind == OpKind::Full)
        for (size_t d = 0; d < store.starts.size() && !matched; ++d)
          matched = store.axis_of_dim[d] == axis && store.bounds_checked[d] &&
                    ir::provably_equal(store.starts[d], lhs.scalar) &&
                    ir::provably_equal(b.shape[d], rhs.scalar) && non_negative(lhs.scalar) &&
                    covered.insert(d).second;
      if (!matched && exact) return false;
    }
    for (size_t d = 0; d < store.starts.size(); ++d)
      if (store.bounds_checked[d] && !covered.count(d)) return false;
    return true;
  }

 private:
  // The `lt` conjuncts of mask `id` with the stored axis each spans (`axes`: the stored axis of
  // each axis of `id`, empty at the mask itself); false when the mask has another form (`exact`),
  // else conjuncts of other forms are passed over. Uniform conditions true under `at` are true.
  bool bound_conjuncts(int id, std::vector<int> axes, bool exact,
                       const std::map<std::string, ir::Expr>& at,
                       std::vector<std::pair<int, int>>* out) const {
    const TileOp& o = *defs_.at(id);
    if (axes.empty())
      for (size_t a = 0; a < o.type.shape.size(); ++a) axes.push_back(static_cast<int>(a));
    if (o.kind == OpKind::Broadcast) {
      std::vector<int> inner;
      for (int d : o.dims) inner.push_back(axes[static_cast<size_t>(d)]);
      return bound_conjuncts(o.args[0], inner, exact, at, out);
    }
    if (o.kind == OpKind::Full && !at.empty() && holds(ir::substitute(o.scalar, at))) return true;
    bool map = o.kind == OpKind::Map && !o.is_call;
    if (map && o.op == ir::Op::And)
      return bound_conjuncts(o.args[0], axes, exact, at, out) &&
             bound_conjuncts(o.args[1], axes, exact, at, out);
    if (!map || o.op != ir::Op::Lt || axes.size() != 1) return !exact;
    out->push_back({id, axes[0]});
    return true;
  }

  // Whether a condition provably holds: true, an equality of provably equal sides (`0 == 0`,
  // `0 * 64 == 0`), or a conjunction of such.
  static bool holds(const ir::Expr& c) {
    ir::Expr e = ir::simplify(c);
    switch (e->op) {
      case ir::Op::BoolImm:
        return e->int_value == 1;
      case ir::Op::Eq:
      case ir::Op::Le:
      case ir::Op::Ge:
        return ir::provably_equal(e->args[0], e->args[1]);
      case ir::Op::And:
        return holds(e->args[0]) && holds(e->args[1]);
      default:
        return false;
    }
  }

  // Literals, sizes and grid indices, combined by +, * and floor division.
  bool non_negative(const ir::Expr& e) const {
    switch (e->op) {
      case ir::Op::IntImm:
        return e->int_value >= 0;
      case ir::Op::Var:
        return e->var_kind == ir::VarKind::Dim || grid_.count(e->name);
      case ir::Op::Add:
      case ir::Op::Mul:
      case ir::Op::Div:
        return non_negative(e->args[0]) && non_negative(e->args[1]);
      default:
        return false;
    }
  }

  std::set<std::string> grid_;
  std::map<int, const TileOp*> defs_;
};

// The buffer a store writes, when it is a store in the buffer's own dtype.
const ir::Buffer* stored_buffer(const TileOp& store, const ir::LoopProgram& source) {
  const ir::Buffer* b = source.find_buffer(store.buffer);
  return store.kind == OpKind::Store && b && b->dtype == store.type.dtype ? b : nullptr;
}

}  // namespace

bool masked_by_its_bound(const Kernel& k, const TileOp& store, const ir::LoopProgram& source) {
  const ir::Buffer* b = stored_buffer(store, source);
  return b && store.args.size() == 2 && BoundMask(k).covers(store, *b, true);
}

bool writes_its_whole_bound_at(const Kernel& k, const TileOp& store, const ir::LoopProgram& source,
                               const std::string& var, const ir::Expr& value) {
  const ir::Buffer* b = stored_buffer(store, source);
  if (!b) return false;
  if (store.args.size() < 2)
    return std::none_of(store.bounds_checked.begin(), store.bounds_checked.end(),
                        [](bool c) { return c; });
  return BoundMask(k).covers(store, *b, true, {{var, value}});
}

bool masked_within_its_bound(const Kernel& k, const TileOp& store, const ir::LoopProgram& source) {
  const ir::Buffer* b = stored_buffer(store, source);
  return b && store.args.size() == 2 && BoundMask(k).covers(store, *b, false);
}

}  // namespace kintsugi::tile
