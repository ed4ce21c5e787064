// \file FragmentWriter.h
// The tensor-core writer's class, FragmentWriter (its definition is split by hardware concept:
// FragmentPlan.cpp, FragmentMasks.cpp, FragmentStaging.cpp, FragmentMma.cpp, FragmentEmit.cpp).
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
//   Smem      a 2-D f16, bf16 or int8 tile in shared memory (swizzled) whose uses are all dot
//             operands, through exact casts and a transpose (views of the same shared tile):
//             loaded from memory, or (f16 and bf16) a B operand computed elementwise from
//             index-computable values and loads (keys rotated or scaled before the scores),
//             written by the threads element by element in front of its dot
// A kernel with a value that fits no kind (a permute of data, a reduction across rows, a dot
// operand computed in registers that is not exact in the type of the other, a shared tile) is
// left to the element-cyclic writer. A dot runs on the tensor cores of its shared operand's type,
// f16, bf16, or int8 (an integer dot: both operands loaded int8 tiles, K-major).
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
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include "ir/Printer.h"
#include "ir/Visit.h"
#include "target/cuda/Fragments.h"
#include "target/cuda/KernelWriter.h"
#include "tile/passes/Walk.h"

namespace kintsugi::cuda::fragment {

using ir::Op;
using tile::OpKind;
using tile::TileOp;

enum class Kind : uint8_t { None, Uniform, Lazy, Frag, Row, RowBcast, Smem };

struct Val {
  Kind kind = Kind::None;
  const TileOp* def = nullptr;
  std::string name;
  // Every element is exactly a number of F16 / of BF16 / of I8 (a dot of that type may take it).
  bool exact_f16 = false, exact_bf16 = false, exact_i8 = false;
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
  DType dtype = DType::F16;  // F16, BF16 or I8
  // Rows, and columns of 16 bits: elements of F16 and BF16, pairs of I8 elements (an int8 tile
  // is staged, swizzled and read by ldmatrix as the 16-bit tile of its bytes; the int8 tensor
  // cores' fragments lie in the same registers as the 16-bit ones, with K twice as long).
  int64_t rows = 0, cols = 0;
  int64_t live_rows = 0;  // rows of the load; the rest (an A tile padded to 16) are zeros
  // A dot reads the load with its rows at and past a limit set to 0 (the values of a cache past
  // its first L positions, select(start + r < L, V, 0)): rows r with first + r >= limit are
  // zero-filled as rows past the buffer's end are. Null: no limit.
  ir::Expr row_limit_first, row_limit;
  std::string stream_loop;  // streamed along this loop (empty: loaded where it stands)
  // Streamed tiles: the first one the loop body uses has two stages, its next copy issued at the
  // top of each iteration; each later one has one stage, its next copy issued right after its
  // last use (the dot `last_use`), so that it overlaps the work in between.
  int stages = 1;
  const TileOp* last_use = nullptr;
  int64_t offset = 0;  // bytes into the dynamic shared memory
  // A computed tile: the Lazy value written into it element by element (no load), -1 otherwise;
  // the value whose definition writes it (an A operand), -1: written in front of each dot.
  int computed = -1;
  int written_at = -1;
  // An element tile (an operand read at the accumulator's positions, a bias or mask tensor over
  // the scores): the bytes of an element and of a row, padded so that the four lanes of a quad,
  // reading a row's two adjacent elements each, and the next rows' quads fall in distinct banks.
  // 0 for a dot operand (f16 or bf16 rows in the ldmatrix swizzle, unpadded).
  int64_t element_bytes = 0, pitch = 0;
  // A streamed tile copied by TMA (FragmentWriter::copy_streams_by_tma): its tensor map's index
  // in the kernel's (KernelLaunch::tensor_maps), and the offset of its mbarriers, one a stage.
  // -1: copied by cp.async.
  int tensor_map = -1;
  int64_t barriers = 0;
  int64_t stage_bytes() const { return pitch > 0 ? rows * pitch : rows * cols * 2; }
};

class FragmentWriter : public KernelWriter {
 public:
  FragmentWriter(const tile::TileProgram& p, const tile::Kernel& k, const CudaTarget& target,
                 std::vector<std::string>& sites)
      : KernelWriter(p, sites), k_(k), target_(target) {
    // Attention-class kernels spend their non-tensor-core issue slots on exp (and tanh for
    // softcapping): the approximate MUFU units instead of the libm-accurate sequences.
    exp_function_ = "ks_exp";
    tanh_function_ = "ks_tanh";
  }

