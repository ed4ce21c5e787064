// \file FragmentEmit.cpp
// The tensor-core writer's emission of a kernel body in the accumulator layout: elementwise work
// slot by slot, row reductions by lane shuffles, loops in their versions, stores with their masks,
// uniform values, and the hoisting of values computed once a row, a column or a diagonal.
//
// Invariant established: every operation writes what the tile IR means at each element a lane
// owns (FragmentWriter.h: the layout's kinds).
#include "target/cuda/FragmentWriter.h"

namespace kintsugi::cuda::fragment {

auto FragmentWriter::is_frag_shape(const std::vector<int64_t>& s) const -> bool {
  return s.size() == 2 && s[0] == rows_ && s[1] % 8 == 0;
}

auto FragmentWriter::data_shape(const std::vector<int64_t>& s) const -> bool {
  return s.empty() || is_frag_shape(s) || is_row_shape(s);
}

auto FragmentWriter::data_kind(const std::vector<int64_t>& s) const -> Kind {
  if (s.empty()) return Kind::Uniform;
  if (is_frag_shape(s)) return Kind::Frag;
  if (is_row_shape(s)) return Kind::Row;
  return Kind::None;
}

auto FragmentWriter::frag_decl(const std::string& type, const std::string& name, int64_t cols) const
    -> std::string {
  return type + " " + name + "[" + std::to_string(mblocks_ * cols / 8) + "][4]";
}

auto FragmentWriter::row_decl(const std::string& type, const std::string& name) const
    -> std::string {
  return type + " " + name + "[" + std::to_string(2 * mblocks_) + "]";
}

auto FragmentWriter::declare_register(const tile::Register& r) -> void {
  std::string ty = ctype(r.type.dtype), name = ident("r", r.name);
  if (r.type.shape.empty())
    line(ty + " " + name + " = 0;");
  else if (is_row_shape(r.type.shape))
    line(row_decl(ty, name) + " = {};");
  else
    line(frag_decl(ty, name, r.type.shape[1]) + " = {};");
}

auto FragmentWriter::frag_col() const -> std::string {
  return "((ks_k >> " + std::to_string(2 + log2_mblocks()) + ") * 8 + ks_col0 + (ks_k & 1))";
}

auto FragmentWriter::row_slot() const -> std::string {
  return "((ks_k >> 1) & " + std::to_string(2 * mblocks_ - 1) + ")";
}

auto FragmentWriter::mblock(const std::string& block, int m) const -> std::string {
  return mblocks_ == 1
             ? block
             : "(" + block + ") * " + std::to_string(mblocks_) + " + " + std::to_string(m);
}

auto FragmentWriter::at(int id, Kind ctx) -> std::string {
  const Val& v = val(id);
  switch (v.kind) {
    case Kind::Uniform:
      return v.name;
    case Kind::Lazy:
      return lazy(id, ctx == Kind::Frag ? std::vector<std::string>{frag_row(), frag_col()}
                                        : std::vector<std::string>{row_row()});
    case Kind::Frag:
      return v.name + "[ks_k >> 2][ks_k & 3]";
    case Kind::RowBcast:
      return val(v.row_source).name + "[(ks_k >> 1) & " + std::to_string(2 * mblocks_ - 1) + "]";
    case Kind::Row:
      return v.name + "[ks_h]";
    default:
      internal_error << "fragment codegen: value %" << id << " has no element access";
  }
  return "";
}

auto FragmentWriter::lazy(int id, const std::vector<std::string>& ix) -> std::string {
  return index_code(id, ix, /*in_front=*/false).value_or("");
}

auto FragmentWriter::elementwise(const TileOp& o, const std::vector<std::string>& a)
    -> std::string {
  std::string code;
  if (o.kind == OpKind::Cast) {
    const Val& from = val(o.args[0]);
    return cast_to(a[0], from.def ? from.def->type.dtype : DType::F32, o.type.dtype);
  } else if (o.is_call) {
    code = call(o.fn, a, is_float(o.type.dtype));
  } else if (o.op == Op::Div && o.type.dtype == DType::F32) {
    // Division on the approximate units too: by a uniform divisor, one reciprocal the compiler
    // computes once and a multiply an element; otherwise __fdividef (2 ulp).
    code = val(o.args[1]).kind == Kind::Uniform ? "(" + a[0] + " * (1.0f / " + a[1] + "))"
                                                : "__fdividef(" + a[0] + ", " + a[1] + ")";
  } else {
    bool fl = false;
    for (int id : o.args) fl = fl || is_float(val(id).def ? val(id).def->type.dtype : DType::F32);
    code = spell(o.op, a, fl);
  }
  return is_float(o.type.dtype) ? round_to(code, o.type.dtype) : code;
}

auto FragmentWriter::open_slots(Kind k, int64_t cols, const std::string& first,
                                const std::string& last) -> void {
  line("#pragma unroll");
  if (k == Kind::Frag)
    line("for (int ks_k = " + first + "; ks_k < " +
         (last.empty() ? std::to_string(mblocks_ * cols / 2) : last) + "; ++ks_k) {");
  else
    line("for (int ks_h = 0; ks_h < " + std::to_string(2 * mblocks_) + "; ++ks_h) {");
  ++indent_;
}

auto FragmentWriter::close_slots() -> void {
  --indent_;
  line("}");
}

auto FragmentWriter::slot(const Val& v) const -> std::string {
  return v.kind == Kind::Frag ? v.name + "[ks_k >> 2][ks_k & 3]" : v.name + "[ks_h]";
}

auto FragmentWriter::declare(const Val& v, const tile::TileType& t) -> void {
  std::string ty = ctype(t.dtype);
  line((v.kind == Kind::Frag ? frag_decl(ty, v.name, t.shape[1]) : row_decl(ty, v.name)) + ";");
}

auto FragmentWriter::body(const tile::TileBody& b) -> void {
  const auto issued_outside = slot_loads_;
  if (&b == &k_.body) {
    line("const int ks_lane = ks_tid & 31, ks_warp = ks_tid >> 5;");
    line("const int ks_row0 = ks_warp * " + std::to_string(16 * mblocks_) +
         " + (ks_lane >> 2), ks_col0 = 2 * (ks_lane & 3);");
    line("const u32 ks_smem_u32 = smem_addr(ks_smem);");
    init_tma_barriers();
    smem_bytes_ = smem_total_;
    for (const TileOp* o : ops_)
      if (o->kind == OpKind::Dot && !wgmma_) {
        const Val& a = val(o->args[0]);
        const Val& b = val(o->args[1]);
        if (a.kind == Kind::Smem) define_lane_offsets(a.tile, Access::A);
        define_lane_offsets(b.tile, b.transposed ? Access::B : Access::BTrans);
      }
    prefetch_top_level_tiles();
  }
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].kind == tile::StmtKind::For) {
      loop(b[i]);
      continue;
    }
    const TileOp& o = b[i].op;
    if (o.kind != OpKind::Dot) {
      op(o);
      reissue_after(o);
      continue;
    }
    size_t last = i + 1;
    while (last < b.size() && b[last].kind == tile::StmtKind::Op &&
           slot_local(b[last].op, o.type.shape[1]))
      ++last;
    issue_slot_loads(b, i + 1);
    dot_region(b, i, last);
    for (size_t k = i; k < last; ++k) reissue_after(b[k].op);
    i = last - 1;
  }
  slot_loads_ = issued_outside;
}

