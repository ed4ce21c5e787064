// \file FuseKernels.cpp
// Kernel fusion: two consecutive kernels over the same grid become one when every buffer one of
// them writes and the other touches is private to the grid instance in both, i.e. each instance
// reads and writes only elements no other instance touches. Then running the second kernel's body
// right after the first one's, in the same instance, computes what running the kernels one after
// the other does: no instance waits for another. The split-K combines (maximum, sum, output, then
// the normalisation, each a kernel over the rows) are such a chain; fused, their results stay in
// the instance (forward_stores then hands them over without a memory round trip) and the launches
// are one.
//
// An access is private to the instance when, for every grid variable, some squeezed dimension of
// its region starts exactly at that variable (two instances differ in some grid variable, so
// their elements differ in that dimension). The fused kernel keeps the first kernel's name; the
// second kernel's values are renumbered after the first's.
//
// Invariant established: no two consecutive kernels over the same grid communicate only through
// instance-private elements.
#include <set>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

bool same_grid(const Kernel& a, const Kernel& b) {
  if (a.grid.size() != b.grid.size()) return false;
  for (size_t k = 0; k < a.grid.size(); ++k)
    if (a.grid[k].var != b.grid[k].var || !ir::equal(a.grid[k].extent, b.grid[k].extent))
      return false;
  return true;
}

// Buffers a kernel loads from (reads) or stores to (writes).
std::set<std::string> accessed(Kernel& k, OpKind kind) {
  std::set<std::string> out;
  for_each_op(k.body, [&](TileOp& o) {
    if (o.kind == kind) out.insert(o.buffer);
  });
  return out;
}

bool instance_private(Kernel& k, const std::string& buffer) {
  bool ok = true;
  for_each_op(k.body, [&](TileOp& o) {
    if ((o.kind != OpKind::Load && o.kind != OpKind::Store) || o.buffer != buffer) return;
    std::set<std::string> covered;
    for (size_t d = 0; d < o.starts.size(); ++d)
      if (o.axis_of_dim[d] < 0 && o.starts[d]->op == ir::Op::Var) covered.insert(o.starts[d]->name);
    for (const GridAxis& g : k.grid) ok = ok && covered.count(g.var) > 0;
  });
  return ok;
}

bool fusable(Kernel& a, Kernel& b) {
  if (!same_grid(a, b)) return false;
  for (const Register& ra : a.registers)
    for (const Register& rb : b.registers)
      if (ra.name == rb.name) return false;
  std::set<std::string> a_writes = accessed(a, OpKind::Store), a_reads = accessed(a, OpKind::Load);
  std::set<std::string> b_writes = accessed(b, OpKind::Store), b_reads = accessed(b, OpKind::Load);
  std::set<std::string> shared;  // written by one, touched by the other
  for (const std::string& x : a_writes)
    if (b_writes.count(x) || b_reads.count(x)) shared.insert(x);
  for (const std::string& x : b_writes)
    if (a_reads.count(x)) shared.insert(x);
  for (const std::string& x : shared)
    if (!instance_private(a, x) || !instance_private(b, x)) return false;
  return true;
}

void append(Kernel& a, Kernel b) {
  int offset = a.num_values;
  for_each_op(b.body, [&](TileOp& o) {
    if (o.result >= 0) o.result += offset;
    for (int& x : o.args) x += offset;
  });
  a.registers.insert(a.registers.end(), b.registers.begin(), b.registers.end());
  a.body.insert(a.body.end(), b.body.begin(), b.body.end());
  a.num_values += b.num_values;
}

}  // namespace

void fuse_kernels(TileProgram& p) {
  std::vector<Kernel> fused;
  for (Kernel& k : p.kernels) {
    if (!fused.empty() && fusable(fused.back(), k))
      append(fused.back(), std::move(k));
    else
      fused.push_back(std::move(k));
  }
  p.kernels = std::move(fused);
}

}  // namespace kintsugi::tile