  // Assigns a kind to every value; false when the kernel has no dot of f16 or bf16 values, or
  // some value fits no kind (why() says which).
  bool plan();

  // A load read at the accumulator's positions (a bias or mask tensor over the scores) that a
  // loop streams, whose rows are whole aligned 16-byte chunks of the buffer's innermost dimension
  // that the threads split evenly: it can be copied ahead into shared memory (stage_element_tiles).
  // A tile read transposed (a mask stored key-major: its columns are the accumulator's rows) is
  // staged in its own orientation too; the transpose's reads swap their indices into it.
  bool element_stageable(const TileOp& o) const;

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
  // placed after the rest of the kernel's shared memory while the target's CTA still fits it
  // (CudaTarget::max_shared_bytes); one that does not stays read at its uses.
  void stage_element_tiles(int64_t& offset);
  // Gives a streamed dot operand tile one stage instead of two where its second stage is what
  // keeps another CTA off the SM (blocks_for), moving the later offsets down.
  void single_buffer_for_occupancy();
  // Streamed dot operand tiles of a wgmma kernel whose copies are whole boxes of their buffer
  // (tma_copyable) are copied by TMA: one thread issues each box, completing on the stage's
  // mbarrier, where every thread waits; the copies' addresses, row tests and zero-fill are the
  // tensor map's. Not where the mbarriers would keep a CTA off the SM.
  void copy_streams_by_tma();
  // Whether tile `t` can be copied by TMA: a streamed f16 or bf16 dot operand of a wgmma kernel,
  // unlimited rows, read as one box of a 2- to 4-dimensional buffer (its rows along one
  // dimension, its columns along the innermost, whose rows are a multiple of 16 bytes), stored in
  // whole swizzle atoms at their alignment.
  bool tma_copyable(const SmemTile& t) const;
  const std::vector<TensorMapUse>& tensor_maps() const { return tensor_maps_; }

  // The last operation of the loop body that streams load `o` (at its top level) to read it, in
  // registers, through the index-only values computed from it; nullptr when one in a nested loop
  // reads it.
  const TileOp* last_reader(const TileOp& o) const;

  // Why plan() failed on a kernel with a dot of f16 or bf16 values ("" otherwise).
  const std::string& why() const { return why_; }
  // On a target with wgmma, why the kernel's dots run as mma.sync anyway ("" when they do not, or
  // when the row tile is below a warpgroup's 64 rows: decoding's few queries, by design).
  const std::string& not_warpgroup_mma() const { return not_wgmma_; }

 private:
  // Whether a dot of the kernel has operands that are exactly f16 values, or both bf16, or both
  // int8 (those the tensor cores compute exactly as written; a dot of f32 values stays in f32).
  bool has_tensor_core_dot() const;

  bool fail(const std::string& why);

  // --- layout assignment
  void collect(const tile::TileBody& b, const std::string& loop);

  // Rows the warps cover: the row tile, padded to one warp's 16.
  // Rows the warps hold: the row tile's next power of two, at least 16 (a number of warps that
  // splits the copies of 16-byte chunks evenly; three warps for a group of 48 query heads did
  // not, nor did their copy passes fit the swizzle period).
  int64_t warp_rows() const {
    int64_t w = AccumulatorLayout::kRowsPerWarp;
    while (w < rows_) w *= 2;
    return w;
  }
  bool padded() const { return warp_rows() != rows_; }
  // Rows a shared tile takes: an A tile of the row tile is padded like it.
  int64_t smem_rows(int64_t rows) const { return rows == rows_ ? warp_rows() : rows; }

  bool is_frag_shape(const std::vector<int64_t>& s) const;
  bool is_row_shape(const std::vector<int64_t>& s) const { return s.size() == 1 && s[0] == rows_; }
  bool data_shape(const std::vector<int64_t>& s) const;
  Kind data_kind(const std::vector<int64_t>& s) const;
  Val& val(int id) { return vals_[static_cast<size_t>(id)]; }
  const Val& val(int id) const { return vals_[static_cast<size_t>(id)]; }

