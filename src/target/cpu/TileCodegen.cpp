// \file TileCodegen.cpp
// Tile IR -> C++ for the host compiler (generate_tile_source in CpuBackend.h).
//
// Each kernel's grid runs as one collapsed OpenMP loop (dynamically scheduled: causal grids are
// uneven). Every thread owns a workspace holding each array-valued tile value and register at a
// fixed, 64-byte aligned offset, so tiles are small fixed-size arrays that the host compiler
// vectorises: elementwise operations are one flat loop, dot is the ks_dot micro-kernel, and
// loads and stores walk the region with the innermost tile axis contiguous when the buffer's
// last dimension is. Scalar-shaped values are plain C++ scalars. Float tiles are stored as f32
// (f16/bf16 tiles hold rounded values); a cast to f32 of such a tile reuses its storage. A load
// at the top of a kernel's body that no grid variable moves, from a buffer the kernel does not
// write (a norm's weight row), fills its slot once a thread, before the first instance.
//
// Invariant established: the code computes what the tile IR means (TileIR.h): loads past a
// buffer's extent read 0, stores write only inside the buffer and where the mask holds, a
// squeezed index out of range or an integer division by zero is reported as a kernel error,
// never an out-of-bounds access; registers start zeroed in every grid instance.
#include <algorithm>
#include <functional>
#include <numeric>

#include "target/CSpelling.h"
#include "target/cpu/CpuBackend.h"
#include "target/cpu/CpuEmitter.h"
#include "target/cpu/TilePrelude.h"
#include "tile/passes/Walk.h"

namespace kintsugi::cpu {

namespace {

using tile::OpKind;
using tile::TileOp;

const char* elem_type(DType t) {
  switch (t) {
    case DType::Bool:
      return "unsigned char";
    case DType::Int:
    case DType::I8:
    case DType::I32:
      return "int64_t";
    default:
      return "float";
  }
}

int64_t elem_bytes(DType t) {
  return t == DType::Bool ? 1 : (is_float(t) ? 4 : 8);
}

// Running partials of a reduction along a contiguous tile row: up to two AVX-512 registers of
// f32, and at least one AVX2 register (a shorter row reduces in order).
int64_t reduce_lanes(int64_t len) {
  for (int64_t lanes : {32, 16, 8})
    if (len % lanes == 0) return lanes;
  return 0;
}

CT ct_of(DType t) {
  return t == DType::Bool ? CT::Bool : (is_float(t) ? CT::F32 : CT::I64);
}

// The data (inputs and outputs) below which a grid runs on the calling thread: on the 2-core
// build machine, a team costs 2-5 us to start and join, the time one core takes to stream
// about 64 KiB.
constexpr int64_t kParallelMinBytes = 64 * 1024;

class TileEmitter : public Codegen {
 public:
  explicit TileEmitter(const tile::TileProgram& tp)
      : Codegen(tp.source), tp_(tp), in_memory_(tile::buffers_in_memory(tp)) {}

  std::string source() {
    std::string s = run();
    // The tile helpers need the prelude's conversions: put them right after it.
    size_t at = s.find("namespace {\n\nconst char* const ks_sites[]");
    internal_assert(at != std::string::npos) << "tile codegen: no site table in the frame";
    s.insert(at, std::string(kTilePrelude) + "\n");
    return "// Tile IR:\n" + comment(tile::to_string(tp_)) + s;
  }

 protected:
  void emit_program() override {
    for (const tile::Kernel& k : tp_.kernels) kernel(k);
  }
  // An intermediate no kernel loads or stores (a register, or one the tile passes made dead:
  // a whole-row softmax's exponentials) is not allocated: a call would otherwise allocate a
  // buffer of the whole intermediate and never touch it.
  bool in_memory(const ir::Buffer& b) const override { return in_memory_.count(b.name) > 0; }
  std::string prepare_thread() const override {
    return "ks_workspace(" + std::to_string(largest_workspace_) + ");";
  }

 private:
  static std::string comment(const std::string& text) {
    std::string out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      for (char& c : l)
        if (c == '\\') c = '/';
      out += "//   " + l + "\n";
    }
    return out;
  }

  // Where an element of a tile is: its linear index, and (when the loop that reads it is nested
  // by axes) the index along each axis.
  struct Index {
    std::string flat;
    std::vector<std::string> axes;
  };

  struct Value {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    bool cvar = false;  // a C++ scalar variable rather than an array
    // An elementwise value with one reader in the same body is not stored: `element` spells its
    // element at an index, inside the reader's loop. `needs_axes`: it reads a broadcast, so the
    // index must name the axes.
    std::function<std::string(const Index&)> element = nullptr;
    bool needs_axes = false;
    bool scalar() const { return shape.empty(); }
    int64_t elements() const {
      return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
    }
  };

  // Workspace layout: every array value and register gets its own slot.
  int64_t slot(int64_t bytes) {
    int64_t at = ws_bytes_;
    ws_bytes_ += (bytes + 63) / 64 * 64;
    return at;
  }

  std::string scalar(const Expr& e, CT want) {
    std::string code = convert(expr(e), want);
    fallible_ = false;  // errors stay in ks_l until the end of the grid instance
    return code;
  }

  std::string ptr_decl(const Value& v, int64_t offset) {
    return std::string(elem_type(v.dtype)) + "* __restrict__ " + v.name + " = (" +
           elem_type(v.dtype) + "*)(ks_ws + " + std::to_string(offset) + ");";
  }

