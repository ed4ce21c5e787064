// \file PadDots.cpp
// Dot extents padded for a target's matrix instructions: a dot's contracted (K) or output-column
// (N) extent E that is a multiple of 8 but not of TileProgram::dot_multiple (a head size of 40 or
// 72 against the tensor cores' 16; an integer dot's K against twice that, the 32 of an 8-bit
// MMA's step, so 80 becomes 96) becomes the next multiple, E', in every tile that shares the
// dimension: the loads, registers, maps and stores tied to it through the operations.
//
// The E' - E extra positions of a tile hold values nothing uses. Loads along the dimension are
// bounds-checked, so they read 0 past the buffer's end and never outside it; where a load reads
// the whole dimension from index 0 (E its extent), its extra positions are those zeros. Stores
// skip them, which needs a store of the whole dimension from 0 (else the class is left as it
// is). Every operation that combines positions along the dimension (a reduction along it, a dot
// contracting it) sees them through a tail mask `select(d < E, x, identity)`, put on a dot's
// operand under its casts to f32 and its transposes (the 16-bit tile a target stages);
// drop_redundant_tail_selects removes the masks again where x is 0 there already (a zero-filled
// load, its cast, its transpose). Every other operation works position by position, so what it
// computes at the extra positions reaches no stored value.
//
// A class with a gathered tile is left as it is (a gather's indices past E are not checked as a
// region's are); so is one whose extent is not a multiple of 8, where the extra positions would
// split a 16-byte chunk of 16-bit elements. The target's writer falls back then, and says so.
//
// Invariant established: every dot's K and N that the rules above allow to widen is a multiple
// of `multiple` (an integer dot's K of twice it), and the program computes what it did at every
// position it stores.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "ir/Printer.h"
#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

// The dimensions of a kernel's tiles (values and registers) joined into classes of dimensions
// that must keep one extent: an elementwise operation's operands and result, a broadcast's and a
// permute's mapped axes, a dot's contracted pair, a register and what is written to or read from
// it.
class DimClasses {
 public:
  explicit DimClasses(const Kernel& k) {
    for (const Register& r : k.registers)
      for (size_t d = 0; d < r.type.shape.size(); ++d) reg(r.name, d);
    for_each_op(k.body, [&](const TileOp& o) { join_op(o); });
  }

  int value(int id, size_t dim) { return node({id, static_cast<int>(dim)}); }
  int reg(const std::string& name, size_t dim) { return node({-1, static_cast<int>(dim)}, name); }
  int find(int n) {
    while (parent_[static_cast<size_t>(n)] != n) n = parent_[static_cast<size_t>(n)];
    return n;
  }

 private:
  int node(std::pair<int, int> key, const std::string& name = "") {
    auto [it, added] = nodes_.try_emplace({name, key}, static_cast<int>(parent_.size()));
    if (added) parent_.push_back(it->second);
    return it->second;
  }
  void join(int a, int b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
  void join_shape(int a, int b, size_t rank) {
    for (size_t d = 0; d < rank; ++d) join(value(a, d), value(b, d));
  }

  void join_op(const TileOp& o) {
    const size_t rank = o.type.shape.size();
    switch (o.kind) {
      case OpKind::Map:
      case OpKind::Cast:
      case OpKind::Gather:
        // Operands of the result's shape (scalars broadcast and join nothing).
        for (int a : o.args) join_shape(o.result, a, rank_of(a) == rank ? rank : 0);
        break;
      case OpKind::Broadcast:
        for (size_t d = 0; d < o.dims.size(); ++d)
          join(value(o.result, static_cast<size_t>(o.dims[d])), value(o.args[0], d));
        break;
      case OpKind::Permute:
        for (size_t d = 0; d < o.perm.size(); ++d)
          join(value(o.result, d), value(o.args[0], static_cast<size_t>(o.perm[d])));
        break;
      case OpKind::Dot:
        join(value(o.result, 0), value(o.args[0], 0));
        join(value(o.result, 1), value(o.args[1], 1));
        join(value(o.args[0], 1), value(o.args[1], 0));
        break;
      case OpKind::Reduce:
        for (size_t d = 0, e = 0; d < rank + 1; ++d)
          if (static_cast<int>(d) != o.axis) join(value(o.result, e++), value(o.args[0], d));
        break;
      case OpKind::Read:
        for (size_t d = 0; d < rank; ++d) join(value(o.result, d), reg(o.buffer, d));
        break;
      case OpKind::Write:
        for (size_t d = 0; d < rank_of(o.args[0]); ++d) join(value(o.args[0], d), reg(o.buffer, d));
        break;
      case OpKind::Store:
        for (int a : o.args) join_shape(o.args[0], a, rank_of(o.args[0]));
        join_region(o, o.args[0]);
        break;
      case OpKind::Load:
        join_region(o, o.result);
        break;
      case OpKind::Full:
      case OpKind::Arange:
        break;
    }
    if (o.result >= 0) rank_[o.result] = rank;
  }

  // Loads and stores of one region of a buffer are one tile in memory (a split-K partial
  // stored, then read back; loads CSE merges): their tiles keep one extent.
  void join_region(const TileOp& o, int tile) {
    for (const auto& [other, other_tile] : regions_)
      if (other->buffer == o.buffer && same_region(*other, o))
        join_shape(other_tile, tile, o.type.shape.size());
    regions_.emplace_back(&o, tile);
  }

  size_t rank_of(int id) const {
    auto it = rank_.find(id);
    return it == rank_.end() ? 0 : it->second;
  }

  std::map<std::pair<std::string, std::pair<int, int>>, int> nodes_;
  std::vector<int> parent_;
  std::map<int, size_t> rank_;
  std::vector<std::pair<const TileOp*, int>> regions_;  // loads and stores, with their tiles
};

// The value of a buffer's extent the kernels were generated for: a literal, or a specialised size.
std::optional<int64_t> extent_value(const TileProgram& p, const ir::Expr& e) {
  if (e->op == ir::Op::IntImm) return e->int_value;
  auto sp = p.specialised.find(ir::to_string(e));
  if (sp != p.specialised.end()) return sp->second.value;
  return std::nullopt;
}

class KernelPadding {
 public:
  KernelPadding(const TileProgram& p, Kernel& k, int64_t multiple)
      : p_(p), k_(k), multiple_(multiple), classes_(k) {}