  // Whether every use of value `id` is a dot operand, through exact widening casts (to f32, an
  // int8 to a wider integer), transposes and row limits (row_limited).
  bool feeds_only_dots(int id) const;
  // Select `o` = select(first + r < limit, x, 0) over the rows r of a 2-D tile x (a mask of the
  // tile's rows alone, r its leading axis): (first, limit), else nullopt.
  std::optional<std::pair<ir::Expr, ir::Expr>> row_limited(const TileOp& o) const;
  // Whether cast `o` widens its operand exactly: f16 or bf16 to f32, i8 to a wider integer.
  bool widens_exactly(const TileOp& o) const;
  // The dot's K in the 16-bit columns of its shared tiles (SmemTile::cols).
  int64_t k_columns(const TileOp& dot) const;

  // Whether value `id` flows into the B operand of a dot through elementwise operations, casts,
  // broadcasts and transposes only.
  bool reaches_b_operand(int id) const;

  // Whether 1-D value `id` is broadcast along the columns of a tile (through casts): a vector of
  // the column axis, whatever its length.
  bool spread_along_columns(int id) const;

  // A 2-D f16 or bf16 load whose rows are whole 16-byte chunks of the buffer's innermost
  // dimension, all inside the buffer (copy_tile tests rows only).
  bool stageable(const TileOp& o) const;

  bool assign(const TileOp& o);

  // A shared tile `a` seen through the exact cast or the transpose `o`.
  Val view_of(const Val& a, const TileOp& o, bool transposed) const;

  // The type of the tensor cores dot `o` runs on: that of its shared B operand.
  DType dot_dtype(const TileOp& o) const;

  bool plan_dot(const TileOp& o);

  // Makes the Lazy operand `operand` of dot `o` (1: B, 0: A) a computed shared tile: the f16 or
  // bf16 value under its exact casts to f32 and transposes. B is written whole in front of the
  // dot; A (the rows of the tile, as queries rotated by position) where it is defined, once
  // however many times a loop runs the dot. The operand's other uses, if any, must be dots as
  // well (they read the same tile).
  bool stage_computed_operand(const TileOp& o, int operand);

  // Writes computed tile `t`: each thread two adjacent columns of a row at a time, packed, at
  // the swizzled position its ldmatrix reads expect. Barriers on both sides: the previous
  // iteration's dot has read the tile, and every element is written before this one reads it.
  void write_computed_tile(const SmemTile& t);

  // Computes Lazy reduction `o` into its shared vector, one element a thread at a time, between
  // barriers (the previous iteration's readers are done; every element is written before use).
  void write_computed_vector(const TileOp& o);

  // --- emission
  int threads() const override { return static_cast<int>(warp_rows() / (16 * mblocks_)) * 32; }
  // As many CTAs an SM as its shared memory holds (228 KB, 1 KB of it reserved per CTA), up to
  // as many as leave 168 registers a thread with one m-block a warp (three CTAs of four warps;
  // four, at 128, made even the head-size-32 prefill kernels spill) and 255 with two (their
  // accumulators are twice as wide) or with wgmma (whole accumulators: at 168, a 64-row tile of
  // head size 128 spilled 64 bytes).
  int min_blocks() const override { return blocks_for(smem_total_); }
  // wgmma's swizzled operands start on 1024-byte atoms (the descriptors' base offset is 0).
  int smem_alignment() const override { return wgmma_ ? 1024 : 128; }
  int blocks_for(int64_t shared_bytes) const;

  std::string frag_decl(const std::string& type, const std::string& name, int64_t cols) const;
  std::string row_decl(const std::string& type, const std::string& name) const;

  void declare_register(const tile::Register& r) override;

  // Coordinates of the current element: slot ks_k of a Frag, ks_h of a Row. A Frag's slots run
  // by blocks of 4 (one m16n8 accumulator), block b covering m-block b % M of column block b / M
  // (M m-blocks a warp), so that a 16-column block's slots are consecutive; its row half is the
  // Row slot it pairs with (row_slot).
  std::string frag_row() const { return "(ks_row0 + " + row_slot() + " * 8)"; }
  std::string frag_col() const;
  static std::string row_row() { return "(ks_row0 + ks_h * 8)"; }
  std::string row_slot() const;
  int log2_mblocks() const { return mblocks_ == 2 ? 1 : 0; }
  // Accumulator block of m-block m in column block `block` (an expression).
  std::string mblock(const std::string& block, int m) const;

