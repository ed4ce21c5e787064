// \file FragmentCodegen.cpp
// Tile IR -> CUDA C++ in the tensor-core layout (Fragments.h): layout assignment, then emission.
//
// Layout assignment gives every tile value of the kernel one of these kinds, in program order:
//   Uniform   shape []; one variable every thread holds
//   Lazy      computable from indices alone (full, arange, and elementwise / broadcast / permute of
//             such values), a 1-D load along an axis other than the rows (a per-key bias, a
//             per-column weight, read from its region where it is used), a 2-D load that is not a
//             row tile (a key tile that feeds a computed B operand), or a gather whose
//             indices are such values (a bias table by bucket of relative position): spelled at
//             the coordinates of each use, never stored; or an f32 reduction of a 2-D Lazy value
//             that is not a row tile (the norm of each key), computed whole into shared memory at
//             its place, one row a thread, and read there at its uses
//   Frag      [R, N] data in the accumulator layout: `T name[N / 8][4]`
//   Row       [R] data: `T name[2]`, the two rows of the lane
//   RowBcast  a Row broadcast along the columns: a view of the Row, no storage
//   Smem      a 2-D f16 or bf16 tile in shared memory (swizzled) whose uses are all dot operands,
//             through exact casts and a transpose (views of the same shared tile): loaded from
//             memory, or a B operand computed elementwise from index-computable values and loads
//             (keys rotated or scaled before the scores), written by the threads element by
//             element in front of its dot
// A kernel with a value that fits no kind (a permute of data, a reduction across rows, a dot
// operand computed in registers that is not exact in the type of the other, a shared tile) is
// left to the element-cyclic writer. A dot runs on the tensor cores of its shared operand's type,
// f16 or bf16.
//
// Emission, beyond one loop of slots per operation: a dot and the slot-local operations after it
// run by 16-column blocks when its accumulator is wide (dot_region); a dot added to a value
// accumulates onto it, its zeroing selects moved onto the rows of A (accumulation); a loop body
// comes in two versions, the interior one with every tile comparison (affine, or monotone and
// tested at the tile's corner) and first-iteration condition folded (versioned_body); streamed
// tiles are copied one iteration ahead (the first used, two stages) or right after their last use
// (the others, one stage), without row tests when all their rows lie inside the buffer; ldmatrix
// and copy addresses add compile-time constants to per-lane offsets computed once; a 128-row tile
// runs on four warps of two m16 blocks (mblocks_); exp of a difference is one fused multiply-add
// into exp2, a product of uniform scales one multiply, and a maximum is taken through a positive
// scale, constant or tested at run time (exp_of_difference, product_of_scales, reduce); f32 casts
// of affine positions add a compile-time offset to a value converted once (float_of_affine);
// divided starts of streamed tiles are computed in front of their loop.
//
// Invariant established: the kernel computes what the tile IR means (TileIR.h), like the cyclic
// writer: loads past a buffer's extent read 0 (cp.async zero-fills), stores write only inside the
// buffer where the mask holds, squeezed indices out of range record an error site; a streamed
// tile is read only after its copy group completed and a barrier, and refilled only after a
// barrier that follows the last read of that stage; the folded version runs only when the
// conditions it assumes hold over the whole tile, checked uniformly for the CTA. Two departures:
// for non-finite B operands only, a dot row that a select drops is computed from a zeroed A row,
// and 0 times an infinite or NaN element of B is NaN, not the 0 the select gives; and an f32 cast
// of an affine position of magnitude 2^24 or more may be an ulp off (two roundings, not one).
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <set>

#include "ir/Printer.h"
#include "ir/Visit.h"
#include "target/cuda/Fragments.h"
#include "tile/passes/Walk.h"

namespace kintsugi::cuda {

std::vector<int> row_shuffle_masks() {
  // A lane bit belongs to the row reduction when flipping it keeps every slot's row and moves its
  // column.
  std::vector<int> masks;
  for (int bit = 1; bit < 32; bit <<= 1) {
    bool same_row = true, other_col = true;
    for (int lane = 0; lane < 32; ++lane)
      for (int slot = 0; slot < 4; ++slot) {
        same_row = same_row && AccumulatorLayout::row(0, lane, slot) ==
                                   AccumulatorLayout::row(0, lane ^ bit, slot);
        other_col = other_col &&
                    AccumulatorLayout::col(lane, slot) != AccumulatorLayout::col(lane ^ bit, slot);
      }
    if (same_row && other_col) masks.push_back(bit);
  }
  return masks;
}

namespace {

// What a row's chunks are XORed with: (row >> shift) & (span - 1), span = gcd(chunks a row, 8)
// and 2^shift = 8 / span. Consecutive rows start 16-byte bank groups apart by chunks a row
// (mod 8), which visits 8 / span distinct starts before it repeats; XORing the low chunk bits with
// the repetition count makes 8 consecutive rows at one logical chunk cover the 8 bank groups.
// (Rows shorter than 128 bytes: the term is the index of the 128-byte line a row is in; a head
// size of 96, 12 chunks: rows alternate between two starts, and pairs of rows get the XOR terms
// 0-3.)
int swizzle_span(int chunks_per_row) {
  return std::gcd(chunks_per_row, 8);
}
int swizzle_shift(int chunks_per_row) {
  int shift = 0;
  while ((swizzle_span(chunks_per_row) << shift) < 8) ++shift;
  return shift;
}
int swizzle_term(int row, int chunks_per_row) {
  return (row >> swizzle_shift(chunks_per_row)) & (swizzle_span(chunks_per_row) - 1);
}

}  // namespace

int swizzle_chunk(int row, int chunk, int chunks_per_row) {
  return chunk ^ swizzle_term(row, chunks_per_row);
}

int swizzled_lane_chunk(int lane_row, int lane_chunk, int residue, int chunks_per_row) {
  int x = swizzle_term(lane_row, chunks_per_row);
  return (residue ^ (x & ~1)) | ((lane_chunk ^ x) & 1);
}

namespace {

using ir::Op;
using tile::OpKind;
using tile::TileOp;

enum class Kind : uint8_t { None, Uniform, Lazy, Frag, Row, RowBcast, Smem };

struct Val {
  Kind kind = Kind::None;
  const TileOp* def = nullptr;
  std::string name;
  // Every element is exactly a number of F16 / of BF16 (a dot of that type may take it).
  bool exact_f16 = false, exact_bf16 = false;
  int tile = -1;            // Smem: the shared-memory tile
  bool transposed = false;  // Smem: element (a, b) is the tile's element (b, a)
  int row_source = -1;      // RowBcast: the row vector
  int vector = -1;          // Lazy reduction: its shared vector
};

// A Lazy reduction's result in shared memory: f32 elements, one a row of its operand.
struct SmemVector {
  const TileOp* reduce = nullptr;
  int64_t offset = 0;  // bytes into the dynamic shared memory
};

struct SmemTile {
  const TileOp* load = nullptr;
  DType dtype = DType::F16;    // F16 or BF16
  int64_t rows = 0, cols = 0;  // elements
  int64_t live_rows = 0;       // rows of the load; the rest (an A tile padded to 16) are zeros
  std::string stream_loop;     // streamed along this loop (empty: loaded where it stands)
  // Streamed tiles: the first one the loop body uses has two stages, its next copy issued at the
  // top of each iteration; each later one has one stage, its next copy issued right after its
  // last use (the dot `last_use`), so that it overlaps the work in between.
  int stages = 1;
  const TileOp* last_use = nullptr;
  int64_t offset = 0;  // bytes into the dynamic shared memory
  // A computed tile: the Lazy value written into it element by element (no load), -1 otherwise.
  int computed = -1;
  // An element tile (an operand read at the accumulator's positions, a bias or mask tensor over
  // the scores): the bytes of an element and of a row, padded so that the four lanes of a quad,
  // reading a row's two adjacent elements each, and the next rows' quads fall in distinct banks.
  // 0 for a dot operand (f16 or bf16 rows in the ldmatrix swizzle, unpadded).
  int64_t element_bytes = 0, pitch = 0;
  int64_t stage_bytes() const { return pitch > 0 ? rows * pitch : rows * cols * 2; }
};

class FragmentWriter : public KernelWriter {
 public:
  FragmentWriter(const tile::TileProgram& p, const tile::Kernel& k, std::vector<std::string>& sites)
      : KernelWriter(p, sites), k_(k) {
    // Attention-class kernels spend their non-tensor-core issue slots on exp (and tanh for
    // softcapping): the approximate MUFU units instead of the libm-accurate sequences.
    exp_function_ = "ks_exp";
    tanh_function_ = "ks_tanh";
  }

  // Assigns a kind to every value; false when the kernel has no dot of f16 or bf16 values, or
  // some value fits no kind (why() says which).
  bool plan() {
    vals_.assign(static_cast<size_t>(k_.num_values), Val{});
    collect(k_.body, "");
    if (!has_half_dot()) return false;  // nothing for the tensor cores
    for (const TileOp* o : ops_)
      if (o->kind == OpKind::Dot) {
        int64_t r = o->type.shape[0];
        if (rows_ >= 0 && r != rows_)
          return fail("its dots have row tiles of " + std::to_string(rows_) + " and " +
                      std::to_string(r) + " rows");
        rows_ = r;
      }
    // Fewer than 16 rows (a group of query heads in decode) run as one warp's 16, the rows past
    // the tile never stored.
    if (rows_ > 128 ||
        (rows_ > AccumulatorLayout::kRowsPerWarp && rows_ % AccumulatorLayout::kRowsPerWarp != 0))
      return fail("its row tile of " + std::to_string(rows_) +
                  " rows is neither at most 16 nor a multiple of 16 up to 128");
    // A row tile of 128 runs on four warps of two m16 blocks each (FlashAttention-2's 128-row
    // tiles on 4 warps): every B fragment read from shared memory feeds two mma instead of one.
    // Past 128 columns of a dot's result (head sizes 192 and 256) two blocks' accumulators alone
    // take 192-256 registers a thread: the tile runs on eight warps of one block each (at two
    // blocks ptxas spilled 1352 bytes a thread at D=192 and 2776 at D=256).
    int64_t widest = 0;
    for (const TileOp* o : ops_)
      if (o->kind == OpKind::Dot) widest = std::max(widest, o->type.shape.back());
    mblocks_ = rows_ == 128 && widest <= 128 ? 2 : 1;
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
    return true;
  }

