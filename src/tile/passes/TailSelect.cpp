// \file TailSelect.cpp
// Redundant tail selects: `select(m, L, 0)` where L is a load (or a cast of one) and m is
// `lt(arange(start), full(E))`, possibly broadcast, is L itself when the arange runs along the
// tile axis that spans buffer dimension d of the load's region, the region starts at `start`
// there and is bounds-checked, and E is the buffer's extent along d: where the mask is false the
// region is past the buffer's end, and the load reads 0 there already. The V tile of a key loop,
// masked by the key bound in front of the PV dot, is such a select. Starts and extents are
// compared structurally (ir::equal).
//
// Invariant established: no select of a load against zero repeats the load's own bounds check.
#include <cmath>
#include <map>

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
    std::map<int, int> redundant;  // select -> the load (or cast) it is
    for_each_op(kernel_.body, [&](TileOp& o) {
      if (o.result >= 0) def_[o.result] = &o;
    });
    for_each_op(kernel_.body, [&](TileOp& o) {
      if (int loaded = loaded_value(o); loaded >= 0) redundant[o.result] = loaded;
    });
    def_.clear();
    if (redundant.empty()) return;
    drop(kernel_.body, redundant);
    for_each_op(kernel_.body, [&](TileOp& o) {
      for (int& a : o.args)
        if (auto it = redundant.find(a); it != redundant.end()) a = it->second;
    });
  }

 private:
  const TileOp* def(int id) const {
    auto it = def_.find(id);
    return it == def_.end() ? nullptr : it->second;
  }

  // The load (or cast of a load) that select `o` is, or -1.
  int loaded_value(const TileOp& o) const {
    if (o.kind != OpKind::Map || o.is_call || o.op != ir::Op::Select || o.args.size() != 3)
      return -1;
    const TileOp* zero = def(o.args[2]);
    if (!zero || zero->kind != OpKind::Full || !is_zero(zero->scalar)) return -1;
    const TileOp* value = def(o.args[1]);
    if (!value || value->type.dtype != o.type.dtype || value->type.shape != o.type.shape) return -1;
    const TileOp* load = value;
    if (load->kind == OpKind::Cast) load = def(load->args[0]);
    if (!load || load->kind != OpKind::Load) return -1;
    // The mask: lt(arange, full), possibly broadcast; `axis` is the arange's axis in the select.
    const TileOp* mask = def(o.args[0]);
    if (!mask) return -1;
    std::vector<int> to_select_axis;  // axis of the comparison -> axis of the select
    if (mask->kind == OpKind::Broadcast) {
      to_select_axis = mask->dims;
      mask = def(mask->args[0]);
      if (!mask) return -1;
    } else {
      for (size_t k = 0; k < o.type.shape.size(); ++k)
        to_select_axis.push_back(static_cast<int>(k));
    }
    if (mask->kind != OpKind::Map || mask->is_call || mask->op != ir::Op::Lt ||
        mask->args.size() != 2)
      return -1;
    const TileOp* index = def(mask->args[0]);
    const TileOp* extent = def(mask->args[1]);
    if (!index || index->kind != OpKind::Arange || index->type.shape != mask->type.shape ||
        !extent || extent->kind != OpKind::Full || mask->type.shape.size() != to_select_axis.size())
      return -1;
    int axis = to_select_axis[static_cast<size_t>(index->axis)];
    const ir::Buffer* buffer = source_.find_buffer(load->buffer);
    if (!buffer) return -1;
    for (size_t d = 0; d < load->axis_of_dim.size(); ++d) {
      if (load->axis_of_dim[d] != axis) continue;
      bool covered = load->bounds_checked[d] && d < buffer->shape.size() &&
                     ir::equal(load->starts[d], index->scalar) &&
                     ir::equal(extent->scalar, buffer->shape[d]);
      return covered ? value->result : -1;
    }
    return -1;
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