  // Value `id` at the current element of an operation whose result has kind `ctx` (Frag: slot
  // ks_k; Row: ks_h).
  std::string at(int id, Kind ctx);

  // An index-computable integer value as `uniform` + coef . (tile coordinates), one coefficient
  // per axis of its shape, when it has that form.
  struct Affine {
    std::string uniform;
    std::vector<int64_t> coef;
  };
  std::optional<Affine> affine(int id);

  // An integer comparison of two affine values becomes coef . (coordinates) OP limit, with the
  // limit computed once where the comparison stands (32-bit, clamped beyond any tile
  // coordinate), instead of 64-bit index arithmetic at every element.
  void define_comparison(const TileOp& o);

  // Along tile axis `axis`, whether index-only value `id` never decreases (+1), never increases
  // (-1) or is constant (0); kEitherWay when it is one of the first two but a run-time value
  // decides which (i / C for a param C); 2 when none of these is known.
  static constexpr int kEitherWay = 3;
  int direction(int id, size_t axis) const;
  // The value of a constant (through broadcasts): a literal, or an expression of constants alone
  // (the sizes the kernel is specialised to are constants), e.g. a softmax scale rsqrt(f32(128)).
  std::optional<double> constant_value(int id) const;
  std::optional<double> constant_expr(const ir::Expr& e) const;
  // The value of index-only `id` at the tile's corner where it is largest (`largest`) or
  // smallest, spelled in front of the loop body; nullopt when it is not monotone along some axis.
  // `either_end`: a value monotone along one axis only, in a direction known at run time
  // (kEitherWay), gives that axis's last (`largest`) or first element, its extremes in some order.
  std::optional<std::string> corner(int id, bool largest, bool either_end = false);
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
  std::optional<std::string> whole_tile_test(int id, bool nested = false);
  // Whether whole_tile_test of `id` is not the conjunction of its parts' tests, so that its
  // parts must not be required to hold on their own (a disjunction, |x| < w, a == b; a
  // conjunction is tested part by part).
  bool compound_condition(int id) const;

  // The code of index-computable value `id` at coordinates `ix` (one per axis). `in_front`: spelled
  // from sizes, loop variables and constants alone, for a test in front of a loop body (before
  // its uniform values are defined); nullopt when the value reads anything else.
  std::optional<std::string> index_code(int id, const std::vector<std::string>& ix, bool in_front);
  // An f32 cast of an affine index value, or of its absolute value, at a Frag slot (a position
  // difference, ALiBi's j - (i + T - S) or |i - j|), as the value at the lane's first slot,
  // converted once an iteration, plus the slot's offset from it, a compile-time constant after
  // unrolling: one add an element where 64-bit index arithmetic and a conversion were. (Equal to
  // the cast of the sum below 2^24; above, within an ulp of it.)
  std::optional<std::string> float_of_affine(const TileOp& cast);
  std::string lazy(int id, const std::vector<std::string>& ix);

  std::string elementwise(const TileOp& o, const std::vector<std::string>& a);

  // Opens the loop over the slots of a Frag of `cols` columns (`ks_k`) or of a Row (`ks_h`).
  void open_slots(Kind k, int64_t cols, const std::string& first = "0",
                  const std::string& last = "");
  void close_slots();
  std::string slot(const Val& v) const;
  void declare(const Val& v, const tile::TileType& t);

  void body(const tile::TileBody& b) override;

  // The tiles streamed along loop `var` in the order their copies are committed: the
  // two-stage ones (program order), then the one-stage ones in the order of their last uses.
  std::vector<int> streams_of(const std::string& var) const;

  // The index-only values `id` reads, transitively (itself included).
  // The Lazy values `id` is computed from, itself included; a compound condition's parts are
  // left out (its whole-tile test is its own).
  void lazy_closure(int id, std::set<int>& out) const;
  void used_comparisons(const tile::TileBody& b, std::set<int>& out) const;

