// \file FragmentStaging.cpp
// The tensor-core writer's operand stager: shared-memory tiles copied by cp.async (streamed,
// double-buffered, prefetched, zero-filled past a buffer's end) in the XOR swizzle of
// Fragments.h, element tiles, computed tiles written by the threads, and the ldmatrix addresses
// (per-lane offsets computed once).
//
// Invariant established: a staged tile is read only after its copy group completed and a barrier,
// and refilled only after a barrier that follows the last read of that stage.
#include "target/cuda/FragmentWriter.h"

namespace kintsugi::cuda::fragment {

auto FragmentWriter::write_computed_tile(const SmemTile& t) -> void {
  int64_t pairs = t.rows * t.cols / 2, row_pairs = t.cols / 2;
  std::string cols = std::to_string(t.cols);
  // Rows a thread computes an iteration: their loads are all issued before the first is used.
  int64_t group = 1, step = 0;
  line("__syncthreads();");
  line("{");
  ++indent_;
  if (threads() % row_pairs == 0) {
    // Each thread keeps its pair of columns and steps over rows, so that what depends on the
    // column alone (a column window's bounds, a select between the halves of a row, a weight
    // by column) is visibly the same every iteration and computed once, out of the loop.
    step = threads() / row_pairs;
    group = t.rows % (4 * step) == 0 ? 4 : 1;
    line("const int ks_c = 2 * (ks_tid % " + std::to_string(row_pairs) + ");");
    line("for (int ks_r = ks_tid / " + std::to_string(row_pairs) + "; ks_r < " +
         std::to_string(t.rows) + "; ks_r += " + std::to_string(group * step) + ") {");
  } else {
    line("#pragma unroll 4");
    line("for (int ks_e = ks_tid; ks_e < " + std::to_string(pairs) +
         "; ks_e += " + std::to_string(threads()) + ") {");
    line("  const int ks_r = (2 * ks_e) / " + cols + ", ks_c = (2 * ks_e) % " + cols + ";");
  }
  ++indent_;
  // Every load of the group's elements first, each into a local: spelled inside the
  // expression, a load is used before the next is issued (its bounds test is a branch), and
  // each waited out its latency alone (rotary attention's fused kernel, its row tile of
  // rotated queries computed in front of the walk over the keys: 340 us, 239 with the loads
  // first, against 184 for the kernel without them, on an H100, docs/perf.md).
  std::vector<std::string> rows, lo, hi;
  hoist_loads_ = true;
  for (int64_t g = 0; g < group; ++g) {
    rows.push_back(g == 0 ? "ks_r" : "(ks_r + " + std::to_string(g * step) + ")");
    lo.push_back(lazy(t.computed, {rows.back(), "ks_c"}));
    hi.push_back(lazy(t.computed, {rows.back(), "(ks_c + 1)"}));
  }
  hoist_loads_ = false;
  hoisted_loads_.clear();
  for (int64_t g = 0; g < group; ++g) {
    const std::string& r = rows[static_cast<size_t>(g)];
    line("*(u32*)(ks_smem + " + std::to_string(t.offset) + " + " +
         chunk_offset(t, r, swizzled_chunk(Code("(ks_c >> 3)"), xor_term(r, swizzle_of(t))).text) +
         " + (ks_c & 7) * 2) = " + (t.dtype == DType::F16 ? "pack_f16x2(" : "pack_bf16x2(") +
         lo[static_cast<size_t>(g)] + ", " + hi[static_cast<size_t>(g)] + ");");
  }
  --indent_;
  line("}");
  --indent_;
  line("}");
  if (wgmma_) line("fence_proxy_async();");
  line("__syncthreads();");
}

auto FragmentWriter::write_computed_vector(const TileOp& o) -> void {
  const SmemVector& w = vectors_[static_cast<size_t>(val(o.result).vector)];
  const std::vector<int64_t>& in = val(o.args[0]).def->type.shape;
  int64_t n = o.type.shape[0], len = in[static_cast<size_t>(o.axis)];
  // Threads a row: every thread of the CTA on one row where the rows divide them (a power of two
  // up to a warp that divides the row: each reduces every per-th element, from its lane in the
  // row, then the row's lanes combine by shuffles), else one.
  int64_t per = threads() % n == 0 ? threads() / n : 1;
  if (per > 32 || (per & (per - 1)) != 0 || len % per != 0) per = 1;
  // Elements a thread reads an iteration: their loads are issued before the first is combined.
  int64_t group = len % (8 * per) == 0 ? 8 : 1;
  line("__syncthreads();");
  line("{");
  ++indent_;
  line("const int ks_sub = ks_tid % " + std::to_string(per) + ";");
  line("for (int ks_r = ks_tid / " + std::to_string(per) + "; ks_r < " + std::to_string(n) +
       "; ks_r += " + std::to_string(threads() / per) + ") {");
  ++indent_;
  line("float ks_acc = " + scalar(ir::reducer_identity_expr(o.reducer, DType::F32)) + ";");
  line("for (int ks_k = ks_sub; ks_k < " + std::to_string(len) +
       "; ks_k += " + std::to_string(per * group) + ") {");
  ++indent_;
  std::vector<std::string> terms;
  hoist_loads_ = true;
  for (int64_t g = 0; g < group; ++g) {
    std::string k = g == 0 ? "ks_k" : "(ks_k + " + std::to_string(g * per) + ")";
    terms.push_back(lazy(o.args[0], o.axis == 0 ? std::vector<std::string>{k, "ks_r"}
                                                : std::vector<std::string>{"ks_r", k}));
  }
  hoist_loads_ = false;
  hoisted_loads_.clear();
  for (const std::string& term : terms)
    line("ks_acc = " + round_to(combine(o.reducer, DType::F32, "ks_acc", term), DType::F32) + ";");
  --indent_;
  line("}");
  for (int64_t m = per / 2; m >= 1; m /= 2)
    line("ks_acc = " +
         round_to(combine(o.reducer, DType::F32, "ks_acc",
                          "__shfl_xor_sync(0xffffffffu, ks_acc, " + std::to_string(m) + ")"),
                  DType::F32) +
         ";");
  line(std::string(per > 1 ? "if (ks_sub == 0) " : "") + "((float*)(ks_smem + " +
       std::to_string(w.offset) + "))[ks_r] = ks_acc;");
  --indent_;
  line("}");
  --indent_;
  line("}");
  line("__syncthreads();");
}

auto FragmentWriter::streams_of(const std::string& var) const -> std::vector<int> {
  std::vector<int> out;
  for (int stages : {2, 1})
    for (size_t t = 0; t < tiles_.size(); ++t)
      if (tiles_[t].stream_loop == var && tiles_[t].stages == stages)
        out.push_back(static_cast<int>(t));
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
    const SmemTile &x = tiles_[static_cast<size_t>(a)], &y = tiles_[static_cast<size_t>(b)];
    if (x.stages != y.stages) return x.stages > y.stages;
    return x.stages == 1 && order_.at(x.last_use) < order_.at(y.last_use);
  });
  return out;
}