auto FragmentWriter::versioned_body(const tile::TileStmt& s) -> void {
  hoisting_ = true;
  for (const tile::TileStmt& st : s.body)
    if (st.kind == tile::StmtKind::Op && st.op.kind == OpKind::Map && st.op.result >= 0 &&
        val(st.op.result).kind == Kind::Lazy)
      define_comparison(st.op);
  hoisting_ = false;
  std::set<int> used, versioned;
  used_comparisons(s.body, used);
  std::string all = "true";
  for (int id : used) {
    auto it = comparisons_.find(id);
    if (it == comparisons_.end() || assumed_true_.count(id) || !masks(id)) continue;
    const Comparison& c = it->second;
    // The smallest and largest values of coef . coordinates over the tile.
    int64_t lo = 0, hi = 0;
    for (size_t k = 0; k < c.coef.size(); ++k)
      (c.coef[k] > 0 ? hi : lo) += c.coef[k] * (c.extents[k] - 1);
    std::string test;
    if (c.op == "!=")  // the limit lies outside the tile's range
      test = "(" + c.limit + " < " + std::to_string(lo) + " || " + c.limit + " > " +
             std::to_string(hi) + ")";
    else if (c.op == "==" && lo == hi)  // (one that moves along the tile holds over none of it)
      test = "(" + std::to_string(lo) + " == " + c.limit + ")";
    else if (c.op != "==")
      test = "(" + std::to_string(c.op[0] == '<' ? hi : lo) + " " + c.op + " " + c.limit + ")";
    if (test.empty()) continue;
    all += " && " + test;
    versioned.insert(id);
  }
  for (int id : used) {
    // (Not one of a nested loop: its test would read that loop's variable in front of it.)
    if (comparisons_.count(id) || assumed_true_.count(id) ||
        val(id).def->type.dtype != DType::Bool || nested_loop_value(s.body, id) || !masks(id))
      continue;
    if (std::optional<std::string> test = whole_tile_test(id)) {
      all += " && " + *test;
      versioned.insert(id);
    }
  }
  // Uniform conditions comparing the loop variable with a loop-invariant bound (j0 > 0: "not
  // the first iteration") are assumed at the value they keep once the variable has grown past
  // the bound, and checked like the masks.
  std::map<int, bool> steady;
  for (const tile::TileStmt& st : s.body) {
    if (st.kind != tile::StmtKind::Op || st.op.kind != OpKind::Full ||
        st.op.type.dtype != DType::Bool || !st.op.type.shape.empty())
      continue;
    std::optional<bool> value = steady_value(st.op.scalar, s.var);
    if (!value) continue;
    steady[st.op.result] = *value;
    all += " && ((" + scalar(st.op.scalar) + ") == " + (*value ? "true" : "false") + ")";
  }
  // Tiles read from global memory into registers or at their uses (a bias over the scores)
  // whose start moves only with the loops: where the whole tile lies inside its buffer, its
  // elements are read without a bounds test each.
  std::set<const TileOp*> interior;
  for (const tile::TileStmt& st : s.body) {
    if (st.kind != tile::StmtKind::Op) continue;
    std::optional<std::string> test = interior_test(st.op);
    if (!test) continue;
    all += " && " + *test;
    interior.insert(&st.op);
  }
  // A comparison's limit defined inside a version is declared in that version's scope (and in
  // the loop's): the other version, and what follows the loop, define it again.
  const std::map<int, Comparison> outside = comparisons_;
  if (versioned.empty() && steady.empty() && interior.empty()) {
    body(s.body);
    comparisons_ = outside;
    return;
  }
  std::string flag = "ks_full_" + s.var;
  line("const bool " + flag + " = " + all + ";");
  line("if (" + flag + ") {");
  ++indent_;
  for (int id : versioned) assumed_true_.insert(id);
  for (auto [id, value] : steady) assumed_uniform_[id] = value;
  interior_loads_ = interior;
  body(s.body);
  comparisons_ = outside;
  for (int id : versioned) assumed_true_.erase(id);
  for (auto [id, value] : steady) assumed_uniform_.erase(id);
  interior_loads_.clear();
  --indent_;
  line("} else {");
  ++indent_;
  body(s.body);
  comparisons_ = outside;
  --indent_;
  line("}");
}

