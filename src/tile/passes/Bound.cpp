// \file Bound.cpp
// Stores masked by their own region's bound (see Bound.h).
#include "tile/passes/Bound.h"

#include <map>
#include <set>

#include "ir/Simplify.h"
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

  bool covers(const TileOp& store, const ir::Buffer& b) const {
    std::vector<std::pair<int, int>> conjuncts;  // (value, axis of the stored tile it spans)
    if (!bound_conjuncts(store.args[1], {}, &conjuncts)) return false;
    std::set<size_t> covered;
    for (auto [id, axis] : conjuncts) {
      const TileOp& lt = *defs_.at(id);
      const TileOp& lhs = *defs_.at(lt.args[0]);
      const TileOp& rhs = *defs_.at(lt.args[1]);
      if (lhs.kind != OpKind::Arange || rhs.kind != OpKind::Full) return false;
      bool matched = false;
      for (size_t d = 0; d < store.starts.size() && !matched; ++d)
        matched = store.axis_of_dim[d] == axis && store.bounds_checked[d] &&
                  ir::provably_equal(store.starts[d], lhs.scalar) &&
                  ir::provably_equal(b.shape[d], rhs.scalar) && non_negative(lhs.scalar) &&
                  covered.insert(d).second;
      if (!matched) return false;
    }
    for (size_t d = 0; d < store.starts.size(); ++d)
      if (store.bounds_checked[d] && !covered.count(d)) return false;
    return true;
  }

 private:
  // The `lt` conjuncts of mask `id` with the stored axis each spans (`axes`: the stored axis of
  // each axis of `id`, empty at the mask itself); false when the mask has another form.
  bool bound_conjuncts(int id, std::vector<int> axes, std::vector<std::pair<int, int>>* out) const {
    const TileOp& o = *defs_.at(id);
    if (axes.empty())
      for (size_t a = 0; a < o.type.shape.size(); ++a) axes.push_back(static_cast<int>(a));
    if (o.kind == OpKind::Broadcast) {
      std::vector<int> inner;
      for (int d : o.dims) inner.push_back(axes[static_cast<size_t>(d)]);
      return bound_conjuncts(o.args[0], inner, out);
    }
    if (o.kind != OpKind::Map || o.is_call) return false;
    if (o.op == ir::Op::And)
      return bound_conjuncts(o.args[0], axes, out) && bound_conjuncts(o.args[1], axes, out);
    if (o.op != ir::Op::Lt || axes.size() != 1) return false;
    out->push_back({id, axes[0]});
    return true;
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

}  // namespace

bool masked_by_its_bound(const Kernel& k, const TileOp& store, const ir::LoopProgram& source) {
  const ir::Buffer* b = source.find_buffer(store.buffer);
  if (store.kind != OpKind::Store || store.args.size() != 2 || !b || b->dtype != store.type.dtype)
    return false;
  return BoundMask(k).covers(store, *b);
}

}  // namespace kintsugi::tile
