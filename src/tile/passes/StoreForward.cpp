// \file StoreForward.cpp
// Store-to-load forwarding: a load of exactly the region that the same straight-line code stored
// before, with no store to that buffer in between, is the stored value. The split-K partial
// maximum, stored for the combine and loaded back for the exponentials of the same chunk, is
// such a load: forwarding it saves a round trip through memory (and on a GPU a barrier).
//
// The stored value is the loaded one only when the store wrote every element of the region as
// is: the store is unmasked, no dimension of its region is bounds-checked (a tail would be
// skipped by the store and read as 0 by the load), and the buffer's dtype is the value's (no
// rounding on the way). A store is known inside a loop that does not store to its buffer (a
// combine loop reading the maximum that the loop before it produced), not out of a loop, and a
// loop that stores to a buffer ends what is known about it.
//
// Invariant established: no load reads back what an unmasked store of the same code just wrote.
#include <map>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

class StoreForwarding {
 public:
  explicit StoreForwarding(const ir::LoopProgram& source) : source_(source) {}

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
        if (writes_whole(o)) stored[o.buffer] = &o;
      } else if (o.kind == OpKind::Load) {
        auto it = stored.find(o.buffer);
        if (it != stored.end() && same_region(*it->second, o))
          forwarded_[o.result] = it->second->args[0];
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
  std::map<int, int> forwarded_;  // load result -> the stored value
};

}  // namespace

void forward_stores(TileProgram& p) {
  for (Kernel& k : p.kernels) {
    StoreForwarding f(p.source);
    f.walk(k.body);
    f.rewrite(k.body);
  }
}

}  // namespace kintsugi::tile