auto FragmentWriter::loop(const tile::TileStmt& s) -> void {
  const std::vector<std::pair<int, bool>> invariant = hoist_invariant_slot_values(s);
  loop_body(s);
  for (const auto& key : invariant) invariant_slots_.erase(key);
}

auto FragmentWriter::loop_body(const tile::TileStmt& s) -> void {
  std::vector<int> streams = streams_of(s.var), two_stage;
  for (int t : streams)
    if (tiles_[static_cast<size_t>(t)].stages == 2) two_stage.push_back(t);
  std::string lo, hi;
  if (streams.empty()) {
    open_loop(s);
    versioned_body(s);
    close_loop();
    return;
  }
  // Prologue: the first iteration's tiles into stage 0, one copy group per tile.
  std::string var = ident("v", s.var);
  line("{");
  ++indent_;
  // Starts of the streamed tiles that divide without depending on the loop (the key/value head
  // h / (HQ / HK) of grouped-query attention: 64-bit divisions, which the C++ compiler cannot
  // hoist past their error reports) are computed once here.
  std::vector<std::string> hoisted;
  for (int t : streams)
    for (const ir::Expr& e : tiles_[static_cast<size_t>(t)].load->starts) {
      bool divides = false;
      ir::visit(e, [&](const ir::Expr& x) {
        divides = divides || x->op == Op::Div || x->op == Op::Mod;
        return true;
      });
      std::string start = scalar(e);
      if (!divides || ir::uses_var(e, s.var) || invariant_starts_.count(start)) continue;
      std::string name = tmp();
      line("const long long " + name + " = " + start + ";");
      invariant_starts_[start] = name;
      hoisted.push_back(start);
    }
  lo = tmp();
  hi = tmp();
  line("const long long " + lo + " = " + scalar(s.min) + ";");
  line("const long long " + hi + " = " + lo + " + " + scalar(s.extent) + ";");
  loop_lo_[s.var] = lo;
  loop_hi_[s.var] = hi;
  issue_streams(streams, lo, hi, "0");
  // The loop runs only where that first issue did: its squeezed checks that stay put hold for
  // every iteration (checked_before_loop_).
  std::vector<std::string> checked;
  for (int t : streams) {
    const TileOp& load = *tiles_[static_cast<size_t>(t)].load;
    bool moves = false;
    for (size_t d = 0; d < load.starts.size(); ++d)
      moves = moves || (load.axis_of_dim[d] < 0 && ir::uses_var(load.starts[d], s.var));
    std::string key = squeezed_check(load);
    if (!moves && checked_before_loop_.insert(key).second) checked.push_back(std::move(key));
  }
  line("for (long long " + var + " = " + lo + "; " + var + " < " + hi + "; ++" + var + ") {");
  ++indent_;
  line("const int ks_stage_" + s.var + " = (int)((" + var + " - " + lo + ") & 1);");
  // Every warp is done with the previous iteration's stage before it is refilled.
  line("__syncthreads();");
  issue_streams(two_stage, var + " + 1", hi, "ks_stage_" + s.var + " ^ 1");
  versioned_body(s);
  close_loop();
  // A prefetch left to this loop's waits is still pending when the loop runs no iteration; no
  // copy may outlive the CTA whose shared memory it writes.
  if (unwaited_before_.erase(s.var)) line("cp_async_wait_group<0>();");
  for (const std::string& start : hoisted) invariant_starts_.erase(start);
  for (const std::string& key : checked) checked_before_loop_.erase(key);
}