  void kernel(const tile::Kernel& k) {
    values_.assign(static_cast<size_t>(k.num_values), Value{});
    op_types_.assign(static_cast<size_t>(k.num_values), DType::F32);
    op_shapes_.assign(static_cast<size_t>(k.num_values), {});
    defs_.assign(static_cast<size_t>(k.num_values), nullptr);
    inline_.assign(static_cast<size_t>(k.num_values), false);
    record_types(k.body);
    {
      std::vector<Use> uses(static_cast<size_t>(k.num_values));
      std::vector<size_t> eval_pos(static_cast<size_t>(k.num_values), 0);
      count_uses(k.body, uses);
      plan_inlining(k.body, uses, eval_pos);
    }
    registers_.clear();
    ws_bytes_ = 0;
    grid_vars_.clear();
    for (const tile::GridAxis& g : k.grid) grid_vars_.insert(g.var);
    reduced_with_.assign(static_cast<size_t>(k.num_values), nullptr);
    reduced_early_.assign(static_cast<size_t>(k.num_values), false);
    emitted_early_.assign(static_cast<size_t>(k.num_values), false);
    chain_of_.clear();
    plan_reductions_in_producers(k.body);
    next_grid_var_ = k.grid.empty() ? std::string() : k.grid.back().var;
    next_rows_.clear();
    row_reductions_left_ = 0;
    for (const tile::TileStmt& s : k.body)
      if (s.kind == tile::StmtKind::Op && s.op.kind == OpKind::Reduce && reduces_by_lanes(s.op))
        ++row_reductions_left_;
    prefetch_in_store_ = false;
    if (row_reductions_left_ == 1)
      for (const tile::TileStmt& s : k.body)
        prefetch_in_store_ |= s.kind == tile::StmtKind::Op && stores_row_in_chunks(s.op);
    streams_ = false;
    written_ = tile::written_in(k.body);
    prologue_.str("");
    std::ostringstream* saved = out_;
    std::ostringstream inner;
    out_ = &inner;
    int base_indent = indent_;
    indent_ = base_indent + 2;
    for (const tile::Register& r : k.registers) {
      Value v{ident("r", r.name), r.type.dtype, r.type.shape};
      registers_[r.name] = v;
      int64_t at = slot(v.elements() * elem_bytes(v.dtype));
      line(ptr_decl(v, at));
    }
    int64_t reg_bytes = ws_bytes_;
    if (reg_bytes) line("memset(ks_ws, 0, " + std::to_string(reg_bytes) + ");");
    Scope scope;
    for (const tile::GridAxis& g : k.grid) scope.vars[g.var] = {ident("v", g.var), g.extent};
    scopes_.push_back(scope);
    body(k.body);
    scopes_.pop_back();
    out_ = saved;
    indent_ = base_indent;

    line("{  // kernel " + k.name);
    ++indent_;
    std::vector<std::string> extents, ids;
    for (const tile::GridAxis& g : k.grid) {
      extents.push_back(tmp());
      ids.push_back(ident("v", g.var));
      line("const int64_t " + extents.back() + " = " + scalar(g.extent, CT::I64) + ";");
    }
    std::string total = "INT64_C(1)";
    for (const std::string& e : extents) total += " * " + e;
    // One grid instance, with the thread's workspace of tiles.
    std::string params = "char* ks_ws", args = "ks_ws";
    for (const std::string& id : ids) {
      params += ", const int64_t " + id;
      args += ", " + id;
    }
    const std::string io_bytes = program_io_bytes();
    if (streams_) line("const bool ks_stream = " + io_bytes + " >= ks_stream_bytes();");
    line("auto ks_instance = [&](" + params + ") {");
    ++indent_;
    line("if (KS_FAILED(ks_e)) return;");
    line("KsLocal ks_l = {};");
    *out_ << inner.str();
    if (streams_) line("if (ks_stream) ks_stream_fence();");
    line("if (__builtin_expect(ks_l.bad, 0)) ks_flush(ks_e, ks_l);");
    --indent_;
    line("};");
    std::string ws_size = std::to_string(ws_bytes_ + 64);
    largest_workspace_ = std::max(largest_workspace_, ws_bytes_ + 64);
    auto instances = [&](bool parallel) {
      line("char* ks_ws = ks_workspace(" + ws_size + ");");
      line("if (!ks_ws) ks_fail_site(ks_e, \"out of memory for the tiles of kernel \", " +
           std::to_string(site(k.name)) + ");");
      if (!prologue_.str().empty()) {
        line("if (ks_ws) {  // the tiles every grid instance loads alike, once a thread");
        ++indent_;
        line("KsLocal ks_l = {};");
        std::istringstream lines(prologue_.str());
        for (std::string l; std::getline(lines, l);) line(l);
        line("if (__builtin_expect(ks_l.bad, 0)) ks_flush(ks_e, ks_l);");
        --indent_;
        line("}");
      }
      if (parallel) {
        // Instances in chunks of about 1/64 of a thread's share: small instances (a row of a
        // norm) do not pay a scheduling step each, uneven ones (causal row tiles) still balance.
        line("#pragma omp for collapse(" + std::to_string(k.grid.size()) +
             ") schedule(dynamic, ks_chunk)");
      }
      for (size_t a = 0; a < k.grid.size(); ++a)
        line("for (int64_t " + ids[a] + " = 0; " + ids[a] + " < " + extents[a] + "; ++" + ids[a] +
             ")");
      line("  if (ks_ws) ks_instance(" + args + ");");
    };
    // A grid of one instance (or none, or a kernel without a grid) runs on the calling thread,
    // outside any OpenMP region: a team would only wait for it (on a loaded machine, for a
    // descheduled thread to reach the join), and even a team of one costs two futex calls.
    // Nor does a grid over little data: the program's inputs and outputs under
    // kParallelMinBytes take less time on one thread than a team takes to start and join.
    if (!k.grid.empty()) {
      line("if (" + total + " > 1 && " + io_bytes + " >= INT64_C(" +
           std::to_string(kParallelMinBytes) + ")) {");
      ++indent_;
      line("const int ks_team = ks_threads();");
      line("const int ks_chunk = (int)ks_imax(1, ks_imin(INT64_C(1) << 20, (" + total +
           ") / (64 * (int64_t)ks_team)));");
      line("#pragma omp parallel num_threads(ks_team)");
      line("{");
      ++indent_;
      instances(true);
      --indent_;
      line("}");
      --indent_;
      line("} else {");
      ++indent_;
      instances(false);
      --indent_;
      line("}");
    } else {
      instances(false);
    }
    line("if (KS_FAILED(ks_e)) return 1;");
    --indent_;
    line("}");
  }

  // The code of the bytes of the program's inputs and outputs in memory.
  std::string program_io_bytes() {
    std::string bytes = "INT64_C(0)";
    for (const ir::Buffer& b : tp_.source.buffers) {
      if (b.role != ir::BufferRole::Input && b.role != ir::BufferRole::Output) continue;
      std::string n = "INT64_C(" + std::to_string(dtype_bytes(b.dtype)) + ")";
      for (const Expr& e : b.shape) n += " * " + scalar(e, CT::I64);
      bytes += " + " + n;
    }
    return bytes;
  }

  void body(const tile::TileBody& b) {
    for (const tile::TileStmt& s : b) {
      if (s.kind == tile::StmtKind::Op) {
        op(s.op);
        continue;
      }
      std::string lo = tmp(), hi = tmp(), id = ident("v", s.var);
      line("{");
      ++indent_;
      line("const int64_t " + lo + " = " + scalar(s.min, CT::I64) + ";");
      line("const int64_t " + hi + " = " + lo + " + " + scalar(s.extent, CT::I64) + ";");
      line("for (int64_t " + id + " = " + lo + "; " + id + " < " + hi + "; ++" + id + ") {");
      ++indent_;
      Scope scope;
      scope.vars[s.var] = {id, nullptr};
      scopes_.push_back(scope);
      body(s.body);
      scopes_.pop_back();
      --indent_;
      line("}");
      --indent_;
      line("}");
    }
  }

  const Value& val(int id) const { return values_[static_cast<size_t>(id)]; }

  // Element `x` of an operand of a tile of the same shape, or the scalar.
  std::string at(int id, const Index& x) const {
    const Value& v = val(id);
    if (v.cvar) return v.name;
    if (v.element) {
      internal_assert(!v.needs_axes || x.axes.size() == v.shape.size())
          << "tile codegen: an inlined broadcast read without its axes";
      return v.element(x);
    }
    return v.name + "[" + (v.scalar() ? std::string("0") : x.flat) + "]";
  }
  std::string at(int id, const std::string& flat) const { return at(id, Index{flat, {}}); }

  bool any_needs_axes(const TileOp& o) const {
    return std::any_of(o.args.begin(), o.args.end(), [&](int id) { return val(id).needs_axes; });
  }

  // Opens the loops of an elementwise op over `shape`: one flat loop, or one loop per axis when
  // an inlined operand reads a broadcast. Returns the index and how many loops to close.
  std::pair<Index, size_t> open_elementwise(const std::vector<int64_t>& shape, bool by_axes) {
    if (!by_axes) {
      line("for (int64_t i = 0; i < " + std::to_string(elements_of(shape)) + "; ++i) {");
      ++indent_;
      return {Index{"i", {}}, 1};
    }
    std::vector<std::string> ix = open_loops(shape);
    line("const int64_t i = " + target::spell_linear_index(ix, shape) + ";");
    return {Index{"i", ix}, ix.size()};
  }

  // Defines array value `v` of elementwise op `o` from `element`: inlined into its reader when
  // planned so, else stored by one loop (nested by axes when `element` needs them).
  void elementwise(const TileOp& o, Value& v, std::function<std::string(const Index&)> element,
                   bool reads_axes = false) {
    const bool by_axes = reads_axes || any_needs_axes(o);
    if (inline_[static_cast<size_t>(o.result)]) {
      v.element = std::move(element);
      v.needs_axes = by_axes;
      return;
    }
    declare_array(v);
    if (const TileOp* r = reduced_with_[static_cast<size_t>(o.result)]) {
      reduce_along_rows(*r, [&](const Index& x) { return element(x); }, v.name);
      return;
    }
    auto [x, loops] = open_elementwise(v.shape, by_axes);
    line(v.name + "[i] = " + element(x) + ";");
    close_loops(loops);
  }