  // Whether bool value `id` masks what it guards somewhere in the kernel, directly or through
  // conjunctions, disjunctions and views: the mask of a gather or a store, or the condition of a
  // select of floats whose other side is a constant (a masked score) or a register's previous
  // value (a guarded update). A comparison that only chooses between two values (T5's bucket of a
  // key after its query, 16 + d or d) splits the tiles about evenly or holds over none: a
  // version of the body for tiles where it holds everywhere would be taken rarely, and the tail
  // tests of the other version paid everywhere else.
  bool masks(int id) const;

  // The loop body, in two versions when it uses tile comparisons that mask: one for iterations
  // where every such comparison holds over the whole tile (interior tiles: no tail, no diagonal),
  // where they fold to true and their selects disappear, and the general one. The choice is
  // uniform over the CTA, so both versions keep their barriers.
  void versioned_body(const tile::TileStmt& s);

  // For a load of a Frag or Lazy tile whose region the bounds may cut and whose starts read only
  // loop variables, sizes and params: the test that the whole tile lies inside the buffer.
  std::optional<std::string> interior_test(const TileOp& o);

  // Whether value `id` is defined in a loop nested in body `b`.
  static bool nested_loop_value(const tile::TileBody& b, int id);

  // The value `var OP bound` (or `bound OP var`) keeps once var exceeds the loop-invariant bound.
  static std::optional<bool> steady_value(const ir::Expr& e, const std::string& var);

  void loop(const tile::TileStmt& s);
  void loop_body(const tile::TileStmt& s);  // loop's code, after its invariant lane arrays

  // Issues the copies of `streams` for the iteration whose loop variable is `next` into stage
  // `stage` when next < hi, and commits one group per tile either way (so that the group count a
  // wait names is the same in every iteration).
  void issue_streams(const std::vector<int>& streams, const std::string& next,
                     const std::string& hi, const std::string& stage);

  // The buffer dimension of a tile's rows, and the offset of its first element; declares
  // ks_stride, the elements from one row to the next.
  std::pair<size_t, std::string> tile_origin(const Region& reg);

  // cp.async of a whole tile into `stage`: 16-byte chunks, rows past the buffer zero-filled.
  void copy_tile(const SmemTile& t, const std::string& stage);
  // The TMA copy of tile `t` into `stage`: a box a column block, issued by thread 0 on the
  // stage's mbarrier after announcing the tile's bytes.
  void copy_tile_by_tma(const SmemTile& t, const std::string& stage);
  // Every thread waits for the TMA copy of tile `t` into `stage`, the stage's phase bit flipped.
  void wait_tma(const SmemTile& t, const std::string& stage);
  // The mbarriers of the TMA tiles initialised (one arrival each), before any copy.
  void init_tma_barriers();
  std::string barrier_address(const SmemTile& t, const std::string& stage) const;
  std::string phase_name(const SmemTile& t) const;

  // The three ldmatrix.x4 access patterns of the dots: each lane addresses one row of an 8 x 8
  // matrix; `lane_row` is its row within the 16-row block (plus the warp's first row for A) and
  // `lane_chunk` its 16-byte chunk within the two-chunk step.
  enum class Access : uint8_t { A, B, BTrans };
  struct AccessSpec {
    std::string lane_row, lane_chunk;
  };
  AccessSpec access_spec(Access a) const;
  struct Swizzle {
    int64_t span = 8;  // chunk positions the XOR permutes (gcd of the chunks a row and 8)
    int shift = 0;     // rows sharing one XOR term: row >> shift
  };
  Swizzle swizzle_of(const SmemTile& t) const;
  // swizzle_term (Fragments.h) spelled on a non-negative int row (a shift and a mask).
  static Code xor_term(const std::string& row, const Swizzle& z);
  std::string lane_offsets_name(int tile, Access a) const;

  // A lane's byte offsets into a tile for an access pattern, computed once: the rows of every
  // 16-row block share the lane's XOR term (blocks start at multiples of 16), so the swizzled
  // chunk of (block, even chunk c0 + lane chunk) depends on the lane and on c0 modulo the span
  // only: one offset per even residue; the rest is a compile-time constant at each use.
  void define_lane_offsets(int tile, Access a);