auto FragmentWriter::slot_local(const TileOp& o, int64_t n) const -> bool {
  if (o.kind == OpKind::Read) return true;
  if (o.kind == OpKind::Write) return data_kind(o.type.shape) == Kind::Frag && o.type.shape[1] == n;
  if (o.kind != OpKind::Map && o.kind != OpKind::Cast && o.kind != OpKind::Broadcast &&
      o.kind != OpKind::Full && o.kind != OpKind::Arange)
    return false;
  Kind k = val(o.result).kind;
  return hoistable(k) || k == Kind::RowBcast || (k == Kind::Frag && o.type.shape[1] == n);
}

auto FragmentWriter::reduce(const TileOp& o, const Val& v) -> void {
  const Val& a = val(o.args[0]);
  int64_t N = a.def->type.shape[1];
  DType t = o.type.dtype;
  // The maximum (minimum) of x c for a c > 0 uniform or constant along the row is c times that
  // of x, exactly (rounding is monotone): x c need not be computed for it. A constant c is known
  // positive; otherwise (a param, like a softcap, or a row's factor, like the reciprocal of a
  // query's norm) the test is made at run time, x c reduced where it fails.
  std::optional<Scaled> sc = scaled(o.args[0]);
  if (t != DType::F32 || (o.reducer != ir::Reducer::Max && o.reducer != ir::Reducer::Min))
    sc.reset();
  std::string positive;  // the run-time test; empty: c is a positive constant
  std::string scale;     // c in the row's slot
  if (sc) {
    const Val& c_val = val(sc->scale);
    scale = c_val.kind == Kind::RowBcast ? val(c_val.row_source).name + "[ks_h]" : c_val.name;
    if (sc->reciprocal) scale = "(1.0f / " + scale + ")";
    std::optional<double> c = constant_value(sc->scale);
    if (c && *c <= 0) sc.reset();
    if (sc && !c) positive = "(" + scale + " > 0.0f)";
  }
  std::string ty = ctype(t);
  std::string identity = scalar(ir::reducer_identity_expr(o.reducer, t));
  line(row_decl(ty, v.name) + ";");
  open_slots(Kind::Row, 0);
  line(ty + " ks_acc = " + identity + ";");
  auto accumulate = [&](int operand) {
    line("#pragma unroll");
    line("for (int ks_k2 = 0; ks_k2 < " + std::to_string(N / 4) + "; ++ks_k2) {");
    ++indent_;
    // Row slot h's two slots in each column block (Frag slot order: frag_row).
    line("const int ks_k = (ks_k2 >> 1) * " + std::to_string(4 * mblocks_) +
         " + ks_h * 2 + (ks_k2 & 1);");
    line("ks_acc = " + round_to(combine(o.reducer, t, "ks_acc", at(operand, Kind::Frag)), t) + ";");
    --indent_;
    line("}");
  };
  if (!sc) {
    accumulate(o.args[0]);
  } else if (positive.empty()) {
    accumulate(sc->x);
  } else {
    line("if " + positive + " {");
    ++indent_;
    accumulate(sc->x);
    --indent_;
    line("} else {");
    ++indent_;
    accumulate(o.args[0]);
    --indent_;
    line("}");
  }
  for (int m : row_shuffle_masks())
    line("ks_acc = " +
         round_to(combine(o.reducer, t, "ks_acc",
                          "__shfl_xor_sync(0xffffffffu, ks_acc, " + std::to_string(m) + ")"),
                  t) +
         ";");
  std::string result = "ks_acc";
  if (sc) result = "ks_acc * " + scale;
  if (!positive.empty()) result = positive + " ? " + result + " : ks_acc";
  line(v.name + "[ks_h] = " + result + ";");
  close_slots();
}

auto FragmentWriter::live_row(Kind ctx) const -> std::string {
  if (!padded() || (ctx != Kind::Frag && ctx != Kind::Row)) return "";
  return " && " + (ctx == Kind::Frag ? frag_row() : row_row()) + " < " + std::to_string(rows_);
}