  // A load read at the accumulator's positions (a bias or mask tensor over the scores) that a
  // loop streams, whose rows are whole aligned 16-byte chunks of the buffer's innermost dimension
  // that the threads split evenly: it can be copied ahead into shared memory (stage_element_tiles).
  // A tile read transposed (a mask stored key-major: its columns are the accumulator's rows) is
  // staged in its own orientation too; the transpose's reads swap their indices into it.
  bool element_stageable(const TileOp& o) const {
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

  // Element tiles are copied by cp.async ahead of their use and read from shared memory there:
  // read at the uses from global memory, a tile's loads stood between the dot that computes the
  // scores and everything after it, with only the warps of one or two CTAs to hide their latency
  // (a 128 x 64 f32 bias took as long as the tile's two dots). Two stages, the next iteration's
  // copy issued at the top of each iteration with the first dot operand's, where the CTAs an SM
  // stay as many; else one stage, the next copy issued after the tile's last reader, where that
  // keeps them (an f16 mask beside prefill's 80 KB: two CTAs an SM, not one; the copy still
  // overlaps the softmax, the PV dot and the next QK dot); else two stages. A row's pitch is an
  // odd multiple of the bytes that a quad's four lanes read in one access phase (16, or 32 for
  // f32 read two at a time), so that the eight rows of a phase start in distinct banks. Each is
  // placed after the rest of the kernel's shared memory while every supported architecture's CTA
  // still fits; one that does not stays read at its uses.
  void stage_element_tiles(int64_t& offset) {
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
      if (offset + t.stages * t.stage_bytes() > kMaxSharedBytes) continue;
      t.offset = offset;
      offset += t.stages * t.stage_bytes();
      val(o->result).tile = static_cast<int>(tiles_.size());
      tiles_.push_back(t);
    }
  }

