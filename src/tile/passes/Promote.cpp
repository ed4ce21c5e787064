// \file Promote.cpp
// Buffer promotion: a buffer that a serial loop both loads and stores at one loop-invariant
// region (the running state of a split-K combine: `store m = ...; load m; ...; store m = ...`
// every iteration) lives in a register for the loop instead, loaded into it once before the
// loop and stored back once after it. Each iteration then costs no memory round trip (and, on
// the GPU, no barrier to make a store visible to the next load).
//
// A loop qualifies for buffer B when, in the loop's own body (loops nested there access no B: a
// row's running maximum and sum stay in registers around the walk of a long product's reduced
// axis, nested in the walk of the row):
//   - every access to B is a top-level load or store of the same region: equal starts that do
//     not mention the loop variable, the same tile axes and shape, no tail bounds (so a load
//     reads back exactly what the last store wrote) unless no store writes past the region's
//     bound (Bound.h: the register keeps the 0 loaded past the bound, as every load would
//     read; a split-K chunk's first-iteration init is masked by the bound and its iteration),
//     in B's own dtype (no rounding on store);
//   - B is not an input (accesses to B outside the loop see it in memory: loaded before the
//     loop, stored after it);
//   - a loaded value is used only before the next store to B (a register read may not outlive
//     the next write to its register: TileIR.h's verifier rule).
// The rewrite: `load B` becomes `read R`; `store B = v` becomes `write R = v`, and a masked
// store `write R = select(mask, v, read R)`. R starts as B loaded, or as 0 when the loop runs a
// constant, positive number of times and its first iteration stores the whole region before any
// load (Bound.h: writes_its_whole_bound_at); that
// store is dropped when it stores 0 in the first iteration only (a split-K chunk's rolling
// partial, initialised at its first tile): R already holds it. A loop
// that never runs then loads and stores back the same values, which changes nothing.
//
// Invariant established: the program computes the same values; after the pass, no loop both
// loads and stores one loop-invariant region of a buffer.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "tile/Passes.h"
#include "tile/passes/Bound.h"
#include "tile/passes/Walk.h"

namespace kintsugi::tile {

namespace {

class Promoter {
 public:
  Promoter(const TileProgram& p, Kernel& k) : p_(p), k_(k) {}

  void run(TileBody& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      if (b[i].kind != StmtKind::For) continue;
      run(b[i].body);
      std::vector<std::string> buffers = candidates(b[i]);
      for (const std::string& name : buffers) i = promote(b, i, name);
    }
  }

 private:
  std::vector<std::string> candidates(const TileStmt& loop) const {
    std::map<std::string, std::vector<const TileOp*>> by_buffer;
    std::set<std::string> excluded;  // gathered, or accessed in a nested loop
    for (const TileStmt& s : loop.body) {
      if (s.kind == StmtKind::For) {
        for_each_op(s.body, [&](const TileOp& o) { excluded.insert(o.buffer); });
        continue;
      }
      if (s.op.kind == OpKind::Load || s.op.kind == OpKind::Store)
        by_buffer[s.op.buffer].push_back(&s.op);
      if (s.op.kind == OpKind::Gather) excluded.insert(s.op.buffer);
    }
    std::vector<std::string> out;
    for (const auto& [name, ops] : by_buffer) {
      const ir::Buffer* b = p_.source.find_buffer(name);
      if (!b || b->role == ir::BufferRole::Input || is_register(p_, name) || excluded.count(name))
        continue;
      bool loads = false, stores = false, ok = true, bound_masked = true;
      for (const TileOp* o : ops)
        if (o->kind == OpKind::Store)
          bound_masked = bound_masked && masked_within_its_bound(k_, *o, p_.source);
      for (const TileOp* o : ops) {
        loads = loads || o->kind == OpKind::Load;
        stores = stores || o->kind == OpKind::Store;
        ok = ok && same_region(*o, *ops[0]) && o->type.dtype == b->dtype && o->stream_loop.empty();
        for (size_t d = 0; ok && d < o->starts.size(); ++d)
          ok = !ir::uses_var(o->starts[d], loop.var) &&
               (o->axis_of_dim[d] < 0 || !o->bounds_checked[d] || bound_masked);
      }
      if (ok && loads && stores && loaded_values_die_before_stores(loop.body, name))
        out.push_back(name);
    }
    return out;
  }

  // Every value loaded from `name` is used only before the next store to it.
  static bool loaded_values_die_before_stores(const TileBody& body, const std::string& name) {
    std::set<int> live;  // loaded since the last store
    std::set<int> dead;  // loaded before a store that followed
    for (const TileStmt& s : body) {
      bool uses_dead = false;
      auto check = [&](const TileOp& o) {
        for (int a : o.args) uses_dead = uses_dead || dead.count(a) > 0;
      };
      if (s.kind == StmtKind::For) {
        for_each_op(s.body, check);
        if (uses_dead) return false;
        continue;
      }
      check(s.op);
      if (uses_dead) return false;
      if (s.op.buffer != name) continue;
      if (s.op.kind == OpKind::Load) live.insert(s.op.result);
      if (s.op.kind == OpKind::Store) {
        dead.insert(live.begin(), live.end());
        live.clear();
      }
    }
    return true;
  }

  int fresh() { return k_.num_values++; }

