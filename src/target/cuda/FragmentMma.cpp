// \file FragmentMma.cpp
// The tensor-core writer's MMA atoms: mma.sync m16n8k16 on the accumulator layout of Fragments.h,
// A fragments packed from an accumulator or loaded by ldmatrix, B fragments by ldmatrix from a
// staged tile, column-blocked for register pressure, accumulating onto an addend; and on sm_90a
// wgmma m64nNk16 on the same layout (a warpgroup's four warps hold its 64 rows as four m16
// blocks), A packed the same way (the RS form) or read from a staged tile like B, through
// swizzled descriptors.
//
// Invariant established: a dot region computes the dot of the tile IR (and the slot-local
// operations after it) exactly as the mma instruction rounds it.
#include "target/cuda/FragmentWriter.h"

namespace kintsugi::cuda::fragment {

auto FragmentWriter::accumulation(const tile::TileBody& b, size_t first, size_t last)
    -> std::optional<Accumulation> {
  const TileOp& dot = b[first].op;
  if (val(dot.args[0]).kind != Kind::Frag || is_int(dot.type.dtype)) return std::nullopt;
  std::map<const TileOp*, size_t> at_index;
  for (size_t i = first + 1; i < last; ++i) at_index[&b[i].op] = i;
  Accumulation acc;
  acc.keep.assign(static_cast<size_t>(2 * mblocks_), "true");
  for (int cur = dot.result;;) {
    auto users = users_.find(cur);
    if (users == users_.end() || users->second.size() != 1 || !at_index.count(users->second[0]))
      return std::nullopt;
    const TileOp& u = *users->second[0];
    if (u.kind != OpKind::Map || u.is_call) return std::nullopt;
    acc.folded.insert(&u);
    if (u.op == Op::Add) {
      acc.sum = u.result;
      acc.addend = u.args[0] == cur ? u.args[1] : u.args[0];
      if (val(acc.addend).kind != Kind::Frag) return std::nullopt;
      return acc;
    }
    if (u.op != Op::Select) return std::nullopt;
    bool kept_when_true = u.args[1] == cur;
    if (constant_value(kept_when_true ? u.args[2] : u.args[1]) != 0.0) return std::nullopt;
    const Val& c = val(u.args[0]);
    for (size_t h = 0; h < acc.keep.size(); ++h) {
      std::string cond;
      if (c.kind == Kind::Uniform)
        cond = c.name;
      else if (c.kind == Kind::RowBcast)
        cond = val(c.row_source).name + "[" + std::to_string(h) + "]";
      else if (known_true(u.args[0]) && kept_when_true)
        continue;
      else
        return std::nullopt;
      acc.keep[h] += std::string(" && ") + (kept_when_true ? "" : "!") + cond;
    }
    cur = u.result;
  }
}

auto FragmentWriter::dot_region(const tile::TileBody& b, size_t first, size_t last) -> void {
  const TileOp& o = b[first].op;
  const Val& a = val(o.args[0]);
  const Val& bv = val(o.args[1]);
  const SmemTile& bt = tiles_[static_cast<size_t>(bv.tile)];
  int64_t K = k_columns(o), N = o.type.shape[1];
  if (bt.computed >= 0) write_computed_tile(bt);
  for (size_t i = first + 1; i < last; ++i) {
    const TileOp& c = b[i].op;
    if (c.result >= 0 && c.kind != OpKind::Read && hoistable(val(c.result).kind)) op(c);
  }
  std::optional<Accumulation> acc = accumulation(b, first, last);
  // The operations computing the addend run in front of the mma of their block; the rest after.
  std::set<const TileOp*> before;
  if (acc) {
    std::set<int> needed = {acc->addend};
    for (size_t i = last - 1; i > first; --i) {
      const TileOp& c = b[i].op;
      if (c.result < 0 || !needed.count(c.result)) continue;
      before.insert(&c);
      needed.insert(c.args.begin(), c.args.end());
    }
  } else {
    line(frag_decl(bt.dtype == DType::I8 ? "int" : "float", val(o.result).name, N) + " = {};");
  }
  const std::string& sum = val(acc ? acc->sum : o.result).name;
  for (size_t i = first + 1; i < last; ++i) {
    const TileOp& c = b[i].op;
    if (c.result >= 0 && val(c.result).kind == Kind::Frag && c.kind != OpKind::Read &&
        !(acc && acc->folded.count(&c) && c.result != acc->sum))
      declare(val(c.result), c.type);
  }
  line("{");
  ++indent_;
  line("const u32 ks_b = " + stage_address(bt, stage_of(bt)) + ";");
  if (a.kind == Kind::Frag) {
    // The accumulator of columns [16 kk, 16 kk + 16) is the A fragment of k-step kk; the
    // packing rounds to the dot's type itself, so a round trip through it in front is skipped.
    const std::string& src = val(unrounded(o.args[0], bt.dtype)).name;
    bool zeroing = acc && std::any_of(acc->keep.begin(), acc->keep.end(),
                                      [](const std::string& k) { return k != "true"; });
    if (zeroing) {
      std::string keeps;
      for (size_t h = 0; h < acc->keep.size(); ++h)
        keeps += (h ? ", ks_keep" : "ks_keep") + std::to_string(h) + " = " + acc->keep[h];
      line("const bool " + keeps + ";");
    }
    // A dropped row's pairs are zeroed packed: one select a pair, not one an element.
    auto pair = [&](const std::string& block, const std::string& s, int h) {
      std::string e = src + "[" + block + "][" + s;
      std::string packed = std::string(bt.dtype == DType::F16 ? "pack_f16x2(" : "pack_bf16x2(") +
                           e + "], " + e + " + 1])";
      return zeroing ? "(ks_keep" + std::to_string(h) + " ? " + packed + " : 0u)" : packed;
    };
    line("u32 ks_pa[" + std::to_string(mblocks_ * K / 16) + "][4];");
    line("#pragma unroll");
    line("for (int ks_kk = 0; ks_kk < " + std::to_string(K / 16) + "; ++ks_kk) {");
    ++indent_;
    for (int m = 0; m < mblocks_; ++m) {
      std::string pa = "ks_pa[" + mblock("ks_kk", m) + "]";
      std::string lo = mblock("2 * ks_kk", m), hi = mblock("2 * ks_kk + 1", m);
      line(pa + "[0] = " + pair(lo, "0", 2 * m) + ";");
      line(pa + "[1] = " + pair(lo, "2", 2 * m + 1) + ";");
      line(pa + "[2] = " + pair(hi, "0", 2 * m) + ";");
      line(pa + "[3] = " + pair(hi, "2", 2 * m + 1) + ";");
    }
    --indent_;
    line("}");
  }
  // Column-blocked when the whole accumulator would take more than 32 registers a thread and
  // the region consumes it; otherwise k-steps outermost, so that consecutive mma.sync write
  // independent accumulators.
  bool blocked = !wgmma_ && N / 2 > 32 && last > first + 1;
  std::string block_slots = std::to_string(8 * mblocks_);
  std::string from = blocked ? "ks_np * " + block_slots : "0",
              to = blocked ? "ks_np * " + block_slots + " + " + block_slots : "";
  auto slots = [&](bool in_front) {
    for (size_t i = first + 1; i < last; ++i) {
      const TileOp& c = b[i].op;
      if (before.count(&c) != in_front || (acc && acc->folded.count(&c))) continue;
      if (c.kind == OpKind::Write || (c.result >= 0 && val(c.result).kind == Kind::Frag))
        frag_slots(c, from, to);
    }
  };
  if (wgmma_) {
    // The accumulator whole, one instruction a k-step for its 64 x N block, the addend copied
    // into it first.
    if (acc) {
      slots(true);
      open_slots(Kind::Frag, N, "0", "");
      line(slot(val(acc->sum)) + " = " + at(acc->addend, Kind::Frag) + ";");
      close_slots();
    }
    wgmma_dot(o, a, bv, sum);
    slots(false);
    --indent_;
    line("}");
    return;
  }
  std::string ksteps = std::to_string(K / 16), npairs = std::to_string(N / 16);
  if (blocked) {
    line("#pragma unroll");
    line("for (int ks_np = 0; ks_np < " + npairs + "; ++ks_np) {");
    ++indent_;
  }
  if (acc) {
    slots(true);
    open_slots(Kind::Frag, N, from, to);
    line(slot(val(acc->sum)) + " = " + at(acc->addend, Kind::Frag) + ";");
    close_slots();
  }
  line("#pragma unroll");
  line("for (int ks_kk = 0; ks_kk < " + ksteps + "; ++ks_kk) {");
  ++indent_;
  a_fragment(a);
  if (!blocked) {
    line("#pragma unroll");
    line("for (int ks_np = 0; ks_np < " + npairs + "; ++ks_np) {");
    ++indent_;
  }
  line("u32 ks_bq[4];");
  if (bv.transposed)  // B[k][n] = tile[n][k]: block rows n, chunks k; no transpose
    line("ldmatrix_x4(ks_bq, " +
         ldmatrix_address(bv.tile, Access::B, "ks_b", "ks_np * 16", "2 * ks_kk") + ");");
  else  // B[k][n] = tile[k][n]: block rows k, chunks n; .trans
    line("ldmatrix_x4_trans(ks_bq, " +
         ldmatrix_address(bv.tile, Access::BTrans, "ks_b", "ks_kk * 16", "2 * ks_np") + ");");
  line("const u32 ks_b0[2] = {ks_bq[0], ks_bq[1]}, ks_b1[2] = {ks_bq[2], ks_bq[3]};");
  std::string mma = bt.dtype == DType::F16    ? "mma_m16n8k16_f16("
                    : bt.dtype == DType::BF16 ? "mma_m16n8k16_bf16("
                                              : "mma_m16n8k32_s8(";
  for (int m = 0; m < mblocks_; ++m) {
    line(mma + sum + "[" + mblock("2 * ks_np", m) + "], " + a_name(m) + ", ks_b0);");
    line(mma + sum + "[" + mblock("2 * ks_np + 1", m) + "], " + a_name(m) + ", ks_b1);");
  }
  if (!blocked) {
    --indent_;
    line("}");
  }
  --indent_;
  line("}");
  slots(false);
  if (blocked) {
    --indent_;
    line("}");
  }
  --indent_;
  line("}");
}

auto FragmentWriter::unrounded(int id, DType half) const -> int {
  const TileOp& d = *val(id).def;
  if (d.kind == OpKind::Map && !d.is_call && d.op == Op::Select && known_true(d.args[0]))
    return unrounded(d.args[1], half);
  if (d.kind != OpKind::Cast || d.type.dtype != DType::F32) return id;
  const TileOp& inner = *val(d.args[0]).def;
  if (inner.kind != OpKind::Cast || inner.type.dtype != half) return id;
  int x = inner.args[0];
  return val(x).kind == Kind::Frag && val(x).def->type.dtype == DType::F32 ? x : id;
}

auto FragmentWriter::a_fragment(const Val& a) -> void {
  for (int m = 0; m < mblocks_; ++m) {
    if (a.kind == Kind::Frag) {
      line("const u32 (&" + a_name(m) + ")[4] = ks_pa[" + mblock("ks_kk", m) + "];");
      continue;
    }
    const SmemTile& t = tiles_[static_cast<size_t>(a.tile)];
    line("u32 " + a_name(m) + "[4];");
    line("ldmatrix_x4(" + a_name(m) + ", " +
         ldmatrix_address(a.tile, Access::A, stage_address(t, stage_of(t)), std::to_string(16 * m),
                          "2 * ks_kk") +
         ");");
  }
}

auto FragmentWriter::wgmma_shapes(std::string* why) const -> bool {
  for (const TileOp* o : ops_) {
    if (o->kind != OpKind::Dot) continue;
    const int64_t k = k_columns(*o), n = o->type.shape[1];
    // The device library's widths: multiples of 16 up to 256. A tile's row (K of a K-major
    // operand, M or N of an MN-major one) is whole swizzle atoms (block_cols), so K is any
    // multiple of 16, as the tile program's are (tile::pad_dot_extents).
    if (n % 16 != 0 || n > 256 || k % 16 != 0) {
      *why = "the dot `" + tile::to_string(*o) + "` has " + std::to_string(n) +
             " columns and sums over " + std::to_string(k) +
             "; wgmma is generated for multiples of 16, at most 256 columns";
      return false;
    }
  }
  return true;
}

auto FragmentWriter::descriptor(const SmemTile& t, bool mn_major, const std::string& base,
                                const std::string& row0) const -> std::string {
  const int64_t rb = row_bytes(t), block = block_bytes(t);
  // The swizzle of a row's width (smem_desc.cuh): the tile's XOR swizzle is that swizzle where
  // the tile starts on an atom (plan() aligns every tile to 1024 bytes).
  const char* mode = rb == 128 ? "kSwizzle128B" : rb == 64 ? "kSwizzle64B" : "kSwizzle32B";
  // K-major: row0 is a row (of M); MN-major: a column, whose column block is the start.
  std::string start =
      mn_major ? (column_blocked(t) ? "(" + row0 + ") / " + std::to_string(block_cols(t)) + " * " +
                                          std::to_string(block)
                                    : "0")
               : "(" + row0 + ") * " + std::to_string(rb);
  // The leading offset steps between column blocks along M or N (MN-major; unused K-major), the
  // stride offset between groups of 8 rows.
  return "smem_descriptor(" + base + " + (u32)(" + start + "), " +
         std::to_string(mn_major ? block : 16) + "u, " + std::to_string(8 * rb) + "u, " + mode +
         ")";
}

auto FragmentWriter::k_step_offset(const SmemTile& t, bool mn_major) const -> std::string {
  // K-major: 16 elements are 32 bytes along a row, a column block every block_cols / 16 steps
  // (4, 2 or 1); MN-major: 16 rows.
  const int64_t steps = block_cols(t) / 16;
  const std::string block = std::to_string(block_bytes(t));
  std::string bytes = mn_major             ? "ks_kk * " + std::to_string(16 * row_bytes(t))
                      : !column_blocked(t) ? "ks_kk * 32"
                      : steps == 1
                          ? "ks_kk * " + block
                          : "(ks_kk >> " + std::to_string(steps == 4 ? 2 : 1) + ") * " + block +
                                " + (ks_kk & " + std::to_string(steps - 1) + ") * 32";
  return "(u64)((" + bytes + ") >> 4)";
}

auto FragmentWriter::wgmma_dot(const TileOp& o, const Val& a, const Val& b, const std::string& sum)
    -> void {
  const SmemTile& bt = tiles_[static_cast<size_t>(b.tile)];
  const int64_t K = k_columns(o), N = o.type.shape[1];
  // B[k][n] = tile[n][k] (a transposed view) is K-major; the tile itself, rows of K, MN-major.
  const bool b_mn = !b.transposed;
  const std::string half = std::to_string(N / 2);
  // An int8 dot is k32 over the same 32 bytes of a row that an f16 one's k16 covers.
  const bool s8 = bt.dtype == DType::I8;
  const std::string fn = "wgmma_m64n" + std::to_string(N) +
                         (s8                       ? "k32_s8"
                          : bt.dtype == DType::F16 ? "k16_f16"
                                                   : "k16_bf16");
  const char* acc = s8 ? "int" : "float";
  line(std::string(acc) + " (&ks_d)[" + half + "] = *reinterpret_cast<" + acc + " (*)[" + half +
       "]>(&" + sum + "[0][0]);");
  line("const u64 ks_db = " + descriptor(bt, b_mn, "ks_b", "0") + ";");
  std::string a_operand;
  if (a.kind == Kind::Smem) {
    // The warpgroup's 64 rows of A.
    const SmemTile& at = tiles_[static_cast<size_t>(a.tile)];
    line("const u64 ks_da = " +
         descriptor(at, a.transposed, stage_address(at, stage_of(at)), "(ks_warp >> 2) * 64") +
         ";");
    // The integer forms read both operands K-major and take no transposes.
    a_operand =
        (s8 ? std::string("(")
            : "_ss<" + std::to_string(a.transposed ? 1 : 0) + ", " + (b_mn ? "1" : "0") + ">(") +
        "ks_d, ks_da + " + k_step_offset(at, a.transposed);
  } else {
    a_operand = std::string("_rs<") + (b_mn ? "1" : "0") + ">(ks_d, ks_pa[ks_kk]";
  }
  line("wgmma_fence();");
  line("#pragma unroll");
  line("for (int ks_kk = 0; ks_kk < " + std::to_string(K / 16) + "; ++ks_kk)");
  line("  " + fn + a_operand + ", ks_db + " + k_step_offset(bt, b_mn) + ", 1u);");
  line("wgmma_commit_group();");
  line("wgmma_wait_group<0>();");
}

}  // namespace kintsugi::cuda::fragment