  // An integer division (or modulo) of a tile by one value (c / G along a tile of columns): the
  // divisor is tested for zero once, and where it and every dividend lie within 2^53 in magnitude
  // the floor of the quotient of doubles is the floor division, in vector instructions (exact: a
  // quotient a / b that is no integer lies at least 1 / |b| from one, and rounding moves it by at
  // most |a / b| 2^-53 < 1 / |b|); elsewhere the integer division, an element at a time.
  void int_division_by_scalar(const TileOp& o, Value& v) {
    declare_array(v);
    const bool div = o.op == Op::Div;
    const std::string b = at(o.args[1], "0");
    line("if (__builtin_expect(" + b + " == 0, 0)) ks_divzero(ks_l, " +
         std::to_string(site(div ? "/" : "%")) + ");");
    line("{");
    ++indent_;
    line("bool ks_small = " + b + " != 0 && ks_iabs(" + b + ") < (INT64_C(1) << 53);");
    // The dividend may be inlined from broadcasts (i - j along two axes): then loops by axes.
    auto each = [&](const std::function<std::string(const std::string&)>& code) {
      auto [x, loops] = open_elementwise(v.shape, any_needs_axes(o));
      line(code(at(o.args[0], x)));
      close_loops(loops);
    };
    each([&](const std::string& a) {
      return "ks_small &= ks_iabs(" + a + ") < (INT64_C(1) << 53);";
    });
    line("if (ks_small) {");
    ++indent_;
    each([&](const std::string& a) {
      const std::string q = "(int64_t)floor((double)(" + a + ") / (double)(" + b + "))";
      return v.name + "[i] = " + (div ? q : "(" + a + ") - " + q + " * (" + b + ")") + ";";
    });
    --indent_;
    line("} else {");
    ++indent_;
    each([&](const std::string& a) {
      return v.name + "[i] = " + (div ? "ks_fdivc(" : "ks_fmodc(") + a + ", " + b + ");";
    });
    --indent_;
    line("}");
    --indent_;
    line("}");
  }

  // A reduction along the contiguous last axis of a stored elementwise value, later in the same
  // body, runs in the loop that stores the value: each element is computed, stored and combined
  // once, rather than stored by one pass and read back by another (softmax's sum of the
  // exponentials it keeps for the output). The reduction reads nothing else, and the stored tile
  // does not change, so its result is the same wherever it is computed. Likewise a reduction of
  // an f16 row as loaded (converted_in_steps) runs in the loop that converts the row.
  void plan_reductions_in_producers(const tile::TileBody& b) {
    for (size_t q = 0; q < b.size(); ++q) {
      if (b[q].kind == tile::StmtKind::For) {
        plan_reductions_in_producers(b[q].body);
        continue;
      }
      const TileOp& r = b[q].op;
      if (r.kind != OpKind::Reduce || !reduces_by_lanes(r)) continue;
      const int a = r.args[0];
      if (plan_conversion_in_steps(b, q) || inline_[static_cast<size_t>(a)] ||
          reduced_with_[static_cast<size_t>(a)])
        continue;
      for (size_t p = 0; p < q; ++p) {
        const TileOp& o = b[p].op;
        if (b[p].kind != tile::StmtKind::Op || o.result != a) continue;
        const bool elementwise =
            o.kind == OpKind::Map ||
            (o.kind == OpKind::Cast && !cast_reuses_storage(o) && !cast_rounds_row(o)) ||
            (o.kind == OpKind::Broadcast && !o.args.empty());
        if (elementwise && o.type.shape.size() <= 2 &&
            op_types_[static_cast<size_t>(a)] == r.type.dtype) {
          reduced_with_[static_cast<size_t>(a)] = &r;
          reduced_early_[static_cast<size_t>(r.result)] = true;
        }
      }
    }
  }

  // Plans reduction b[q] to run in the steps that convert the f16 row it reads
  // (load_converting_in_steps) where its operand is computed from a loaded row alone
  // (row_chain), every op of that computation defined in the same body after the load, and no
  // other reduction has claimed the load.
  bool plan_conversion_in_steps(const tile::TileBody& b, size_t q) {
    const TileOp& r = b[q].op;
    std::vector<int> chain;
    const int load = row_chain(r.args[0], chain);
    if (load < 0 || r.type.dtype != DType::F32 || reduced_with_[static_cast<size_t>(load)])
      return false;
    size_t found = 0, p = 0;
    while (p < q && !(b[p].kind == tile::StmtKind::Op && b[p].op.result == load)) ++p;
    for (size_t k = p; k < q; ++k)
      if (b[k].kind == tile::StmtKind::Op &&
          std::find(chain.begin(), chain.end(), b[k].op.result) != chain.end())
        ++found;
    if (p == q || found != chain.size()) return false;
    reduced_with_[static_cast<size_t>(load)] = &r;
    reduced_early_[static_cast<size_t>(r.result)] = true;
    chain_of_[load] = chain;
    return true;
  }

  // The value of the loaded f16 row (converted_in_steps) that value `id` is computed from alone,
  // through casts reusing its storage and inlined elementwise maps and casts, which `chain`
  // collects in the order they are defined; -1 where `id` reads anything else.
  int row_chain(int id, std::vector<int>& chain) const {
    const TileOp* d = defs_[static_cast<size_t>(id)];
    if (!d) return -1;
    if (converted_in_steps(*d)) return id;
    const bool inlined = inline_[static_cast<size_t>(id)];
    const bool passes = (d->kind == OpKind::Cast && (cast_reuses_storage(*d) || inlined)) ||
                        (d->kind == OpKind::Map && inlined && !d->args.empty());
    if (!passes) return -1;
    int load = -1;
    for (int a : d->args) {
      const int l = row_chain(a, chain);
      if (l < 0 || (load >= 0 && l != load)) return -1;
      load = l;
    }
    if (std::find(chain.begin(), chain.end(), id) == chain.end()) chain.push_back(id);
    return load;
  }

  // Whether load `o` reads one contiguous f16 row that moves with the grid (not one filled once a
  // thread, same_in_every_instance), inside its buffer along the row: its conversion to f32 can
  // run a step at a time inside the loop of a reduction of the row (load_converting_in_steps).
  bool converted_in_steps(const TileOp& o) const {
    if (o.kind != OpKind::Load || o.type.shape.size() != 1 || o.axis_of_dim.back() != 0 ||
        o.bounds_checked.back())
      return false;
    const ir::Buffer* b = tp_.source.find_buffer(o.buffer);
    bool moves = false;
    for (const Expr& start : o.starts)
      for (const std::string& g : grid_vars_) moves = moves || ir::uses_var(start, g);
    return b && b->dtype == DType::F16 && moves;
  }

  // The axes of the element of a reduction's operand of `shape` (rank 1 or 2) at `along` on the
  // reduced axis `axis` and `other` on the other one; empty for higher ranks (their operands are
  // stored, see reads_elementwise).
  static std::vector<std::string> reduce_axes(const std::vector<int64_t>& shape, size_t axis,
                                              const std::string& along, const std::string& other) {
    if (shape.size() == 1) return {along};
    if (shape.size() == 2) return axis == 0 ? std::vector{along, other} : std::vector{other, along};
    return {};
  }

  static int64_t elements_of(const std::vector<int64_t>& shape) {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  }

  // Inlining plan. A value is inlined into its reader when it is an elementwise map, cast or
  // broadcast of a tile, read exactly once, by an op of the same body that reads its operands
  // element by element (map, cast, broadcast, store, reduce), and no register write or loop lies
  // between its definition and the place its expression is finally evaluated: the registers an
  // expression reads through `read` hold the same values there. Fallible integer division stays
  // stored, so that it runs on every element as before.
  //
  // A cheap map (a few additions and multiplications of stored tiles and scalars) read by up to
  // three such readers of the same body is inlined into each of them, computed again where it is
  // read rather than stored by a pass of its own and read back: a row's passes are bound by the
  // bandwidth of the core's caches, not by its arithmetic (a norm's `x * r * w`, read by its
  // max-abs and by its quantising store: rmsnorm_quant 8.2 -> 6.5 ms at 4096 x 8192).
  struct Use {
    const tile::TileBody* body = nullptr;
    size_t pos = 0;
    int count = 0;
    std::vector<std::pair<const tile::TileBody*, size_t>> all;  // every reader, in order
  };
  static constexpr int kMaxRecomputedReaders = 3;
  static constexpr int kMaxRecomputedOps = 3;

  void count_uses(const tile::TileBody& b, std::vector<Use>& uses) {
    for (size_t p = 0; p < b.size(); ++p) {
      if (b[p].kind == tile::StmtKind::For) {
        count_uses(b[p].body, uses);
        continue;
      }
      for (int id : b[p].op.args) {
        Use& u = uses[static_cast<size_t>(id)];
        u.body = &b;
        u.pos = p;
        ++u.count;
        u.all.emplace_back(&b, p);
      }
    }
  }