auto FragmentWriter::store(const TileOp& o) -> void {
  line("{  // store " + o.buffer);
  ++indent_;
  Region reg = open_region(o);
  const std::string& buf = buffer_ids_.at(o.buffer);
  Kind ctx = data_kind(o.type.shape);
  std::vector<std::string> ix;
  std::string guard = "true";
  if (ctx == Kind::Frag) {
    open_slots(Kind::Frag, o.type.shape[1]);
    ix = {frag_row(), frag_col()};
  } else if (ctx == Kind::Row) {
    open_slots(Kind::Row, 0);
    ix = {row_row()};
    // One lane of the quad holding the row writes it, unless the kernel reads it back: then
    // every lane does (the same value), so that each reads its own write, once every lane of
    // the warp has read what the store replaces (an update of a row kept in memory across a
    // loop: a lane that stored first would otherwise have another lane read its new value).
    bool read_back = false;
    for (const TileOp* x : ops_)
      read_back = read_back || (x->kind == OpKind::Load && x->buffer == o.buffer);
    if (read_back)
      line("__syncwarp();");
    else
      guard = "(ks_lane & 3) == 0";
  } else {
    guard = "ks_tid == 0";
  }
  std::string offset, inside;
  element(reg, ix, &offset, &inside);
  inside += live_row(ctx);
  std::string value = ctx == Kind::Uniform ? val(o.args[0]).name : at(o.args[0], ctx);
  std::string mask;
  if (o.args.size() > 1)
    mask = " && " + (ctx == Kind::Uniform ? val(o.args[1]).name : at(o.args[1], ctx));
  line("if (" + guard + " && " + inside + mask + ") " + buf + "[" + offset +
       "] = " + store_value(o.buffer, value) + ";");
  if (ctx != Kind::Uniform) close_slots();
  --indent_;
  line("}");
}

auto FragmentWriter::op(const TileOp& o) -> void {
  if (o.kind == OpKind::Store) {
    store(o);
    return;
  }
  if (o.kind == OpKind::Write) {
    Kind ctx = data_kind(o.type.shape);
    std::string reg = ident("r", o.buffer);
    if (ctx == Kind::Uniform) {
      line(reg + " = " + val(o.args[0]).name + ";");
      return;
    }
    frag_slots(o, "0", "");
    return;
  }
  const Val& v = val(o.result);
  switch (v.kind) {
    case Kind::Lazy:
      if (o.kind == OpKind::Map) define_comparison(o);
      if (o.kind == OpKind::Load && v.tile >= 0) load_smem(v);  // an element tile
      if (o.kind == OpKind::Load && v.tile < 0 && !slot_loads_.count({o.result, true}) &&
          !slot_loads_.count({o.result, false})) {
        lazy_loads_[o.result] = open_region(o);
        lazy_loads_[o.result].interior = interior_loads_.count(&o) > 0;
      }
      if (o.kind == OpKind::Reduce) write_computed_vector(o);
      return;  // spelled at the uses
    case Kind::RowBcast:
      return;
    case Kind::Smem:
      if (o.kind == OpKind::Load) load_smem(v);
      if (tiles_[static_cast<size_t>(v.tile)].written_at == o.result)
        write_computed_tile(tiles_[static_cast<size_t>(v.tile)]);
      return;
    case Kind::Uniform:
      uniform(o, v);
      return;
    default:
      break;
  }
  if (o.kind == OpKind::Read) return;  // aliases the register
  if (o.kind == OpKind::Reduce) return reduce(o, v);
  declare(v, o.type);
  if (o.kind == OpKind::Load) {
    line("{");
    ++indent_;
    Region reg = open_region(o);
    reg.interior = interior_loads_.count(&o) > 0;
    open_slots(v.kind, v.kind == Kind::Frag ? o.type.shape[1] : 0);
    std::string offset, inside;
    element(reg,
            v.kind == Kind::Frag ? std::vector<std::string>{frag_row(), frag_col()}
                                 : std::vector<std::string>{row_row()},
            &offset, &inside);
    inside += live_row(v.kind);
    line(slot(v) + " = (" + inside + ") ? " +
         load_value(o.buffer, buffer_ids_.at(o.buffer) + "[" + offset + "]", o.type.dtype) +
         " : 0;");
    close_slots();
    --indent_;
    line("}");
    return;
  }
  frag_slots(o, "0", "");
}

auto FragmentWriter::frag_slots(const TileOp& o, const std::string& first, const std::string& last)
    -> void {
  if (o.kind == OpKind::Read || (o.result >= 0 && val(o.result).kind == Kind::RowBcast)) return;
  Kind ctx = data_kind(o.type.shape);
  if (ctx == Kind::Frag)
    for (int x : o.args) hoist_slot_values(x, Position::Element, o.type.shape[1]);
  open_slots(ctx, ctx == Kind::Frag ? o.type.shape[1] : 0, first, last);
  if (o.kind == OpKind::Write) {
    line(slot(Val{ctx, nullptr, ident("r", o.buffer)}) + " = " + at(o.args[0], ctx) + ";");
  } else if (std::optional<std::string> e = exp_of_difference(o, ctx)) {
    line(slot(val(o.result)) + " = " + *e + ";");
  } else if (std::optional<std::string> e = product_of_scales(o, ctx)) {
    line(slot(val(o.result)) + " = " + *e + ";");
  } else {
    std::vector<std::string> a;
    for (int x : o.args) a.push_back(at(x, ctx));
    line(slot(val(o.result)) + " = " + elementwise(o, a) + ";");
  }
  close_slots();
  slot_values_.clear();
  diagonal_values_.clear();
}