auto FragmentWriter::issue_streams(const std::vector<int>& streams, const std::string& next,
                                   const std::string& hi, const std::string& stage) -> void {
  if (streams.empty()) return;
  const std::string& var = tiles_[static_cast<size_t>(streams[0])].stream_loop;
  std::string at_next = tmp();
  line("const long long " + at_next + " = " + next + ";");
  for (int t : streams) {
    line("{");
    ++indent_;
    line("const long long " + ident("v", var) + " = " + at_next + ";");
    line("if (" + at_next + " < " + hi + ") {");
    ++indent_;
    copy_tile(tiles_[static_cast<size_t>(t)], stage);
    --indent_;
    line("}");
    --indent_;
    line("}");
    line("cp_async_commit();");
  }
}

auto FragmentWriter::tile_origin(const Region& reg) -> std::pair<size_t, std::string> {
  const TileOp& o = *reg.op;
  size_t row_dim = 0;
  for (size_t d = 0; d < o.axis_of_dim.size(); ++d)
    if (o.axis_of_dim[d] == 0) row_dim = d;
  const std::vector<std::string>& ext = buffer_extents_.at(o.buffer);
  std::string stride = "1LL";
  for (size_t d = row_dim + 1; d < ext.size(); ++d) stride += " * " + ext[d];
  std::string origin, inside;
  element(reg, {"0", "0"}, &origin, &inside);
  line("const long long ks_stride = " + stride + ";");
  return {row_dim, origin};
}