  const TileOp* def(int id) const {
    const TileOp* out = nullptr;
    for_each_op(k_.body, [&](const TileOp& o) {
      if (o.result == id) out = &o;
    });
    return out;
  }
  // A full tile of 0, or a broadcast of one.
  bool is_zero(int id) const {
    const TileOp* d = def(id);
    if (d && d->kind == OpKind::Broadcast) d = def(d->args[0]);
    if (!d || d->kind != OpKind::Full) return false;
    const ir::Expr& v = d->scalar;
    if (v->op == ir::Op::FloatImm) return v->float_value == 0.0 && !std::signbit(v->float_value);
    return v->op == ir::Op::IntImm && v->int_value == 0;
  }
  // Whether mask `id` has the conjunct `loop.var == loop.min` (a full scalar, maybe broadcast).
  bool only_first(int id, const TileStmt& loop) const {
    const TileOp* d = def(id);
    if (!d) return false;
    if (d->kind == OpKind::Broadcast) return only_first(d->args[0], loop);
    if (d->kind == OpKind::Map && !d->is_call && d->op == ir::Op::And)
      return only_first(d->args[0], loop) || only_first(d->args[1], loop);
    if (d->kind != OpKind::Full) return false;
    const ir::Expr& c = d->scalar;
    return c->op == ir::Op::Eq && c->args[0]->op == ir::Op::Var && c->args[0]->name == loop.var &&
           ir::equal(c->args[1], loop.min);
  }

  static TileStmt op_stmt(TileOp o) {
    TileStmt s;
    s.op = std::move(o);
    return s;
  }

  // Rewrites loop b[i] for buffer `name`; returns the loop's new index in b.
  size_t promote(TileBody& b, size_t i, const std::string& name) {
    std::string reg = name + ".promoted";
    for (int n = 2; std::any_of(k_.registers.begin(), k_.registers.end(),
                                [&](const Register& r) { return r.name == reg; });
         ++n)
      reg = name + ".promoted" + std::to_string(n);
    TileOp region;
    for (const TileStmt& s : b[i].body)
      if (s.op.buffer == name) region = s.op;
    TileType type{region.type.dtype, region.type.shape};
    // When the first iteration's first access stores the whole region (a split-K chunk's init),
    // the value before the loop is never read: the register starts at 0, as memory reads past
    // the bound, instead of loading the buffer.
    // If that store stores 0 and only in the first iteration (its mask has the conjunct
    // `var == min`), it writes what the register already holds: it is dropped.
    bool overwritten = false;
    const TileOp* zero_init = nullptr;
    // (Only in a loop that surely runs: one that never runs stores back what was loaded.)
    std::optional<int64_t> trips = ir::as_const_int(b[i].extent);
    for (const TileStmt& s : b[i].body)
      if (s.op.buffer == name) {
        overwritten = trips && *trips > 0 && s.op.kind == OpKind::Store &&
                      writes_its_whole_bound_at(k_, s.op, p_.source, b[i].var, b[i].min);
        if (overwritten && is_zero(s.op.args[0]) && s.op.args.size() > 1 &&
            only_first(s.op.args[1], b[i]))
          zero_init = &s.op;
        break;
      }
    k_.registers.push_back(Register{reg, type, ""});

    TileBody body;
    for (TileStmt& s : b[i].body) {
      TileOp& o = s.op;
      if (&o == zero_init) continue;
      if (o.buffer != name) {
        body.push_back(std::move(s));
        continue;
      }
      if (o.kind == OpKind::Load) {
        TileOp read;
        read.kind = OpKind::Read;
        read.buffer = reg;
        read.type = type;
        read.result = o.result;
        body.push_back(op_stmt(read));
        continue;
      }
      int value = o.args[0];
      if (o.args.size() > 1) {  // masked: keep the register where the mask is false
        TileOp old;
        old.kind = OpKind::Read;
        old.buffer = reg;
        old.type = type;
        old.result = fresh();
        TileOp merged;
        merged.kind = OpKind::Map;
        merged.op = ir::Op::Select;
        merged.args = {o.args[1], value, old.result};
        merged.type = type;
        merged.result = fresh();
        value = merged.result;
        body.push_back(op_stmt(old));
        body.push_back(op_stmt(merged));
      }
      TileOp write;
      write.kind = OpKind::Write;
      write.buffer = reg;
      write.args = {value};
      write.type = type;
      body.push_back(op_stmt(write));
    }
    b[i].body = std::move(body);

    TileOp load = region;
    load.kind = OpKind::Load;
    load.args.clear();
    load.result = fresh();
    std::vector<TileStmt> zeros;
    if (overwritten) {
      TileOp zero;
      zero.kind = OpKind::Full;
      zero.scalar = ir::make_float(0.0, type.dtype);
      zero.type = TileType{type.dtype, {}};
      zero.result = fresh();
      load = zero;
      if (!type.shape.empty()) {
        load = TileOp{};
        load.kind = OpKind::Broadcast;
        load.args = {zero.result};
        load.type = type;
        load.result = fresh();
        zeros.push_back(op_stmt(zero));
      }
    }
    TileOp init;
    init.kind = OpKind::Write;
    init.buffer = reg;
    init.args = {load.result};
    init.type = type;
    TileOp last;
    last.kind = OpKind::Read;
    last.buffer = reg;
    last.type = type;
    last.result = fresh();
    TileOp store = region;
    store.kind = OpKind::Store;
    store.result = -1;
    store.args = {last.result};
    b.insert(b.begin() + static_cast<std::ptrdiff_t>(i) + 1, {op_stmt(last), op_stmt(store)});
    zeros.push_back(op_stmt(load));
    zeros.push_back(op_stmt(init));
    b.insert(b.begin() + static_cast<std::ptrdiff_t>(i), zeros.begin(), zeros.end());
    return i + zeros.size();
  }

  const TileProgram& p_;
  Kernel& k_;
};

}  // namespace

void promote_loop_buffers(TileProgram& p) {
  for (Kernel& k : p.kernels) Promoter(p, k).run(k.body);
}

}  // namespace kintsugi::tile