  // The last operation of the loop body that streams load `o` (at its top level) to read it, in
  // registers, through the index-only values computed from it; nullptr when one in a nested loop
  // reads it.
  const TileOp* last_reader(const TileOp& o) const {
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

  // Why plan() failed on a kernel with a dot of f16 or bf16 values ("" otherwise).
  const std::string& why() const { return why_; }

 private:
  // Whether a dot of the kernel has operands that are exactly f16 values, or both bf16 (those
  // the tensor cores compute exactly as written; a dot of f32 values stays in f32).
  bool has_half_dot() const {
    std::vector<std::pair<bool, bool>> exact(static_cast<size_t>(k_.num_values));
    auto at = [&](int id) -> std::pair<bool, bool>& { return exact[static_cast<size_t>(id)]; };
    bool found = false;
    for (const TileOp* o : ops_) {
      if (o->kind == OpKind::Dot) {
        const auto &a = at(o->args[0]), &b = at(o->args[1]);
        found = found || (a.first && b.first) || (a.second && b.second);
      }
      if (o->result < 0) continue;
      at(o->result) = {holds_values_of(DType::F16, *o, [&](int id) { return at(id).first; }),
                       holds_values_of(DType::BF16, *o, [&](int id) { return at(id).second; })};
    }
    return found;
  }

  bool fail(const std::string& why) {
    why_ = why;
    return false;
  }

  // --- layout assignment
  void collect(const tile::TileBody& b, const std::string& loop) {
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

  // Rows the warps cover: the row tile, padded to one warp's 16.
  int64_t warp_rows() const { return std::max<int64_t>(rows_, AccumulatorLayout::kRowsPerWarp); }
  bool padded() const { return warp_rows() != rows_; }
  // Rows a shared tile takes: an A tile of the row tile is padded like it.
  int64_t smem_rows(int64_t rows) const { return rows == rows_ ? warp_rows() : rows; }

  bool is_frag_shape(const std::vector<int64_t>& s) const {
    return s.size() == 2 && s[0] == rows_ && s[1] % 8 == 0;
  }
  bool is_row_shape(const std::vector<int64_t>& s) const { return s.size() == 1 && s[0] == rows_; }
  bool data_shape(const std::vector<int64_t>& s) const {
    return s.empty() || is_frag_shape(s) || is_row_shape(s);
  }
  Kind data_kind(const std::vector<int64_t>& s) const {
    if (s.empty()) return Kind::Uniform;
    if (is_frag_shape(s)) return Kind::Frag;
    if (is_row_shape(s)) return Kind::Row;
    return Kind::None;
  }
  Val& val(int id) { return vals_[static_cast<size_t>(id)]; }
  const Val& val(int id) const { return vals_[static_cast<size_t>(id)]; }

  // Whether every use of value `id` is a dot operand, through exact casts to f32 and
  // transposes.
  bool feeds_only_dots(int id) const {
    auto it = users_.find(id);
    if (it == users_.end()) return false;
    for (const TileOp* u : it->second) {
      if (u->kind == OpKind::Dot) continue;
      bool view = (u->kind == OpKind::Cast && u->type.dtype == DType::F32) ||
                  (u->kind == OpKind::Permute && u->perm == std::vector<int>{1, 0});
      if (!view || !feeds_only_dots(u->result)) return false;
    }
    return true;
  }

  // Whether value `id` flows into the B operand of a dot through elementwise operations, casts,
  // broadcasts and transposes only.
  bool reaches_b_operand(int id) const {
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

  // A 2-D f16 or bf16 load whose rows are whole 16-byte chunks of the buffer's innermost
  // dimension, all inside the buffer (copy_tile tests rows only).
  bool stageable(const TileOp& o) const {
    if ((o.type.dtype != DType::F16 && o.type.dtype != DType::BF16) || o.type.shape.size() != 2)
      return false;
    if (buffer_dtype(o.buffer) != o.type.dtype || !innermost_chunks(o, 8)) return false;
    int64_t rows = smem_rows(o.type.shape[0]), cols = o.type.shape[1];
    // Whole 16-byte chunks a row, an even number of them (ldmatrix reads two), split evenly over
    // the threads.
    int64_t cpr = cols / 8, threads = this->threads();
    return rows % 16 == 0 && cols % 16 == 0 && rows * cpr % threads == 0;
  }

  bool assign(const TileOp& o) {
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
          if (!stageable(o))
            return fail("the dot operand `" + tile::to_string(o) +
                        "` is not an f16 or bf16 tile of whole 16-byte rows of its buffer's "
                        "innermost dimension (16-row and 16-column multiples)");
          SmemTile t;
          t.load = &o;
          t.dtype = o.type.dtype;
          t.rows = smem_rows(o.type.shape[0]);
          t.live_rows = o.type.shape[0];
          t.cols = o.type.shape[1];
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
          return o.type.dtype == DType::F32;
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

  // A shared tile `a` seen through the exact cast or the transpose `o`.
  Val view_of(const Val& a, const TileOp& o, bool transposed) const {
    Val v = a;
    v.def = &o;
    v.name = "t" + std::to_string(o.result);
    v.transposed = transposed;
    return v;
  }

  // The type of the tensor cores dot `o` runs on: that of its shared B operand.
  DType dot_dtype(const TileOp& o) const {
    return tiles_[static_cast<size_t>(val(o.args[1]).tile)].dtype;
  }

  bool plan_dot(const TileOp& o) {
    Val& a = val(o.args[0]);
    const Val& b = val(o.args[1]);
    int64_t K = val(o.args[0]).def->type.shape[1], N = o.type.shape[1];
    if (K % 16 != 0 || N % 16 != 0)
      return fail("the dot `" + tile::to_string(o) + "` has K = " + std::to_string(K) +
                  " and N = " + std::to_string(N) + ", not multiples of 16");
    if (b.kind != Kind::Smem && !stage_computed_operand(o))
      return fail("the B operand of the dot `" + tile::to_string(o) +
                  "` is neither an f16 or bf16 tile loaded from memory nor an f16 or bf16 tile "
                  "computed from loads and indices (of 16-row and 16-column multiples)");
    tiles_[static_cast<size_t>(b.tile)].last_use = &o;
    DType half = dot_dtype(o);
    if (a.kind == Kind::Smem) {
      SmemTile& t = tiles_[static_cast<size_t>(a.tile)];
      if (a.transposed || !t.stream_loop.empty() || t.rows != warp_rows() || t.dtype != half)
        return fail("the A operand of the dot `" + tile::to_string(o) +
                    "` is a shared tile that is transposed, streamed, not of the row tile, or "
                    "not of B's type");
      t.last_use = &o;
      return true;
    }
    if (a.kind != Kind::Frag || !(half == DType::F16 ? a.exact_f16 : a.exact_bf16))
      return fail("the A operand of the dot `" + tile::to_string(o) +
                  "` is computed in registers and not exactly a " + dtype_name(half) +
                  " value (round it with a cast, as " + dtype_name(half) + "(p))");
    return true;
  }

  // Makes the Lazy B operand of dot `o` a computed shared tile: the f16 or bf16 value under its
  // exact casts to f32 and transposes, written whole in front of the dot. The operand's other
  // uses, if any, must be dots as well (they read the same tile).
  bool stage_computed_operand(const TileOp& o) {
    int id = o.args[1];
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
    const TileOp& r = *val(root).def;
    if (val(root).kind != Kind::Lazy || r.type.shape.size() != 2 ||
        (r.type.dtype != DType::F16 && r.type.dtype != DType::BF16) || r.type.shape[0] % 16 != 0 ||
        r.type.shape[1] % 16 != 0)
      return false;
    SmemTile t;
    t.computed = root;
    t.dtype = r.type.dtype;
    t.rows = t.live_rows = r.type.shape[0];
    t.cols = r.type.shape[1];
    Val& v = val(id);
    v.kind = Kind::Smem;
    v.tile = static_cast<int>(tiles_.size());
    v.transposed = transposed;
    tiles_.push_back(t);
    return true;
  }

  // Writes computed tile `t`: each thread two adjacent columns of a row at a time, packed, at
  // the swizzled position its ldmatrix reads expect. Barriers on both sides: the previous
  // iteration's dot has read the tile, and every element is written before this one reads it.
  void write_computed_tile(const SmemTile& t) {
    int64_t pairs = t.rows * t.cols / 2;
    std::string cols = std::to_string(t.cols);
    line("__syncthreads();");
    line("#pragma unroll 4");
    line("for (int ks_e = ks_tid; ks_e < " + std::to_string(pairs) +
         "; ks_e += " + std::to_string(threads()) + ") {");
    ++indent_;
    line("const int ks_r = (2 * ks_e) / " + cols + ", ks_c = (2 * ks_e) % " + cols + ";");
    std::string lo = lazy(t.computed, {"ks_r", "ks_c"});
    std::string hi = lazy(t.computed, {"ks_r", "(ks_c + 1)"});
    line("*(u32*)(ks_smem + " + std::to_string(t.offset) + " + ks_r * " +
         std::to_string(t.cols * 2) + " + (((ks_c >> 3) ^ " + xor_term("ks_r", swizzle_of(t)) +
         ") * 16) + (ks_c & 7) * 2) = " + (t.dtype == DType::F16 ? "pack_f16x2(" : "pack_bf16x2(") +
         lo + ", " + hi + ");");
    --indent_;
    line("}");
    line("__syncthreads();");
  }

  // Computes Lazy reduction `o` into its shared vector, one element a thread at a time, between
  // barriers (the previous iteration's readers are done; every element is written before use).
  void write_computed_vector(const TileOp& o) {
    const SmemVector& w = vectors_[static_cast<size_t>(val(o.result).vector)];
    const std::vector<int64_t>& in = val(o.args[0]).def->type.shape;
    int64_t n = o.type.shape[0], len = in[static_cast<size_t>(o.axis)];
    std::vector<std::string> ix = o.axis == 0 ? std::vector<std::string>{"ks_k", "ks_r"}
                                              : std::vector<std::string>{"ks_r", "ks_k"};
    line("__syncthreads();");
    line("for (int ks_r = ks_tid; ks_r < " + std::to_string(n) +
         "; ks_r += " + std::to_string(threads()) + ") {");
    ++indent_;
    line("float ks_acc = " + scalar(ir::reducer_identity_expr(o.reducer, DType::F32)) + ";");
    line("#pragma unroll 8");
    line("for (int ks_k = 0; ks_k < " + std::to_string(len) + "; ++ks_k)");
    line("  ks_acc = " +
         round_to(combine(o.reducer, DType::F32, "ks_acc", lazy(o.args[0], ix)), DType::F32) + ";");
    line("((float*)(ks_smem + " + std::to_string(w.offset) + "))[ks_r] = ks_acc;");
    --indent_;
    line("}");
    line("__syncthreads();");
  }

  // --- emission
  int threads() const override { return static_cast<int>(warp_rows() / (16 * mblocks_)) * 32; }
  // As many CTAs an SM as its shared memory holds (228 KB, 1 KB of it reserved per CTA), up to
  // as many as leave 168 registers a thread with one m-block a warp (three CTAs of four warps;
  // four, at 128, made even the head-size-32 prefill kernels spill) and 255 with two (their
  // accumulators are twice as wide).
  int min_blocks() const override { return blocks_for(smem_total_); }
  int blocks_for(int64_t shared_bytes) const {
    int per_thread = mblocks_ == 1 ? 168 : 255;
    int64_t by_registers = std::max(1, 65536 / (threads() * per_thread));
    return static_cast<int>(
        std::clamp<int64_t>(228 * 1024 / (shared_bytes + 1024), 1, by_registers));
  }

  std::string frag_decl(const std::string& type, const std::string& name, int64_t cols) const {
    return type + " " + name + "[" + std::to_string(mblocks_ * cols / 8) + "][4]";
  }
  std::string row_decl(const std::string& type, const std::string& name) const {
    return type + " " + name + "[" + std::to_string(2 * mblocks_) + "]";
  }

  void declare_register(const tile::Register& r) override {
    std::string ty = ctype(r.type.dtype), name = ident("r", r.name);
    if (r.type.shape.empty())
      line(ty + " " + name + " = 0;");
    else if (is_row_shape(r.type.shape))
      line(row_decl(ty, name) + " = {};");
    else
      line(frag_decl(ty, name, r.type.shape[1]) + " = {};");
  }

  // Coordinates of the current element: slot ks_k of a Frag, ks_h of a Row. A Frag's slots run
  // by blocks of 4 (one m16n8 accumulator), block b covering m-block b % M of column block b / M
  // (M m-blocks a warp), so that a 16-column block's slots are consecutive; its row half is the
  // Row slot it pairs with (row_slot).
  std::string frag_row() const { return "(ks_row0 + " + row_slot() + " * 8)"; }
  std::string frag_col() const {
    return "((ks_k >> " + std::to_string(2 + log2_mblocks()) + ") * 8 + ks_col0 + (ks_k & 1))";
  }
  static std::string row_row() { return "(ks_row0 + ks_h * 8)"; }
  std::string row_slot() const {
    return "((ks_k >> 1) & " + std::to_string(2 * mblocks_ - 1) + ")";
  }
  int log2_mblocks() const { return mblocks_ == 2 ? 1 : 0; }
  // Accumulator block of m-block m in column block `block` (an expression).
  std::string mblock(const std::string& block, int m) const {
    return mblocks_ == 1
               ? block
               : "(" + block + ") * " + std::to_string(mblocks_) + " + " + std::to_string(m);
  }

  // Value `id` at the current element of an operation whose result has kind `ctx` (Frag: slot
  // ks_k; Row: ks_h).
  std::string at(int id, Kind ctx) {
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

  // An index-computable integer value as `uniform` + coef . (tile coordinates), one coefficient
  // per axis of its shape, when it has that form.
  struct Affine {
    std::string uniform;
    std::vector<int64_t> coef;
  };
  std::optional<Affine> affine(int id) {
    const Val& v = val(id);
    const TileOp& o = *v.def;
    size_t rank = o.type.shape.size();
    if (is_float(o.type.dtype) || o.type.dtype == DType::Bool) return std::nullopt;
    Affine r{"", std::vector<int64_t>(rank, 0)};
    if (v.kind == Kind::Uniform) {
      // A constant is spelled in place, so that the comparison can move to its loop's top.
      if (o.kind == OpKind::Full) {
        r.uniform = scalar(o.scalar);
        return r;
      }
      if (hoisting_) return std::nullopt;
      r.uniform = v.name;
      return r;
    }
    if (v.kind != Kind::Lazy) return std::nullopt;
    std::optional<Affine> a;
    switch (o.kind) {
      case OpKind::Full:
        r.uniform = scalar(o.scalar);
        return r;
      case OpKind::Arange:
        r.uniform = scalar(o.scalar);
        r.coef[static_cast<size_t>(o.axis)] = 1;
        return r;
      case OpKind::Broadcast:
      case OpKind::Permute:
        if (!(a = affine(o.args[0]))) return std::nullopt;
        r.uniform = a->uniform;
        for (size_t k = 0; k < a->coef.size(); ++k) {
          if (o.kind == OpKind::Broadcast)
            r.coef[static_cast<size_t>(o.dims[k])] = a->coef[k];
          else
            r.coef[k] = a->coef[static_cast<size_t>(o.perm[k])];
        }
        return r;
      case OpKind::Map: {
        if (o.is_call || (o.op != Op::Add && o.op != Op::Sub)) return std::nullopt;
        std::optional<Affine> b;
        if (!(a = affine(o.args[0])) || !(b = affine(o.args[1]))) return std::nullopt;
        int64_t sign = o.op == Op::Add ? 1 : -1;
        r.uniform = "(" + a->uniform + (sign > 0 ? " + " : " - ") + b->uniform + ")";
        for (size_t k = 0; k < rank; ++k)
          r.coef[k] =
              (a->coef.empty() ? 0 : a->coef[k]) + sign * (b->coef.empty() ? 0 : b->coef[k]);
        return r;
      }
      default:
        return std::nullopt;
    }
  }

  // An integer comparison of two affine values becomes coef . (coordinates) OP limit, with the
  // limit computed once where the comparison stands (32-bit, clamped beyond any tile
  // coordinate), instead of 64-bit index arithmetic at every element.
  void define_comparison(const TileOp& o) {
    static const std::map<Op, std::string> kCompare = {
        {Op::Lt, "<"}, {Op::Le, "<="}, {Op::Gt, ">"}, {Op::Ge, ">="}};
    if (o.is_call || !kCompare.count(o.op) || comparisons_.count(o.result)) return;
    std::optional<Affine> a = affine(o.args[0]), b;
    if (!a || !(b = affine(o.args[1]))) return;
    size_t rank = o.type.shape.size();
    Comparison c{std::vector<int64_t>(rank, 0), val(o.result).name + "_lim", kCompare.at(o.op),
                 o.type.shape};
    for (size_t k = 0; k < rank; ++k)
      c.coef[k] = (a->coef.empty() ? 0 : a->coef[k]) - (b->coef.empty() ? 0 : b->coef[k]);
    line("const int " + c.limit + " = (int)max(-65536LL, min(65536LL, (long long)(" + b->uniform +
         " - " + a->uniform + ")));");
    comparisons_[o.result] = c;
  }

  // Along tile axis `axis`, whether index-only value `id` never decreases (+1), never increases
  // (-1) or is constant (0); kEitherWay when it is one of the first two but a run-time value
  // decides which (i / C for a param C); 2 when none of these is known.
  static constexpr int kEitherWay = 3;
  int direction(int id, size_t axis) const {
    const TileOp& o = *val(id).def;
    auto join = [](int a, int b) {
      if (a == 2 || b == 2) return 2;
      if (a == kEitherWay || b == kEitherWay) return a == 0 || b == 0 ? kEitherWay : 2;
      return a == 0 ? b : (b == 0 || a == b ? a : 2);
    };
    auto negated = [](int a) { return a == 2 || a == kEitherWay ? a : -a; };
    switch (o.kind) {
      case OpKind::Full:
        return 0;
      case OpKind::Arange:
        return static_cast<size_t>(o.axis) == axis ? 1 : 0;
      case OpKind::Broadcast:
        for (size_t k = 0; k < o.dims.size(); ++k)
          if (static_cast<size_t>(o.dims[k]) == axis) return direction(o.args[0], k);
        return 0;
      case OpKind::Permute:
        return direction(o.args[0], static_cast<size_t>(o.perm[axis]));
      case OpKind::Cast:
        return direction(o.args[0], axis);
      case OpKind::Map:
        break;
      default:
        return 2;
    }
    std::vector<int> d;
    for (int a : o.args) d.push_back(direction(a, axis));
    bool constant = std::all_of(d.begin(), d.end(), [](int x) { return x == 0; });
    if (constant) return 0;
    if (o.is_call || d.size() != 2) return 2;
    std::optional<double> c0 = constant_value(o.args[0]), c1 = constant_value(o.args[1]);
    switch (o.op) {
      case Op::Add:
      case Op::Min:
      case Op::Max:
        return join(d[0], d[1]);
      case Op::Sub:
        return join(d[0], negated(d[1]));
      case Op::Mul:
        if (c1) return *c1 >= 0 ? d[0] : negated(d[0]);
        if (c0) return *c0 >= 0 ? d[1] : negated(d[1]);
        return 2;
      case Op::Div:  // floor division for integers
        if (c1) return *c1 > 0 ? d[0] : 2;
        // By a divisor uniform over the tile: monotone, in the direction of the divisor's sign.
        return d[1] == 0 && d[0] != 2 ? kEitherWay : 2;
      default:
        return 2;
    }
  }
  // The value of a constant (through broadcasts): a literal, or an expression of constants alone
  // (the sizes the kernel is specialised to are constants), e.g. a softmax scale rsqrt(f32(128)).
  std::optional<double> constant_value(int id) const {
    const TileOp& d = *val(id).def;
    if (d.kind == OpKind::Broadcast) return constant_value(d.args[0]);
    return d.kind == OpKind::Full ? constant_expr(d.scalar) : std::nullopt;
  }
  std::optional<double> constant_expr(const ir::Expr& e) const {
    if (e->op == Op::Var && e->var_kind == ir::VarKind::Dim)
      if (auto sp = p_.specialised.find(ir::to_string(e)); sp != p_.specialised.end())
        return static_cast<double>(sp->second.value);
    std::vector<double> a;
    for (const ir::Expr& x : e->args) {
      std::optional<double> c = constant_expr(x);
      if (!c) return std::nullopt;
      a.push_back(*c);
    }
    switch (e->op) {
      case Op::IntImm:
        return static_cast<double>(e->int_value);
      case Op::FloatImm:
        return e->float_value;
      case Op::Cast:
        return a[0];
      case Op::Neg:
        return -a[0];
      case Op::Add:
        return a[0] + a[1];
      case Op::Sub:
        return a[0] - a[1];
      case Op::Mul:
        return a[0] * a[1];
      case Op::Div:
        return is_float(e->type) && a[1] != 0 ? std::optional<double>(a[0] / a[1]) : std::nullopt;
      case Op::Call:
        if (e->fn == ir::MathFn::Sqrt && a[0] >= 0) return std::sqrt(a[0]);
        if (e->fn == ir::MathFn::Rsqrt && a[0] > 0) return 1.0 / std::sqrt(a[0]);
        return std::nullopt;
      default:
        return std::nullopt;
    }
  }
  // The value of index-only `id` at the tile's corner where it is largest (`largest`) or
  // smallest, spelled in front of the loop body; nullopt when it is not monotone along some axis.
  // `either_end`: a value monotone along one axis only, in a direction known at run time
  // (kEitherWay), gives that axis's last (`largest`) or first element, its extremes in some order.
  std::optional<std::string> corner(int id, bool largest, bool either_end = false) {
    const TileOp& o = *val(id).def;
    std::vector<std::string> at;
    int varying = 0;
    bool either_way = false;
    for (size_t k = 0; k < o.type.shape.size(); ++k) {
      int d = direction(id, k);
      if (d == 2) return std::nullopt;
      varying += d != 0;
      either_way |= d == kEitherWay;
      at.push_back(d != 0 && (d != -1) == largest ? std::to_string(o.type.shape[k] - 1) : "0");
    }
    if (either_way && (!either_end || varying > 1)) return std::nullopt;
    return index_code(id, at, /*in_front=*/true);
  }
  // A condition on index-only values holds over the whole tile when, spelled in front of the
  // loop body, the test this returns holds (nullopt: no such test is known):
  //   a comparison of values monotone along every tile axis (not only affine ones: the per-row
  //   trip count of a key loop widened to a row strip, min(tiles, (i + T - S) / 64 + 1)), between
  //   its sides' extreme corners: the largest left side and the smallest right side for < and <=;
  //   |x| < w when x stays inside (-w, w) (a symmetric window);
  //   a == b when both are one value over the tile (the same chunk, i / C == j / C: equal
  //   extremes, for any sign of C);
  //   a conjunction when both sides hold; a disjunction when either does (a prefix `j < P || j
  //   <= i`: a tile of the prefix, or one below the diagonal).
  // (Conjunctions and views are taken inside a compound condition only: elsewhere their parts
  // are tested on their own.)
  std::optional<std::string> whole_tile_test(int id, bool nested = false) {
    static const std::map<Op, std::string> kCompare = {
        {Op::Lt, "<"}, {Op::Le, "<="}, {Op::Gt, ">"}, {Op::Ge, ">="}};
    const TileOp& o = *val(id).def;
    nested = nested || compound_condition(id);
    if (nested && (o.kind == OpKind::Broadcast || o.kind == OpKind::Permute))
      return whole_tile_test(o.args[0], true);
    if (o.kind != OpKind::Map || o.is_call) return std::nullopt;
    if (nested && (o.op == Op::And || o.op == Op::Or)) {
      std::optional<std::string> a = whole_tile_test(o.args[0], true),
                                 b = whole_tile_test(o.args[1], true);
      if (o.op == Op::And) {
        if (!a || !b) return std::nullopt;
        return "(" + *a + " && " + *b + ")";
      }
      if (!a || !b) return a ? a : b;
      return "(" + *a + " || " + *b + ")";
    }
    if (nested && o.op == Op::Eq) {
      std::vector<std::string> c;
      for (int side : o.args)
        for (bool largest : {true, false}) {
          std::optional<std::string> e = corner(side, largest, /*either_end=*/true);
          if (!e) return std::nullopt;
          c.push_back(*e);
        }
      return "(" + c[0] + " == " + c[1] + " && " + c[2] + " == " + c[3] + " && " + c[0] +
             " == " + c[2] + ")";
    }
    if (!kCompare.count(o.op)) return std::nullopt;
    bool upper = o.op == Op::Lt || o.op == Op::Le;
    // |x| on the small side of the comparison: x's largest corner below the bound, and its
    // smallest corner above the bound's negation.
    int small = upper ? o.args[0] : o.args[1], bound = upper ? o.args[1] : o.args[0];
    const TileOp& s = *val(small).def;
    if (s.kind == OpKind::Map && s.is_call && s.fn == ir::MathFn::Abs) {
      std::optional<std::string> hi = corner(s.args[0], true), lo = corner(s.args[0], false),
                                 w = corner(bound, false);
      if (!hi || !lo || !w) return std::nullopt;
      std::string op = o.op == Op::Lt || o.op == Op::Gt ? "<" : "<=";
      return "(" + *hi + " " + op + " " + *w + " && -(" + *lo + ") " + op + " " + *w + ")";
    }
    std::optional<std::string> a = corner(o.args[0], upper), b = corner(o.args[1], !upper);
    if (!a || !b) return std::nullopt;
    return "(" + *a + " " + kCompare.at(o.op) + " " + *b + ")";
  }
  // Whether whole_tile_test of `id` is not the conjunction of its parts' tests, so that its
  // parts must not be required to hold on their own (a disjunction, |x| < w, a == b; a
  // conjunction is tested part by part).
  bool compound_condition(int id) const {
    const TileOp& o = *val(id).def;
    if (o.kind != OpKind::Map || o.is_call || o.type.dtype != DType::Bool) return false;
    if (o.op == Op::Or || o.op == Op::Eq) return true;
    for (int a : o.args) {
      const TileOp& d = *val(a).def;
      if (d.kind == OpKind::Map && d.is_call && d.fn == ir::MathFn::Abs) return true;
    }
    return false;
  }

  // The code of index-computable value `id` at coordinates `ix` (one per axis). `in_front`: spelled
  // from sizes, loop variables and constants alone, for a test in front of a loop body (before
  // its uniform values are defined); nullopt when the value reads anything else.
  std::optional<std::string> index_code(int id, const std::vector<std::string>& ix, bool in_front) {
    const Val& v = val(id);
    const TileOp& o = *v.def;
    if (in_front) {
      if (v.kind == Kind::Uniform && o.kind != OpKind::Full) return std::nullopt;
    } else {
      if (ix.size() == 1 && (ix[0] == frag_row() || ix[0] == frag_col()))
        if (auto it = slot_values_.find({id, ix[0] == frag_row()}); it != slot_values_.end())
          return it->second;
      if (auto it = diagonal_values_.find(id);
          it != diagonal_values_.end() && ix == std::vector{frag_row(), frag_col()})
        return diagonal_element(it->second, ix);
      if (v.kind == Kind::Uniform) return v.name;
      if (assumed_true_.count(id)) return "true";
      auto cmp = comparisons_.find(id);
      if (cmp != comparisons_.end()) {
        std::string term = "0";
        for (size_t k = 0; k < ix.size(); ++k)
          if (cmp->second.coef[k] != 0)
            term += " + " + std::to_string(cmp->second.coef[k]) + " * " + ix[k];
        return "((" + term + ") " + cmp->second.op + " " + cmp->second.limit + ")";
      }
    }
    switch (o.kind) {
      case OpKind::Full:
        return scalar(o.scalar);
      case OpKind::Arange:
        return "(" + scalar(o.scalar) + " + " + ix[static_cast<size_t>(o.axis)] + ")";
      case OpKind::Broadcast: {
        std::vector<std::string> src;
        for (int d : o.dims) src.push_back(ix[static_cast<size_t>(d)]);
        return index_code(o.args[0], src, in_front);
      }
      case OpKind::Permute: {
        std::vector<std::string> src(ix.size());
        for (size_t k = 0; k < o.perm.size(); ++k) src[static_cast<size_t>(o.perm[k])] = ix[k];
        return index_code(o.args[0], src, in_front);
      }
      case OpKind::Load: {
        if (in_front) return std::nullopt;
        if (val(id).tile >= 0) {  // an element tile: zero-filled past the buffer
          const SmemTile& t = tiles_[static_cast<size_t>(val(id).tile)];
          std::string st = storage(t.dtype);
          return load_value(o.buffer,
                            "((const " + st + "*)(ks_smem + " + std::to_string(t.offset) + " + (" +
                                stage_of(t) + ") * " + std::to_string(t.stage_bytes()) + "))[(" +
                                ix[0] + ") * " + std::to_string(t.pitch / t.element_bytes) + " + " +
                                ix[1] + "]",
                            o.type.dtype);
        }
        auto region = lazy_loads_.find(id);
        internal_assert(region != lazy_loads_.end())
            << "fragment codegen: %" << id << " is used before its region is open";
        std::string offset, inside;
        element(region->second, ix, &offset, &inside);
        return "((" + inside + ") ? " +
               load_value(o.buffer, buffer_ids_.at(o.buffer) + "[" + offset + "]", o.type.dtype) +
               " : (" + ctype(o.type.dtype) + ")0)";
      }
      case OpKind::Reduce: {
        if (in_front) return std::nullopt;
        const SmemVector& w = vectors_[static_cast<size_t>(val(id).vector)];
        return "((const float*)(ks_smem + " + std::to_string(w.offset) + "))[" + ix[0] + "]";
      }
      case OpKind::Gather: {
        if (in_front) return std::nullopt;
        std::vector<std::string> a;
        for (int x : o.args) a.push_back(*index_code(x, ix, false));
        if (!diagonal_checks_)
          return gather_element(o, a, o.type.dtype);  // its index checks go in front of the use
        std::string inside;
        std::string e = gather_element(o, a, o.type.dtype, &inside);
        if (!inside.empty()) {
          const std::string& checks = diagonal_checks_->at(&o);
          if (checks.empty())
            line("if (!(" + inside + ")) ks_fail(ks_err, " + std::to_string(site(o.buffer)) + ");");
          else
            line(checks + "[ks_s] = " + inside + ";");
        }
        return e;
      }
      case OpKind::Cast:
      case OpKind::Map: {
        if (o.kind == OpKind::Cast && !in_front && ix == std::vector{frag_row(), frag_col()})
          if (std::optional<std::string> f = float_of_affine(o)) return *f;
        std::vector<std::string> a;
        for (int x : o.args) {
          std::optional<std::string> e = index_code(x, ix, in_front);
          if (!e) return std::nullopt;
          a.push_back(*e);
        }
        return elementwise(o, a);
      }
      default:
        internal_assert(in_front) << "fragment codegen: %" << id << " is not index-computable";
        return std::nullopt;
    }
  }
  // An f32 cast of an affine index value, or of its absolute value, at a Frag slot (a position
  // difference, ALiBi's j - (i + T - S) or |i - j|), as the value at the lane's first slot,
  // converted once an iteration, plus the slot's offset from it, a compile-time constant after
  // unrolling: one add an element where 64-bit index arithmetic and a conversion were. (Equal to
  // the cast of the sum below 2^24; above, within an ulp of it.)
  std::optional<std::string> float_of_affine(const TileOp& cast) {
    if (cast.type.dtype != DType::F32 || cast.type.shape.size() != 2) return std::nullopt;
    // The cast of |x| (a symmetric distance, |i - j|) is |f32(x)|: rounding is symmetric.
    const TileOp* arg = val(cast.args[0]).def;
    bool abs = arg && arg->kind == OpKind::Map && arg->is_call && arg->fn == ir::MathFn::Abs;
    std::optional<Affine> a = affine(abs ? arg->args[0] : cast.args[0]);
    if (!a) return std::nullopt;
    auto term = [](int64_t coef, const std::string& x) {
      return coef == 0 ? std::string() : " + " + std::to_string(coef) + " * " + x;
    };
    std::string col_slot =
        "((ks_k >> " + std::to_string(2 + log2_mblocks()) + ") * 8 + (ks_k & 1))";
    std::string lane =
        "(" + a->uniform + term(a->coef[0], "ks_row0") + term(a->coef[1], "ks_col0") + ")";
    std::string slot =
        "(0" + term(a->coef[0], "(" + row_slot() + " * 8)") + term(a->coef[1], col_slot) + ")";
    std::string sum = "((float)" + lane + " + (float)" + slot + ")";
    return abs ? "fabsf(" + sum + ")" : sum;
  }
  std::string lazy(int id, const std::vector<std::string>& ix) {
    return index_code(id, ix, /*in_front=*/false).value_or("");
  }

  std::string elementwise(const TileOp& o, const std::vector<std::string>& a) {
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

  // Opens the loop over the slots of a Frag of `cols` columns (`ks_k`) or of a Row (`ks_h`).
  void open_slots(Kind k, int64_t cols, const std::string& first = "0",
                  const std::string& last = "") {
    line("#pragma unroll");
    if (k == Kind::Frag)
      line("for (int ks_k = " + first + "; ks_k < " +
           (last.empty() ? std::to_string(mblocks_ * cols / 2) : last) + "; ++ks_k) {");
    else
      line("for (int ks_h = 0; ks_h < " + std::to_string(2 * mblocks_) + "; ++ks_h) {");
    ++indent_;
  }
  void close_slots() {
    --indent_;
    line("}");
  }
  std::string slot(const Val& v) const {
    return v.kind == Kind::Frag ? v.name + "[ks_k >> 2][ks_k & 3]" : v.name + "[ks_h]";
  }
  void declare(const Val& v, const tile::TileType& t) {
    std::string ty = ctype(t.dtype);
    line((v.kind == Kind::Frag ? frag_decl(ty, v.name, t.shape[1]) : row_decl(ty, v.name)) + ";");
  }

  void body(const tile::TileBody& b) override {
    if (&b == &k_.body) {
      line("const int ks_lane = ks_tid & 31, ks_warp = ks_tid >> 5;");
      line("const int ks_row0 = ks_warp * " + std::to_string(16 * mblocks_) +
           " + (ks_lane >> 2), ks_col0 = 2 * (ks_lane & 3);");
      line("const u32 ks_smem_u32 = smem_addr(ks_smem);");
      smem_bytes_ = smem_total_;
      for (const TileOp* o : ops_)
        if (o->kind == OpKind::Dot) {
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
      dot_region(b, i, last);
      for (size_t k = i; k < last; ++k) reissue_after(b[k].op);
      i = last - 1;
    }
  }

  // The tiles streamed along loop `var` in the order their copies are committed: the
  // two-stage ones (program order), then the one-stage ones in the order of their last uses.
  std::vector<int> streams_of(const std::string& var) const {
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

  // The index-only values `id` reads, transitively (itself included).
  // The Lazy values `id` is computed from, itself included; a compound condition's parts are
  // left out (its whole-tile test is its own).
  void lazy_closure(int id, std::set<int>& out) const {
    const Val& v = val(id);
    if (v.kind != Kind::Lazy || !out.insert(id).second || compound_condition(id)) return;
    for (int a : v.def->args) lazy_closure(a, out);
  }
  void used_comparisons(const tile::TileBody& b, std::set<int>& out) const {
    for (const tile::TileStmt& st : b) {
      if (st.kind == tile::StmtKind::For) {
        used_comparisons(st.body, out);
        continue;
      }
      // A Lazy value's operands count through the closure of the values that use it.
      if (st.op.result >= 0 && val(st.op.result).kind == Kind::Lazy) continue;
      for (int a : st.op.args) lazy_closure(a, out);
    }
  }

  // Whether bool value `id` masks what it guards somewhere in the kernel, directly or through
  // conjunctions, disjunctions and views: the mask of a gather or a store, or the condition of a
  // select of floats whose other side is a constant (a masked score) or a register's previous
  // value (a guarded update). A comparison that only chooses between two values (T5's bucket of a
  // key after its query, 16 + d or d) splits the tiles about evenly or holds over none: a
  // version of the body for tiles where it holds everywhere would be taken rarely, and the tail
  // tests of the other version paid everywhere else.
  bool masks(int id) const {
    bool found = false;
    std::function<void(const tile::TileBody&)> scan = [&](const tile::TileBody& b) {
      for (const tile::TileStmt& st : b) {
        if (found) return;
        if (st.kind == tile::StmtKind::For) {
          scan(st.body);
          continue;
        }
        const TileOp& o = st.op;
        for (size_t a = 0; a < o.args.size() && !found; ++a) {
          if (o.args[a] != id) continue;
          bool last = a + 1 == o.args.size();
          if (o.kind == OpKind::Gather)
            found = last && o.args.size() > o.index_in_bounds.size();
          else if (o.kind == OpKind::Store)
            found = a == 1;
          else if (o.kind == OpKind::Broadcast || o.kind == OpKind::Permute)
            found = masks(o.result);
          else if (o.kind == OpKind::Map && !o.is_call && (o.op == Op::And || o.op == Op::Or))
            found = masks(o.result);
          else if (o.kind == OpKind::Map && !o.is_call && o.op == Op::Select && a == 0)
            found = is_float(o.type.dtype) && (constant_value(o.args[2]).has_value() ||
                                               val(o.args[2]).def->kind == OpKind::Read);
        }
      }
    };
    scan(k_.body);
    return found;
  }

  // The loop body, in two versions when it uses tile comparisons that mask: one for iterations
  // where every such comparison holds over the whole tile (interior tiles: no tail, no diagonal),
  // where they fold to true and their selects disappear, and the general one. The choice is
  // uniform over the CTA, so both versions keep their barriers.
  void versioned_body(const tile::TileStmt& s) {
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
      // The largest (for < and <=) or smallest (for > and >=) value of coef . coordinates.
      bool upper = c.op[0] == '<';
      int64_t bound = 0;
      for (size_t k = 0; k < c.coef.size(); ++k)
        if ((c.coef[k] > 0) == upper && c.coef[k] != 0) bound += c.coef[k] * (c.extents[k] - 1);
      all += " && (" + std::to_string(bound) + " " + c.op + " " + c.limit + ")";
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

  // For a load of a Frag or Lazy tile whose region the bounds may cut and whose starts read only
  // loop variables, sizes and params: the test that the whole tile lies inside the buffer.
  std::optional<std::string> interior_test(const TileOp& o) {
    if (o.kind != OpKind::Load || o.result < 0 || val(o.result).tile >= 0) return std::nullopt;
    Kind k = val(o.result).kind;
    if (k != Kind::Frag && k != Kind::Lazy) return std::nullopt;
    std::string test;
    const std::vector<std::string>& ext = buffer_extents_.at(o.buffer);
    for (size_t d = 0; d < o.starts.size(); ++d) {
      if (o.axis_of_dim[d] < 0 || !o.bounds_checked[d]) continue;
      bool loads = false;
      ir::visit(o.starts[d], [&](const ir::Expr& x) {
        loads = loads || x->op == Op::Load;
        return true;
      });
      if (loads) return std::nullopt;
      std::string start = "(" + scalar(o.starts[d]) + ")";
      int64_t last = o.type.shape[static_cast<size_t>(o.axis_of_dim[d])] - 1;
      test += std::string(test.empty() ? "" : " && ") + "(unsigned long long)" + start +
              " < (unsigned long long)" + ext[d] + " && " + start + " + " + std::to_string(last) +
              " < " + ext[d];
    }
    if (test.empty()) return std::nullopt;
    return "(" + test + ")";
  }

  // Whether value `id` is defined in a loop nested in body `b`.
  static bool nested_loop_value(const tile::TileBody& b, int id) {
    std::function<bool(const tile::TileBody&)> defines = [&](const tile::TileBody& body) {
      for (const tile::TileStmt& st : body)
        if (st.kind == tile::StmtKind::For ? defines(st.body) : st.op.result == id) return true;
      return false;
    };
    for (const tile::TileStmt& st : b)
      if (st.kind == tile::StmtKind::For && defines(st.body)) return true;
    return false;
  }

  // The value `var OP bound` (or `bound OP var`) keeps once var exceeds the loop-invariant bound.
  static std::optional<bool> steady_value(const ir::Expr& e, const std::string& var) {
    static const std::map<Op, std::pair<bool, bool>> kSteady = {
        // op -> (steady value with var on the left, with var on the right)
        {Op::Gt, {true, false}}, {Op::Ge, {true, false}},  {Op::Lt, {false, true}},
        {Op::Le, {false, true}}, {Op::Eq, {false, false}}, {Op::Ne, {true, true}}};
    auto it = kSteady.find(e->op);
    if (it == kSteady.end() || e->args.size() != 2) return std::nullopt;
    auto is_var = [&](const ir::Expr& x) { return x->op == Op::Var && x->name == var; };
    if (is_var(e->args[0]) && !ir::uses_var(e->args[1], var)) return it->second.first;
    if (is_var(e->args[1]) && !ir::uses_var(e->args[0], var)) return it->second.second;
    return std::nullopt;
  }

  void loop(const tile::TileStmt& s) {
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
    loop_hi_[s.var] = hi;
    issue_streams(streams, lo, hi, "0");
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
  }

  // Issues the copies of `streams` for the iteration whose loop variable is `next` into stage
  // `stage` when next < hi, and commits one group per tile either way (so that the group count a
  // wait names is the same in every iteration).
  void issue_streams(const std::vector<int>& streams, const std::string& next,
                     const std::string& hi, const std::string& stage) {
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

  // The buffer dimension of a tile's rows, and the offset of its first element; declares
  // ks_stride, the elements from one row to the next.
  std::pair<size_t, std::string> tile_origin(const Region& reg) {
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

  // cp.async of a whole tile into `stage`: 16-byte chunks, rows past the buffer zero-filled.
  void copy_tile(const SmemTile& t, const std::string& stage) {
    if (t.pitch > 0) return copy_element_tile(t, stage);
    const TileOp& o = *t.load;
    Region reg = open_region(o);
    int64_t cpr = t.cols / 8, chunks = t.rows * cpr;
    // Thread q copies chunk (q % cpr) of rows q / cpr, q / cpr + rows_per_pass, ...: one source
    // pointer a thread, advanced by a uniform step, and one 32-bit row test a chunk.
    internal_assert(chunks % threads() == 0)
        << "fragment codegen: tile " << o.buffer << " does not split evenly over the threads";
    const auto [row_dim, origin] = tile_origin(reg);
    const std::vector<std::string>& ext = buffer_extents_.at(o.buffer);
    const std::string& buf = buffer_ids_.at(o.buffer);
    std::string rows = std::to_string(t.live_rows);
    if (o.bounds_checked[row_dim]) {
      const std::string& start = reg.starts[row_dim];
      line("const int ks_rlo = " + reg.ok + " ? (int)min(" + rows + "LL, max(0LL, -" + start +
           ")) : " + rows + ";");
      line("const int ks_rhi = " + reg.ok + " ? (int)max(0LL, min(" + rows + "LL, " + ext[row_dim] +
           " - " + start + ")) : 0;");
    } else {
      line("const int ks_rlo = 0, ks_rhi = " + reg.ok + " ? " + rows + " : 0;");
    }
    // A tail along the rows themselves (keys along a V^T tile's rows): the chunks of a row past
    // the buffer's end (whole chunks, innermost_chunks) are zero-filled too.
    const size_t col_dim = o.starts.size() - 1;
    std::string whole_chunks, chunk_in;
    if (o.bounds_checked[col_dim]) {
      line("const int ks_cl = (int)max(0LL, min(" + std::to_string(cpr) + "LL, (" + ext[col_dim] +
           " - " + reg.starts[col_dim] + ") / 8));");
      whole_chunks = " && ks_cl == " + std::to_string(cpr);
      chunk_in = " && ks_c < ks_cl";
    }
    // Every row and chunk of the tile's `n` rows inside the buffer.
    auto whole = [&](int64_t n) {
      return "ks_rlo == 0 && ks_rhi == " + std::to_string(n) + whole_chunks;
    };
    std::string passes = std::to_string(chunks / threads());
    if (threads() % cpr != 0) {
      // Rows the threads do not divide (whole swizzle spans, a head size of 192): thread q copies
      // chunks q, q + threads, ... of the tile, each at its own row and chunk.
      std::string n = std::to_string(cpr), all = std::to_string(threads());
      const std::string dst = stage_address(t, stage) + " + (u32)(ks_r * " +
                              std::to_string(t.cols * 2) + " + ((ks_c ^ " +
                              xor_term("ks_r", swizzle_of(t)) + ") * 16))";
      // Rows that follow each other in memory (a key tile of whole heads): chunk g lies 8 g
      // elements past the tile's first, so that a tile inside the buffer is copied from one
      // pointer a thread at constant offsets, without a row test or a 64-bit product a chunk.
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
               ") + ks_r * ks_stride + ks_c * 8 : " + buf + ", ks_in ? 16 : 0);");
        } else {
          line("cp_async_cg16(" + dst + ", ks_src + ks_i * " + std::to_string(threads() * 8) +
               ", 16);");
        }
        --indent_;
        line("}");
      };
      const bool contiguous = row == static_cast<double>(t.cols);
      if (contiguous) {
        line("const u16* ks_src = " + buf + " + (" + origin + ") + ks_tid * 8;");
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
    line("const u16* ks_src = " + buf + " + (" + origin + ") + ks_r0 * ks_stride + ks_c * 8;");
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
    std::string row_bytes = std::to_string(t.cols * 2);
    auto destination = [&](const std::string& row) {
      return stage_address(t, stage) + " + (u32)(" + row + " * " + row_bytes + " + ((ks_c ^ " +
             xor_term(row, z) + ") * 16))";
    };
    std::string step = std::to_string(phases * rows_per_pass * t.cols * 2), dst;
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
    line("  cp_async_cg16(" + dst + ", ks_src + ks_i * (" + pass_rows + " * ks_stride), 16);");
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

  // The three ldmatrix.x4 access patterns of the dots: each lane addresses one row of an 8 x 8
  // matrix; `lane_row` is its row within the 16-row block (plus the warp's first row for A) and
  // `lane_chunk` its 16-byte chunk within the two-chunk step.
  enum class Access : uint8_t { A, B, BTrans };
  struct AccessSpec {
    std::string lane_row, lane_chunk;
  };
  AccessSpec access_spec(Access a) const {
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
  struct Swizzle {
    int64_t span = 8;  // chunk positions the XOR permutes (gcd of the chunks a row and 8)
    int shift = 0;     // rows sharing one XOR term: row >> shift
  };
  static Swizzle swizzle_of(const SmemTile& t) {
    const int cpr = static_cast<int>(t.cols / 8);
    return Swizzle{swizzle_span(cpr), swizzle_shift(cpr)};
  }
  // swizzle_term spelled on a non-negative int row (a shift and a mask).
  static std::string xor_term(const std::string& row, const Swizzle& z) {
    return "(((" + row + ") >> " + std::to_string(z.shift) + ") & " + std::to_string(z.span - 1) +
           ")";
  }
  std::string lane_offsets_name(int tile, Access a) const {
    return "ks_lane_off" + std::to_string(tile) + "_" + std::to_string(static_cast<int>(a));
  }

  // A lane's byte offsets into a tile for an access pattern, computed once: the rows of every
  // 16-row block share the lane's XOR term (blocks start at multiples of 16), so the swizzled
  // chunk of (block, even chunk c0 + lane chunk) depends on the lane and on c0 modulo the span
  // only: one offset per even residue; the rest is a compile-time constant at each use.
  void define_lane_offsets(int tile, Access a) {
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
    line("const int ks_x = " + xor_term("ks_lr", z) + ";");
    for (int64_t r = 0; r < n; ++r)
      line(name + "[" + std::to_string(r) + "] = (u32)(ks_lr * " + std::to_string(t.cols * 2) +
           " + (((" + std::to_string(2 * r) + " ^ (ks_x & ~1)) | ((ks_lc ^ ks_x) & 1)) * 16));");
    --indent_;
    line("}");
  }

  // The shared-window address of the ldmatrix of block row `r0` (a multiple of 16) and even
  // chunk `c0` (compile-time after unrolling) of a tile whose stage starts at `base`.
  std::string ldmatrix_address(int tile, Access a, const std::string& base, const std::string& r0,
                               const std::string& c0) const {
    const SmemTile& t = tiles_[static_cast<size_t>(tile)];
    std::string mask = std::to_string(swizzle_of(t).span - 1);
    return base + " + " + lane_offsets_name(tile, a) + "[((" + c0 + ") & " + mask + ") >> 1] + (" +
           r0 + ") * " + std::to_string(t.cols * 2) + " + ((" + c0 + ") & ~" + mask + ") * 16";
  }
  std::string stage_address(const SmemTile& t, const std::string& stage) const {
    return "(ks_smem_u32 + " + std::to_string(t.offset) + " + (" + stage + ") * " +
           std::to_string(t.stage_bytes()) + ")";
  }

  // cp.async of an element tile into `stage`, row by row at its pitch: thread q copies chunk
  // q % (chunks a row) of rows q / (chunks a row) + k (threads / chunks a row); chunks of rows
  // or columns past the buffer are zero-filled (a column chunk lies inside the buffer or past it
  // whole: element_stageable).
  void copy_element_tile(const SmemTile& t, const std::string& stage) {
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

  // The stage expression of a tile at its use.
  std::string stage_of(const SmemTile& t) const {
    return t.stages == 1 ? "0" : "ks_stage_" + t.stream_loop;
  }

  // After the last use of one-stage streamed tiles (a dot, or an element tile's last reader): a
  // barrier (every warp has read the stage), then the next iteration's copy.
  void reissue_after(const TileOp& use) {
    for (size_t t = 0; t < tiles_.size(); ++t) {
      const SmemTile& tile = tiles_[t];
      if (tile.stream_loop.empty() || tile.stages != 1 || tile.last_use != &use) continue;
      line("__syncthreads();");
      issue_streams({static_cast<int>(t)}, ident("v", tile.stream_loop) + " + 1",
                    loop_hi_.at(tile.stream_loop), "0");
    }
  }

  // The shared tiles the kernel loads at its top level before any loop are copied at its start,
  // one group each, in program order, so that their transfers overlap (a decode chunk's Q, K and
  // V); each is waited for at its load.
  void prefetch_top_level_tiles() {
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

  void load_smem(const Val& v) {
    const SmemTile& t = tiles_[static_cast<size_t>(v.tile)];
    if (auto p = prefetched_.find(v.tile); p != prefetched_.end()) {
      if (std::optional<std::string> loop = wait_left_to_stream(v.tile)) {
        unwaited_before_.insert(*loop);
        return;
      }
      int later = static_cast<int>(prefetched_.size()) - 1 - p->second;
      line("cp_async_wait_group<" + std::to_string(later) + ">();");
      line("__syncthreads();");
      return;
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
      line("cp_async_wait_group<" + std::to_string(n - 1 - index + two_stage + reissued) + ">();");
      line("__syncthreads();");
      return;
    }
    line("__syncthreads();");  // earlier readers of this tile (a loop's previous iteration)
    line("{");
    ++indent_;
    copy_tile(t, "0");
    --indent_;
    line("}");
    line("cp_async_commit();");
    line("cp_async_wait_group<0>();");
    line("__syncthreads();");
  }

  // The loop whose streamed-tile waits can stand in for the wait of prefetched tile `tile`: the
  // one loop where every dot reads it, each after a streamed tile's load (its wait and barrier).
  // cp.async groups complete in commit order, so that wait covers the older prefetch group, and
  // the loop's first copies are issued without first waiting for the prefetch (Q of prefill).
  std::optional<std::string> wait_left_to_stream(int tile) const {
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

  // Whether `o` works slot by slot on [R, n] accumulator tiles (or emits nothing), so that it can
  // run column block by column block right after the dot that feeds it.
  bool slot_local(const TileOp& o, int64_t n) const {
    if (o.kind == OpKind::Read) return true;
    if (o.kind == OpKind::Write)
      return data_kind(o.type.shape) == Kind::Frag && o.type.shape[1] == n;
    if (o.kind != OpKind::Map && o.kind != OpKind::Cast && o.kind != OpKind::Broadcast &&
        o.kind != OpKind::Full && o.kind != OpKind::Arange)
      return false;
    Kind k = val(o.result).kind;
    return hoistable(k) || k == Kind::RowBcast || (k == Kind::Frag && o.type.shape[1] == n);
  }
  // Kinds of values in a dot region that depend on nothing the region computes (no reduction
  // runs in it): they are emitted in front of it.
  static bool hoistable(Kind k) { return k == Kind::Lazy || k == Kind::Uniform || k == Kind::Row; }

  // A dot whose result only reaches `X + select(c, dot, 0)` (through any number of such selects,
  // each keeping the dot where its condition, uniform or one per row, holds or fails) accumulates
  // onto X: FlashAttention's o = o a + P V, with the mma adding P V to the rescaled o, so that
  // the dot's result never takes registers of its own. A row the selects drop has its A row
  // zeroed instead (the P row of a query whose keys are all masked so far, NaN before the select
  // drops it): 0 times the B operand, a loaded 16-bit tile, is 0 where that tile is finite.
  struct Accumulation {
    int sum = -1;                    // the add: its value is the mma's accumulator
    int addend = -1;                 // X
    std::set<const TileOp*> folded;  // the selects and the add, emitted by the mma
    std::vector<std::string> keep;   // by Row slot: whether the dot counts for its row
  };
  std::optional<Accumulation> accumulation(const tile::TileBody& b, size_t first, size_t last) {
    const TileOp& dot = b[first].op;
    if (val(dot.args[0]).kind != Kind::Frag) return std::nullopt;
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

  // A dot and the slot-local operations after it (b[first], ..., b[last - 1]), interleaved by
  // 16-column blocks: block np's accumulators are finished and consumed (the repaired o update)
  // before the next block's mma, so the dot's result never lives in registers whole.
  void dot_region(const tile::TileBody& b, size_t first, size_t last) {
    const TileOp& o = b[first].op;
    const Val& a = val(o.args[0]);
    const Val& bv = val(o.args[1]);
    const SmemTile& bt = tiles_[static_cast<size_t>(bv.tile)];
    int64_t K = a.def->type.shape[1], N = o.type.shape[1];
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
      line(frag_decl("float", val(o.result).name, N) + " = {};");
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
    bool blocked = N / 2 > 32 && last > first + 1;
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
    std::string mma = bt.dtype == DType::F16 ? "mma_m16n8k16_f16(" : "mma_m16n8k16_bf16(";
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

  // Whether index-only value `id` is true everywhere in the current loop version.
  bool known_true(int id) const {
    if (assumed_true_.count(id)) return true;
    const Val& v = val(id);
    if (v.kind != Kind::Lazy) return false;
    const TileOp& d = *v.def;
    if (d.kind == OpKind::Broadcast || d.kind == OpKind::Permute) return known_true(d.args[0]);
    return d.kind == OpKind::Map && !d.is_call && d.op == Op::And && known_true(d.args[0]) &&
           known_true(d.args[1]);
  }
  // The Frag value whose rounding to `half` is value `id` (through f32(half(x)) and selects the
  // current loop version decides), or `id` itself.
  int unrounded(int id, DType half) const {
    const TileOp& d = *val(id).def;
    if (d.kind == OpKind::Map && !d.is_call && d.op == Op::Select && known_true(d.args[0]))
      return unrounded(d.args[1], half);
    if (d.kind != OpKind::Cast || d.type.dtype != DType::F32) return id;
    const TileOp& inner = *val(d.args[0]).def;
    if (inner.kind != OpKind::Cast || inner.type.dtype != half) return id;
    int x = inner.args[0];
    return val(x).kind == Kind::Frag && val(x).def->type.dtype == DType::F32 ? x : id;
  }

  // The A fragments of k-step ks_kk, one an m-block (a_name): packed from the accumulator
  // (ks_pa), or read from the shared tile with ldmatrix.x4 (lane l addresses row
  // (l & 7) + 8 ((l >> 3) & 1) of the m-block at chunk 2 kk + (l >> 4)).
  void a_fragment(const Val& a) {
    for (int m = 0; m < mblocks_; ++m) {
      if (a.kind == Kind::Frag) {
        line("const u32 (&" + a_name(m) + ")[4] = ks_pa[" + mblock("ks_kk", m) + "];");
        continue;
      }
      const SmemTile& t = tiles_[static_cast<size_t>(a.tile)];
      line("u32 " + a_name(m) + "[4];");
      line("ldmatrix_x4(" + a_name(m) + ", " +
           ldmatrix_address(a.tile, Access::A, stage_address(t, "0"), std::to_string(16 * m),
                            "2 * ks_kk") +
           ");");
    }
  }
  std::string a_name(int m) const { return mblocks_ == 1 ? "ks_a" : "ks_a" + std::to_string(m); }

  void reduce(const TileOp& o, const Val& v) {
    const Val& a = val(o.args[0]);
    int64_t N = a.def->type.shape[1];
    DType t = o.type.dtype;
    // The maximum (minimum) of x c for a uniform c > 0 is c times that of x, exactly (rounding is
    // monotone): x c need not be computed for it. A constant c is known positive; otherwise (a
    // param, like a softcap) the test is made at run time, x c reduced when it fails.
    std::optional<Scaled> sc = scaled(o.args[0]);
    if (t != DType::F32 || (o.reducer != ir::Reducer::Max && o.reducer != ir::Reducer::Min))
      sc.reset();
    std::string positive;  // the run-time test; empty: c is a positive constant
    if (sc) {
      std::optional<double> c = constant_value(sc->scale);
      if (c && *c <= 0) sc.reset();
      if (sc && !c) positive = "(" + val(sc->scale).name + " > 0.0f)";
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
      line("ks_acc = " + round_to(combine(o.reducer, t, "ks_acc", at(operand, Kind::Frag)), t) +
           ";");
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
    if (sc) result = "ks_acc * " + val(sc->scale).name;
    if (!positive.empty()) result = positive + " ? " + result + " : ks_acc";
    line(v.name + "[ks_h] = " + result + ";");
    close_slots();
  }

  // A padded row tile's elements past its rows are neither loaded nor stored.
  std::string live_row(Kind ctx) const {
    if (!padded() || (ctx != Kind::Frag && ctx != Kind::Row)) return "";
    return " && " + (ctx == Kind::Frag ? frag_row() : row_row()) + " < " + std::to_string(rows_);
  }

  void store(const TileOp& o) {
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
      // every lane does (the same value), so that each reads its own write.
      bool read_back = false;
      for (const TileOp* x : ops_)
        read_back = read_back || (x->kind == OpKind::Load && x->buffer == o.buffer);
      if (!read_back) guard = "(ks_lane & 3) == 0";
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

  void op(const TileOp& o) {
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
        if (o.kind == OpKind::Load && v.tile < 0) {
          lazy_loads_[o.result] = open_region(o);
          lazy_loads_[o.result].interior = interior_loads_.count(&o) > 0;
        }
        if (o.kind == OpKind::Reduce) write_computed_vector(o);
        return;  // spelled at the uses
      case Kind::RowBcast:
        return;
      case Kind::Smem:
        if (o.kind == OpKind::Load) load_smem(v);
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

  // A register write or an elementwise operation over slots [first, last) (last empty: all) of
  // its Frag or Row result; values are declared by the caller.
  void frag_slots(const TileOp& o, const std::string& first, const std::string& last) {
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

  // A value of a row or a column coordinate alone that costs more than a few instructions an
  // element (a division, a math function, a load), read by an elementwise operation on a Frag:
  // computed once for each of the lane's rows or columns in front of the operation's slot loop,
  // not once an element. (A 64-bit division by a param per element made the masked tiles of a
  // chunked mask, i / C == j / C, cost several unmasked ones; a key's norm read and inverted per
  // element put a load and a reciprocal on every score.) `at` is where value `id` is read: at
  // the element, or along the rows or the columns only (through a broadcast).
  enum class Position { Element, Row, Column };
  void hoist_slot_values(int id, Position at, int64_t cols) {
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
    bool division = o.kind == OpKind::Map && !o.is_call && (o.op == Op::Div || o.op == Op::Mod) &&
                    (is_float(o.type.dtype) ? val(o.args[1]).kind != Kind::Uniform
                                            : !constant_value(o.args[1]));
    bool costly = division || o.kind == OpKind::Load || (o.kind == OpKind::Map && o.is_call);
    if (!costly || at == Position::Element) {
      for (int x : o.args) hoist_slot_values(x, at, cols);
      return;
    }
    const bool rows = at == Position::Row;
    if (slot_values_.count({id, rows})) return;
    std::string name = tmp(), n = std::to_string(rows ? 2 * mblocks_ : cols / 4);
    std::string coordinate =
        rows ? "(ks_row0 + ks_s * 8)" : "((ks_s >> 1) * 8 + ks_col0 + (ks_s & 1))";
    // A 32-bit division's quotient in a 32-bit register (ks_fdiv_i32): 20 64-bit ones for a
    // chunked mask's rows and columns spilled.
    bool narrow = division && !is_float(o.type.dtype) && p_.int32_division_overrun >= 0;
    line(std::string(narrow ? "int" : ctype(o.type.dtype)) + " " + name + "[" + n + "];");
    line("#pragma unroll");
    line("for (int ks_s = 0; ks_s < " + n + "; ++ks_s) " + name +
         "[ks_s] = " + *index_code(id, {coordinate}, /*in_front=*/false) + ";");
    slot_values_[{id, rows}] =
        name + "[" +
        (rows ? row_slot()
              : "(ks_k >> " + std::to_string(2 + log2_mblocks()) + ") * 2 + (ks_k & 1)") +
        "]";
  }

  // How value `id`, read at a Frag element, depends on the element's row i and column j; `axes`
  // says for each axis of the value whether it runs along the rows (0) or the columns (1). Only
  // the element's indices count: a gather's mask, its last argument, is collected in `masks`
  // and left to the use.
  struct Dependence {
    enum Form { None, Affine, Diagonal, Other } form = None;  // Diagonal: through j - i alone
    int64_t row = 0, col = 0;                                 // Affine: row i + col j + uniform
  };
  Dependence dependence(int id, const std::vector<int>& axes, std::set<int>* masks) const {
    const Val& v = val(id);
    if (v.kind == Kind::Uniform || assumed_true_.count(id)) return {};
    const auto diagonal = [](const Dependence& d) {
      if (d.form != Dependence::Affine) return d;
      if (d.row == 0 && d.col == 0) return Dependence{};
      return Dependence{d.row == -d.col ? Dependence::Diagonal : Dependence::Other};
    };
    if (auto c = comparisons_.find(id); c != comparisons_.end()) {
      Dependence d{Dependence::Affine};
      for (size_t k = 0; k < axes.size(); ++k) (axes[k] == 0 ? d.row : d.col) += c->second.coef[k];
      return diagonal(d);
    }
    const TileOp& o = *v.def;
    switch (o.kind) {
      case OpKind::Full:
        return {};
      case OpKind::Arange: {
        Dependence d{Dependence::Affine};
        (axes[static_cast<size_t>(o.axis)] == 0 ? d.row : d.col) = 1;
        return d;
      }
      case OpKind::Broadcast: {
        std::vector<int> src;
        for (int d : o.dims) src.push_back(axes[static_cast<size_t>(d)]);
        return dependence(o.args[0], src, masks);
      }
      case OpKind::Permute: {
        std::vector<int> src(axes.size());
        for (size_t k = 0; k < o.perm.size(); ++k) src[static_cast<size_t>(o.perm[k])] = axes[k];
        return dependence(o.args[0], src, masks);
      }
      case OpKind::Map:
      case OpKind::Cast:
      case OpKind::Gather: {
        size_t n = o.args.size();
        if (o.kind == OpKind::Gather && n > o.index_in_bounds.size()) masks->insert(o.args[--n]);
        std::vector<Dependence> a;
        for (size_t k = 0; k < n; ++k) {
          a.push_back(dependence(o.args[k], axes, masks));
          if (a.back().form == Dependence::Other) return a.back();
        }
        bool affine = std::all_of(a.begin(), a.end(), [](const Dependence& d) {
          return d.form == Dependence::None || d.form == Dependence::Affine;
        });
        if (o.kind == OpKind::Map && !o.is_call && affine &&
            (o.op == Op::Add || o.op == Op::Sub || o.op == Op::Neg)) {
          int64_t sign = o.op == Op::Add ? 1 : -1;
          Dependence d{Dependence::Affine, o.op == Op::Neg ? -a[0].row : a[0].row,
                       o.op == Op::Neg ? -a[0].col : a[0].col};
          if (o.op != Op::Neg) d.row += sign * a[1].row, d.col += sign * a[1].col;
          return d;
        }
        Dependence d;  // any other function of its arguments
        for (const Dependence& x : a) {
          Dependence f = diagonal(x);
          if (f.form == Dependence::Other) return f;
          if (f.form == Dependence::Diagonal) d = f;
        }
        return d;
      }
      default:
        return Dependence{Dependence::Other};
    }
  }

  // A gather at each Frag element whose value depends on the element's row i and column j
  // through j - i alone (T5's bias, looked up by the bucket of the relative position, or computed
  // from it with a logarithm): the tile's rows + cols - 1 diagonals are computed once an
  // iteration by the CTA's threads into a shared table, between barriers (the previous
  // iteration's readers are done; every entry is written before use), each at one element on
  // it; a lane then reads the 2 (cols / 8 + 2 mblocks - 1) diagonals its elements lie on (the
  // rows ks_row0 + 8 r and columns 8 c + ks_col0 + b differ by 8 (c - r) + b plus the lane's own
  // offset) into registers in front of the slot loop: 22 reads for 64 lookups at 32 rows and 64
  // columns, one lookup or two a thread. Gathers inside it are read whatever their mask, where
  // their indices are inside the buffer; the mask, one for all of them, and the index checks are
  // applied at each element, where they differ along a diagonal.
  struct Diagonal {
    std::string values;                               // the lane's array, by diagonal
    int mask = -1;                                    // the gathers' mask, -1: none
    std::vector<std::pair<int, std::string>> checks;  // (error site, array of in-bounds flags)
  };
  // Whether gather `id` depends on its element through j - i alone, under one mask (its own:
  // *mask, -1 for none) for every gather inside it.
  bool diagonal_gather(int id, int* mask) const {
    std::set<int> masks;
    const TileOp& root = *val(id).def;
    if (dependence(id, {0, 1}, &masks).form != Dependence::Diagonal || masks.size() > 1 ||
        (!masks.empty() &&
         (root.args.size() == root.index_in_bounds.size() || root.args.back() != *masks.begin())))
      return false;
    *mask = masks.empty() ? -1 : *masks.begin();
    return true;
  }
  void hoist_diagonal(int id, int64_t cols) {
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
    line("const int ks_dg = " + blocks + " * 8 + (ks_s & 1) + ks_col0 - ks_row0 + " + last_row +
         ";");
    line(d.values + "[ks_s] = " + shared + "[ks_dg];");
    size_t k = 0;
    for (const auto& [gather, flags] : checks)
      if (!flags.empty()) line(d.checks[k++].second + "[ks_s] = " + flags + "[ks_dg];");
    --indent_;
    line("}");
    diagonal_values_[id] = std::move(d);
  }
  // The gathers under value `id` whose indices are checked.
  void checked_gathers(int id, std::set<const TileOp*>* out) const {
    const Val& v = val(id);
    if (v.kind == Kind::Uniform || !v.def) return;
    const TileOp& o = *v.def;
    if (o.kind == OpKind::Gather &&
        !std::all_of(o.index_in_bounds.begin(), o.index_in_bounds.end(), [](bool b) { return b; }))
      out->insert(&o);
    if (o.kind == OpKind::Map || o.kind == OpKind::Cast || o.kind == OpKind::Gather ||
        o.kind == OpKind::Broadcast || o.kind == OpKind::Permute)
      for (int x : o.args) checked_gathers(x, out);
  }
  // The hoisted gather at the current Frag element: its diagonal's value where the mask holds,
  // after the index checks there.
  std::string diagonal_element(const Diagonal& d, const std::vector<std::string>& ix) {
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

  // f32 exp(u - v) of a data tile less a row or uniform value, as 2^(u log2 e - v log2 e): one
  // fused multiply-add an element and the exp2 unit, v log2 e computed once a row; and when u is
  // x c for a uniform c, 2^(x (c log2 e) - v log2 e), so that x c is not computed for it (the
  // scaled scores of attention, whose maximum reduce() takes through the scale too).
  std::optional<std::string> exp_of_difference(const TileOp& o, Kind ctx) {
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
      slope = "(" + val(sc->scale).name + " * " + log2e + ")";
    }
    return "ex2_approx(fmaf(" + x + ", " + slope + ", -(" + at(d.args[1], ctx) + " * " + log2e +
           ")))";
  }

  // f32 (x c1) c2 or (x c1) / c2 for uniform c1, c2 as x (c1 c2): one multiply an element, x c1
  // not computed for it (a softcap's scores scaled, then divided by the cap). Rounds once, where
  // the product in the program's order rounds twice.
  std::optional<std::string> product_of_scales(const TileOp& o, Kind ctx) {
    if (ctx != Kind::Frag || o.kind != OpKind::Map || o.is_call || o.type.dtype != DType::F32 ||
        (o.op != Op::Mul && o.op != Op::Div))
      return std::nullopt;
    int data = o.args[0], factor = o.args[1];
    if (o.op == Op::Mul && val(data).kind == Kind::Uniform) std::swap(data, factor);
    std::optional<Scaled> sc;
    if (val(factor).kind != Kind::Uniform || val(data).kind != Kind::Frag || !(sc = scaled(data)))
      return std::nullopt;
    std::string f = val(factor).name;
    if (o.op == Op::Div) f = "(1.0f / " + f + ")";
    return "(" + at(sc->x, ctx) + " * (" + val(sc->scale).name + " * " + f + "))";
  }

  // A data tile x times a uniform value, through selects the current loop version decides.
  struct Scaled {
    int x = -1, scale = -1;
  };
  std::optional<Scaled> scaled(int id) const {
    const TileOp* d = val(id).def;
    while (d->kind == OpKind::Map && !d->is_call && d->op == Op::Select && known_true(d->args[0]))
      d = val(d->args[1]).def;
    if (d->kind != OpKind::Map || d->is_call || d->op != Op::Mul) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      int x = d->args[static_cast<size_t>(side)], c = d->args[static_cast<size_t>(1 - side)];
      if (val(x).kind == Kind::Frag && val(c).kind == Kind::Uniform) return Scaled{x, c};
    }
    return std::nullopt;
  }

  void uniform(const TileOp& o, const Val& v) {
    std::string ty = ctype(o.type.dtype);
    switch (o.kind) {
      case OpKind::Read:
        return;  // aliases the register
      case OpKind::Full: {
        auto known = assumed_uniform_.find(o.result);
        if (o.scalar->op == Op::IntImm) literal_names_.insert(v.name);
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

  const tile::Kernel& k_;
  int64_t rows_ = -1;
  int mblocks_ = 1;  // m16 blocks a warp owns
  int64_t smem_total_ = 0;
  std::vector<Val> vals_;
  std::vector<const TileOp*> ops_;
  std::map<const TileOp*, std::string> loop_of_;
  std::map<int, std::vector<const TileOp*>> users_;
  std::vector<const TileOp*> stored_;  // the kernel's stores
  std::vector<SmemTile> tiles_;
  std::vector<const TileOp*> element_loads_;  // loads that may be element tiles (plan)
  std::vector<SmemVector> vectors_;
  std::set<std::string> lane_offsets_;          // defined at the kernel's start
  std::map<int, int> prefetched_;               // tile copied at the kernel's start -> its order
  std::set<std::string> unwaited_before_;       // loops whose waits cover a prefetch's
  std::map<const TileOp*, int> order_;          // program order of the ops
  std::map<std::string, std::string> loop_hi_;  // a streamed loop's end bound, by variable
  struct Comparison {
    std::vector<int64_t> coef;
    std::string limit, op;
    std::vector<int64_t> extents;  // of the compared tile's axes
  };
  bool hoisting_ = false;       // defining comparisons at a loop's top: no names of its body
  std::set<int> assumed_true_;  // comparisons the current loop version knows hold everywhere
  std::set<const TileOp*> interior_loads_;  // loads whose tile the loop version knows is inside
  // (value, along the rows) -> its element in the lane's row or column array, while an
  // elementwise operation's slot loop is written (hoist_slot_values).
  std::map<std::pair<int, bool>, std::string> slot_values_;
  std::map<int, Diagonal> diagonal_values_;  // gathers computed once a diagonal (hoist_diagonal)
  // A gather's table of diagonals in shared memory: its values (f32), and the in-bounds flags of
  // each checked gather inside it, by diagonal.
  struct DiagonalTable {
    int mask = -1;  // the gathers' mask (diagonal_gather), -1: none
    int64_t entries = 0, offset = 0;
    std::map<const TileOp*, int64_t> flags;
  };
  std::map<int, DiagonalTable> diagonal_tables_;  // by the gather's value, planned by plan()
  // While a diagonal is computed: the array of in-bounds flags of each checked gather in it.
  const std::map<const TileOp*, std::string>* diagonal_checks_ = nullptr;
  std::map<int, bool> assumed_uniform_;  // uniform conditions the current version knows
  std::map<int, Comparison> comparisons_;
  std::map<int, Region> lazy_loads_;  // the open region of each load read at its uses
  std::string why_;                   // why plan() failed
};

}  // namespace

std::unique_ptr<KernelWriter> fragment_writer(const tile::TileProgram& p, const tile::Kernel& k,
                                              std::vector<std::string>& sites, std::string* why) {
  auto w = std::make_unique<FragmentWriter>(p, k, sites);
  if (!w->plan()) {
    if (why) *why = w->why();
    return nullptr;
  }
  return w;
}

}  // namespace kintsugi::cuda