auto FragmentWriter::hoist_slot_values(int id, Position at, int64_t cols) -> void {
  const Val& v = val(id);
  // Not read: known to hold in this loop version, or a comparison spelled by its limit.
  if (v.kind != Kind::Lazy || assumed_true_.count(id) || comparisons_.count(id)) return;
  const TileOp& o = *v.def;
  if (o.kind == OpKind::Broadcast && at == Position::Element && o.dims.size() == 1 &&
      o.type.shape.size() == 2) {
    hoist_slot_values(o.args[0], o.dims[0] == 0 ? Position::Row : Position::Column, cols);
    return;
  }
  if (o.kind == OpKind::Gather) {
    if (at == Position::Element) hoist_diagonal(id, cols);
    return;
  }
  if (o.kind != OpKind::Map && o.kind != OpKind::Cast && o.kind != OpKind::Load) return;
  bool division = costly_division(o);
  bool costly = division || o.kind == OpKind::Load || (o.kind == OpKind::Map && o.is_call);
  if (!costly || at == Position::Element) {
    for (int x : o.args) hoist_slot_values(x, at, cols);
    return;
  }
  const bool rows = at == Position::Row;
  if (slot_values_.count({id, rows})) return;
  auto invariant = invariant_slots_.find({id, rows});
  std::string name = invariant != invariant_slots_.end() ? invariant->second
                                                         : slot_array(id, rows, cols, division);
  slot_values_[{id, rows}] =
      name + "[" +
      (rows ? row_slot()
            : "(ks_k >> " + std::to_string(2 + log2_mblocks()) + ") * 2 + (ks_k & 1)") +
      "]";
}

auto FragmentWriter::costly_division(const TileOp& o) const -> bool {
  return o.kind == OpKind::Map && !o.is_call && (o.op == Op::Div || o.op == Op::Mod) &&
         (is_float(o.type.dtype) ? val(o.args[1]).kind != Kind::Uniform
                                 : !constant_value(o.args[1]));
}

auto FragmentWriter::slot_array(int id, bool rows, int64_t cols, bool division) -> std::string {
  const TileOp& o = *val(id).def;
  std::string name = tmp(), n = std::to_string(slot_count(rows, cols));
  // A 32-bit division's quotient in a 32-bit register (ks_fdiv_i32): 20 64-bit ones for a
  // chunked mask's rows and columns spilled.
  bool narrow = division && !is_float(o.type.dtype) && p_.int32_division_overrun >= 0;
  line(std::string(narrow ? "int" : ctype(o.type.dtype)) + " " + name + "[" + n + "];");
  line("#pragma unroll");
  line("for (int ks_s = 0; ks_s < " + n + "; ++ks_s) " + name +
       "[ks_s] = " + *index_code(id, {slot_coordinate(rows)}, /*in_front=*/false) + ";");
  return name;
}

auto FragmentWriter::hoist_invariant_slot_values(const tile::TileStmt& s)
    -> std::vector<std::pair<int, bool>> {
  std::set<int> inside;
  tile::for_each_op(s.body, [&](const TileOp& o) {
    if (o.result >= 0) inside.insert(o.result);
  });
  std::vector<std::pair<int, bool>> out;
  std::function<void(int, bool, int64_t)> visit = [&](int id, bool rows, int64_t cols) {
    const Val& v = val(id);
    if (v.kind != Kind::Lazy || !v.def) return;
    const TileOp& o = *v.def;
    if (o.kind != OpKind::Map && o.kind != OpKind::Cast) return;
    const bool division = costly_division(o) && !is_float(o.type.dtype);
    if (!division || inside.count(id)) {
      for (int x : o.args) visit(x, rows, cols);
      return;
    }
    if (invariant_slots_.count({id, rows})) return;
    invariant_slots_[{id, rows}] = slot_array(id, rows, cols, division);
    out.emplace_back(id, rows);
  };
  tile::for_each_op(s.body, [&](const TileOp& o) {
    for (int a : o.args) {
      const Val& v = val(a);
      if (v.kind != Kind::Lazy || !v.def) continue;
      const TileOp& c = *v.def;
      if (c.kind == OpKind::Broadcast && c.type.shape.size() == 2 && c.dims.size() == 1)
        visit(c.args[0], c.dims[0] == 0, c.type.shape[1]);
    }
  });
  return out;
}

auto FragmentWriter::slot_coordinate(bool rows) const -> std::string {
  return rows ? "(ks_row0 + ks_s * 8)" : "((ks_s >> 1) * 8 + ks_col0 + (ks_s & 1))";
}

auto FragmentWriter::slot_count(bool rows, int64_t cols) const -> int64_t {
  return rows ? 2 * mblocks_ : cols / 4;
}

