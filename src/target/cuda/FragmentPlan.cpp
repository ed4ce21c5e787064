// \file FragmentPlan.cpp
// The tensor-core writer's kernel plan: the kind of every value (FragmentWriter.h), the
// shared-memory tiles and vectors and their offsets, element tiles, the number of warps and
// m-blocks.
//
// Invariant established: plan() either gives every value a kind the emission can write, with
// every shared tile placed, or fails and says why (the element-cyclic writer then takes the
// kernel).
#include "target/cuda/FragmentWriter.h"

namespace kintsugi::cuda::fragment {

auto FragmentWriter::plan() -> bool {
  vals_.assign(static_cast<size_t>(k_.num_values), Val{});
  collect(k_.body, "");
  if (!has_tensor_core_dot()) return false;  // nothing for the tensor cores
  for (const TileOp* o : ops_)
    if (o->kind == OpKind::Dot) {
      int64_t r = o->type.shape[0];
      if (rows_ >= 0 && r != rows_)
        return fail("its dots have row tiles of " + std::to_string(rows_) + " and " +
                    std::to_string(r) + " rows");
      rows_ = r;
    }
  // A row tile that is no power of two (a group of 24 or 48 query heads in decode, fewer than
  // 16) runs on the warps of the next power of two rows (warp_rows), the rows past it never
  // stored.
  if (rows_ > 128)
    return fail("its row tile of " + std::to_string(rows_) + " rows is more than 128");
  // A row tile of 128 runs on four warps of two m16 blocks each (FlashAttention-2's 128-row
  // tiles on 4 warps): every B fragment read from shared memory feeds two mma instead of one.
  // Past 128 columns of a dot's result (head sizes 192 and 256) two blocks' accumulators alone
  // take 192-256 registers a thread: the tile runs on eight warps of one block each (at two
  // blocks ptxas spilled 1352 bytes a thread at D=192 and 2776 at D=256).
  int64_t widest = 0;
  for (const TileOp* o : ops_)
    if (o->kind == OpKind::Dot) widest = std::max(widest, o->type.shape.back());
  // On sm_90a a row tile of whole warpgroups runs its dots as wgmma, each warp one m16 block of
  // its warpgroup's 64 rows (eight warps for 128 rows).
  if (target_.warpgroup_mma() && warp_rows() % 64 == 0) wgmma_ = wgmma_shapes(&not_wgmma_);
  mblocks_ = !wgmma_ && rows_ == 128 && widest <= 128 ? 2 : 1;
  for (const tile::Register& r : k_.registers)
    if (!data_shape(r.type.shape))
      return fail("register '" + r.name + "' of " + tile::to_string(r.type) +
                  " is neither a scalar, a row nor a row tile");
  for (const TileOp* o : ops_)
    if (o->kind == OpKind::Store) stored_.push_back(o);
  for (const TileOp* o : ops_)
    if (!assign(*o))
      return fail(why_.empty() ? "`" + tile::to_string(*o) +
                                     "` fits no tensor-core layout (a scalar, a row, a row tile "
                                     "in fragments, or a dot operand in shared memory)"
                               : why_);
  for (const TileOp* o : ops_) order_[o] = static_cast<int>(order_.size());
  std::set<std::string> first_seen;
  for (SmemTile& t : tiles_) {
    if (t.stream_loop.empty()) continue;
    bool first = first_seen.insert(t.stream_loop).second;
    bool reissuable = t.last_use && loop_of_.at(t.last_use) == t.stream_loop;
    t.stages = first || !reissuable ? 2 : 1;
  }
  int64_t offset = 0;
  for (SmemTile& t : tiles_) {
    if (wgmma_) offset = (offset + 1023) / 1024 * 1024;  // a swizzle atom's boundary
    t.offset = offset;
    offset += t.stage_bytes() * t.stages;
  }
  for (SmemVector& w : vectors_) {
    w.offset = offset;
    offset += (w.reduce->type.shape[0] * 4 + 15) / 16 * 16;
  }
  for (const TileOp* o : ops_) {
    int mask = -1;
    if (o->kind != OpKind::Gather || o->type.dtype != DType::F32 || o->type.shape.size() != 2 ||
        o->type.shape[0] != rows_ || !diagonal_gather(o->result, &mask))
      continue;
    DiagonalTable& t = diagonal_tables_[o->result];
    t.mask = mask;
    t.entries = rows_ + o->type.shape[1] - 1;
    t.offset = offset;
    offset += (t.entries * 4 + 15) / 16 * 16;
    std::set<const TileOp*> checked;
    checked_gathers(o->result, &checked);
    for (const TileOp* gather : checked) {
      t.flags[gather] = offset;
      offset += (t.entries + 15) / 16 * 16;
    }
  }
  stage_element_tiles(offset);
  smem_total_ = offset;
  single_buffer_for_occupancy();
  copy_streams_by_tma();
  return true;
}

auto FragmentWriter::tma_copyable(const SmemTile& t) const -> bool {
  // A streamed f16 or bf16 dot operand of a wgmma kernel (an element tile's rows are padded for
  // the banks, a computed tile is written by the threads), all of whose rows the buffer supplies
  // (not zero-filled past a limit, not padded to the warps' rows), at most a box's 256.
  if (!wgmma_ || t.stream_loop.empty() || t.pitch != 0 || t.computed >= 0 || !t.load ||
      (t.dtype != DType::F16 && t.dtype != DType::BF16) || t.row_limit || t.live_rows != t.rows ||
      t.rows > 256 || t.rows % 8 != 0)
    return false;
  // One box of a 2- to 4-dimensional buffer: its rows along one dimension, its columns along the
  // innermost, whose rows are a constant multiple of 16 bytes (TMA's strides).
  const TileOp& o = *t.load;
  const size_t rank = o.starts.size();
  if (rank < 2 || rank > 4 || o.axis_of_dim[rank - 1] != 1 ||
      std::count(o.axis_of_dim.begin(), o.axis_of_dim.end(), 0) != 1 ||
      std::count(o.axis_of_dim.begin(), o.axis_of_dim.end(), 1) != 1)
    return false;
  std::optional<double> inner = constant_expr(p_.source.find_buffer(o.buffer)->shape[rank - 1]);
  if (!inner || static_cast<int64_t>(*inner) * 2 % 16 != 0) return false;
  // A box lands at the swizzle's repeat: 8 rows of the atom.
  const int64_t repeat = 8 * row_bytes(t);
  return t.offset % repeat == 0 && t.stage_bytes() % repeat == 0 && block_bytes(t) % repeat == 0;
}

auto FragmentWriter::copy_streams_by_tma() -> void {
  std::vector<size_t> chosen;
  int64_t at = (smem_total_ + 7) / 8 * 8, bytes = 0;
  for (size_t i = 0; i < tiles_.size(); ++i)
    if (tma_copyable(tiles_[i]) && chosen.size() < static_cast<size_t>(kMaxTensorMaps)) {
      chosen.push_back(i);
      bytes += 8 * tiles_[i].stages;
    }
  if (chosen.empty() || blocks_for(at + bytes) < blocks_for(smem_total_)) return;
  for (size_t i : chosen) {
    SmemTile& t = tiles_[i];
    const TileOp& o = *t.load;
    TensorMapUse use;
    for (size_t b = 0; b < p_.source.buffers.size(); ++b)
      if (p_.source.buffers[b].name == o.buffer) use.buffer = b;
    for (size_t d = o.starts.size(); d-- > 0;)
      use.box.push_back(o.axis_of_dim[d] == 1   ? static_cast<uint32_t>(block_cols(t))
                        : o.axis_of_dim[d] == 0 ? static_cast<uint32_t>(t.rows)
                                                : 1u);
    use.swizzle_bytes = static_cast<int>(row_bytes(t));
    t.tensor_map = static_cast<int>(tensor_maps_.size());
    tensor_maps_.push_back(std::move(use));
    t.barriers = at;
    at += 8 * t.stages;
  }
  smem_total_ = at;
}

auto FragmentWriter::single_buffer_for_occupancy() -> void {
  // A second stage of a loop's streamed tile lets its next copy start a whole iteration early; a
  // second CTA on the SM hides the copies too and overlaps its exps and barriers with the
  // other's dots. Where second stages keep a CTA off the SM (a mask or bias tile staged beside Q,
  // K and V at 64 x 128 wgmma tiles: 132 KB with a bool mask, one CTA an SM, 100 KB without K's
  // second stage), the fewest tiles that free it, in the loop's order (K first), get one stage,
  // each next copy issued after the tile's last use like the later ones. An f16 mask's tile
  // (17 KB, an element tile) needs its own second stage dropped as well as K's. Only for wgmma's
  // tiles, where it was measured: on the mma.sync decode kernels it freed a CTA and ptxas spilled
  // 24 bytes a thread (grouped decode, 8 heads a group, head size 128).
  if (!wgmma_) return;
  std::vector<size_t> chosen;
  int64_t freed = 0;
  std::vector<const TileOp*> last_uses(tiles_.size());
  for (size_t i = 0; i < tiles_.size(); ++i) {
    const SmemTile& t = tiles_[i];
    // (An element tile's last use is its last reader: a mask's select.)
    last_uses[i] = t.element_bytes != 0 ? last_reader(*t.load) : t.last_use;
    if (t.stream_loop.empty() || t.stages != 2 || t.computed >= 0 || !last_uses[i] ||
        loop_of_.at(last_uses[i]) != t.stream_loop)
      continue;
    // Later offsets move down by whole swizzle atoms (they start at 1024-byte boundaries).
    int64_t bytes = t.stage_bytes() / 1024 * 1024;
    if (bytes == 0) continue;
    chosen.push_back(i);
    freed += bytes;
    if (blocks_for(smem_total_ - freed) > blocks_for(smem_total_)) break;
  }
  if (chosen.empty() || blocks_for(smem_total_ - freed) <= blocks_for(smem_total_)) return;
  for (size_t i : chosen) {
    SmemTile& t = tiles_[i];
    const int64_t bytes = t.stage_bytes() / 1024 * 1024, end = t.offset + t.stage_bytes();
    t.stages = 1;
    t.last_use = last_uses[i];
    auto move = [&](int64_t& offset) {
      if (offset >= end) offset -= bytes;
    };
    for (SmemTile& other : tiles_) move(other.offset);
    for (SmemVector& w : vectors_) move(w.offset);
    for (auto& [id, table] : diagonal_tables_) {
      move(table.offset);
      for (auto& [gather, offset] : table.flags) move(offset);
    }
    smem_total_ -= bytes;
  }
}

auto FragmentWriter::element_stageable(const TileOp& o) const -> bool {
  if (o.type.shape.size() != 2 || o.stream_loop.empty() || loop_of_.at(&o) != o.stream_loop)
    return false;
  const bool transposed = o.type.shape[0] != rows_ && o.type.shape[1] == rows_ &&
                          users_.count(o.result) && users_.at(o.result).size() == 1 &&
                          users_.at(o.result)[0]->kind == OpKind::Permute;
  if (o.type.shape[0] != rows_ && !transposed) return false;
  int64_t bytes = dtype_bytes(buffer_dtype(o.buffer));
  if (bytes > 16 || 16 % bytes != 0 || !innermost_chunks(o, 16 / bytes)) return false;
  const int row_axis = transposed ? 1 : 0;
  bool has_rows =
      std::find(o.axis_of_dim.begin(), o.axis_of_dim.end(), row_axis) != o.axis_of_dim.end();
  return has_rows && o.type.shape[0] * (o.type.shape[1] * bytes / 16) % threads() == 0;
}

auto FragmentWriter::stage_element_tiles(int64_t& offset) -> void {
  for (const TileOp* o : element_loads_) {
    SmemTile t;
    t.load = o;
    t.dtype = buffer_dtype(o->buffer);
    t.rows = t.live_rows = o->type.shape[0];
    t.cols = o->type.shape[1];
    t.stream_loop = o->stream_loop;
    t.element_bytes = dtype_bytes(t.dtype);
    int64_t unit = std::max<int64_t>(16, 8 * t.element_bytes);
    int64_t units = (t.cols * t.element_bytes + unit - 1) / unit;
    t.pitch = (units | 1) * unit;
    const TileOp* reader = last_reader(*o);
    t.stages = 2;
    if (blocks_for(offset + 2 * t.stage_bytes()) < blocks_for(offset) && reader &&
        blocks_for(offset + t.stage_bytes()) == blocks_for(offset)) {
      t.stages = 1;
      t.last_use = reader;
    }
    if (offset + t.stages * t.stage_bytes() > target_.max_shared_bytes()) continue;
    t.offset = offset;
    offset += t.stages * t.stage_bytes();
    val(o->result).tile = static_cast<int>(tiles_.size());
    tiles_.push_back(t);
  }
}

auto FragmentWriter::last_reader(const TileOp& o) const -> const TileOp* {
  const TileOp* last = nullptr;
  bool nested = false;
  std::function<bool(int)> reads = [&](int id) {
    const Val& v = val(id);
    if (id == o.result) return true;
    if (v.kind != Kind::Lazy || !v.def) return false;
    return std::any_of(v.def->args.begin(), v.def->args.end(), reads);
  };
  std::function<void(const tile::TileBody&, bool)> scan = [&](const tile::TileBody& b, bool top) {
    for (const tile::TileStmt& st : b) {
      if (st.kind == tile::StmtKind::For) {
        scan(st.body, false);
        continue;
      }
      // (A Lazy value is read where it is used, but a Lazy reduction writes its vector where it
      // stands.)
      const TileOp& x = st.op;
      if (x.result >= 0 && val(x.result).kind == Kind::Lazy && x.kind != OpKind::Reduce) continue;
      if (!std::any_of(x.args.begin(), x.args.end(), reads)) continue;
      if (top)
        last = &x;
      else
        nested = true;
    }
  };
  std::function<const tile::TileBody*(const tile::TileBody&)> body_of =
      [&](const tile::TileBody& b) -> const tile::TileBody* {
    for (const tile::TileStmt& st : b)
      if (st.kind == tile::StmtKind::For) {
        if (st.var == o.stream_loop) return &st.body;
        if (const tile::TileBody* inner = body_of(st.body)) return inner;
      }
    return nullptr;
  };
  const tile::TileBody* loop = body_of(k_.body);
  if (!loop) return nullptr;
  scan(*loop, true);
  return nested ? nullptr : last;
}

auto FragmentWriter::has_tensor_core_dot() const -> bool {
  constexpr DType kTypes[] = {DType::F16, DType::BF16, DType::I8};
  std::vector<std::array<bool, 3>> exact(static_cast<size_t>(k_.num_values));
  auto at = [&](int id) -> std::array<bool, 3>& { return exact[static_cast<size_t>(id)]; };
  bool found = false;
  for (const TileOp* o : ops_) {
    for (size_t t = 0; t < 3; ++t) {
      if (o->kind == OpKind::Dot) found = found || (at(o->args[0])[t] && at(o->args[1])[t]);
      if (o->result >= 0)
        at(o->result)[t] = holds_values_of(kTypes[t], *o, [&](int id) { return at(id)[t]; });
    }
  }
  return found;
}

auto FragmentWriter::fail(const std::string& why) -> bool {
  why_ = why;
  return false;
}

auto FragmentWriter::collect(const tile::TileBody& b, const std::string& loop) -> void {
  for (const tile::TileStmt& s : b) {
    if (s.kind == tile::StmtKind::For) {
      collect(s.body, s.var);
      continue;
    }
    ops_.push_back(&s.op);
    loop_of_[&s.op] = loop;
    if (s.op.result >= 0) vals_[static_cast<size_t>(s.op.result)].def = &s.op;
    for (int a : s.op.args) users_[a].push_back(&s.op);
  }
}

auto FragmentWriter::feeds_only_dots(int id) const -> bool {
  auto it = users_.find(id);
  if (it == users_.end()) return false;
  for (const TileOp* u : it->second) {
    if (u->kind == OpKind::Dot) continue;
    bool view = (u->kind == OpKind::Cast && widens_exactly(*u)) ||
                (u->kind == OpKind::Permute && u->perm == std::vector<int>{1, 0}) ||
                (u->args.size() == 3 && u->args[1] == id && row_limited(*u));
    if (!view || !feeds_only_dots(u->result)) return false;
  }
  return true;
}

auto FragmentWriter::row_limited(const TileOp& o) const
    -> std::optional<std::pair<ir::Expr, ir::Expr>> {
  if (o.kind != OpKind::Map || o.is_call || o.op != Op::Select || o.type.shape.size() != 2)
    return std::nullopt;
  const TileOp& zero = *val(o.args[2]).def;
  const TileOp* mask = val(o.args[0]).def;
  if (zero.kind != OpKind::Full || !zero.type.shape.empty() || zero.scalar->op != Op::FloatImm ||
      zero.scalar->float_value != 0.0 || mask->kind != OpKind::Broadcast ||
      mask->dims != std::vector<int>{0})
    return std::nullopt;
  const TileOp& lt = *val(mask->args[0]).def;
  if (lt.kind != OpKind::Map || lt.is_call || lt.op != Op::Lt) return std::nullopt;
  const TileOp &rows = *val(lt.args[0]).def, &limit = *val(lt.args[1]).def;
  if (rows.kind != OpKind::Arange || limit.kind != OpKind::Full || !limit.type.shape.empty())
    return std::nullopt;
  return std::make_pair(rows.scalar, limit.scalar);
}

auto FragmentWriter::widens_exactly(const TileOp& o) const -> bool {
  const DType from = val(o.args[0]).def->type.dtype, to = o.type.dtype;
  if (from == DType::I8) return is_int(to);
  return (from == DType::F16 || from == DType::BF16) && to == DType::F32;
}

auto FragmentWriter::k_columns(const TileOp& dot) const -> int64_t {
  const int64_t k = val(dot.args[0]).def->type.shape[1];
  return is_int(dot.type.dtype) ? k / 2 : k;  // an integer dot runs on int8 tiles (plan_dot)
}

auto FragmentWriter::reaches_b_operand(int id) const -> bool {
  auto it = users_.find(id);
  if (it == users_.end()) return false;
  for (const TileOp* u : it->second) {
    if (u->kind == OpKind::Dot) {
      if (u->args[1] == id) return true;
      continue;
    }
    if ((u->kind == OpKind::Map || u->kind == OpKind::Cast || u->kind == OpKind::Permute) &&
        reaches_b_operand(u->result))
      return true;
  }
  return false;
}

auto FragmentWriter::spread_along_columns(int id) const -> bool {
  auto it = users_.find(id);
  if (it == users_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(), [&](const TileOp* u) {
    return (u->kind == OpKind::Broadcast && u->dims == std::vector<int>{1}) ||
           (u->kind == OpKind::Cast && spread_along_columns(u->result));
  });
}

auto FragmentWriter::stageable(const TileOp& o) const -> bool {
  if ((o.type.dtype != DType::F16 && o.type.dtype != DType::BF16 && o.type.dtype != DType::I8) ||
      o.type.shape.size() != 2)
    return false;
  const int64_t bytes = dtype_bytes(o.type.dtype);
  if (buffer_dtype(o.buffer) != o.type.dtype || !innermost_chunks(o, 16 / bytes)) return false;
  int64_t rows = smem_rows(o.type.shape[0]), cols = o.type.shape[1] * bytes / 2;
  // Whole 16-byte chunks a row, an even number of them (ldmatrix reads two), split evenly over
  // the threads.
  int64_t cpr = cols / 8, threads = this->threads();
  return rows % 16 == 0 && cols % 16 == 0 && rows * cpr % threads == 0;
}

auto FragmentWriter::assign(const TileOp& o) -> bool {
  if (o.kind == OpKind::Store) {
    const Val& v = val(o.args[0]);
    return v.kind != Kind::Smem && data_shape(o.type.shape) &&
           (o.args.size() < 2 || val(o.args[1]).kind != Kind::Smem);
  }
  if (o.kind == OpKind::Write) return val(o.args[0]).kind != Kind::Smem;
  Val& v = val(o.result);
  v.name = "t" + std::to_string(o.result);
  v.exact_f16 = holds_values_of(DType::F16, o, [&](int id) { return val(id).exact_f16; });
  v.exact_bf16 = holds_values_of(DType::BF16, o, [&](int id) { return val(id).exact_bf16; });
  v.exact_i8 = holds_values_of(DType::I8, o, [&](int id) { return val(id).exact_i8; });
  auto kind_of = [&](int id) { return val(id).kind; };
  switch (o.kind) {
    case OpKind::Full:
    case OpKind::Arange:
      v.kind = o.type.shape.empty() ? Kind::Uniform : Kind::Lazy;
      return true;
    case OpKind::Read:
      v.kind = data_kind(o.type.shape);
      v.name = ident("r", o.buffer);  // reads alias the register (no use follows a write)
      return true;
    case OpKind::Load: {
      // A buffer this kernel stores is read back only where each thread stored what it
      // reads: a row tile or a row at the region of every store to it (the layout maps each
      // element to one thread, or a row to the four lanes of a quad, which all store it then;
      // a tail row the stores skipped reads 0, as the region says).
      bool stored_here = false, read_back = data_kind(o.type.shape) == Kind::Frag ||
                                            data_kind(o.type.shape) == Kind::Row;
      for (const TileOp* st : stored_)
        if (st->buffer == o.buffer) {
          stored_here = true;
          read_back = read_back && tile::same_region(*st, o);
        }
      if (stored_here && !read_back) return false;
      if (!stored_here && o.type.shape.size() == 2 && feeds_only_dots(o.result)) {
        if (!stageable(o)) {
          // Rows that are no whole aligned 16-byte chunks (values stored key-major, V^T, whose
          // rows of T keys start off 16-byte boundaries): read element by element into a
          // computed tile in front of the dot (stage_computed_operand), not copied by cp.async.
          if (!innermost_chunks(o, 8) &&
              (o.type.dtype == DType::F16 || o.type.dtype == DType::BF16) &&
              buffer_dtype(o.buffer) == o.type.dtype) {
            v.kind = Kind::Lazy;
            return true;
          }
          return fail("the dot operand `" + tile::to_string(o) +
                      "` is not an f16, bf16 or int8 tile of whole 16-byte rows of its buffer's "
                      "innermost dimension (16-row and 16-column multiples)");
        }
        SmemTile t;
        t.load = &o;
        t.dtype = o.type.dtype;
        t.rows = smem_rows(o.type.shape[0]);
        t.live_rows = o.type.shape[0];
        t.cols = o.type.shape[1] * dtype_bytes(o.type.dtype) / 2;
        if (!o.stream_loop.empty() && loop_of_.at(&o) == o.stream_loop) {
          t.stream_loop = o.stream_loop;
        }
        v.kind = Kind::Smem;
        v.tile = static_cast<int>(tiles_.size());
        tiles_.push_back(t);
        return true;
      }
      // A tile that reaches the B operand of a dot through elementwise operations and a
      // transpose holds keys, not rows, whatever its shape (a key tile as long as the row
      // tile): read at its uses, for the computed B operand.
      v.kind = reaches_b_operand(o.result) ? Kind::Lazy : data_kind(o.type.shape);
      // A vector as long as the row tile that is spread along the columns (a per-column weight
      // at a head size equal to the row tile) runs along another axis than the rows (below).
      if (v.kind == Kind::Row && spread_along_columns(o.result)) v.kind = Kind::None;
      // A fragment of a buffer this kernel does not write, used once (a bias added to the
      // scores), is read at its use: the same loads, without a register tile live across
      // the operations in between.
      if (v.kind == Kind::Frag && !stored_here && users_.count(o.result) &&
          users_.at(o.result).size() == 1) {
        v.kind = Kind::Lazy;
        if (element_stageable(o)) element_loads_.push_back(&o);
      }
      // A vector along another axis than the rows (a per-key bias or norm, a per-column
      // weight) is read element by element where it is used, from its region (L1-cached).
      // So is a 2-D tile of other rows (keys that a computed B operand transforms).
      if (v.kind == Kind::None && o.type.shape.size() <= 2) {
        v.kind = Kind::Lazy;
        if (!stored_here && element_stageable(o)) element_loads_.push_back(&o);
      }
      return v.kind != Kind::None;
    }
    case OpKind::Cast: {
      const Val& a = val(o.args[0]);
      if (a.kind == Kind::Smem) {
        v = view_of(a, o, a.transposed);
        return widens_exactly(o);
      }
      v.kind = a.kind == Kind::RowBcast ? Kind::Frag : a.kind;
      return true;
    }
    case OpKind::Permute: {
      const Val& a = val(o.args[0]);
      if (a.kind == Kind::Smem) {
        v = view_of(a, o, !a.transposed);
        return true;
      }
      v.kind = Kind::Lazy;
      return a.kind == Kind::Lazy || a.kind == Kind::Uniform;
    }
    case OpKind::Broadcast: {
      Kind a = kind_of(o.args[0]);
      if (a == Kind::Uniform || a == Kind::Lazy) {
        v.kind = Kind::Lazy;
        return true;
      }
      v.kind = Kind::RowBcast;
      v.row_source = o.args[0];
      return a == Kind::Row && o.dims == std::vector<int>{0} && is_frag_shape(o.type.shape);
    }
    case OpKind::Map: {
      // A staged tile read with its rows past a limit set to 0: the copy zero-fills them.
      if (auto limited = row_limited(o); limited && kind_of(o.args[1]) == Kind::Smem) {
        const Val& a = val(o.args[1]);
        SmemTile& t = tiles_[static_cast<size_t>(a.tile)];
        if (a.transposed || t.computed >= 0 || t.pitch > 0 || t.row_limit) return false;
        t.row_limit_first = limited->first;
        t.row_limit = limited->second;
        v = view_of(a, o, false);
        return true;
      }
      bool index_only = true;
      for (int a : o.args) {
        Kind k = kind_of(a);
        if (k == Kind::Smem) return false;
        index_only = index_only && (k == Kind::Uniform || k == Kind::Lazy);
      }
      if (index_only) {
        v.kind = o.type.shape.empty() ? Kind::Uniform : Kind::Lazy;
        return true;
      }
      v.kind = data_kind(o.type.shape);
      return v.kind == Kind::Frag || v.kind == Kind::Row;
    }
    case OpKind::Reduce: {
      Kind a = kind_of(o.args[0]);
      if (a == Kind::Lazy && o.type.shape.size() == 1 && o.type.dtype == DType::F32) {
        v.kind = Kind::Lazy;
        v.vector = static_cast<int>(vectors_.size());
        vectors_.push_back(SmemVector{&o});
        return true;
      }
      v.kind = Kind::Row;
      return (a == Kind::Frag || a == Kind::RowBcast) && o.axis == 1;
    }
    case OpKind::Dot:
      v.kind = Kind::Frag;
      return plan_dot(o);
    case OpKind::Gather:
      // Indices computable at each element (a bucket of the relative position): the element
      // is looked up where it is used.
      v.kind = Kind::Lazy;
      return std::all_of(o.args.begin(), o.args.end(), [&](int a) {
        return kind_of(a) == Kind::Lazy || kind_of(a) == Kind::Uniform;
      });
    default:
      return false;
  }
}

auto FragmentWriter::view_of(const Val& a, const TileOp& o, bool transposed) const -> Val {
  Val v = a;
  v.def = &o;
  v.name = "t" + std::to_string(o.result);
  v.transposed = transposed;
  return v;
}

auto FragmentWriter::dot_dtype(const TileOp& o) const -> DType {
  return tiles_[static_cast<size_t>(val(o.args[1]).tile)].dtype;
}

auto FragmentWriter::plan_dot(const TileOp& o) -> bool {
  Val& a = val(o.args[0]);
  const Val& b = val(o.args[1]);
  int64_t K = val(o.args[0]).def->type.shape[1], N = o.type.shape[1];
  if (K % 16 != 0 || N % 16 != 0)
    return fail("the dot `" + tile::to_string(o) + "` has K = " + std::to_string(K) +
                " and N = " + std::to_string(N) + ", not multiples of 16");
  if (is_int(o.type.dtype)) {
    // The int8 tensor cores (m16n8k32, wgmma k32) read both operands K-major from shared
    // memory: A as rows of the row tile, B as its rows of N (keys, a transposed view), K a
    // multiple of 32. Their i32 sums are exact: at most 2^14 K < 2^31 for a tile's K.
    if (!a.exact_i8 || !b.exact_i8 || a.kind != Kind::Smem || b.kind != Kind::Smem ||
        a.transposed || !b.transposed || K % 32 != 0)
      return fail("the integer dot `" + tile::to_string(o) +
                  "` is not of two int8 tiles loaded from memory with K (a multiple of 32) "
                  "innermost in both, as the int8 tensor cores read them");
  }
  if (b.kind != Kind::Smem && !stage_computed_operand(o, 1))
    return fail("the B operand of the dot `" + tile::to_string(o) +
                "` is neither an f16 or bf16 tile loaded from memory nor an f16 or bf16 tile "
                "computed from loads and indices (of 16-row and 16-column multiples)");
  tiles_[static_cast<size_t>(b.tile)].last_use = &o;
  DType half = dot_dtype(o);
  if (a.kind == Kind::Lazy) stage_computed_operand(o, 0);
  if (a.kind == Kind::Smem) {
    SmemTile& t = tiles_[static_cast<size_t>(a.tile)];
    if (a.transposed || t.rows != warp_rows() || t.dtype != half)
      return fail("the A operand of the dot `" + tile::to_string(o) +
                  "` is a shared tile that is transposed, not of the row tile, or "
                  "not of B's type");
    t.last_use = &o;
    return true;
  }
  if (a.kind != Kind::Frag || half == DType::I8 ||
      !(half == DType::F16 ? a.exact_f16 : a.exact_bf16))
    return fail("the A operand of the dot `" + tile::to_string(o) +
                "` is computed in registers and not exactly a " + dtype_name(half) +
                " value (round it with a cast, as " + dtype_name(half) + "(p))");
  return true;
}

auto FragmentWriter::stage_computed_operand(const TileOp& o, int operand) -> bool {
  int id = o.args[static_cast<size_t>(operand)];
  if (val(id).kind != Kind::Lazy || !feeds_only_dots(id)) return false;
  int root = id;
  bool transposed = false;
  for (;;) {
    const TileOp& d = *val(root).def;
    if (d.kind == OpKind::Permute && d.perm == std::vector<int>{1, 0}) {
      transposed = !transposed;
    } else if (!(d.kind == OpKind::Cast && d.type.dtype == DType::F32 &&
                 val(d.args[0]).def->type.dtype != DType::F32)) {
      break;
    }
    root = d.args[0];
  }
  // The root holds f16 or bf16 values: of that type, or f32 values each exactly one (a
  // rounded tile with its masked rows selected to 0, as a split-K chunk reads its rows).
  const TileOp& r = *val(root).def;
  // (The A operand takes B's type where it holds values of both.)
  const bool f16 = val(root).exact_f16, bf16 = val(root).exact_bf16;
  const DType half = r.type.dtype != DType::F32    ? r.type.dtype
                     : operand == 0 && f16 && bf16 ? dot_dtype(o)
                     : f16                         ? DType::F16
                     : bf16                        ? DType::BF16
                                                   : DType::F32;
  if (val(root).kind != Kind::Lazy || r.type.shape.size() != 2 ||
      (half != DType::F16 && half != DType::BF16) || r.type.shape[0] % 16 != 0 ||
      r.type.shape[1] % 16 != 0)
    return false;
  SmemTile t;
  t.computed = root;
  t.dtype = half;
  t.rows = t.live_rows = r.type.shape[0];
  t.cols = r.type.shape[1];
  if (operand == 0) t.written_at = id;
  Val& v = val(id);
  v.kind = Kind::Smem;
  v.tile = static_cast<int>(tiles_.size());
  v.transposed = transposed;
  tiles_.push_back(t);
  return true;
}

auto FragmentWriter::blocks_for(int64_t shared_bytes) const -> int {
  // wgmma's accumulators are whole (no column blocks): a 64 x 128 output and a 64 x 64 score
  // tile alone take 96 registers a thread.
  int per_thread = mblocks_ == 1 && !wgmma_ ? 168 : 255;
  int64_t by_registers = std::max(1, 65536 / (threads() * per_thread));
  return static_cast<int>(std::clamp<int64_t>(228 * 1024 / (shared_bytes + 1024), 1, by_registers));
}

}  // namespace kintsugi::cuda::fragment
