// \file Dce.cpp
// Dead code elimination: pure operations whose values nothing uses are removed, repeatedly
// (removing one use can make its operands dead); loops left empty are removed.
//
// Invariant established: every remaining value-producing operation has a use or is a load or
// read feeding one (transitively, a store or a write).
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

}  // namespace

void eliminate_dead(TileProgram& p) {
  for (Kernel& k : p.kernels) {
    bool changed = true;
    while (changed) {
      std::set<int> used;
      for_each_op(k.body, [&](TileOp& o) { used.insert(o.args.begin(), o.args.end()); });
      changed = sweep(k.body, used);
    }
  }
}

}  // namespace kintsugi::tile