auto FragmentWriter::issue_slot_loads(const tile::TileBody& b, size_t after) -> void {
  std::function<void(int, bool, int64_t)> visit = [&](int id, bool rows, int64_t cols) {
    const Val& v = val(id);
    if (v.kind != Kind::Lazy || !v.def) return;
    const TileOp& o = *v.def;
    if (o.kind == OpKind::Map || o.kind == OpKind::Cast) {
      for (int x : o.args) visit(x, rows, cols);
      return;
    }
    if (o.kind != OpKind::Load || v.tile >= 0 || o.type.shape.size() != 1 ||
        slot_loads_.count({id, rows}))
      return;
    lazy_loads_[id] = open_region(o);
    lazy_loads_[id].interior = interior_loads_.count(&o) > 0;
    const std::string name = tmp(), n = std::to_string(slot_count(rows, cols));
    line(std::string(ctype(o.type.dtype)) + " " + name + "[" + n + "];");
    line("#pragma unroll");
    line("for (int ks_s = 0; ks_s < " + n + "; ++ks_s) " + name +
         "[ks_s] = " + *index_code(id, {slot_coordinate(rows)}, /*in_front=*/false) + ";");
    slot_loads_[{id, rows}] = name;
  };
  for (size_t i = after; i < b.size(); ++i) {
    if (b[i].kind != tile::StmtKind::Op) continue;
    const TileOp& c = b[i].op;
    if (c.kind == OpKind::Broadcast && c.result >= 0 && c.type.shape.size() == 2 &&
        c.dims.size() == 1 && val(c.result).kind == Kind::Lazy)
      visit(c.args[0], c.dims[0] == 0, c.type.shape[1]);
  }
}

auto FragmentWriter::hoist_diagonal(int id, int64_t cols) -> void {
  auto table = diagonal_tables_.find(id);
  if (diagonal_values_.count(id) || table == diagonal_tables_.end()) return;
  const DiagonalTable& t = table->second;
  Diagonal d;
  d.mask = t.mask;
  d.values = tmp();
  const std::string entries = std::to_string(t.entries), last_row = std::to_string(rows_ - 1);
  const std::string shared = "((float*)(ks_smem + " + std::to_string(t.offset) + "))";
  // Where the gathers' mask holds over the whole tile, every entry is read by some element,
  // and its index checks are made where it is computed; elsewhere they are kept by diagonal
  // and made at the elements the mask leaves.
  const bool unmasked = t.mask < 0 || known_true(t.mask);
  std::map<const TileOp*, std::string> checks;
  for (const auto& [gather, at] : t.flags)
    checks[gather] = unmasked ? "" : "((bool*)(ks_smem + " + std::to_string(at) + "))";
  // Entry e is the diagonal j - i = e - (rows - 1); its element in row max(0, rows - 1 - e).
  line("__syncthreads();");
  line("for (int ks_s = ks_tid; ks_s < " + entries + "; ks_s += " + std::to_string(threads()) +
       ") {");
  ++indent_;
  diagonal_checks_ = &checks;
  std::string e = *index_code(
      id, {"max(0, " + last_row + " - ks_s)", "max(ks_s - " + last_row + ", 0)"}, false);
  diagonal_checks_ = nullptr;
  line(shared + "[ks_s] = " + e + ";");
  --indent_;
  line("}");
  line("__syncthreads();");
  const int64_t lane_rows = 2 * mblocks_, n = 2 * (cols / 8 + lane_rows - 1);
  const std::string count = std::to_string(n);
  line("float " + d.values + "[" + count + "];");
  for (const auto& [gather, flags] : checks) {
    if (flags.empty()) continue;
    d.checks.emplace_back(site(gather->buffer), tmp());
    line("bool " + d.checks.back().second + "[" + count + "];");
  }
  // The lane's diagonal ks_s: columns less rows (ks_s >> 1) - (lane_rows - 1) m8 blocks apart.
  const std::string blocks = "((ks_s >> 1) - " + std::to_string(lane_rows - 1) + ")";
  line("#pragma unroll");
  line("for (int ks_s = 0; ks_s < " + count + "; ++ks_s) {");
  ++indent_;
  line("const int ks_dg = " + blocks + " * 8 + (ks_s & 1) + ks_col0 - ks_row0 + " + last_row + ";");
  line(d.values + "[ks_s] = " + shared + "[ks_dg];");
  size_t k = 0;
  for (const auto& [gather, flags] : checks)
    if (!flags.empty()) line(d.checks[k++].second + "[ks_s] = " + flags + "[ks_dg];");
  --indent_;
  line("}");
  diagonal_values_[id] = std::move(d);
}

