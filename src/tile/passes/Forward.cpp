// \file Forward.cpp
// Register forwarding: a register read whose value is known at that point is replaced by that
// value, so registers that only hand a tile from one operation to the next disappear.
//
// Walking each body in order, the pass tracks what every register holds:
//   - zero: at the start of a grid instance (registers start zeroed), until the first write;
//     a read is a zero tile;
//   - a value: after `write r = v`, a later read of r in the same straight-line code (or in a
//     loop nested there that does not write r) is v;
//   - stale: at the start of each iteration of the loop a register is scoped to
//     (Register::scope_loop), until the iteration writes it. The loop program reads no element
//     of such a register that the iteration has not written first (its reference interpreter
//     poisons every fresh allocation), so what a stale read returns never reaches an output: in
//     `select(p, x, stale)` and `select(p, stale, x)` the select becomes x, and any other use
//     reads a zero tile (what a fresh allocation holds);
//   - unknown: every register a nested loop writes, inside that loop (an iteration sees what
//     the one before wrote) and after it. Such reads stay.
// Values are not carried into a loop for what it writes, nor out of a loop, so a value never
// crosses an iteration of the loop it was written in. A value read from another register is not
// forwarded (the verifier's rule that a read is not used after a write to its register would no
// longer be local to one register). Afterwards a write nothing can read is dropped: every write
// of a register with no reads left, a write the same code writes again before any read, and a
// write that no later operation reads before the register's life ends (the end of the kernel
// body, or of the body of its scope loop).
// Registers without reads are removed from the kernel.
//
// Invariant established: a register read remains only where it may see a write of an earlier
// iteration of a loop around it (or a copy of another register's read); every remaining write
// may be read; every register of a kernel is read.
#include <map>

#include "tile/Passes.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

bool same_type(const TileType& a, const TileType& b) {
  return a.dtype == b.dtype && a.shape == b.shape;
}

bool is_select(const TileOp& o) {
  return o.kind == OpKind::Map && !o.is_call && o.op == ir::Op::Select && o.args.size() == 3;
}

ir::Expr zero_of(DType t) {
  if (is_float(t)) return ir::make_float(0.0, t);
  if (t == DType::Bool) return ir::make_bool(false);
  return ir::make_int(0);
}

// What a register holds at a point of the walk.
struct Held {
  enum class Kind : uint8_t { Unknown, Zero, Stale, Value };
  Kind kind = Kind::Unknown;
  int value = -1;  // Kind::Value: the value last written
};
using Holdings = std::map<std::string, Held>;  // absent: unknown

class Forwarder {
 public:
  explicit Forwarder(Kernel& k) : kernel_(k) {
    for (const Register& r : k.registers)
      if (!r.scope_loop.empty()) scoped_to_[r.scope_loop].push_back(r.name);
    for_each_op(k.body, [&](TileOp& o) {
      if (o.result >= 0) types_[o.result] = o.type;
    });
  }

  void run() {
    Holdings held;  // every register starts a grid instance zeroed
    for (const Register& r : kernel_.registers) held[r.name] = Held{Held::Kind::Zero, -1};
    forward(kernel_.body, held);
    materialise_zero_tiles(kernel_.body);
    drop_dead_writes();
  }

 private:
  int resolve(int id) const {
    for (auto it = renamed_.find(id); it != renamed_.end(); it = renamed_.find(id)) id = it->second;
    return id;
  }

  void forward(TileBody& b, Holdings& held) {
    TileBody out;
    for (TileStmt& s : b) {
      if (s.kind == StmtKind::For) {
        // Each iteration may see what an earlier one wrote; registers scoped to the loop start
        // every iteration stale.
        std::set<std::string> written = written_in(s.body);
        Holdings inner = held;
        for (const std::string& r : written) inner[r] = Held{};
        if (auto it = scoped_to_.find(s.var); it != scoped_to_.end())
          for (const std::string& r : it->second) inner[r] = Held{Held::Kind::Stale, -1};
        forward(s.body, inner);
        for (const std::string& r : written) held[r] = Held{};
        out.push_back(std::move(s));
        continue;
      }
      TileOp& o = s.op;
      for (int& a : o.args) a = resolve(a);
      if (o.kind == OpKind::Read) {
        Held h = held.count(o.buffer) ? held.at(o.buffer) : Held{};
        if (h.kind == Held::Kind::Value && same_type(types_.at(h.value), o.type)) {
          renamed_[o.result] = h.value;
          continue;
        }
        if (h.kind == Held::Kind::Stale)
          stale_reads_.insert(o.result);
        else if (h.kind == Held::Kind::Zero)
          zero_reads_.insert(o.result);
        else
          real_reads_.insert(o.result);
      } else if (o.kind == OpKind::Write) {
        int v = o.args[0];
        held[o.buffer] = real_reads_.count(v) ? Held{} : Held{Held::Kind::Value, v};
      } else if (is_select(o)) {
        int kept = -1;
        if (stale_reads_.count(o.args[2]))
          kept = o.args[1];
        else if (stale_reads_.count(o.args[1]))
          kept = o.args[2];
        if (kept >= 0 && !real_reads_.count(kept) && same_type(types_.at(kept), o.type)) {
          renamed_[o.result] = kept;
          continue;
        }
      }
      out.push_back(std::move(s));
    }
    b = std::move(out);
  }