auto FragmentWriter::copy_tile(const SmemTile& t, const std::string& stage) -> void {
  if (t.pitch > 0) return copy_element_tile(t, stage);
  if (t.tensor_map >= 0) return copy_tile_by_tma(t, stage);
  const TileOp& o = *t.load;
  Region reg = open_region(o);
  int64_t cpr = t.cols / 8, chunks = t.rows * cpr;
  // The buffer's elements: a 16-byte chunk holds 8 of 16 bits or 16 int8.
  const int64_t per_chunk = 16 / dtype_bytes(t.dtype);
  const std::string in_chunk = std::to_string(per_chunk),
                    pointer = t.dtype == DType::I8 ? "const i8*" : "const u16*";
  // Thread q copies chunk (q % cpr) of rows q / cpr, q / cpr + rows_per_pass, ...: one source
  // pointer a thread, advanced by a uniform step, and one 32-bit row test a chunk.
  internal_assert(chunks % threads() == 0)
      << "fragment codegen: tile " << o.buffer << " does not split evenly over the threads";
  const auto [row_dim, origin] = tile_origin(reg);
  const std::vector<std::string>& ext = buffer_extents_.at(o.buffer);
  const std::string& buf = buffer_ids_.at(o.buffer);
  std::string rows = std::to_string(t.live_rows);
  // Rows past a limit that a dot's select sets to 0 (SmemTile::row_limit) are not copied.
  const std::string limited =
      t.row_limit ? "(" + scalar(t.row_limit) + ") - (" + scalar(t.row_limit_first) + ")" : "";
  if (o.bounds_checked[row_dim]) {
    const std::string& start = reg.starts[row_dim];
    line("const int ks_rlo = " + reg.ok + " ? (int)min(" + rows + "LL, max(0LL, -" + start +
         ")) : " + rows + ";");
    const std::string end = ext[row_dim] + " - " + start;
    line("const int ks_rhi = " + reg.ok + " ? (int)max(0LL, min(" + rows + "LL, " +
         (limited.empty() ? end : "min(" + end + ", " + limited + ")") + ")) : 0;");
  } else if (!limited.empty()) {
    line("const int ks_rlo = 0, ks_rhi = " + reg.ok + " ? (int)max(0LL, min(" + rows + "LL, " +
         limited + ")) : 0;");
  } else {
    line("const int ks_rlo = 0, ks_rhi = " + reg.ok + " ? " + rows + " : 0;");
  }
  // A tail along the rows themselves (keys along a V^T tile's rows): the chunks of a row past
  // the buffer's end (whole chunks, innermost_chunks) are zero-filled too.
  const size_t col_dim = o.starts.size() - 1;
  // Where the start and the extent are known when the kernel is generated (a head size padded
  // for the tensor cores, tile::pad_dot_extents), every row has the same chunks inside: a tile
  // whose rows are inside is copied without row tests, its last chunks zero-filled.
  std::string whole_chunks, chunk_in, fixed_chunks;
  if (o.bounds_checked[col_dim]) {
    std::optional<double> start = constant_expr(o.starts[col_dim]),
                          extent = constant_expr(p_.source.find_buffer(o.buffer)->shape[col_dim]);
    if (start && extent) {
      int64_t inside = std::clamp<int64_t>(
          (static_cast<int64_t>(*extent) - static_cast<int64_t>(*start)) / per_chunk, 0, cpr);
      line("const int ks_cl = " + std::to_string(inside) + ";");
      if (inside < cpr) fixed_chunks = "ks_c < ks_cl";
    } else {
      line("const int ks_cl = (int)max(0LL, min(" + std::to_string(cpr) + "LL, (" + ext[col_dim] +
           " - " + reg.starts[col_dim] + ") / " + in_chunk + "));");
      whole_chunks = " && ks_cl == " + std::to_string(cpr);
    }
    chunk_in = " && ks_c < ks_cl";
  }
  // An untested copy of `src`: its chunks past a fixed column limit are zero-filled.
  auto untested = [&](const std::string& dst, const std::string& src) {
    if (fixed_chunks.empty()) return "cp_async_cg16(" + dst + ", " + src + ", 16);";
    return "cp_async_cg16(" + dst + ", " + fixed_chunks + " ? " + src + " : " + buf + ", " +
           fixed_chunks + " ? 16 : 0);";
  };
  // Every row and chunk of the tile's `n` rows inside the buffer.
  auto whole = [&](int64_t n) {
    return "ks_rlo == 0 && ks_rhi == " + std::to_string(n) + whole_chunks;
  };
  std::string passes = std::to_string(chunks / threads());
  if (threads() % cpr != 0) {
    // Rows the threads do not divide (whole swizzle spans, a head size of 192): thread q copies
    // chunks q, q + threads, ... of the tile, each at its own row and chunk.
    std::string n = std::to_string(cpr), all = std::to_string(threads());
    const std::string dst =
        stage_address(t, stage) + " + (u32)(" +
        chunk_offset(t, "ks_r",
                     swizzled_chunk(Code("ks_c"), xor_term("ks_r", swizzle_of(t))).text) +
        ")";
    // Rows that follow each other in memory (a key tile of whole heads): chunk g lies 8 g
    // elements (16 g int8) past the tile's first, so that a tile inside the buffer is copied from
    // one pointer a thread at constant offsets, without a row test or a 64-bit product a chunk.
    double row = 1;
    for (size_t d = row_dim + 1; d < o.starts.size(); ++d) {
      std::optional<double> e = constant_expr(p_.source.find_buffer(o.buffer)->shape[d]);
      row = e ? row * *e : -1;
    }
    // The passes, each chunk with a row test and a substitute address (`tested`) or not.
    auto passes_loop = [&](bool tested) {
      line("#pragma unroll");
      line("for (int ks_i = 0; ks_i < " + passes + "; ++ks_i) {");
      ++indent_;
      line("const int ks_g = ks_tid + ks_i * " + all + ";");
      line("const int ks_r = ks_g / " + n + ", ks_c = ks_g % " + n + ";");
      if (tested) {
        line("const bool ks_in = ks_r >= ks_rlo && ks_r < ks_rhi" + chunk_in + ";");
        line("cp_async_cg16(" + dst + ", ks_in ? " + buf + " + (" + origin +
             ") + ks_r * ks_stride + ks_c * " + in_chunk + " : " + buf + ", ks_in ? 16 : 0);");
      } else {
        line(untested(dst, "ks_src + ks_i * " + std::to_string(threads() * per_chunk)));
      }
      --indent_;
      line("}");
    };
    const bool contiguous = row == static_cast<double>(t.cols * 2 / dtype_bytes(t.dtype));
    if (contiguous) {
      line(pointer + " ks_src = " + buf + " + (" + origin + ") + ks_tid * " + in_chunk + ";");
      line("if (" + whole(t.live_rows) + ") {");
      ++indent_;
      passes_loop(false);
      --indent_;
      line("} else {");
      ++indent_;
    }
    passes_loop(true);
    if (contiguous) {
      --indent_;
      line("}");
    }
    return;
  }
  int64_t rows_per_pass = threads() / cpr;
  line("const int ks_r0 = ks_tid / " + std::to_string(cpr) + ", ks_c = ks_tid % " +
       std::to_string(cpr) + ";");
  line(pointer + " ks_src = " + buf + " + (" + origin + ") + ks_r0 * ks_stride + ks_c * " +
       in_chunk + ";");
  // The XOR term of the rows a thread copies repeats with the swizzle period: one destination
  // a thread for each of the passes within a period (a single one when a pass is a period or
  // more), advanced by a compile-time constant. (Each pass's address of its own, which ptxas
  // keeps live across the loop, took 50 registers of the one-warp decode kernels.)
  Swizzle z = swizzle_of(t);
  int64_t period = z.span << z.shift;
  int64_t phases = rows_per_pass % period == 0 ? 1 : period / rows_per_pass;
  internal_assert(phases == 1 || period % rows_per_pass == 0)
      << "fragment codegen: copy passes of " << rows_per_pass << " rows and a swizzle period of "
      << period;
  auto destination = [&](const std::string& row) {
    return stage_address(t, stage) + " + (u32)(" +
           chunk_offset(t, row, swizzled_chunk(Code("ks_c"), xor_term(row, z)).text) + ")";
  };
  std::string step = std::to_string(phases * rows_per_pass * row_bytes(t)), dst;
  if (phases == 1) {
    line("const u32 ks_dst = " + destination("ks_r0") + ";");
    dst = "ks_dst + ks_i * " + step;
  } else {
    line("u32 ks_dst[" + std::to_string(phases) + "];");
    for (int64_t k = 0; k < phases; ++k) {
      std::string row = k == 0 ? "ks_r0" : "ks_r0 + " + std::to_string(k * rows_per_pass);
      line("ks_dst[" + std::to_string(k) + "] = " + destination("(" + row + ")") + ";");
    }
    dst = "ks_dst[ks_i % " + std::to_string(phases) + "] + (ks_i / " + std::to_string(phases) +
          ") * " + step;
  }
  // A tile whose rows all lie inside the buffer (every one but a tail's) is copied without a
  // row test or a substitute address: one cp.async a chunk, at a constant offset from the
  // thread's source pointer when the stride is a constant (the tests and selects of the
  // general copy took a tenth of a prefill iteration's instructions).
  std::string pass_rows = std::to_string(rows_per_pass);
  line("if (" + whole(t.rows) + ") {");
  ++indent_;
  line("#pragma unroll");
  line("for (int ks_i = 0; ks_i < " + passes + "; ++ks_i)");
  line("  " + untested(dst, "ks_src + ks_i * (" + pass_rows + " * ks_stride)"));
  --indent_;
  line("} else {");
  ++indent_;
  line("#pragma unroll");
  line("for (int ks_i = 0; ks_i < " + passes + "; ++ks_i) {");
  ++indent_;
  line("const int ks_r = ks_r0 + ks_i * " + pass_rows + ";");
  line("const bool ks_in = ks_r >= ks_rlo && ks_r < ks_rhi" + chunk_in + ";");
  line("cp_async_cg16(" + dst + ", ks_in ? ks_src : " + buf + ", ks_in ? 16 : 0);");
  line("ks_src += " + pass_rows + " * ks_stride;");
  --indent_;
  line("}");
  --indent_;
  line("}");
}

