// \file OverwrittenStores.cpp
// A store that a later store of the same straight-line code overwrites whole, with nothing in
// between that reads the buffer, is dropped. A split-K chunk whose walk may run no tile (a mask
// skips its dead tiles) initialises its partial results in memory before the walk, and writes
// them again from the registers that the walk updated, after it: the first write is never read.
//
// The later store covers the earlier when both address the same region (equal starts, axes and
// shape, so the same elements are bounds-checked), and the later is unmasked or masked by the
// same value. Between them, no operation (in loops too) may read or gather from the buffer or
// store to it.
//
// Invariant established: no store of a kernel is overwritten whole by a later store of the same
// body before anything reads its buffer.
#include <algorithm>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

// Whether `o` reads or writes `buffer` in memory.
bool touches(const TileOp& o, const std::string& buffer) {
  return (reads_buffer(o) || o.kind == OpKind::Store) && o.buffer == buffer;
}

bool touches(const TileStmt& s, const std::string& buffer) {
  if (s.kind != StmtKind::For) return touches(s.op, buffer);
  bool found = false;
  for_each_op(s.body, [&](const TileOp& o) { found = found || touches(o, buffer); });
  return found;
}

// Whether `later` writes every element that `earlier` wrote.
bool covers(const TileOp& later, const TileOp& earlier) {
  if (!same_region(later, earlier)) return false;
  if (later.args.size() == 1) return true;
  return earlier.args.size() == 2 && later.args[1] == earlier.args[1];
}

void drop(TileBody& body) {
  for (TileStmt& s : body)
    if (s.kind == StmtKind::For) drop(s.body);
  std::vector<bool> dead(body.size(), false);
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i].kind == StmtKind::For || body[i].op.kind != OpKind::Store) continue;
    const TileOp& store = body[i].op;
    for (size_t j = i + 1; j < body.size(); ++j) {
      const TileStmt& next = body[j];
      if (next.kind != StmtKind::For && next.op.kind == OpKind::Store &&
          next.op.buffer == store.buffer) {
        dead[i] = covers(next.op, store);
        break;
      }
      if (touches(next, store.buffer)) break;
    }
  }
  size_t k = 0;
  body.erase(std::remove_if(body.begin(), body.end(), [&](const TileStmt&) { return dead[k++]; }),
             body.end());
}

}  // namespace

void drop_overwritten_stores(TileProgram& p) {
  for (Kernel& k : p.kernels) drop(k.body);
}

}  // namespace kintsugi::tile
