// \file Dce.cpp
// Dead code elimination: stores to an intermediate buffer that no kernel reads are removed (the
// statistics and elementwise values of a row reduction computed whole, which stay in registers);
// then pure operations whose values nothing uses, repeatedly (removing one use can make its
// operands dead); loops left empty are removed.
//
// Invariant established: every remaining store is to an output or to an intermediate some kernel
// reads; every remaining value-producing operation has a use or is a load or read feeding one
// (transitively, a store or a write).
#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

bool sweep(TileBody& b, const std::set<int>& used) {
  bool changed = false;
  TileBody out;
  for (TileStmt& s : b) {
    if (s.kind == StmtKind::For) {
      changed |= sweep(s.body, used);
      if (s.body.empty()) {
        changed = true;
        continue;
      }
    } else if (is_pure(s.op) && !used.count(s.op.result)) {
      changed = true;
      continue;
    }
    out.push_back(std::move(s));
  }
  b = std::move(out);
  return changed;
}

// Removes the stores to `buffers` from `b`; whether there were any.
bool drop_stores(TileBody& b, const std::set<std::string>& buffers) {
  bool dropped = false;
  TileBody out;
  for (TileStmt& s : b) {
    if (s.kind == StmtKind::For) {
      dropped |= drop_stores(s.body, buffers);
    } else if (s.op.kind == OpKind::Store && buffers.count(s.op.buffer)) {
      dropped = true;
      continue;
    }
    out.push_back(std::move(s));
  }
  b = std::move(out);
  return dropped;
}

}  // namespace

void eliminate_dead(TileProgram& p) {
  for (bool dropped = true; dropped;) {
    for (Kernel& k : p.kernels) {
      bool changed = true;
      while (changed) {
        std::set<int> used;
        for_each_op(k.body, [&](TileOp& o) { used.insert(o.args.begin(), o.args.end()); });
        changed = sweep(k.body, used);
      }
    }
    // Loads left after the sweep read what they name; stores to other intermediates are dead.
    std::set<std::string> read;
    for (const Kernel& k : p.kernels)
      for_each_op(k.body, [&](const TileOp& o) {
        if (o.kind != OpKind::Store && !o.buffer.empty()) read.insert(o.buffer);
      });
    std::set<std::string> unread;
    for (const ir::Buffer& b : p.source.buffers)
      if (b.role == ir::BufferRole::Intermediate && !read.count(b.name)) unread.insert(b.name);
    dropped = false;
    for (Kernel& k : p.kernels) dropped |= drop_stores(k.body, unread);
  }
}

}  // namespace kintsugi::tile
