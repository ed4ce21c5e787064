// \file Pipeline.cpp
// The double-buffering structure of streamed loads: in a serial loop, a load of a buffer that
// nothing in the kernel stores to, whose region moves with the loop variable (the K and V tiles
// of a key loop), is marked as a stream of that loop, and the loop gets two pipeline stages. A
// back end realises this by issuing the load of iteration j + 1 before the compute of iteration
// j (cp.async into the other shared-memory buffer on a GPU, a prefetch on the CPU); the tile IR
// only states what streams and how deep.
//
// Invariant established: every load marked with a stream loop is inside that loop, reads a
// buffer the kernel never writes, and has a region start that uses the loop variable.
#include "ir/Visit.h"
#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

void mark(TileBody& b, const std::set<std::string>& stored) {
  for (TileStmt& s : b) {
    if (s.kind != StmtKind::For) continue;
    mark(s.body, stored);
    bool streams = false;
    for (TileStmt& c : s.body) {
      if (c.kind != StmtKind::Op || c.op.kind != OpKind::Load || stored.count(c.op.buffer) ||
          !c.op.stream_loop.empty())
        continue;
      bool moves = false;
      for (const ir::Expr& st : c.op.starts) moves = moves || ir::uses_var(st, s.var);
      if (!moves) continue;
      c.op.stream_loop = s.var;
      streams = true;
    }
    if (streams) s.pipeline_stages = 2;
  }
}

}  // namespace

void pipeline_streams(TileProgram& p) {
  for (Kernel& k : p.kernels) mark(k.body, written_in(k.body));
}

const std::vector<NamedPass>& passes() {
  static const std::vector<NamedPass> list = {
      {"fuse_kernels", fuse_kernels},
      {"cse", cse},
      {"promote_loop_buffers", promote_loop_buffers},
      {"forward_stores", forward_stores},
      {"forward_registers", forward_registers},
      {"factor_uniform_sums", factor_uniform_sums},
      {"pad_dot_extents", pad_dot_extents},
      {"drop_redundant_tail_selects", drop_redundant_tail_selects},
      {"cancel_permutes", cancel_permutes},
      {"fold_permutes_into_reduces", fold_permutes_into_reduces},
      {"residues_along_axes", residues_along_axes},
      {"cse", cse},
      {"reciprocal_of_broadcast_divisors", reciprocal_of_broadcast_divisors},
      {"hoist_invariants", hoist_invariants},
      {"drop_overwritten_stores", drop_overwritten_stores},
      {"eliminate_dead", eliminate_dead},
      {"pipeline_streams", pipeline_streams},
  };
  return list;
}

void optimize(TileProgram& p) {
  for (const NamedPass& pass : passes()) {
    pass.run(p);
    verify(p);
  }
}

}  // namespace kintsugi::tile