auto FragmentWriter::barrier_address(const SmemTile& t, const std::string& stage) const
    -> std::string {
  return "(ks_smem_u32 + " + std::to_string(t.barriers) + " + (" + stage + ") * 8)";
}

auto FragmentWriter::phase_name(const SmemTile& t) const -> std::string {
  return "ks_phase" + std::to_string(t.tensor_map);
}

auto FragmentWriter::init_tma_barriers() -> void {
  if (tensor_maps_.empty()) return;
  line("if (ks_tid == 0) {");
  ++indent_;
  for (const SmemTile& t : tiles_)
    for (int s = 0; t.tensor_map >= 0 && s < t.stages; ++s)
      line("mbarrier_init(" + barrier_address(t, std::to_string(s)) + ", 1);");
  line("fence_mbarrier_init();");
  --indent_;
  line("}");
  line("__syncthreads();");
  // The parity each stage's barrier completes next (bit s: stage s), flipped at every wait.
  for (const SmemTile& t : tiles_)
    if (t.tensor_map >= 0) line("u32 " + phase_name(t) + " = 0;");
}

auto FragmentWriter::copy_tile_by_tma(const SmemTile& t, const std::string& stage) -> void {
  const TileOp& o = *t.load;
  // (Its squeezed coordinates' check as for a cp.async copy; a box past the buffer is zeros.)
  Region reg = open_region(o);
  const size_t rank = o.starts.size();
  const int64_t blocks = t.cols / block_cols(t);
  line("if (ks_tid == 0) {");
  ++indent_;
  line("const u32 ks_bar = " + barrier_address(t, stage) + ";");
  // The threads' reads of this stage (ldmatrix, generic proxy) come before the copy's writes.
  line("fence_proxy_async();");
  line("mbarrier_arrive_expect_tx(ks_bar, " + std::to_string(t.stage_bytes()) + "u);");
  for (int64_t b = 0; b < blocks; ++b) {
    std::string args = stage_address(t, stage) + " + " + std::to_string(b * block_bytes(t)) +
                       "u, (const TensorMap*)ks_args.maps[" + std::to_string(t.tensor_map) +
                       "], ks_bar";
    for (size_t d = rank; d-- > 0;) {
      std::string c = reg.starts[d];
      if (d == rank - 1 && b > 0) c += " + " + std::to_string(b * block_cols(t));
      args += ", (int)(" + c + ")";
    }
    line("tma_load_" + std::to_string(rank) + "d(" + args + ");");
  }
  --indent_;
  line("}");
}