  void run() {
    for_each_op(k_.body, [&](const TileOp& o) {
      if (o.result >= 0) shape_[o.result] = o.type.shape;
    });
    // The classes a dot wants widened, and the extent each has.
    // An integer dot (8-bit operands, i32 accumulators) steps twice as far along K.
    for_each_op(k_.body, [&](const TileOp& o) {
      if (o.kind != OpKind::Dot) return;
      const int64_t k_multiple = is_int(o.type.dtype) ? 2 * multiple_ : multiple_;
      want(classes_.value(o.args[0], 1), shape_[o.args[0]][1], k_multiple);
      want(classes_.value(o.result, 1), o.type.shape[1], multiple_);
    });
    for_each_op(k_.body, [&](const TileOp& o) { refuse_unless_whole(o); });
    for (int c : refused_) padded_.erase(c);
    if (padded_.empty()) return;
    widen();
    mask_combinations();
  }

 private:
  void want(int node, int64_t extent, int64_t multiple) {
    if (extent % 8 != 0 || extent % multiple == 0) return;
    const int c = classes_.find(node);
    const int64_t widened = (extent + multiple - 1) / multiple * multiple;
    if (!padded_.count(c) || padded_[c].padded < widened)
      padded_[c] = {extent, widened, ir::make_int(extent)};
  }

  // The class of dimension `dim` of `o`'s tile, when it is one to widen.
  std::optional<int> padded_class(int id, size_t dim) {
    int c = classes_.find(classes_.value(id, dim));
    return padded_.count(c) ? std::optional<int>(c) : std::nullopt;
  }

  // A class with a gathered tile, or with a store other than of the whole buffer dimension from
  // index 0, keeps its extent; a load of the whole dimension gives the class the extent's
  // expression for its masks (the one drop_redundant_tail_selects matches).
  void refuse_unless_whole(const TileOp& o) {
    if (o.kind == OpKind::Gather) {
      for (size_t d = 0; d < o.type.shape.size(); ++d)
        if (auto c = padded_class(o.result, d)) refused_.insert(*c);
      return;
    }
    if (o.kind != OpKind::Load && o.kind != OpKind::Store) return;
    const int tile = o.kind == OpKind::Load ? o.result : o.args[0];
    const ir::Buffer* buffer = p_.source.find_buffer(o.buffer);
    for (size_t d = 0; d < o.starts.size(); ++d) {
      if (o.axis_of_dim[d] < 0) continue;
      auto c = padded_class(tile, static_cast<size_t>(o.axis_of_dim[d]));
      if (!c) continue;
      const bool whole = ir::equal(o.starts[d], ir::make_int(0)) &&
                         extent_value(p_, buffer->shape[d]) == padded_[*c].extent;
      if (whole)
        padded_[*c].expr = buffer->shape[d];
      else if (o.kind == OpKind::Store)
        refused_.insert(*c);
    }
  }