  bool reads_elementwise(const TileOp& reader) const {
    switch (reader.kind) {
      case OpKind::Map:
      case OpKind::Broadcast:
      case OpKind::Store:
        return true;
      case OpKind::Reduce:
        return reader.type.shape.size() <= 1;  // a tile of rank 1 or 2: its axes are spelled
      case OpKind::Cast:
        return !cast_reuses_storage(reader) && !cast_rounds_row(reader);
      default:
        return false;
    }
  }

  bool inlinable(const TileOp& o) const {
    if (o.result < 0 || o.type.shape.empty()) return false;
    switch (o.kind) {
      case OpKind::Map: {
        bool fl = false;
        for (int id : o.args) fl = fl || is_float(op_types_[static_cast<size_t>(id)]);
        return o.is_call || fl || (o.op != ir::Op::Div && o.op != ir::Op::Mod);
      }
      case OpKind::Broadcast:
        return true;
      case OpKind::Cast:
        return !cast_reuses_storage(o) && !cast_rounds_row(o);
      default:
        return false;
    }
  }

  void plan_inlining(const tile::TileBody& b, const std::vector<Use>& uses,
                     std::vector<size_t>& eval_pos) {
    for (size_t p = b.size(); p-- > 0;) {
      if (b[p].kind == tile::StmtKind::For) {
        plan_inlining(b[p].body, uses, eval_pos);
        continue;
      }
      const TileOp& o = b[p].op;
      if (!inlinable(o)) continue;
      const Use& u = uses[static_cast<size_t>(o.result)];
      if (u.count == 0 || (u.count > 1 && (u.count > kMaxRecomputedReaders ||
                                           recompute_ops(o.result) > kMaxRecomputedOps)))
        continue;
      // Where the expression is evaluated last: at its last reader, or where that reader is.
      size_t at = 0;
      bool readable = true;
      for (const auto& [body, pos] : u.all) {
        readable = readable && body == &b && reads_elementwise(b[pos].op);
        if (!readable) break;
        const int reader = b[pos].op.result;
        at = std::max(at, reader >= 0 && inline_[static_cast<size_t>(reader)]
                              ? eval_pos[static_cast<size_t>(reader)]
                              : pos);
      }
      if (!readable) continue;
      bool clear = true;
      for (size_t q = p + 1; q < at && clear; ++q)
        clear = b[q].kind == tile::StmtKind::Op && b[q].op.kind != OpKind::Write;
      if (!clear) continue;
      inline_[static_cast<size_t>(o.result)] = true;
      eval_pos[static_cast<size_t>(o.result)] = at;
    }
  }

  // The operations computing value `id` again costs where it is read: the elementwise maps,
  // casts and broadcasts down to stored values and scalars; more than kMaxRecomputedOps when
  // one of them is a call or a division (not cheap).
  int recompute_ops(int id) const {
    const TileOp* o = defs_[static_cast<size_t>(id)];
    if (!o || !inlinable(*o)) return 0;
    if ((o->kind == OpKind::Map && (o->is_call || o->op == Op::Div || o->op == Op::Mod)))
      return kMaxRecomputedOps + 1;
    int n = 1;
    for (int a : o->args) n += recompute_ops(a);
    return n;
  }

  void record_types(const tile::TileBody& b) {
    for (const tile::TileStmt& st : b) {
      if (st.kind == tile::StmtKind::For)
        record_types(st.body);
      else if (st.op.result >= 0) {
        op_types_[static_cast<size_t>(st.op.result)] = st.op.type.dtype;
        op_shapes_[static_cast<size_t>(st.op.result)] = st.op.type.shape;
        defs_[static_cast<size_t>(st.op.result)] = &st.op;
      }
    }
  }

  bool cast_reuses_storage(const TileOp& o) const {
    DType from = op_types_[static_cast<size_t>(o.args[0])];
    bool same_storage = std::string(elem_type(from)) == elem_type(o.type.dtype);
    return same_storage && (o.type.dtype == DType::F32 || from == o.type.dtype);
  }
  bool cast_rounds_row(const TileOp& o) const {
    return op_types_[static_cast<size_t>(o.args[0])] == DType::F32 && o.type.dtype == DType::F16;
  }

  Value& define(const TileOp& o) {
    Value& v = values_[static_cast<size_t>(o.result)];
    v = Value{"t" + std::to_string(o.result), o.type.dtype, o.type.shape};
    return v;
  }

  void declare_array(const Value& v) {
    slot_of_[v.name] = slot(v.elements() * elem_bytes(v.dtype));
    line(ptr_decl(v, slot_of_.at(v.name)));
  }

  // The row a load at the top of a kernel's body reads in the grid instance after this one: the
  // code of its address (an integer, so that a row past the buffer's end is never formed as a
  // pointer) and its bytes. The second pass over the row prefetches it, a share with each step:
  // the next row arrives while this one is computed, where otherwise a core computes and waits for
  // memory in turn (rmsnorm_quant 4096 x 8192: 13 % less time). The second pass, not the first:
  // the first reads this row from memory, the second from the core's caches, and leaves the memory
  // system to the prefetches. It is the last row reduction of the instance (reduce_along_rows;
  // against the first: rmsnorm_quant 19 %, softmax 9 % less time at 4096 x 8192 on two threads),
  // or, after a lone reduction, the stores of the row through a row helper (store_converted_rows;
  // l2norm 22 %; with two reductions the stores were 8-15 % slower than the second reduction).
  struct NextRow {
    std::string address;
    int64_t bytes = 0;
  };

  // Records the next instance's row of load `o` when the load moves with the innermost grid
  // variable (the next instance of a thread's collapsed loop), reads one contiguous row of a
  // buffer the kernel does not write, and the row is at least a few cache lines.
  void note_next_row(const TileOp& o) {
    constexpr int64_t kMinPrefetchBytes = 1024;
    if (scopes_.size() != 1 || o.type.shape.size() != 1 || next_grid_var_.empty() ||
        written_.count(o.buffer) || o.axis_of_dim.back() != 0 || o.bounds_checked.back())
      return;
    bool moves = false;
    for (const Expr& start : o.starts) moves = moves || ir::uses_var(start, next_grid_var_);
    const BufInfo& b = buffer(o.buffer, o.starts.size());
    const int64_t bytes = o.type.shape[0] * dtype_bytes(b.buf->dtype);
    if (!moves || bytes < kMinPrefetchBytes) return;
    const std::map<std::string, Expr> next = {
        {next_grid_var_,
         ir::make_binary(Op::Add, ir::make_var(next_grid_var_, ir::VarKind::Index, DType::Int),
                         ir::make_int(1))}};
    std::string offset;
    for (size_t d = 0; d < o.starts.size(); ++d) {
      const std::string start = "(" + scalar(ir::substitute(o.starts[d], next), CT::I64) + ")";
      offset = d == 0 ? start : "(" + offset + ") * " + b.shape[d] + " + " + start;
    }
    next_rows_.push_back({"(uintptr_t)" + b.id + " + (uintptr_t)(" + offset + ") * " +
                              std::to_string(dtype_bytes(b.buf->dtype)),
                          bytes});
  }

  // A load at the top of a kernel's body whose tile no grid variable moves, from a buffer the
  // kernel does not write: the same tile in every grid instance (a norm's weight vector).
  bool same_in_every_instance(const TileOp& o) const {
    if (scopes_.size() != 1 || o.type.shape.empty() || written_.count(o.buffer)) return false;
    for (const Expr& start : o.starts)
      for (const std::string& g : grid_vars_)
        if (ir::uses_var(start, g)) return false;
    return true;
  }

  // Load `o` into its slot once a thread, before the thread's first grid instance (the kernel's
  // prologue): the slot is the value's alone, so it holds the tile for every instance after.
  void fill_once(const TileOp& o, const Value& v) {
    std::ostringstream* saved = out_;
    const int saved_indent = indent_;
    out_ = &prologue_;
    indent_ = 0;
    line("{  // load " + o.buffer + ": the same tile in every grid instance");
    ++indent_;
    line(ptr_decl(v, slot_of_.at(v.name)));
    region(o, false);
    --indent_;
    line("}");
    out_ = saved;
    indent_ = saved_indent;
  }