  // The shared-window address of the ldmatrix of block row `r0` (a multiple of 16) and even
  // chunk `c0` (compile-time after unrolling) of a tile whose stage starts at `base`.
  std::string ldmatrix_address(int tile, Access a, const std::string& base, const std::string& r0,
                               const std::string& c0) const;
  std::string stage_address(const SmemTile& t, const std::string& stage) const;

  // cp.async of an element tile into `stage`, row by row at its pitch: thread q copies chunk
  // q % (chunks a row) of rows q / (chunks a row) + k (threads / chunks a row); chunks of rows
  // or columns past the buffer are zero-filled (a column chunk lies inside the buffer or past it
  // whole: element_stageable).
  void copy_element_tile(const SmemTile& t, const std::string& stage);

  // The stage expression of a tile at its use.
  std::string stage_of(const SmemTile& t) const;

  // After the last use of one-stage streamed tiles (a dot, or an element tile's last reader): a
  // barrier (every warp has read the stage), then the next iteration's copy.
  void reissue_after(const TileOp& use);

  // The shared tiles the kernel loads at its top level before any loop are copied at its start,
  // one group each, in program order, so that their transfers overlap (a decode chunk's Q, K and
  // V); each is waited for at its load.
  void prefetch_top_level_tiles();

  void load_smem(const Val& v);

  // The loop whose streamed-tile waits can stand in for the wait of prefetched tile `tile`: the
  // one loop where every dot reads it, each after a streamed tile's load (its wait and barrier).
  // cp.async groups complete in commit order, so that wait covers the older prefetch group, and
  // the loop's first copies are issued without first waiting for the prefetch (Q of prefill).
  std::optional<std::string> wait_left_to_stream(int tile) const;

  // Whether `o` works slot by slot on [R, n] accumulator tiles (or emits nothing), so that it can
  // run column block by column block right after the dot that feeds it.
  bool slot_local(const TileOp& o, int64_t n) const;
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
  std::optional<Accumulation> accumulation(const tile::TileBody& b, size_t first, size_t last);

  // A dot and the slot-local operations after it (b[first], ..., b[last - 1]), interleaved by
  // 16-column blocks: block np's accumulators are finished and consumed (the repaired o update)
  // before the next block's mma, so the dot's result never lives in registers whole.
  void dot_region(const tile::TileBody& b, size_t first, size_t last);

  // --- warpgroup MMA (sm_90a): every dot of the kernel one wgmma.mma_async a 16-step of K for
  // each 64-row warpgroup of the tile, A from registers (an accumulator packed, the RS form) or
  // from a shared tile (SS), B from a shared tile, read through descriptors in the 128-, 64- or
  // 32-byte swizzle that the tile's row width gives (the XOR swizzle of Fragments.h is that
  // swizzle on atom-aligned tiles), synchronously (fence, the k-steps, commit, wait) between the
  // copies that the barriers order as for mma.sync.
  // Whether every dot's shapes suit wgmma; why not in `why` otherwise.
  bool wgmma_shapes(std::string* why) const;
  // The columns of a shared dot tile's swizzle atom under wgmma: 64 (rows of 128 bytes) where 64
  // divides the tile's columns, else 32 or 16 (64 or 32 bytes: a head size of 96 or 80). A tile
  // wider than its atom is stored as column blocks of that many columns, each [rows][block],
  // block after block: the canonical layouts wgmma reads, of whole atoms. Other tiles (and every
  // tile of mma.sync) are stored row after row.
  int64_t block_cols(const SmemTile& t) const {
    if (!wgmma_ || t.pitch != 0) return t.cols;
    return t.cols % 64 == 0 ? 64 : t.cols % 32 == 0 ? 32 : 16;
  }
  bool column_blocked(const SmemTile& t) const { return block_cols(t) < t.cols; }
  int64_t row_bytes(const SmemTile& t) const { return std::min(block_cols(t), t.cols) * 2; }
  int64_t block_bytes(const SmemTile& t) const { return t.rows * row_bytes(t); }
  // The byte offset within a stage of row `row`'s stored chunk `chunk` (16 bytes; expressions).
  std::string chunk_offset(const SmemTile& t, const std::string& row,
                           const std::string& chunk) const;
  // The wgmma descriptor of tile `t` at stage address `base`, rows from `row0` on (an
  // expression), read K-major (rows are M or N, columns K) or MN-major (rows K, columns M or N).
  std::string descriptor(const SmemTile& t, bool mn_major, const std::string& base,
                         const std::string& row0) const;
  // The offset of k-step ks_kk in such a descriptor's units (16 bytes).
  std::string k_step_offset(const SmemTile& t, bool mn_major) const;
  // The mma of a dot region as wgmma (see dot_region).
  void wgmma_dot(const TileOp& o, const Val& a, const Val& b, const std::string& sum);
  // cp.async_wait_group<pending>, the proxy fence wgmma's reads need after the copies' generic
  // writes, and the barrier.
  void wait_copies(int pending);