auto FragmentWriter::wait_tma(const SmemTile& t, const std::string& stage) -> void {
  const std::string phase = phase_name(t);
  line("while (!mbarrier_try_wait_parity(" + barrier_address(t, stage) + ", (" + phase + " >> (" +
       stage + ")) & 1u)) {");
  line("}");
  line(phase + " ^= 1u << (" + stage + ");");
}

auto FragmentWriter::chunk_offset(const SmemTile& t, const std::string& row,
                                  const std::string& chunk) const -> std::string {
  if (!column_blocked(t))
    return row + " * " + std::to_string(t.cols * 2) + " + (" + chunk + " * 16)";
  // Chunks a block's row: 8, 4 or 2.
  const int64_t per_block = row_bytes(t) / 16;
  const int shift = per_block == 8 ? 3 : per_block == 4 ? 2 : 1;
  return "((" + chunk + ") >> " + std::to_string(shift) + ") * " + std::to_string(block_bytes(t)) +
         " + " + row + " * " + std::to_string(row_bytes(t)) + " + ((" + chunk + ") & " +
         std::to_string(per_block - 1) + ") * 16";
}

auto FragmentWriter::wait_copies(int pending) -> void {
  line("cp_async_wait_group<" + std::to_string(pending) + ">();");
  if (wgmma_) line("fence_proxy_async();");
  line("__syncthreads();");
}

