// \file StoreForward.cpp
// Store-to-load forwarding: a load of exactly the region that the same straight-line code stored
// before, with no store to that buffer in between, is the stored value. The split-K partial
// maximum, stored for the combine and loaded back for the exponentials of the same chunk, is
// such a load: forwarding it saves a round trip through memory (and on a GPU a barrier).
//
// The stored value is the loaded one when the store wrote every element of the region as is: the
// store is unmasked, no dimension of its region is bounds-checked (a tail would be skipped by the
// store and read as 0 by the load), and the buffer's dtype is the value's (no rounding on the
// way). A store whose mask is exactly its region's bound (a group of rows whose last one may run
// past the buffer: `h < HQ` on a region starting at a non-negative index) wrote every element
// inside the buffer, and the load reads 0 past it: the load is select(mask, value, 0). A store is
// known inside a loop that does not store to its buffer (a combine loop reading the maximum that
// the loop before it produced), not out of a loop, and a loop that stores to a buffer ends what
// is known about it.
//
// Invariant established: no load reads back what a store of the same code just wrote whole.
#include <map>

#include "tile/Passes.h"
#include "tile/passes/Bound.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

class StoreForwarding {
 public:
  explicit StoreForwarding(const ir::LoopProgram& source, Kernel& k) : source_(source), k_(k) {}

  // `stored`: buffer -> the store that last wrote it whole.
  void walk(TileBody& body, std::map<std::string, const TileOp*> stored = {}) {
    for (TileStmt& s : body) {
      if (s.kind == StmtKind::For) {
        for (const std::string& b : written_in(s.body)) stored.erase(b);
        walk(s.body, stored);
        continue;
      }
      TileOp& o = s.op;
      if (o.kind == OpKind::Store) {
        stored.erase(o.buffer);
        if (writes_whole(o) || masked_by_its_bound(k_, o, source_)) stored[o.buffer] = &o;
      } else if (o.kind == OpKind::Load) {
        auto it = stored.find(o.buffer);
        if (it == stored.end() || !same_region(*it->second, o)) continue;
        const TileOp& st = *it->second;
        if (st.args.size() == 1) {
          forwarded_[o.result] = st.args[0];
          continue;
        }
        // select(mask, value, 0) in place of the load, the 0 defined just before it.
        TileOp zero;
        zero.kind = OpKind::Full;
        zero.result = k_.num_values++;
        zero.scalar = ir::make_float(0.0, o.type.dtype);
        zero.type = TileType{o.type.dtype, {}};
        o.kind = OpKind::Map;
        o.op = ir::Op::Select;
        o.is_call = false;
        o.args = {st.args[1], st.args[0], zero.result};
        o.buffer.clear();
        o.starts.clear();
        o.axis_of_dim.clear();
        o.bounds_checked.clear();
        o.stream_loop.clear();
        zeros_.push_back({o.result, std::move(zero)});
      }
    }
  }

  // The zeros of masked forwards go in front of their selects.
  void place_zeros(TileBody& body) {
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i].kind == StmtKind::For) {
        place_zeros(body[i].body);
        continue;
      }
      // By the select's result: inserting into a body moves its ops.
      for (auto& [select, zero] : zeros_)
        if (select == body[i].op.result && body[i].op.kind == OpKind::Map) {
          TileStmt z;
          z.op = zero;
          body.insert(body.begin() + static_cast<std::ptrdiff_t>(i), std::move(z));
          ++i;
          break;
        }
    }
  }

  void rewrite(TileBody& body) const {
    for_each_op(body, [&](TileOp& o) {
      for (int& a : o.args)
        if (auto it = forwarded_.find(a); it != forwarded_.end()) a = it->second;
    });
  }

 private:
  bool writes_whole(const TileOp& store) const {
    if (store.args.size() > 1) return false;
    for (bool checked : store.bounds_checked)
      if (checked) return false;
    const ir::Buffer* b = source_.find_buffer(store.buffer);
    return b && b->dtype == store.type.dtype;
  }

  const ir::LoopProgram& source_;
  Kernel& k_;
  std::map<int, int> forwarded_;               // load result -> the stored value
  std::vector<std::pair<int, TileOp>> zeros_;  // masked forward (its result) -> its zero
};

}  // namespace

void forward_stores(TileProgram& p) {
  for (Kernel& k : p.kernels) {
    StoreForwarding f(p.source, k);
    f.walk(k.body);
    f.rewrite(k.body);
    f.place_zeros(k.body);
  }
}

}  // namespace kintsugi::tile