  // Whether index-only value `id` is true everywhere in the current loop version.
  bool known_true(int id) const;
  // The Frag value whose rounding to `half` is value `id` (through f32(half(x)) and selects the
  // current loop version decides), or `id` itself.
  int unrounded(int id, DType half) const;

  // The A fragments of k-step ks_kk, one an m-block (a_name): packed from the accumulator
  // (ks_pa), or read from the shared tile with ldmatrix.x4 (lane l addresses row
  // (l & 7) + 8 ((l >> 3) & 1) of the m-block at chunk 2 kk + (l >> 4)).
  void a_fragment(const Val& a);
  std::string a_name(int m) const { return mblocks_ == 1 ? "ks_a" : "ks_a" + std::to_string(m); }

  void reduce(const TileOp& o, const Val& v);

  // A padded row tile's elements past its rows are neither loaded nor stored.
  std::string live_row(Kind ctx) const;

  void store(const TileOp& o);

  void op(const TileOp& o);

  // A register write or an elementwise operation over slots [first, last) (last empty: all) of
  // its Frag or Row result; values are declared by the caller.
  void frag_slots(const TileOp& o, const std::string& first, const std::string& last);

  // A value of a row or a column coordinate alone that costs more than a few instructions an
  // element (a division, a math function, a load), read by an elementwise operation on a Frag:
  // computed once for each of the lane's rows or columns in front of the operation's slot loop,
  // not once an element. (A 64-bit division by a param per element made the masked tiles of a
  // chunked mask, i / C == j / C, cost several unmasked ones; a key's norm read and inverted per
  // element put a load and a reciprocal on every score.) `at` is where value `id` is read: at
  // the element, or along the rows or the columns only (through a broadcast).
  enum class Position { Element, Row, Column };
  void hoist_slot_values(int id, Position at, int64_t cols);
  // A division or remainder whose divisor is not known when the code is written (an integer
  // one not constant, a float one not uniform): more than a few instructions an element.
  bool costly_division(const TileOp& o) const;
  // The lane's array of a row or column vector's elements (`rows`: along the rows), written
  // here; returns its name.
  std::string slot_array(int id, bool rows, int64_t cols, bool division);
  // In front of loop `s`: the lane arrays of the row and column vectors that its operations read
  // through broadcasts, that cost a division an element and that the loop does not change (a
  // strided mask's column residues), so that they are computed once, not at each use in every
  // iteration. Returns the keys entered into invariant_slots_.
  std::vector<std::pair<int, bool>> hoist_invariant_slot_values(const tile::TileStmt& s);
  // The coordinate of slot ks_s of the lane's rows or columns, and how many there are.
  std::string slot_coordinate(bool rows) const;
  int64_t slot_count(bool rows, int64_t cols) const;

  // The global loads of row and column vectors that operations after a dot read through
  // broadcasts (a key's norm, a bias along the keys), issued into arrays of the lane's rows or
  // columns in front of the dot, so that their latency passes under the dot's: read at their
  // uses, after the dot, each load's latency was waited out before the scores could go on.
  void issue_slot_loads(const tile::TileBody& b, size_t after);