auto FragmentWriter::access_spec(Access a) const -> AccessSpec {
  switch (a) {
    case Access::A:  // m16 x k16 of A: matrices (rows 0-7 | 8-15) x (chunk 0 | 1)
      return {"ks_warp * " + std::to_string(16 * mblocks_) +
                  " + (ks_lane & 7) + ((ks_lane >> 3) & 1) * 8",
              "(ks_lane >> 4)"};
    case Access::B:  // B = tile^T, tile rows n: matrices (chunk 0 | 1) x (rows 0-7 | 8-15)
      return {"(ks_lane & 7) + ((ks_lane >> 4) & 1) * 8", "((ks_lane >> 3) & 1)"};
    case Access::BTrans:  // B = tile, rows k (.trans): matrices (rows 0-7 | 8-15) x (chunk 0 | 1)
      return {"(ks_lane & 7) + ((ks_lane >> 3) & 1) * 8", "(ks_lane >> 4)"};
  }
  return {};
}

auto FragmentWriter::swizzle_of(const SmemTile& t) const -> Swizzle {
  // The chunks of a stored row: of a column block's row where the tile is blocked.
  const int cpr = static_cast<int>(row_bytes(t) / 16);
  return Swizzle{swizzle_span(cpr), swizzle_shift(cpr)};
}

auto FragmentWriter::xor_term(const std::string& row, const Swizzle& z) -> Code {
  return swizzle_term(Code("(" + row + ")"), z.shift, z.span);
}

auto FragmentWriter::lane_offsets_name(int tile, Access a) const -> std::string {
  return "ks_lane_off" + std::to_string(tile) + "_" + std::to_string(static_cast<int>(a));
}

auto FragmentWriter::define_lane_offsets(int tile, Access a) -> void {
  std::string name = lane_offsets_name(tile, a);
  if (!lane_offsets_.insert(name).second) return;
  const SmemTile& t = tiles_[static_cast<size_t>(tile)];
  Swizzle z = swizzle_of(t);
  AccessSpec spec = access_spec(a);
  int64_t n = z.span / 2;
  line("u32 " + name + "[" + std::to_string(n) + "];");
  line("{");
  ++indent_;
  line("const int ks_lr = " + spec.lane_row + ", ks_lc = " + spec.lane_chunk + ";");
  line("const int ks_x = " + xor_term("ks_lr", z).text + ";");
  for (int64_t r = 0; r < n; ++r)
    line(name + "[" + std::to_string(r) + "] = (u32)(ks_lr * " + std::to_string(t.cols * 2) +
         " + (" + lane_chunk_of(Code(std::to_string(2 * r)), Code("ks_lc"), Code("ks_x")).text +
         " * 16));");
  --indent_;
  line("}");
}

