// \file SinkBroadcast.cpp
// A broadcast of an elementwise function of (at most) one loaded tile is the function of the
// broadcast tile: `broadcast(f(load, scalars, fulls, aranges))` becomes `f'(broadcast(load), ...)`,
// where f' is f computed at the broadcast's shape, its full tiles and aranges made at that shape
// (an arange keeps its axis, renumbered among the result's axes). A split-K combine scales each
// chunk's partial row by exp(m_chunk - m) and masks the chunks that are past the end or empty:
// three broadcasts of per-chunk vectors, which a layout that spreads a tile's elements over
// threads moves through shared memory; sunk, they are one broadcast of the loaded maximum (cse
// merges the copies) and the scale is computed where each element is held. The function is
// computed once per broadcast element instead of once per source element: only chains of at
// most kMaxOps elementwise operations are sunk, and only where that removes a broadcast (one of
// free values only, or one of several over the same loaded tile). Kernels with dots are left as
// they are: there the back ends hold a row vector broadcast along the columns as a view of the dot
// layout's rows, which costs nothing, while a function recomputed per element costs registers.
//
// Invariant established: in a kernel without dots, no broadcast reads an elementwise function of
// free values only, and no two broadcasts read elementwise functions of the same loaded tile.
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

constexpr int kMaxOps = 16;

class Sinker {
 public:
  explicit Sinker(Kernel& k) : k_(k) {
    for_each_op(k.body, [&](const TileOp& o) {
      if (o.result >= 0) defs_[o.result] = o;
    });
    for_each_op(k.body, [&](const TileOp& o) {
      if (o.kind != OpKind::Broadcast) return;
      if (std::optional<int> load = loaded_leaf(o.args[0]); load && *load >= 0)
        ++broadcasts_of_[key(*load, o)];
    });
  }

  void body(TileBody& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      if (b[i].kind == StmtKind::For) {
        body(b[i].body);
        continue;
      }
      const TileOp& o = b[i].op;
      if (o.kind != OpKind::Broadcast) continue;
      // Sunk when that removes a broadcast: one of free values only, or one of several over the
      // same loaded tile (cse merges what remains of them).
      std::optional<int> load = loaded_leaf(o.args[0]);
      if (!load || (*load >= 0 && broadcasts_of_[key(*load, o)] < 2)) continue;
      std::vector<TileOp> fresh;
      int root = sink(o.args[0], o.type.shape, o.dims, &fresh);
      // The last new operation computes the broadcast's value: it takes the broadcast's id.
      TileOp& last = fresh.back();
      internal_assert(last.result == root) << "sink_broadcasts: the root is not the last op";
      last.result = o.result;
      defs_[o.result] = last;
      std::vector<TileStmt> stmts;
      for (TileOp& n : fresh) {
        TileStmt s;
        s.op = std::move(n);
        stmts.push_back(std::move(s));
      }
      b.erase(b.begin() + static_cast<long>(i));
      b.insert(b.begin() + static_cast<long>(i), stmts.begin(), stmts.end());
      i += stmts.size() - 1;
    }
  }

 private:
  static bool elementwise(const TileOp& o) {
    return o.kind == OpKind::Map || o.kind == OpKind::Cast;
  }
  // Values that cost nothing to make at any shape.
  bool free(int id) const {
    const TileOp& d = defs_.at(id);
    return d.type.shape.empty() || d.kind == OpKind::Full || d.kind == OpKind::Arange;
  }
  static std::string key(int load, const TileOp& broadcast) {
    std::string k = std::to_string(load) + ":";
    for (int64_t e : broadcast.type.shape) k += std::to_string(e) + ",";
    k += ":";
    for (int d : broadcast.dims) k += std::to_string(d) + ",";
    return k;
  }

  // When `id` is an array-valued elementwise function (of at most kMaxOps operations) of at most
  // one loaded tile, scalars, full tiles and aranges, or a full tile or arange: that loaded tile,
  // or -1 when there is none. Otherwise nothing.
  std::optional<int> loaded_leaf(int id) const {
    if (!defs_.count(id) || defs_.at(id).type.shape.empty()) return std::nullopt;
    int load = -1, ops = 0;
    std::function<bool(int)> walk = [&](int v) {
      if (!defs_.count(v)) return false;
      const TileOp& d = defs_.at(v);
      if (free(v)) return true;
      if (d.kind == OpKind::Load) {
        if (load >= 0 && load != v) return false;
        load = v;
        return true;
      }
      if (!elementwise(d) || ++ops > kMaxOps) return false;
      for (int a : d.args)
        if (!walk(a)) return false;
      return true;
    };
    if (!walk(id) || id == load) return std::nullopt;
    return load;
  }

  int fresh_op(TileOp o, std::vector<TileOp>* out) {
    o.result = k_.num_values++;
    defs_[o.result] = o;
    out->push_back(o);
    return o.result;
  }

  // Value `id` at `shape`, its axis k placed at axis dims[k] of `shape` (as a broadcast places it).
  int sink(int id, const std::vector<int64_t>& shape, const std::vector<int>& dims,
           std::vector<TileOp>* out) {
    const TileOp d = defs_.at(id);
    if (d.type.shape.empty()) return id;
    TileOp n = d;
    n.type.shape = shape;
    switch (d.kind) {
      case OpKind::Full:
        break;
      case OpKind::Arange:
        n.axis = dims[static_cast<size_t>(d.axis)];
        break;
      case OpKind::Map:
      case OpKind::Cast:
        for (int& a : n.args) a = sink(a, shape, dims, out);
        break;
      default:  // the loaded tile
        n = TileOp{};
        n.kind = OpKind::Broadcast;
        n.type = TileType{d.type.dtype, shape};
        n.args = {id};
        n.dims = dims;
        break;
    }
    return fresh_op(n, out);
  }

  Kernel& k_;
  std::map<int, TileOp> defs_;
  std::map<std::string, int> broadcasts_of_;  // sinkable broadcasts by loaded tile, shape, dims
};

}  // namespace

void sink_broadcasts(TileProgram& p) {
  for (Kernel& k : p.kernels) {
    bool dots = false;
    for_each_op(k.body, [&](const TileOp& o) { dots |= o.kind == OpKind::Dot; });
    if (!dots) Sinker(k).body(k.body);
  }
}

}  // namespace kintsugi::tile