  // Load `o` (converted_in_steps) with reduction `r` of its row: the load's region finds where
  // the row starts, and each step of the reduction's loop converts its share of the row before
  // it reduces it, the row read from memory once, the share still in the core's first cache when
  // it is reduced (layer norm 4096 x 8192: 7 % less time than a conversion pass and a reduction
  // pass). Where a squeezed index is out of range (reported as an error), the row is read from a
  // slot of the workspace instead, whatever it holds.
  void load_converting_in_steps(const TileOp& o, const Value& v, const TileOp& r) {
    const std::string src = tmp();
    line("const uint16_t* __restrict__ " + src + " = (const uint16_t*)(ks_ws + " +
         std::to_string(slot(v.elements() * 2)) + ");");
    line("{  // load " + o.buffer + ": converted by the steps of a reduction of the row");
    ++indent_;
    region(o, false, src);
    --indent_;
    line("}");
    // A cast that reuses the row's storage names the row itself: written through one pointer and
    // read through another in the same loop, restrict pointers would let the host compiler read
    // an element before it is converted.
    for (int id : chain_of_.at(o.result)) {
      const TileOp& d = *defs_[static_cast<size_t>(id)];
      if (d.kind == OpKind::Cast && cast_reuses_storage(d))
        define(d).name = v.name;
      else
        op(d);
      emitted_early_[static_cast<size_t>(id)] = true;
    }
    const std::string lanes = std::to_string(reduce_lanes(v.elements()));
    reduce_along_rows(
        r, [&](const Index& x) { return at(r.args[0], x); }, "",
        "ks_h2f_row(" + v.name + " + ks_r, " + src + " + ks_r, " + lanes + ");");
  }

  // Nested loops over `shape`; returns the index variables (outermost first).
  std::vector<std::string> open_loops(const std::vector<int64_t>& shape) {
    std::vector<std::string> ix;
    for (int64_t n : shape) {
      std::string i = tmp();
      line("for (int64_t " + i + " = 0; " + i + " < " + std::to_string(n) + "; ++" + i + ") {");
      ++indent_;
      ix.push_back(i);
    }
    return ix;
  }
  void close_loops(size_t n) {
    for (size_t k = 0; k < n; ++k) {
      --indent_;
      line("}");
    }
  }

  std::string map_code(const TileOp& o, const std::vector<std::string>& a) {
    target::CHelpers h{"ks_fmin",
                       "ks_fmax",
                       "ks_imin",
                       "ks_imax",
                       "ks_iabs",
                       "ks_fmodf",
                       "ks_expf",
                       "tanhf",
                       [this](Op op, const std::string& x, const std::string& y) {
                         return std::string(op == Op::Div ? "ks_fdiv" : "ks_fmod") + "(ks_l, " + x +
                                ", " + y + ", " + std::to_string(site(op == Op::Div ? "/" : "%")) +
                                ")";
                       }};
    if (o.is_call) return target::spell_call(o.fn, a, is_float(o.type.dtype), h);
    if (o.op == Op::Select) return "ks_sel(" + a[0] + ", " + a[1] + ", " + a[2] + ")";
    bool fl = false;
    for (int id : o.args) fl = fl || is_float(val(id).dtype);
    return target::spell_op(o.op, a, fl, h);
  }

  // Buffer access helpers: the C++ names of a buffer's extents, and whether a region dimension
  // index is inside the buffer.
  // The start of region `o` in every buffer dimension, defined; and the condition that its
  // squeezed indices (dimensions without a tile axis) lie inside buffer `b` (reported if not).
  std::pair<std::vector<std::string>, std::string> region_starts(const TileOp& o,
                                                                 const BufInfo& b) {
    std::vector<std::string> starts;
    std::string squeezed_ok;
    for (size_t d = 0; d < o.starts.size(); ++d) {
      starts.push_back(tmp());
      line("const int64_t " + starts.back() + " = " + scalar(o.starts[d], CT::I64) + ";");
      if (o.axis_of_dim[d] < 0)
        squeezed_ok += std::string(squeezed_ok.empty() ? "" : " && ") + "ks_chk(ks_l, " +
                       starts.back() + ", " + b.shape[d] + ", " + std::to_string(site(o.buffer)) +
                       ", " + std::to_string(d) + ")";
    }
    return {starts, squeezed_ok};
  }

  // Whether load `o` can read its input in place: one f32 row of an f32 input along its last
  // dimension, inside the buffer along it (no tail). An input is never written by the kernel,
  // so the row holds the loaded values wherever they are read.
  bool reads_in_place(const TileOp& o) {
    const BufInfo& b = buffer(o.buffer, o.starts.size());
    return o.type.shape.size() == 1 && o.type.dtype == DType::F32 && b.buf->dtype == DType::F32 &&
           b.buf->role == ir::BufferRole::Input && o.axis_of_dim.back() == 0 &&
           !o.bounds_checked.back();
  }

  // Tile value `v` of load `o` (reads_in_place) as a pointer into the input; where a squeezed
  // index is out of range (reported), a workspace slot instead.
  void load_in_place(const TileOp& o, const Value& v) {
    const BufInfo& b = buffer(o.buffer, o.starts.size());
    auto [starts, squeezed_ok] = region_starts(o, b);
    std::string offset;
    for (size_t d = 0; d < starts.size(); ++d)
      offset = d == 0 ? "(" + starts[d] + ")"
                      : "(" + offset + ") * " + b.shape[d] + " + (" + starts[d] + ")";
    std::string at_input = b.id + " + " + offset;
    if (squeezed_ok.empty()) {
      line("float* __restrict__ " + v.name + " = " + at_input + ";");
      return;
    }
    line("float* __restrict__ " + v.name + " = (" + squeezed_ok + ") ? " + at_input +
         " : (float*)(ks_ws + " + std::to_string(slot(v.elements() * 4)) + ");");
  }

