// \file TailSelect.cpp
// Redundant tail selects: `select(m, x, 0)`, m a tail mask `lt(arange(start), full(E))`
// (possibly broadcast), is x itself when x is already 0 wherever m is false. What is known to be
// 0 outside m:
//   - a load along whose bounds-checked dimension d the arange runs, from the region's start
//     there, with E the buffer's extent along d: past the buffer's end the load reads 0 (the V
//     tile of a key loop, masked by the key bound in front of the PV dot);
//   - a cast, permute or broadcast of such a value (the mask's axes mapped through the permute or
//     the broadcast; a key tile transposed for the scores' dot), a
//     product of two such values (0 * 0 is 0, whatever each holds where m is true), a zero, and a
//     select against 0 that is such a value or is masked by m itself (the masked exponentials of
//     a decode chunk, times its tail-loaded V rows).
// Starts and extents are compared structurally (ir::equal), masks by their comparison.
//
// Invariant established: no select against zero repeats what its true operand already is.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

bool is_zero(const ir::Expr& e) {
  switch (e->op) {
    case ir::Op::IntImm:
    case ir::Op::BoolImm:
      return e->int_value == 0;
    case ir::Op::FloatImm:
      return e->float_value == 0.0 && !std::signbit(e->float_value);
    default:
      return false;
  }
}

class TailSelects {
 public:
  TailSelects(const ir::LoopProgram& source, Kernel& k) : source_(source), kernel_(k) {}

  void run() {
    std::map<int, int> redundant;  // select -> the value it is
    for_each_op(kernel_.body, [&](TileOp& o) {
      if (o.result >= 0) def_[o.result] = &o;
    });
    for_each_op(kernel_.body, [&](TileOp& o) {
      if (int value = selected_value(o); value >= 0) redundant[o.result] = value;
    });
    def_.clear();
    if (redundant.empty()) return;
    drop(kernel_.body, redundant);
    for_each_op(kernel_.body, [&](TileOp& o) {
      for (int& a : o.args)
        for (auto it = redundant.find(a); it != redundant.end(); it = redundant.find(a))
          a = it->second;
    });
  }

 private:
  // A tail mask: `compare` is lt(arange, full); its axis k is axis axes[k] of the masked value.
  struct Mask {
    const TileOp* compare = nullptr;
    std::vector<int> axes;
    bool operator==(const Mask& o) const { return compare == o.compare && axes == o.axes; }
  };

  const TileOp* def(int id) const {
    auto it = def_.find(id);
    return it == def_.end() ? nullptr : it->second;
  }

  bool is_zero_value(int id) const {
    const TileOp* v = def(id);
    if (v && v->kind == OpKind::Broadcast && v->dims.empty()) v = def(v->args[0]);
    return v && v->kind == OpKind::Full && is_zero(v->scalar);
  }

  // The tail mask that value `id` of rank `rank` is (possibly broadcast), if it is one.
  std::optional<Mask> mask_of(int id, size_t rank) const {
    const TileOp* m = def(id);
    if (!m) return std::nullopt;
    Mask out;
    if (m->kind == OpKind::Broadcast) {
      out.axes = m->dims;
      m = def(m->args[0]);
      if (!m) return std::nullopt;
    } else {
      for (size_t k = 0; k < rank; ++k) out.axes.push_back(static_cast<int>(k));
    }
    if (m->kind != OpKind::Map || m->is_call || m->op != ir::Op::Lt || m->args.size() != 2 ||
        m->type.shape.size() != out.axes.size())
      return std::nullopt;
    const TileOp* index = def(m->args[0]);
    const TileOp* extent = def(m->args[1]);
    if (!index || index->kind != OpKind::Arange || index->type.shape != m->type.shape || !extent ||
        extent->kind != OpKind::Full)
      return std::nullopt;
    out.compare = m;
    return out;
  }

  // Whether value `id` is 0 wherever mask `m` is false.
  bool zero_outside(int id, const Mask& m) const {
    const TileOp* v = def(id);
    if (!v) return false;
    switch (v->kind) {
      case OpKind::Full:
        return is_zero(v->scalar);
      case OpKind::Cast:
        return zero_outside(v->args[0], m);
      case OpKind::Load:
        return load_zero_outside(*v, m);
      case OpKind::Permute: {  // result axis k is the operand's axis perm[k]
        Mask inner{m.compare, {}};
        for (int axis : m.axes) inner.axes.push_back(v->perm[static_cast<size_t>(axis)]);
        return zero_outside(v->args[0], inner);
      }
      case OpKind::Broadcast: {  // the mask's axes must be axes of the broadcast operand
        Mask inner{m.compare, {}};
        for (int axis : m.axes) {
          auto it = std::find(v->dims.begin(), v->dims.end(), axis);
          if (it == v->dims.end()) return false;
          inner.axes.push_back(static_cast<int>(it - v->dims.begin()));
        }
        return zero_outside(v->args[0], inner);
      }
      case OpKind::Map:
        if (v->is_call) return false;
        // 0 * 0 is 0, whatever else each factor holds where the mask is true.
        if (v->op == ir::Op::Mul) return zero_outside(v->args[0], m) && zero_outside(v->args[1], m);
        if (v->op == ir::Op::Select && v->args.size() == 3 && is_zero_value(v->args[2]))
          return zero_outside(v->args[1], m) || mask_of(v->args[0], v->type.shape.size()) == m;
        return false;
      default:
        return false;
    }
  }

  // A load reads 0 past its buffer's end: where the mask's arange, along the tile axis that spans
  // a bounds-checked dimension from the same start, reaches the dimension's extent.
  bool load_zero_outside(const TileOp& load, const Mask& m) const {
    const TileOp* index = def(m.compare->args[0]);
    const TileOp* extent = def(m.compare->args[1]);
    int axis = m.axes[static_cast<size_t>(index->axis)];
    const ir::Buffer* buffer = source_.find_buffer(load.buffer);
    if (!buffer) return false;
    for (size_t d = 0; d < load.axis_of_dim.size(); ++d) {
      if (load.axis_of_dim[d] != axis) continue;
      return load.bounds_checked[d] && d < buffer->shape.size() &&
             ir::equal(load.starts[d], index->scalar) &&
             ir::equal(extent->scalar, buffer->shape[d]);
    }
    return false;
  }

  // The value that select `o` is (its true operand, when that is already 0 wherever the select's
  // mask is false), or -1.
  int selected_value(const TileOp& o) const {
    if (o.kind != OpKind::Map || o.is_call || o.op != ir::Op::Select || o.args.size() != 3 ||
        !is_zero_value(o.args[2]))
      return -1;
    const TileOp* value = def(o.args[1]);
    if (!value || value->type.dtype != o.type.dtype || value->type.shape != o.type.shape) return -1;
    std::optional<Mask> m = mask_of(o.args[0], o.type.shape.size());
    return m && zero_outside(o.args[1], *m) ? o.args[1] : -1;
  }

  static void drop(TileBody& b, const std::map<int, int>& redundant) {
    TileBody out;
    for (TileStmt& s : b) {
      if (s.kind == StmtKind::For)
        drop(s.body, redundant);
      else if (redundant.count(s.op.result))
        continue;
      out.push_back(std::move(s));
    }
    b = std::move(out);
  }

  const ir::LoopProgram& source_;
  Kernel& kernel_;
  std::map<int, const TileOp*> def_;
};

}  // namespace

void drop_redundant_tail_selects(TileProgram& p) {
  for (Kernel& k : p.kernels) TailSelects(p.source, k).run();
}

}  // namespace kintsugi::tile