auto FragmentWriter::ldmatrix_address(int tile, Access a, const std::string& base,
                                      const std::string& r0, const std::string& c0) const
    -> std::string {
  const SmemTile& t = tiles_[static_cast<size_t>(tile)];
  std::string mask = std::to_string(swizzle_of(t).span - 1);
  return base + " + " + lane_offsets_name(tile, a) + "[((" + c0 + ") & " + mask + ") >> 1] + (" +
         r0 + ") * " + std::to_string(t.cols * 2) + " + ((" + c0 + ") & ~" + mask + ") * 16";
}

auto FragmentWriter::stage_address(const SmemTile& t, const std::string& stage) const
    -> std::string {
  return "(ks_smem_u32 + " + std::to_string(t.offset) + " + (" + stage + ") * " +
         std::to_string(t.stage_bytes()) + ")";
}

auto FragmentWriter::copy_element_tile(const SmemTile& t, const std::string& stage) -> void {
  const TileOp& o = *t.load;
  Region reg = open_region(o);
  const int64_t width = 16 / t.element_bytes, cpr = t.cols / width;
  const int64_t rows_per_pass = threads() / cpr, passes = t.rows / rows_per_pass;
  const auto [row_dim, origin] = tile_origin(reg);
  const size_t col_dim = o.starts.size() - 1;
  const std::vector<std::string>& ext = buffer_extents_.at(o.buffer);
  const std::string rows = std::to_string(t.rows), cols = std::to_string(t.cols);
  const std::string &row0 = reg.starts[row_dim], &col0 = reg.starts[col_dim];
  line("const int ks_rlo = " + reg.ok + " ? (int)min(" + rows + "LL, max(0LL, -" + row0 +
       ")) : " + rows + ";");
  line("const int ks_rhi = " + reg.ok + " ? (int)max(0LL, min(" + rows + "LL, " + ext[row_dim] +
       " - " + row0 + ")) : 0;");
  line("const int ks_clim = (int)max(0LL, min(" + cols + "LL, " + ext[col_dim] + " - " + col0 +
       "));");
  line("const int ks_r0 = ks_tid / " + std::to_string(cpr) + ", ks_c = (ks_tid % " +
       std::to_string(cpr) + ") * " + std::to_string(width) + ";");
  const std::string st = storage(t.dtype);
  line("const " + st + "* ks_src = " + buffer_ids_.at(o.buffer) + " + (" + origin +
       ") + ks_r0 * ks_stride + ks_c;");
  line("const u32 ks_dst = " + stage_address(t, stage) + " + (u32)(ks_r0 * " +
       std::to_string(t.pitch) + " + ks_c * " + std::to_string(t.element_bytes) + ");");
  // Consecutive passes are a constant number of rows apart: one pointer a thread, advanced by
  // a step computed once (a 64-bit product a chunk, ptxas kept them all live and spilled). A
  // tile inside the buffer (all but the tails) takes one cp.async a chunk, with no test and no
  // substitute address.
  const std::string step = std::to_string(rows_per_pass), pass = std::to_string(passes),
                    dst_step = std::to_string(rows_per_pass * t.pitch);
  line("const long long ks_step = " + step + " * ks_stride;");
  line("const " + st + "* ks_p = ks_src;");
  line("if (ks_rlo == 0 && ks_rhi == " + rows + " && ks_clim == " + cols + ") {");
  ++indent_;
  line("#pragma unroll");
  line("for (int ks_i = 0; ks_i < " + pass + "; ++ks_i, ks_p += ks_step)");
  line("  cp_async_cg16(ks_dst + (u32)(ks_i * " + dst_step + "), ks_p, 16);");
  --indent_;
  line("} else {");
  ++indent_;
  line("const bool ks_cin = ks_c < ks_clim;");
  line("#pragma unroll");
  line("for (int ks_i = 0; ks_i < " + pass + "; ++ks_i, ks_p += ks_step) {");
  ++indent_;
  line("const int ks_r = ks_r0 + ks_i * " + step + ";");
  line("const bool ks_in = ks_cin && ks_r >= ks_rlo && ks_r < ks_rhi;");
  line("cp_async_cg16(ks_dst + (u32)(ks_i * " + dst_step +
       "), ks_in ? ks_p : " + buffer_ids_.at(o.buffer) + ", ks_in ? 16 : 0);");
  --indent_;
  line("}");
  --indent_;
  line("}");
}

