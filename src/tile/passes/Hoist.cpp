// \file Hoist.cpp
// Loop-invariant code motion: a pure operation inside a serial loop moves in front of the loop
// when its operands are defined outside it, its scalars (full values, arange starts, region
// starts) do not use the loop's variable or any variable bound inside the loop, and, for a load,
// nothing in the kernel stores to its buffer. Register reads never move (the loop may write the
// register). Innermost loops first, so an operation can climb several loops.
//
// Invariant established: every operation left in a loop depends on the loop (its variable, a
// value computed in the loop, or state the loop changes).
#include "ir/Visit.h"
#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

bool uses_any(const ir::Expr& e, const std::set<std::string>& vars) {
  if (!e) return false;
  for (const std::string& v : vars)
    if (ir::uses_var(e, v)) return true;
  return false;
}

class Hoister {
 public:
  explicit Hoister(std::set<std::string> stored) : stored_(std::move(stored)) {}

  // Hoists out of the loops in `b`; returns nothing: hoisted operations are inserted in front of
  // their loop in `b`.
  void body(TileBody& b) {
    TileBody out;
    for (TileStmt& s : b) {
      if (s.kind != StmtKind::For) {
        out.push_back(std::move(s));
        continue;
      }
      body(s.body);  // inner loops first
      std::set<std::string> bound = {s.var};
      collect_loop_vars(s.body, &bound);
      std::set<int> defined_inside;
      for_each_op(s.body, [&](TileOp& o) {
        if (o.result >= 0) defined_inside.insert(o.result);
      });
      TileBody kept;
      for (TileStmt& c : s.body) {
        if (c.kind == StmtKind::Op && movable(c.op, bound, defined_inside)) {
          defined_inside.erase(c.op.result);
          out.push_back(std::move(c));
        } else {
          kept.push_back(std::move(c));
        }
      }
      s.body = std::move(kept);
      out.push_back(std::move(s));
    }
    b = std::move(out);
  }

 private:
  static void collect_loop_vars(TileBody& b, std::set<std::string>* vars) {
    for (TileStmt& s : b)
      if (s.kind == StmtKind::For) {
        vars->insert(s.var);
        collect_loop_vars(s.body, vars);
      }
  }

  bool movable(const TileOp& o, const std::set<std::string>& bound,
               const std::set<int>& defined_inside) const {
    if (!is_pure(o) || o.kind == OpKind::Read) return false;
    if (reads_buffer(o) && stored_.count(o.buffer)) return false;
    for (int a : o.args)
      if (defined_inside.count(a)) return false;
    if (uses_any(o.scalar, bound)) return false;
    for (const ir::Expr& st : o.starts)
      if (uses_any(st, bound)) return false;
    return true;
  }

  std::set<std::string> stored_;
};

}  // namespace

void hoist_invariants(TileProgram& p) {
  for (Kernel& k : p.kernels) Hoister(written_in(k.body)).body(k.body);
}

}  // namespace kintsugi::tile