  // How value `id`, read at a Frag element, depends on the element's row i and column j; `axes`
  // says for each axis of the value whether it runs along the rows (0) or the columns (1). Only
  // the element's indices count: a gather's mask, its last argument, is collected in `masks`
  // and left to the use.
  struct Dependence {
    enum Form { None, Affine, Diagonal, Other } form = None;  // Diagonal: through j - i alone
    int64_t row = 0, col = 0;                                 // Affine: row i + col j + uniform
  };
  Dependence dependence(int id, const std::vector<int>& axes, std::set<int>* masks) const;

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
  bool diagonal_gather(int id, int* mask) const;
  void hoist_diagonal(int id, int64_t cols);
  // The gathers under value `id` whose indices are checked.
  void checked_gathers(int id, std::set<const TileOp*>* out) const;
  // The hoisted gather at the current Frag element: its diagonal's value where the mask holds,
  // after the index checks there.
  std::string diagonal_element(const Diagonal& d, const std::vector<std::string>& ix);

  // f32 exp(u - v) of a data tile less a row or uniform value, as 2^(u log2 e - v log2 e): one
  // fused multiply-add an element and the exp2 unit, v log2 e computed once a row; and when u is
  // x c for a uniform c, 2^(x (c log2 e) - v log2 e), so that x c is not computed for it (the
  // scaled scores of attention, whose maximum reduce() takes through the scale too).
  std::optional<std::string> exp_of_difference(const TileOp& o, Kind ctx);

  // f32 (x c1) c2 or (x c1) / c2 for uniform c1, c2 as x (c1 c2): one multiply an element, x c1
  // not computed for it (a softcap's scores scaled, then divided by the cap). Rounds once, where
  // the product in the program's order rounds twice.
  std::optional<std::string> product_of_scales(const TileOp& o, Kind ctx);

  // A data tile x times a uniform value, or divided by one (times its reciprocal, as the writer
  // spells a division by a uniform value), through selects the current loop version decides.
  struct Scaled {
    int x = -1, scale = -1;
    bool reciprocal = false;  // x / scale
  };
  std::optional<Scaled> scaled(int id) const;
  // The factor of a Scaled value, spelled in context `ctx`: the scale, or its reciprocal.
  std::string factor_of(const Scaled& s, Kind ctx);

  void uniform(const TileOp& o, const Val& v);

  const tile::Kernel& k_;
  const CudaTarget target_;
  int64_t rows_ = -1;
  int mblocks_ = 1;        // m16 blocks a warp owns
  bool wgmma_ = false;     // the dots run as wgmma (sm_90a)
  std::string not_wgmma_;  // why not, on a target that has it
  int64_t smem_total_ = 0;
  std::vector<Val> vals_;
  std::vector<const TileOp*> ops_;
  std::map<const TileOp*, std::string> loop_of_;
  std::map<int, std::vector<const TileOp*>> users_;
  std::vector<const TileOp*> stored_;  // the kernel's stores
  std::vector<SmemTile> tiles_;
  std::vector<TensorMapUse> tensor_maps_;     // of the TMA tiles, SmemTile::tensor_map
  std::vector<const TileOp*> element_loads_;  // loads that may be element tiles (plan)
  std::vector<SmemVector> vectors_;
  std::set<std::string> lane_offsets_;     // defined at the kernel's start
  std::map<int, int> prefetched_;          // tile copied at the kernel's start -> its order
  std::set<std::string> unwaited_before_;  // loops whose waits cover a prefetch's
  // While a computed tile or vector is written: each global load of its elements is read into a
  // local of its own in front of the expression, by load and index (spelled once, then its name),
  // so that an element's loads are all issued before the first of them is used.
  bool hoist_loads_ = false;
  std::map<std::pair<int, std::vector<std::string>>, std::string> hoisted_loads_;
  std::map<const TileOp*, int> order_;                    // program order of the ops
  std::map<std::string, std::string> loop_lo_, loop_hi_;  // a streamed loop's bounds, by variable
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
  // (value, along the rows) -> its lane array computed in front of the loop being written
  // (hoist_invariant_slot_values).
  std::map<std::pair<int, bool>, std::string> invariant_slots_;
  // (load, along the rows) -> its array of the lane's rows or columns, issued in front of a dot
  // (issue_slot_loads), for the rest of the body it was issued in.
  std::map<std::pair<int, bool>, std::string> slot_loads_;
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

}  // namespace kintsugi::cuda::fragment