  void widen() {
    for (Register& r : k_.registers)
      for (size_t d = 0; d < r.type.shape.size(); ++d)
        if (auto it = padded_.find(classes_.find(classes_.reg(r.name, d))); it != padded_.end())
          r.type.shape[d] = it->second.padded;
    for_each_op(k_.body, [&](TileOp& o) {
      const bool stores = o.kind == OpKind::Store || o.kind == OpKind::Write;
      const int tile = stores ? o.args[0] : o.result;
      if (tile < 0) return;
      for (size_t d = 0; d < o.type.shape.size(); ++d)
        if (auto c = padded_class(tile, d)) o.type.shape[d] = padded_[*c].padded;
      if (o.kind != OpKind::Load && o.kind != OpKind::Store) return;
      for (size_t d = 0; d < o.starts.size(); ++d)
        if (o.axis_of_dim[d] >= 0 && padded_class(tile, static_cast<size_t>(o.axis_of_dim[d])))
          o.bounds_checked[d] = true;
    });
  }

  // Reductions along a widened dimension and dots contracting one read their operands through a
  // tail mask. A dot's operand is masked where its 16-bit value is, under the casts to f32 and
  // the transposes that feed the dot (a computed key tile stays a 16-bit tile the target can
  // stage).
  void mask_combinations() {
    class Masker : public OpRewriter {
     public:
      explicit Masker(KernelPadding& pad) : OpRewriter(pad.k_), pad_(pad) {}

     protected:
      void rewrite(TileOp& o, TileBody& out) override {
        if (o.kind == OpKind::Reduce) {
          if (pad_.padded_class(o.args[0], static_cast<size_t>(o.axis)))
            o.args[0] = masked(o.args[0], static_cast<size_t>(o.axis),
                               ir::reducer_identity_expr(o.reducer, o.type.dtype), out);
        } else if (o.kind == OpKind::Dot && !is_int(o.type.dtype)) {
          if (pad_.padded_class(o.args[0], 1)) {
            o.args[0] = masked_operand(o.args[0], 1, out);
            o.args[1] = masked_operand(o.args[1], 0, out);
          }
        }
      }

     private:
      // `arg` with its positions past E along `dim` made 0 at its 16-bit root: the casts and
      // permutes between are applied again to the masked root.
      int masked_operand(int arg, size_t dim, TileBody& out) {
        const TileOp& v = *def(arg);
        size_t inner = dim;
        if (v.kind == OpKind::Permute) {
          inner = static_cast<size_t>(v.perm[dim]);
        } else if (!(v.kind == OpKind::Cast && v.type.dtype == DType::F32 &&
                     (def(v.args[0])->type.dtype == DType::F16 ||
                      def(v.args[0])->type.dtype == DType::BF16))) {
          return masked(arg, dim, ir::make_float(0.0, v.type.dtype), out);
        }
        TileOp again = v;
        again.args = {masked_operand(v.args[0], inner, out)};
        return append(std::move(again), out);
      }

      // `select(arange along dim < E, arg, identity)`.
      int masked(int arg, size_t dim, const ir::Expr& identity, TileBody& out) {
        const TileOp& v = *def(arg);
        TileOp index;
        index.kind = OpKind::Arange;
        index.type = {DType::Int, v.type.shape};
        index.scalar = ir::make_int(0);
        index.axis = static_cast<int>(dim);
        TileOp extent;
        extent.kind = OpKind::Full;
        extent.type = {DType::Int, {}};
        extent.scalar = pad_.padded_[*pad_.padded_class(arg, dim)].expr;
        TileOp inside;
        inside.kind = OpKind::Map;
        inside.op = ir::Op::Lt;
        inside.type = {DType::Bool, v.type.shape};
        inside.args = {append(index, out), append(extent, out)};
        TileOp fill;
        fill.kind = OpKind::Full;
        fill.type = {v.type.dtype, {}};
        fill.scalar = identity;
        TileOp select;
        select.kind = OpKind::Map;
        select.op = ir::Op::Select;
        select.type = v.type;
        select.args = {append(inside, out), arg, append(fill, out)};
        return append(select, out);
      }
      KernelPadding& pad_;
    };
    Masker(*this).run();
  }

  struct Padding {
    int64_t extent = 0, padded = 0;
    ir::Expr expr;  // the buffer extent E the loads along the class read whole
  };

  const TileProgram& p_;
  Kernel& k_;
  int64_t multiple_;
  DimClasses classes_;
  std::map<int, std::vector<int64_t>> shape_;
  std::map<int, Padding> padded_;  // by class
  std::set<int> refused_;
};

}  // namespace

void pad_dot_extents(TileProgram& p) {
  if (p.dot_multiple <= 1) return;
  for (Kernel& k : p.kernels) KernelPadding(p, k, p.dot_multiple).run();
}

}  // namespace kintsugi::tile