  // Stale and zero reads still used become a zero tile of the register's type; unused ones go.
  void materialise_zero_tiles(TileBody& b) {
    std::set<int> used;
    for_each_op(kernel_.body, [&](TileOp& o) { used.insert(o.args.begin(), o.args.end()); });
    materialise_in(b, used);
  }

  void materialise_in(TileBody& b, const std::set<int>& used) {
    TileBody out;
    for (TileStmt& s : b) {
      if (s.kind == StmtKind::For) {
        materialise_in(s.body, used);
      } else if (s.op.kind == OpKind::Read &&
                 (stale_reads_.count(s.op.result) || zero_reads_.count(s.op.result))) {
        if (!used.count(s.op.result)) continue;
        TileOp zero;
        zero.kind = OpKind::Full;
        zero.scalar = zero_of(s.op.type.dtype);
        zero.type = TileType{s.op.type.dtype, {}};
        if (s.op.type.shape.empty()) {
          zero.result = s.op.result;
          s.op = zero;
        } else {
          // Back ends hold a `full` as a scalar: the tile is a broadcast of it.
          zero.result = kernel_.num_values++;
          TileOp tile;
          tile.kind = OpKind::Broadcast;
          tile.result = s.op.result;
          tile.type = s.op.type;
          tile.args = {zero.result};
          TileStmt z;
          z.op = zero;
          out.push_back(std::move(z));
          s.op = tile;
        }
      }
      out.push_back(std::move(s));
    }
    b = std::move(out);
  }

  static void reads_in(const TileBody& b, std::set<std::string>* out) {
    for (const TileStmt& s : b) {
      if (s.kind == StmtKind::For)
        reads_in(s.body, out);
      else if (s.op.kind == OpKind::Read)
        out->insert(s.op.buffer);
    }
  }

  void drop_dead_writes() {
    std::set<std::string> read;
    reads_in(kernel_.body, &read);
    drop_writes(kernel_.body, "", read);
    std::vector<Register> kept;
    for (Register& r : kernel_.registers)
      if (read.count(r.name)) kept.push_back(std::move(r));
    kernel_.registers = std::move(kept);
  }

  // Drops every write of a register not in `read`, and the writes nothing later reads of the
  // registers whose life ends with `b`: all of them in the kernel body (`var` empty), those
  // scoped to loop `var` in its body.
  void drop_writes(TileBody& b, const std::string& var, const std::set<std::string>& read) {
    for (TileStmt& s : b)
      if (s.kind == StmtKind::For) drop_writes(s.body, s.var, read);
    std::set<std::string> scoped_here;
    if (var.empty())
      for (const Register& r : kernel_.registers) scoped_here.insert(r.name);
    else if (auto it = scoped_to_.find(var); it != scoped_to_.end())
      scoped_here.insert(it->second.begin(), it->second.end());
    std::set<std::string> read_later;
    std::set<std::string> overwritten;  // written again further down before any read
    TileBody out;
    for (auto it = b.rbegin(); it != b.rend(); ++it) {
      TileStmt& s = *it;
      if (s.kind == StmtKind::For) {
        reads_in(s.body, &read_later);
        overwritten.clear();  // the loop may read, or may not run
      } else if (s.op.kind == OpKind::Read) {
        read_later.insert(s.op.buffer);
        overwritten.erase(s.op.buffer);
      } else if (s.op.kind == OpKind::Write) {
        if (!read.count(s.op.buffer) || overwritten.count(s.op.buffer) ||
            (scoped_here.count(s.op.buffer) && !read_later.count(s.op.buffer)))
          continue;
        overwritten.insert(s.op.buffer);
      }
      out.push_back(std::move(s));
    }
    b.assign(std::make_move_iterator(out.rbegin()), std::make_move_iterator(out.rend()));
  }

  Kernel& kernel_;
  std::map<std::string, std::vector<std::string>> scoped_to_;  // loop -> registers scoped to it
  std::map<int, TileType> types_;
  std::map<int, int> renamed_;  // forwarded read or dropped select -> the value it is
  std::set<int> stale_reads_;   // reads of a register holding nothing of this iteration
  std::set<int> zero_reads_;    // reads of a register not written yet in the grid instance
  std::set<int> real_reads_;    // reads that stay
};

}  // namespace

void forward_registers(TileProgram& p) {
  for (Kernel& k : p.kernels) Forwarder(k).run();
}

}  // namespace kintsugi::tile