auto FragmentWriter::stage_of(const SmemTile& t) const -> std::string {
  return t.stages == 1 ? "0" : "ks_stage_" + t.stream_loop;
}

auto FragmentWriter::reissue_after(const TileOp& use) -> void {
  for (size_t t = 0; t < tiles_.size(); ++t) {
    const SmemTile& tile = tiles_[t];
    if (tile.stream_loop.empty() || tile.stages != 1 || tile.last_use != &use) continue;
    line("__syncthreads();");
    issue_streams({static_cast<int>(t)}, ident("v", tile.stream_loop) + " + 1",
                  loop_hi_.at(tile.stream_loop), "0");
  }
}

auto FragmentWriter::prefetch_top_level_tiles() -> void {
  for (const tile::TileStmt& st : k_.body) {
    if (st.kind == tile::StmtKind::For) break;
    if (st.op.kind != OpKind::Load || val(st.op.result).kind != Kind::Smem) continue;
    int tile = val(st.op.result).tile;
    prefetched_[tile] = static_cast<int>(prefetched_.size());
    line("{");
    ++indent_;
    copy_tile(tiles_[static_cast<size_t>(tile)], "0");
    --indent_;
    line("}");
    line("cp_async_commit();");
  }
}

auto FragmentWriter::load_smem(const Val& v) -> void {
  const SmemTile& t = tiles_[static_cast<size_t>(v.tile)];
  if (auto p = prefetched_.find(v.tile); p != prefetched_.end()) {
    if (std::optional<std::string> loop = wait_left_to_stream(v.tile)) {
      unwaited_before_.insert(*loop);
      return;
    }
    wait_copies(static_cast<int>(prefetched_.size()) - 1 - p->second);
    return;
  }
  // A TMA tile's copy group is empty: the mbarrier alone says its copy landed, to every thread
  // and to wgmma (each cp.async tile waits for its own group, with its own barrier). A prefetch
  // whose wait was left to the loop's streams (the queries' tile) is waited for in the first
  // iteration.
  if (t.tensor_map >= 0) {
    if (unwaited_before_.count(t.stream_loop)) {
      line("if (" + ident("v", t.stream_loop) + " == " + loop_lo_.at(t.stream_loop) + ") {");
      ++indent_;
      wait_copies(0);
      --indent_;
      line("}");
    }
    return wait_tma(t, stage_of(t));
  }
  if (!t.stream_loop.empty()) {
    // Wait for this tile's group of this iteration. Committed after it: the later groups of
    // the previous iteration's sequence (two-stage tiles at its top, one-stage ones after their
    // uses), then this iteration's two-stage tiles and the one-stage tiles already reissued.
    std::vector<int> streams = streams_of(t.stream_loop);
    int index =
        static_cast<int>(std::find(streams.begin(), streams.end(), v.tile) - streams.begin());
    int n = static_cast<int>(streams.size()), two_stage = 0, reissued = 0;
    for (int u : streams) {
      const SmemTile& other = tiles_[static_cast<size_t>(u)];
      if (other.stages == 2) ++two_stage;
      if (other.stages == 1 && order_.at(other.last_use) < order_.at(t.load)) ++reissued;
    }
    wait_copies(n - 1 - index + two_stage + reissued);
    return;
  }
  line("__syncthreads();");  // earlier readers of this tile (a loop's previous iteration)
  line("{");
  ++indent_;
  copy_tile(t, "0");
  --indent_;
  line("}");
  line("cp_async_commit();");
  wait_copies(0);
}

auto FragmentWriter::wait_left_to_stream(int tile) const -> std::optional<std::string> {
  std::string loop;
  int first_use = -1;
  for (const TileOp* o : ops_) {
    if (o->kind != OpKind::Dot) continue;
    for (int a : o->args) {
      if (val(a).kind != Kind::Smem || val(a).tile != tile) continue;
      if (!loop.empty() && loop_of_.at(o) != loop) return std::nullopt;
      loop = loop_of_.at(o);
      if (first_use < 0) first_use = order_.at(o);
    }
  }
  if (loop.empty()) return std::nullopt;
  for (const SmemTile& t : tiles_)
    if (t.stream_loop == loop && order_.at(t.load) < first_use) return loop;
  return std::nullopt;
}

}  // namespace kintsugi::cuda::fragment