auto FragmentWriter::diagonal_element(const Diagonal& d, const std::vector<std::string>& ix)
    -> std::string {
  const int64_t lane_rows = 2 * mblocks_;
  const std::string slot = "(((ks_k >> " + std::to_string(2 + log2_mblocks()) + ") - " +
                           row_slot() + " + " + std::to_string(lane_rows - 1) +
                           ") * 2 + (ks_k & 1))";
  std::string mask = d.mask >= 0 ? *index_code(d.mask, ix, false) : "true";
  for (const auto& [where, flags] : d.checks)
    line("if ((" + mask + ") && !" + flags + "[" + slot + "]) ks_fail(ks_err, " +
         std::to_string(where) + ");");
  std::string value = d.values + "[" + slot + "]";
  return d.mask >= 0 ? "((" + mask + ") ? " + value + " : (float)0)" : value;
}

auto FragmentWriter::exp_of_difference(const TileOp& o, Kind ctx) -> std::optional<std::string> {
  if (ctx != Kind::Frag || o.kind != OpKind::Map || !o.is_call || o.fn != ir::MathFn::Exp ||
      o.type.dtype != DType::F32)
    return std::nullopt;
  const TileOp& d = *val(o.args[0]).def;
  if (d.kind != OpKind::Map || d.is_call || d.op != Op::Sub) return std::nullopt;
  Kind v = val(d.args[1]).kind;
  if (val(d.args[0]).kind != Kind::Frag || (v != Kind::RowBcast && v != Kind::Uniform))
    return std::nullopt;
  const std::string log2e = "1.4426950408889634f";
  std::string x = at(d.args[0], ctx), slope = log2e;
  if (std::optional<Scaled> sc = scaled(d.args[0])) {
    x = at(sc->x, ctx);
    slope = "(" + factor_of(*sc, ctx) + " * " + log2e + ")";
  }
  return "ex2_approx(fmaf(" + x + ", " + slope + ", -(" + at(d.args[1], ctx) + " * " + log2e +
         ")))";
}

auto FragmentWriter::product_of_scales(const TileOp& o, Kind ctx) -> std::optional<std::string> {
  if (ctx != Kind::Frag || o.kind != OpKind::Map || o.is_call || o.type.dtype != DType::F32 ||
      (o.op != Op::Mul && o.op != Op::Div))
    return std::nullopt;
  int data = o.args[0], factor = o.args[1];
  if (o.op == Op::Mul && val(data).kind == Kind::Uniform) std::swap(data, factor);
  std::optional<Scaled> sc;
  if (val(factor).kind != Kind::Uniform || val(data).kind != Kind::Frag || !(sc = scaled(data)) ||
      val(sc->scale).kind != Kind::Uniform)
    return std::nullopt;
  std::string f = val(factor).name;
  if (o.op == Op::Div) f = "(1.0f / " + f + ")";
  return "(" + at(sc->x, ctx) + " * (" + factor_of(*sc, ctx) + " * " + f + "))";
}

auto FragmentWriter::scaled(int id) const -> std::optional<Scaled> {
  const TileOp* d = val(id).def;
  while (d->kind == OpKind::Map && !d->is_call && d->op == Op::Select && known_true(d->args[0]))
    d = val(d->args[1]).def;
  if (d->kind != OpKind::Map || d->is_call || (d->op != Op::Mul && d->op != Op::Div))
    return std::nullopt;
  for (int side = 0; side < (d->op == Op::Mul ? 2 : 1); ++side) {
    int x = d->args[static_cast<size_t>(side)], c = d->args[static_cast<size_t>(1 - side)];
    if (val(x).kind == Kind::Frag &&
        (val(c).kind == Kind::Uniform || val(c).kind == Kind::RowBcast))
      return Scaled{x, c, d->op == Op::Div};
  }
  return std::nullopt;
}

auto FragmentWriter::factor_of(const Scaled& s, Kind ctx) -> std::string {
  const std::string c = at(s.scale, ctx);
  return s.reciprocal ? "(1.0f / " + c + ")" : c;
}

auto FragmentWriter::uniform(const TileOp& o, const Val& v) -> void {
  std::string ty = ctype(o.type.dtype);
  switch (o.kind) {
    case OpKind::Read:
      return;  // aliases the register
    case OpKind::Full: {
      auto known = assumed_uniform_.find(o.result);
      if (o.scalar->op == Op::IntImm) literal_names_.insert(v.name);
      note_full(v.name, o.scalar);
      line("const " + ty + " " + v.name + " = " +
           (known != assumed_uniform_.end() ? (known->second ? "true" : "false")
                                            : scalar(o.scalar)) +
           ";");
      return;
    }
    case OpKind::Load: {
      Region reg = open_region(o);
      std::string offset, inside;
      element(reg, {}, &offset, &inside);
      line("const " + ty + " " + v.name + " = (" + inside + ") ? " +
           load_value(o.buffer, buffer_ids_.at(o.buffer) + "[" + offset + "]", o.type.dtype) +
           " : 0;");
      return;
    }
    default: {
      std::vector<std::string> a;
      for (int x : o.args) a.push_back(val(x).name);
      line("const " + ty + " " + v.name + " = " + elementwise(o, a) + ";");
    }
  }
}

}  // namespace kintsugi::cuda::fragment