  // With `row_source`, a load's contiguous f16 row is not converted: the variable of that name is
  // set to where it starts (load_converting_in_steps).
  void region(const TileOp& o, bool is_store, const std::string& row_source = "") {
    const BufInfo& b = buffer(o.buffer, o.starts.size());
    auto [starts, squeezed_ok] = region_starts(o, b);
    const std::vector<int64_t>& shape = o.type.shape;
    if (!squeezed_ok.empty()) {
      line("if (" + squeezed_ok + ") {");
      ++indent_;
    }
    // A store's buffer pointer and extents, copied into locals: the instance's lambda captures
    // them by reference, and a store of 1-byte elements may alias anything, the closure included,
    // so the host compiler would reload them after every element and not vectorise the loop (a
    // quantising store to i8: scalar, most of rmsnorm_quant's time).
    std::string base = b.id;
    std::vector<std::string> extents = b.shape;
    if (is_store && !shape.empty()) {
      base = tmp();
      line(std::string(storage_type(b.buf->dtype)) + "* __restrict__ " + base + " = " + b.id + ";");
      for (std::string& e : extents) {
        std::string local = tmp();
        line("const int64_t " + local + " = " + e + ";");
        e = local;
      }
    }
    // The innermost tile axis is contiguous in memory when it spans the last buffer dimension.
    const bool contiguous = !shape.empty() &&
                            o.axis_of_dim.back() == static_cast<int>(shape.size()) - 1 &&
                            !o.bounds_checked.back();
    bool streamed_else = false;  // the stores below are the other branch of streamed ones
    if (is_store && contiguous) {
      bool masked = o.args.size() > 1;
      for (size_t d = 0; d < o.starts.size(); ++d)
        masked = masked || (o.axis_of_dim[d] >= 0 && o.bounds_checked[d]);
      if (auto [converter, value] = row_converter(o, b.buf->dtype); !masked && converter) {
        // f32 rows need no conversion: computed into a chunk only where they stream (5 % more
        // time for softmax 64 x 4096 in the cache), stored element by element otherwise.
        streamed_else = std::string(converter) == "ks_f32_row";
        if (streamed_else) {
          line("if (ks_stream) {");
          ++indent_;
        }
        store_converted_rows(o, value, converter, starts, base, extents);
        if (!streamed_else) {
          close_region(squeezed_ok);
          return;
        }
        --indent_;
        line("} else {");
        ++indent_;
      }
    }
    const bool contiguous_f16 = !is_store && contiguous && b.buf->dtype == DType::F16;
    std::vector<std::string> ix =
        open_loops(contiguous_f16 ? std::vector<int64_t>(shape.begin(), shape.end() - 1) : shape);
    if (contiguous_f16) ix.push_back("0");
    std::string offset, inside;
    for (size_t d = 0; d < o.starts.size(); ++d) {
      std::string idx = starts[d];
      if (o.axis_of_dim[d] >= 0) idx += " + " + ix[static_cast<size_t>(o.axis_of_dim[d])];
      offset = d == 0 ? "(" + idx + ")" : "(" + offset + ") * " + extents[d] + " + (" + idx + ")";
      if (o.axis_of_dim[d] >= 0 && o.bounds_checked[d])
        inside += std::string(inside.empty() ? "" : " & ") + "(uint64_t)(" + idx +
                  ") < (uint64_t)" + extents[d];
    }
    if (offset.empty()) offset = "0";
    std::string lin = target::spell_linear_index(ix, shape);
    if (contiguous_f16) {
      // A row past the buffer's end along an outer tile axis reads 0.
      std::string row = val(o.result).name + " + " + lin, n = std::to_string(shape.back());
      std::string convert_row =
          "ks_h2f_row(" + row + ", " + b.id + " + " + offset + ", " + n + ");";
      if (!row_source.empty()) {
        internal_assert(inside.empty()) << "tile codegen: a row converted in steps has a tail";
        line(row_source + " = " + b.id + " + " + offset + ";");
      } else if (inside.empty()) {
        line(convert_row);
      } else {
        line("if (" + inside + ") " + convert_row);
        line("else memset(" + row + ", 0, " + n + " * sizeof(float));");
      }
    } else if (is_store) {
      std::string cond = inside;
      // The value first, then the condition without short circuits: a masked store the host
      // compiler can vectorise (the value reads tiles only, in range wherever it is stored).
      const Index here{lin, ix};
      if (o.args.size() > 1) cond += (cond.empty() ? "(" : " & (") + at(o.args[1], here) + ")";
      Val v{at(o.args[0], here), ct_of(val(o.args[0]).dtype)};
      if (cond.empty()) {
        line(base + "[" + offset + "] = " + store_value(v, b.buf->dtype) + ";");
      } else {
        line("const auto ks_v = " + store_value(v, b.buf->dtype) + ";");
        line("const bool ks_ok = " + cond + ";");
        line("if (ks_ok) " + base + "[" + offset + "] = ks_v;");
      }
    } else {
      std::string raw = b.id + "[" + offset + "]";
      std::string conv = is_float(b.buf->dtype)
                             ? float_of_storage(raw, b.buf->dtype)
                             : "(" + std::string(elem_type(o.type.dtype)) + ")" + raw;
      std::string zero = is_float(o.type.dtype) ? "0.0f" : "0";
      line(val(o.result).name + "[" + lin +
           "] = " + (inside.empty() ? conv : "(" + inside + ") ? " + conv + " : " + zero) + ";");
    }
    close_loops(contiguous_f16 ? shape.size() - 1 : shape.size());
    if (streamed_else) {
      --indent_;
      line("}");
    }
    close_region(squeezed_ok);
  }
  void close_region(const std::string& squeezed_ok) {
    if (!squeezed_ok.empty()) {
      --indent_;
      line("}");
    }
  }

  // The row helper that converts the f32 values of store `o` to `stored` elements, and the value
  // whose elements it converts: an f32 tile stored to f16 (ks_f2h_row) or to f32 (ks_f32_row),
  // an f32 tile cast to i8 (ks_f2i8_row, the cast looked through); {nullptr, -1} for the other
  // stores.
  std::pair<const char*, int> row_converter(const TileOp& o, DType stored) const {
    const int id = o.args[0];
    if (stored == DType::F16 && op_types_[static_cast<size_t>(id)] == DType::F32)
      return {"ks_f2h_row", id};
    if (stored == DType::F32 && op_types_[static_cast<size_t>(id)] == DType::F32)
      return {"ks_f32_row", id};
    const TileOp* cast = defs_[static_cast<size_t>(id)];
    if (stored == DType::I8 && cast && cast->kind == OpKind::Cast &&
        cast->type.dtype == DType::I8 && inline_[static_cast<size_t>(id)] &&
        op_types_[static_cast<size_t>(cast->args[0])] == DType::F32)
      return {"ks_f2i8_row", cast->args[0]};
    return {nullptr, -1};
  }

  // Store `o` to rows that are contiguous and unmasked, converted by a row helper: the f32
  // elements of `value` for a chunk of a row into an array on the stack, then converted to the
  // stored type by vector instructions (`converter`). Converted an element in scalar code, the
  // exact f16 rounding in integer arithmetic took half of a layer norm's time, and a saturating
  // i8 cast a third of a quantising norm's.
  void store_converted_rows(const TileOp& o, int value, const char* converter,
                            const std::vector<std::string>& starts, const std::string& base,
                            const std::vector<std::string>& extents) {
    const std::vector<int64_t>& shape = o.type.shape;
    constexpr int64_t kChunk = 256;
    const int64_t n = shape.back(), chunk = std::min(n, kChunk);
    std::vector<std::string> ix = open_loops(std::vector<int64_t>(shape.begin(), shape.end() - 1));
    std::vector<NextRow> next;  // the next instance's rows, after a lone row reduction
    if (prefetch_in_store_ && scopes_.size() == 1 && shape.size() == 1) next = take_next_rows();
    const std::string c = tmp(), left = tmp(), buf = tmp(), k = tmp();
    line("for (int64_t " + c + " = 0; " + c + " < " + std::to_string(n) + "; " + c +
         " += " + std::to_string(chunk) + ") {");
    ++indent_;
    line("const int64_t " + left + " = ks_imin(" + std::to_string(chunk) + ", " +
         std::to_string(n) + " - " + c + ");");
    for (const NextRow& r : next)
      line("ks_prefetch(" + r.address + " + " + c + " * " + std::to_string(r.bytes) + " / " +
           std::to_string(n) + ", " + std::to_string((r.bytes * chunk + n - 1) / n) + ");");
    line("float " + buf + "[" + std::to_string(chunk) + "];");
    ix.push_back(k);
    const Index here{target::spell_linear_index(ix, shape), ix};
    line("for (int64_t " + k + " = " + c + "; " + k + " < " + c + " + " + left + "; ++" + k + ") " +
         buf + "[" + k + " - " + c + "] = " + at(value, here) + ";");
    ix.back() = c;
    std::string offset;
    for (size_t d = 0; d < o.starts.size(); ++d) {
      std::string idx = starts[d];
      if (o.axis_of_dim[d] >= 0) idx += " + " + ix[static_cast<size_t>(o.axis_of_dim[d])];
      offset = d == 0 ? "(" + idx + ")" : "(" + offset + ") * " + extents[d] + " + (" + idx + ")";
    }
    line(std::string(converter) + "(" + base + " + " + offset + ", " + buf + ", " + left +
         ", ks_stream);");
    streams_ = true;
    --indent_;
    line("}");
    close_loops(shape.size() - 1);
  }

  std::string reduction_identity(const TileOp& o) {
    return convert(expr(reducer_identity_expr(o.reducer, o.type.dtype)), ct_of(o.type.dtype));
  }

  std::string combine(const TileOp& o, const std::string& x, const std::string& y) const {
    const bool fl = is_float(o.type.dtype);
    switch (o.reducer) {
      case Reducer::Sum:
        return x + " + " + y;
      case Reducer::Prod:
        return x + " * " + y;
      case Reducer::Max:
        return std::string(fl ? "ks_fmax(" : "ks_imax(") + x + ", " + y + ")";
      case Reducer::Min:
        return std::string(fl ? "ks_fmin(" : "ks_imin(") + x + ", " + y + ")";
    }
    internal_error << "tile codegen: unknown reducer";
    return std::string();
  }

  // The rows noted for prefetching (note_next_row), taken, their addresses named.
  std::vector<NextRow> take_next_rows() {
    std::vector<NextRow> next;
    next.swap(next_rows_);
    for (NextRow& r : next) {
      const std::string name = tmp();
      line("const uintptr_t " + name + " = " + r.address + ";");
      r.address = name;
    }
    return next;
  }

