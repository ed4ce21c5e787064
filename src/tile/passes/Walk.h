// \file Walk.h
// What the tile passes share: visiting every operation of a body (loops included), the values
// an operation uses, and whether an operation is pure (its result depends only on its operands,
// scalars and read-only inputs, so it may be computed once, moved or dropped).
#pragma once

#include <functional>
#include <map>
#include <set>

#include "tile/TileIR.h"

namespace kintsugi::tile {

inline void for_each_op(TileBody& b, const std::function<void(TileOp&)>& f) {
  for (TileStmt& s : b) {
    if (s.kind == StmtKind::For)
      for_each_op(s.body, f);
    else
      f(s.op);
  }
}
inline void for_each_op(const TileBody& b, const std::function<void(const TileOp&)>& f) {
  for (const TileStmt& s : b) {
    if (s.kind == StmtKind::For)
      for_each_op(s.body, f);
    else
      f(s.op);
  }
}

// Buffers stored to and registers written anywhere in a body.
inline std::set<std::string> written_in(const TileBody& b) {
  std::set<std::string> out;
  for_each_op(b, [&](const TileOp& o) {
    if (o.kind == OpKind::Store || o.kind == OpKind::Write) out.insert(o.buffer);
  });
  return out;
}

// Buffers some kernel of `p` keeps in memory: loaded, gathered from or stored to (registers are
// read and written instead; an intermediate outside this set needs no memory).
inline std::set<std::string> buffers_in_memory(const TileProgram& p) {
  std::set<std::string> out;
  for (const Kernel& k : p.kernels)
    for_each_op(k.body, [&](const TileOp& o) {
      if (o.kind == OpKind::Load || o.kind == OpKind::Store || o.kind == OpKind::Gather)
        out.insert(o.buffer);
    });
  return out;
}

// Whether two loads or stores address the same region: equal starts, tile axes and shape.
inline bool same_region(const TileOp& a, const TileOp& b) {
  if (a.axis_of_dim != b.axis_of_dim || a.type.shape != b.type.shape ||
      a.starts.size() != b.starts.size())
    return false;
  for (size_t d = 0; d < a.starts.size(); ++d)
    if (!ir::equal(a.starts[d], b.starts[d])) return false;
  return true;
}

// Whether an operation reads a buffer in memory (a region load or a gather).
inline bool reads_buffer(const TileOp& o) {
  return o.kind == OpKind::Load || o.kind == OpKind::Gather;
}

// No side effects, and the value is the same wherever it is computed with the same operands —
// except Read, Load and Gather, whose value also depends on the last write or store to their
// source.
inline bool is_pure(const TileOp& o) {
  return o.kind != OpKind::Store && o.kind != OpKind::Write;
}

// A pass that rewrites operations in program order, in place, and may put new operations in front
// of the one it rewrites: `def` finds any operation defined before the current one (as it is
// after its own rewrite), `append` adds one with the kernel's next value id.
class OpRewriter {
 public:
  explicit OpRewriter(Kernel& k) : k_(k) {}
  virtual ~OpRewriter() = default;
  void run() { body(k_.body); }

 protected:
  // Rewrites `o` (keeping its result), appending the operations it needs to `out`.
  virtual void rewrite(TileOp& o, TileBody& out) = 0;
  int depth() const { return depth_; }  // serial loops around the current operation
  const TileOp* def(int id) const {
    auto it = defs_.find(id);
    return it == defs_.end() ? nullptr : &it->second;
  }
  int append(TileOp o, TileBody& out) {
    o.result = k_.num_values++;
    defs_[o.result] = o;
    TileStmt s;
    s.op = std::move(o);
    out.push_back(std::move(s));
    return out.back().op.result;
  }

 private:
  void body(TileBody& b) {
    TileBody out;
    for (TileStmt& s : b) {
      if (s.kind == StmtKind::For) {
        ++depth_;
        body(s.body);
        --depth_;
      } else {
        rewrite(s.op, out);
        defs_[s.op.result] = s.op;
      }
      out.push_back(std::move(s));
    }
    b = std::move(out);
  }

  Kernel& k_;
  std::map<int, TileOp> defs_;  // every operation seen so far, by result
  int depth_ = 0;
};

}  // namespace kintsugi::tile
