// \file FuseKernels.cpp
// Kernel fusion: two kernels over the same grid become one when every buffer one of
// them writes and the other touches is private to the grid instance in both, i.e. each instance
// reads and writes only elements no other instance touches. Then running the second kernel's body
// right after the first one's, in the same instance, computes what running the kernels one after
// the other does: no instance waits for another. The split-K combines (maximum, sum, output, then
// the normalisation, each a kernel over the rows) are such a chain; fused, their results stay in
// the instance (forward_stores then hands them over without a memory round trip) and the launches
// are one. The second need not follow the first: it moves in front of the kernels between them
// when it touches nothing they write and writes nothing they touch (a query's normalisation joins
// its norm's kernel past the keys' norm kernels).
//
// An access is private to the instance when, for every grid variable g, some dimension of its
// region separates the instances: a squeezed one at exactly g, or one starting at g * c that the
// region spans at most c elements of (two instances differ in some grid variable, so their
// elements differ in that dimension). Grids are the same when their extents are; the second
// kernel's variables are renamed to the first's. The fused kernel keeps the first kernel's name;
// the second kernel's values are renumbered after the first's.
//
// Invariant established: no kernel over the same grid as an earlier one that it could move next
// to communicates with it only through instance-private elements.
#include <functional>
#include <map>
#include <set>

#include "ir/Visit.h"
#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

bool same_grid(const Kernel& a, const Kernel& b) {
  if (a.grid.size() != b.grid.size()) return false;
  for (size_t k = 0; k < a.grid.size(); ++k)
    if (!ir::equal(a.grid[k].extent, b.grid[k].extent)) return false;
  return true;
}

// b over a's grid variables (the same grid, named differently by the loops it came from).
void rename_grid(Kernel& b, const Kernel& a) {
  std::map<std::string, ir::Expr> names;
  for (size_t k = 0; k < a.grid.size(); ++k)
    if (a.grid[k].var != b.grid[k].var)
      names[b.grid[k].var] = ir::make_var(a.grid[k].var, ir::VarKind::Index, DType::Int);
  if (names.empty()) return;
  auto rename = [&](ir::Expr& e) {
    if (e) e = ir::substitute(e, names);
  };
  std::function<void(TileBody&)> walk = [&](TileBody& body) {
    for (TileStmt& st : body) {
      if (st.kind == StmtKind::For) {
        rename(st.min);
        rename(st.extent);
        walk(st.body);
        continue;
      }
      for (ir::Expr& e : st.op.starts) rename(e);
      rename(st.op.scalar);
    }
  };
  walk(b.body);
  b.grid = a.grid;
}

// Buffers a kernel loads from (reads) or stores to (writes).
std::set<std::string> accessed(Kernel& k, OpKind kind) {
  std::set<std::string> out;
  for_each_op(k.body, [&](TileOp& o) {
    if (o.kind == kind || (kind == OpKind::Load && reads_buffer(o))) out.insert(o.buffer);
  });
  return out;
}

// The grid variable whose instances touch disjoint ranges of dimension d of a region: a squeezed
// dimension at `g`, or one at `g * c` that the region spans at most c elements of.
std::string separating_variable(const TileOp& o, size_t d) {
  const ir::Expr& start = o.starts[d];
  int axis = o.axis_of_dim[d];
  int64_t span = axis < 0 ? 1 : o.type.shape[static_cast<size_t>(axis)];
  if (start->op == ir::Op::Var) return span == 1 ? start->name : "";
  if (start->op == ir::Op::Mul && start->args[0]->op == ir::Op::Var &&
      start->args[1]->op == ir::Op::IntImm && span <= start->args[1]->int_value)
    return start->args[0]->name;
  return "";
}

bool instance_private(Kernel& k, const std::string& buffer) {
  bool ok = true;
  for_each_op(k.body, [&](TileOp& o) {
    if (o.buffer != buffer) return;
    if (o.kind == OpKind::Gather) ok = false;  // any element, whatever the instance
    if (o.kind != OpKind::Load && o.kind != OpKind::Store) return;
    std::set<std::string> covered;
    for (size_t d = 0; d < o.starts.size(); ++d) covered.insert(separating_variable(o, d));
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
  rename_grid(b, a);
  int offset = a.num_values;
  for_each_op(b.body, [&](TileOp& o) {
    if (o.result >= 0) o.result += offset;
    for (int& x : o.args) x += offset;
  });
  a.registers.insert(a.registers.end(), b.registers.begin(), b.registers.end());
  a.body.insert(a.body.end(), b.body.begin(), b.body.end());
  a.num_values += b.num_values;
}

// Whether neither kernel touches a buffer the other writes: they run in either order.
bool independent(Kernel& a, Kernel& b) {
  std::set<std::string> a_writes = accessed(a, OpKind::Store),
                        b_writes = accessed(b, OpKind::Store);
  std::set<std::string> a_touches = accessed(a, OpKind::Load),
                        b_touches = accessed(b, OpKind::Load);
  a_touches.insert(a_writes.begin(), a_writes.end());
  b_touches.insert(b_writes.begin(), b_writes.end());
  for (const std::string& x : a_writes)
    if (b_touches.count(x)) return false;
  for (const std::string& x : b_writes)
    if (a_touches.count(x)) return false;
  return true;
}

}  // namespace

void fuse_kernels(TileProgram& p) {
  std::vector<Kernel> fused;
  for (Kernel& k : p.kernels) {
    // The latest kernel k can join, past kernels it is independent of (k then runs before them).
    size_t into = fused.size();
    for (size_t f = fused.size(); f-- > 0;) {
      if (fusable(fused[f], k)) {
        into = f;
        break;
      }
      if (!independent(fused[f], k)) break;
    }
    if (into < fused.size())
      append(fused[into], std::move(k));
    else
      fused.push_back(std::move(k));
  }
  p.kernels = std::move(fused);
}

}  // namespace kintsugi::tile