  // Whether store `o` writes one contiguous, unmasked row through a row helper in chunks in every
  // call (store_converted_rows; an f32 row takes that path only where it streams).
  bool stores_row_in_chunks(const TileOp& o) {
    if (o.kind != OpKind::Store || o.type.shape.size() != 1 || o.args.size() > 1 ||
        o.axis_of_dim.back() != 0 || o.bounds_checked.back())
      return false;
    for (size_t d = 0; d < o.starts.size(); ++d)
      if (o.axis_of_dim[d] >= 0 && o.bounds_checked[d]) return false;
    const char* converter = row_converter(o, buffer(o.buffer, o.starts.size()).buf->dtype).first;
    return converter && std::string(converter) != "ks_f32_row";
  }

  // Whether reduction `o` runs along a contiguous row with running partials (reduce_along_rows):
  // along the last axis, a row length with lanes, and an f32 (or integer) result. f16/bf16
  // results, rounded every step, keep the in-order loop.
  bool reduces_by_lanes(const TileOp& o) const {
    const std::vector<int64_t>& shape = op_shapes_[static_cast<size_t>(o.args[0])];
    return !shape.empty() && static_cast<size_t>(o.axis) + 1 == shape.size() &&
           reduce_lanes(shape.back()) > 0 &&
           (o.type.dtype == DType::F32 || !is_float(o.type.dtype));
  }

  // The result array of reduction `o` (a one-element array for a scalar), declared.
  std::string declare_reduction(const TileOp& o) {
    Value& v = define(o);
    if (!v.scalar()) {
      declare_array(v);
      return v.name;
    }
    std::string acc = tmp();
    line(std::string(elem_type(v.dtype)) + " " + acc + "[1];");
    return acc;
  }
  void finish_reduction(const TileOp& o, const std::string& acc) {
    Value& v = values_[static_cast<size_t>(o.result)];
    if (!v.scalar()) return;
    v.cvar = true;
    line("const " + std::string(elem_type(v.dtype)) + " " + v.name + " = " + acc + "[0];");
  }

  // Reduction `o` along contiguous rows (reduces_by_lanes) of the elements `element` spells: a
  // row's lanes running partials, one vector register's worth per group of lanes, combined as a
  // tree at the end, so that the loop vectorises instead of waiting on one accumulator. With
  // `store` the loop also stores each element there (the reduction runs in its operand's loop).
  void reduce_along_rows(const TileOp& o, const std::function<std::string(const Index&)>& element,
                         const std::string& store, const std::string& step_first = "") {
    const std::vector<int64_t>& shape = op_shapes_[static_cast<size_t>(o.args[0])];
    const int64_t len = shape.back(), outer = elements_of(shape) / len;
    const std::string acc = declare_reduction(o), ty = elem_type(o.type.dtype);
    const std::string lanes = std::to_string(reduce_lanes(len));
    const std::string flat = "ks_o * " + std::to_string(len) + " + ks_r + ks_k";
    const std::string e =
        element(Index{flat, reduce_axes(shape, shape.size() - 1, "ks_r + ks_k", "ks_o")});
    // The next instance's rows, their addresses named where this reduction prefetches them.
    std::vector<NextRow> next;
    if (scopes_.size() == 1 && --row_reductions_left_ <= 0 && !prefetch_in_store_)
      next = take_next_rows();
    line("for (int64_t ks_o = 0; ks_o < " + std::to_string(outer) + "; ++ks_o) {");
    line("  " + ty + " ks_p[" + lanes + "];");
    line("  for (int ks_k = 0; ks_k < " + lanes +
         "; ++ks_k) ks_p[ks_k] = " + reduction_identity(o) + ";");
    line("  for (int64_t ks_r = 0; ks_r < " + std::to_string(len) + "; ks_r += " + lanes + ")");
    const bool block = !next.empty() || !step_first.empty();
    if (block) line("  {");
    if (!step_first.empty()) line("    " + step_first);
    for (const NextRow& r : next) {
      // The share of the next row that this step's share of the reduced row stands for.
      const int64_t step = (r.bytes * reduce_lanes(len) + len - 1) / len;
      line("    ks_prefetch(" + r.address + " + ks_r * " + std::to_string(r.bytes) + " / " +
           std::to_string(len) + ", " + std::to_string(step) + ");");
    }
    if (store.empty()) {
      line("    for (int ks_k = 0; ks_k < " + lanes +
           "; ++ks_k) ks_p[ks_k] = " + combine(o, "ks_p[ks_k]", e) + ";");
    } else {
      line("    for (int ks_k = 0; ks_k < " + lanes + "; ++ks_k) {");
      line("      const " + ty + " ks_e = " + e + ";");
      line("      " + store + "[" + flat + "] = ks_e;");
      line("      ks_p[ks_k] = " + combine(o, "ks_p[ks_k]", "ks_e") + ";");
      line("    }");
    }
    if (block) line("  }");
    line("  for (int ks_w = " + std::to_string(reduce_lanes(len) / 2) + "; ks_w > 0; ks_w /= 2)");
    line("    for (int ks_k = 0; ks_k < ks_w; ++ks_k) ks_p[ks_k] = " +
         combine(o, "ks_p[ks_k]", "ks_p[ks_k + ks_w]") + ";");
    line("  " + acc + "[ks_o] = ks_p[0];");
    line("}");
    finish_reduction(o, acc);
  }

  void op(const TileOp& o) {
    if (o.kind == OpKind::Store) {
      line("{  // store " + o.buffer);
      ++indent_;
      region(o, true);
      --indent_;
      line("}");
      return;
    }
    if (o.kind == OpKind::Write) {
      const Value& r = registers_.at(o.buffer);
      const Value& a = val(o.args[0]);
      if (a.scalar()) {
        line("for (int64_t i = 0; i < " + std::to_string(r.elements()) + "; ++i) " + r.name +
             "[i] = " + at(o.args[0], "0") + ";");
      } else if (r.name != a.name) {
        line("memcpy(" + r.name + ", " + a.name + ", " +
             std::to_string(r.elements() * elem_bytes(r.dtype)) + ");");
      }
      return;
    }
    if ((o.kind == OpKind::Reduce && reduced_early_[static_cast<size_t>(o.result)]) ||
        emitted_early_[static_cast<size_t>(o.result)])
      return;  // computed with its operand, or before the reduction of a row converted in steps
    Value& v = define(o);
    const std::string ty = elem_type(v.dtype);
    switch (o.kind) {
      case OpKind::Read:
        // The register itself: no value read from a register is used after a write to it.
        line(ty + "* __restrict__ " + v.name + " = " + registers_.at(o.buffer).name + ";");
        return;
      case OpKind::Full:
        internal_assert(v.scalar()) << "tile codegen: full of a non-scalar shape";
        v.cvar = true;
        line("const " + ty + " " + v.name + " = " + scalar(o.scalar, ct_of(v.dtype)) + ";");
        return;
      case OpKind::Arange: {
        declare_array(v);
        std::string start = scalar(o.scalar, CT::I64);
        std::vector<std::string> ix = open_loops(v.shape);
        line(v.name + "[" + target::spell_linear_index(ix, v.shape) + "] = " + start + " + " +
             ix[static_cast<size_t>(o.axis)] + ";");
        close_loops(ix.size());
        return;
      }
      case OpKind::Map: {
        if (!is_float(o.type.dtype) && !o.is_call && (o.op == Op::Div || o.op == Op::Mod) &&
            val(o.args[1]).scalar() && !v.scalar()) {
          int_division_by_scalar(o, v);
          return;
        }
        auto element = [this, o](const Index& x) {
          std::vector<std::string> a;
          for (int id : o.args) a.push_back(at(id, x));
          std::string code = map_code(o, a);
          return is_float(o.type.dtype) ? round_to(code, o.type.dtype) : code;
        };
        if (v.scalar()) {
          v.cvar = true;
          line("const " + ty + " " + v.name + " = " + element(Index{"0", {}}) + ";");
          return;
        }
        elementwise(o, v, element);
        return;
      }
      case OpKind::Cast: {
        const Value& a = val(o.args[0]);
        if (a.scalar()) {
          v.cvar = true;
          line("const " + ty + " " + v.name + " = " +
               cast_value(Val{at(o.args[0], "0"), ct_of(a.dtype)}, v.dtype) + ";");
          return;
        }
        if (cast_reuses_storage(o)) {
          // f16/bf16 tiles hold rounded f32 values already.
          line(ty + "* __restrict__ " + v.name + " = " + a.name + ";");
          return;
        }
        if (cast_rounds_row(o)) {
          declare_array(v);
          line("ks_rf16_row(" + v.name + ", " + a.name + ", " + std::to_string(v.elements()) +
               ");");
          return;
        }
        elementwise(o, v, [this, o](const Index& x) {
          const DType from = val(o.args[0]).dtype;
          return cast_value(Val{at(o.args[0], x), ct_of(from)}, o.type.dtype);
        });
        return;
      }
      case OpKind::Broadcast:
        if (val(o.args[0]).scalar()) {
          elementwise(o, v, [this, o](const Index&) { return at(o.args[0], "0"); });
          return;
        }
        elementwise(
            o, v,
            [this, o](const Index& x) {
              // The operand's axes are the broadcast's axes `dims`.
              const Value& a = val(o.args[0]);
              std::vector<std::string> src;
              for (int d : o.dims) src.push_back(x.axes[static_cast<size_t>(d)]);
              return at(o.args[0], Index{target::spell_linear_index(src, a.shape), src});
            },
            true);
        return;
      case OpKind::Permute: {
        const Value& a = val(o.args[0]);
        if (a.scalar()) {
          declare_array(v);
          line("for (int64_t i = 0; i < " + std::to_string(v.elements()) + "; ++i) " + v.name +
               "[i] = " + at(o.args[0], "0") + ";");
          return;
        }
        declare_array(v);
        std::vector<std::string> ix = open_loops(v.shape);
        std::vector<std::string> src(a.shape.size());
        for (size_t k = 0; k < o.perm.size(); ++k) src[static_cast<size_t>(o.perm[k])] = ix[k];
        line(v.name + "[" + target::spell_linear_index(ix, v.shape) + "] = " + a.name + "[" +
             target::spell_linear_index(src, a.shape) + "];");
        close_loops(ix.size());
        return;
      }
      case OpKind::Dot: {
        declare_array(v);
        const Value& a = val(o.args[0]);
        const Value& b = val(o.args[1]);
        line("ks_dot<" + std::to_string(a.shape[0]) + ", " + std::to_string(b.shape[1]) + ", " +
             std::to_string(a.shape[1]) + ">(" + a.name + ", " + b.name + ", " + v.name + ");");
        return;
      }
      case OpKind::Reduce: {
        const Value& a = val(o.args[0]);
        if (reduces_by_lanes(o)) {
          reduce_along_rows(o, [&](const Index& x) { return at(o.args[0], x); }, "");
          return;
        }
        size_t ax = static_cast<size_t>(o.axis);
        int64_t outer = 1, inner = 1, len = a.shape[ax];
        for (size_t k = 0; k < ax; ++k) outer *= a.shape[k];
        for (size_t k = ax + 1; k < a.shape.size(); ++k) inner *= a.shape[k];
        const std::string acc = declare_reduction(o);
        std::string x = "ks_o * " + std::to_string(inner) + " + ks_i";
        std::string src =
            at(o.args[0], Index{"(ks_o * " + std::to_string(len) + " + ks_r) * " +
                                    std::to_string(inner) + " + ks_i",
                                reduce_axes(a.shape, ax, "ks_r", ax == 0 ? "ks_i" : "ks_o")});
        line("for (int64_t ks_o = 0; ks_o < " + std::to_string(outer) + "; ++ks_o) {");
        line("  for (int64_t ks_i = 0; ks_i < " + std::to_string(inner) + "; ++ks_i) " + acc + "[" +
             x + "] = " + reduction_identity(o) + ";");
        line("  for (int64_t ks_r = 0; ks_r < " + std::to_string(len) + "; ++ks_r)");
        line("    for (int64_t ks_i = 0; ks_i < " + std::to_string(inner) + "; ++ks_i) " + acc +
             "[" + x +
             "] = " + round_to(combine(o, acc + "[" + x + "]", src), val(o.result).dtype) + ";");
        line("}");
        finish_reduction(o, acc);
        return;
      }
      case OpKind::Gather: {
        declare_array(v);
        const BufInfo& b = buffer(o.buffer, tp_.source.find_buffer(o.buffer)->shape.size());
        size_t rank = b.shape.size();
        line("for (int64_t i = 0; i < " + std::to_string(v.elements()) + "; ++i) {  // gather " +
             o.buffer);
        ++indent_;
        std::string offset, ok = o.args.size() > rank ? at(o.args[rank], "i") : "";
        std::string checks;
        for (size_t d = 0; d < rank; ++d) {
          std::string ix = tmp();
          line("const int64_t " + ix + " = " + at(o.args[d], "i") + ";");
          if (!o.index_in_bounds[d])
            checks += std::string(checks.empty() ? "" : " && ") + "ks_chk(ks_l, " + ix + ", " +
                      b.shape[d] + ", " + std::to_string(site(o.buffer)) + ", " +
                      std::to_string(d) + ")";
          offset = d == 0 ? ix : "(" + offset + ") * " + b.shape[d] + " + " + ix;
        }
        if (!ok.empty()) checks = checks.empty() ? ok : ok + " && " + checks;
        std::string raw = b.id + "[" + (offset.empty() ? "0" : offset) + "]";
        std::string conv = b.buf->dtype == DType::F16    ? "ks_h2f(" + raw + ")"
                           : b.buf->dtype == DType::BF16 ? "ks_b2f(" + raw + ")"
                                                         : "(" + ty + ")" + raw;
        line(v.name + "[i] = (" + (checks.empty() ? "true" : checks) + ") ? " + conv + " : " +
             (is_float(v.dtype) ? "0.0f" : "0") + ";");
        --indent_;
        line("}");
        return;
      }
      case OpKind::Load:
        note_next_row(o);
        if (reads_in_place(o)) {
          load_in_place(o, v);
          return;
        }
        declare_array(v);
        if (same_in_every_instance(o)) {
          fill_once(o, v);
          return;
        }
        if (const TileOp* r = reduced_with_[static_cast<size_t>(o.result)]) {
          load_converting_in_steps(o, v, *r);
          return;
        }
        line("{  // load " + o.buffer);
        ++indent_;
        region(o, false);
        --indent_;
        line("}");
        return;
      default:
        internal_error << "tile codegen: unexpected op";
    }
  }

  const tile::TileProgram& tp_;
  const std::set<std::string> in_memory_;  // buffers the kernels load or store (buffers_in_memory)
  std::vector<Value> values_;
  std::vector<DType> op_types_;                  // every value's dtype, known before emission
  std::vector<std::vector<int64_t>> op_shapes_;  // and its shape
  std::vector<const TileOp*> defs_;              // and the op defining it
  // Reductions computed in the loop that stores their operand (plan_reductions_in_producers):
  // by operand, the reduction; by reduction, whether it was.
  std::vector<const TileOp*> reduced_with_;
  std::vector<bool> reduced_early_;
  // Loads converted in steps (plan_conversion_in_steps): by load, the ops between the row and
  // its reduction's operand; by value, whether it was defined at the load.
  std::map<int, std::vector<int>> chain_of_;
  std::vector<bool> emitted_early_;
  std::vector<bool> inline_;  // the inlining plan (plan_inlining)
  std::map<std::string, Value> registers_;
  int64_t ws_bytes_ = 0;
  std::map<std::string, int64_t> slot_of_;  // array value -> its workspace offset
  std::set<std::string> grid_vars_;         // of the kernel being written
  std::string next_grid_var_;               // its innermost grid variable
  bool streams_ = false;                    // a row store of the kernel may stream (ks_stream)
  std::vector<NextRow> next_rows_;          // rows to prefetch (note_next_row)
  int row_reductions_left_ = 0;     // of the body's top level, the last of which prefetches them
  bool prefetch_in_store_ = false;  // unless there is one and the row's stores take them
  std::set<std::string> written_;   // buffers the kernel being written stores to
  std::ostringstream prologue_;     // its loads filled once a thread (fill_once)
  int64_t largest_workspace_ = 0;   // over the kernels: what each thread's workspace grows to
};

}  // namespace

std::string generate_tile_source(const tile::TileProgram& program) {
  return TileEmitter(program).source();
}

}  // namespace kintsugi::cpu
