// \file AutoSchedule.h
// The auto-scheduler (`--schedule auto`): finds the chains of reductions that share an axis and
// fuses them with Rolling Update, using nothing but the structure of the program (it never
// matches an operator by name: the same steps schedule attention, softmax, norms, Performer).
//
//   0. Normal form: an elementwise definition computed from positions, sizes, params and inputs
//      alone over dims no operand spans together (a mask or a bias over [S, T]) is inlined into
//      its readers
//      (compute_inline), so that it is neither stored nor hidden from the tile tests; a chain
//      reduction that reads an incomplete producer in its own term gets that part of the term
//      named as an elementwise block (name_term), so that writing it inline or as a definition
//      schedules alike.
//   1. Reduction chains (ReductionChains.h) grouped by the reductions they share: each group is
//      fused under its own tile loop, in program order (two softmaxes over two score matrices
//      are two groups). A reduction with nothing to repair is a group of its own when its term
//      reads a reduction that runs along its axis and rows and that nothing else reads (the
//      score dot of ReLU or sigmoid attention): it fuses with the identity repair; several that
//      read one such head alone along the same axis and rows are one group (attention's dV and
//      dK). Where such reductions read one head along different axes (dQ over the keys, dK and
//      dV over the queries) and nothing else reads the chain, a later group gets copies of what
//      it shares with the others (recompute), so that each fuses. A map with fewer variables
//      than a reduction or map it reads at one point an instance, which other blocks read too
//      (a loss's logit z[r, TGT[r]]), gets that point computed again (recompute_point), so that
//      the chain's head is not stored for it. A group with
//      a member that heads another group (a chain over the head dimension ending in the score
//      dot, as with QK-norm) is inner to it and is not fused along its own axis.
//   2. The head: the earliest block feeding the chain that runs along the axis and along every
//      row of the first reduction, as the loads index them (the QK product of attention, or the
//      first reduction itself; never a key-side definition). What the chain reads without depending
//      on the head or on a member must be complete before the tile loop: such nests placed after
//      the head's move before it (move_nest). The head's loops along the rows that lie inside
//      its axis loop move outside it (reorder: the keys of a sum over the queries). The head's
//      axis loop is split into tiles (halved while more than live_tile_elements stay live).
//   3. The elementwise blocks between the head and the first reduction move under the tile loop
//      (reverse_compute_at); then every reduction of the chain gets a rolling_update, producers
//      first; scans become loop-carried pairs (split_scan_buffer); buffers shrink to what one
//      iteration needs (compact_buffer). When the chain has few independent rows (the product
//      of the first reduction's spatial extents), split_k_update replaces rolling_update: the
//      tiles run in parallel and a combine nest merges them (FlashDecoding); the combine nests
//      walk the chunks in tiles, so the partial results of a tile of chunks combine together, and
//      a wide row of them (the output's head_dim) is spread over several grid instances. A row
//      loop that the chain reads through a floor division h / E (grouped-query attention's
//      query heads sharing a key/value head) is distributed over groups of E rows first, so that
//      a chunk's nests cover the group and read each key and value once for it. A chunk walks
//      several tiles with the rolling update (FlashDecoding) when the partial results of
//      one-tile chunks would weigh too much against the inputs (chunk_tiles, chosen by default).
//      The split-K choice counts the grid instances, not the rows: the rows of a group (and a
//      whole row axis that the keys are read without, a prefix shared by a batch) are one.
//      Tiles that a mask kills are skipped (propagate_mask): by the rolling update's tile loop,
//      and by the walk inside a split-K chunk where the mask reads a param or a tensor.
//   4. With rolling update, the nests that consume the chain's results move into the row loop
//      around the tile loop (reverse_compute_at), and that loop is distributed over a tile of
//      rows, so each nest works on rows x tile (the shape the tile IR turns into tile ops). The
//      rows strip only where a buffer streamed along the axis is shared by the rows or holds them
//      side by side (not the per-head caches of a decode step, one query a head). An
//      elementwise consumer that writes an intermediate (softmax's exponentials, recomputed for
//      the output) is inlined into its readers instead, so no row-length buffer is kept a row
//      tile; a consumer nest over a whole row of symbolic length walks it in tiles (split, the
//      outer loop moved outside the row strip). Producers of the head that run along the axis
//      but not the rows (key-side definitions, a key's norm) are computed per tile of the
//      axis inside the fused loop (compute_at).
//   5. A nest left outside the fused ones that only maps over a row of symbolic length (the
//      outputs of split-K, which read the combined results) walks the row in tiles of map_tile:
//      the innermost loop is split, so a grid instance takes a tile, not one element. A nest
//      left outside that is a matrix product (a projection in front of attention) is split by
//      row_tile along its rows, a map of it over the same nest alike, so that a grid instance
//      takes a product of a tile of rows on the target's dot, not a vector-matrix product. A
//      nest left outside that reduces down short columns (a sum over a group of heads of their
//      partial gradients) takes a strip of column_strip columns a grid instance, the reduced
//      loop moved inside the strip's outer loop, where that keeps it from no kernel it joins.
// A step whose preconditions fail leaves the program unscheduled and says why in the notes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "schedule/Schedule.h"

namespace kintsugi::schedule {

struct AutoScheduleOptions {
  int64_t tile = 64;  // tile of the shared reduction axis (the autotuner will search it)
  // Split-K (chunks of the axis in parallel, then a combine) instead of Rolling Update when the
  // chain has fewer independent rows than split_k_below_rows; or, where the rolling update runs
  // a decode step's few queries (at most 16: a head's queries, or a group of heads, a grid
  // instance) or rows that share no key (one row a grid instance), fewer grid instances than
  // split_k_below_instances (two an SM on the H200's 132; 128 on the CPU). 0 never splits.
  int64_t split_k_below_rows = 128;
  int64_t split_k_below_instances = 256;
  // Split-K also for many rows whose strips (row_tile rows, or a group's) fill fewer than half of
  // split_k_below_instances (one an SM), where the partial results of chunks of max_chunk_tiles
  // weigh at most partial_fraction of the inputs: a long walk of much work a step, such as a fused
  // linear cross-entropy's (R = 2048, V = 32000, C = 4096: 32 strips of 64 rows walked 250 tiles of
  // the vocabulary in 14.8 ms on the H100, docs/perf.md). The CPU's cores are filled by few strips.
  bool split_k_long_walks = false;
  // Split-K: tiles a chunk walks with the rolling update inside (FlashDecoding); 1: a chunk is
  // one tile. Fewer chunks to combine, a serial loop per chunk. 0 chooses at the run's sizes:
  // from one tile, doubled (up to max_chunk_tiles) while the chunks' partial results weigh more
  // than partial_fraction of the inputs and the doubled chunks still make min_chunk_instances
  // grid instances (the instances of a chunk: its rows, or groups of rows). Measured on the H200
  // at T=32768 (docs/perf.md): grouped decode (partials 13 % of the inputs in one-tile chunks)
  // went from 1646 to 2048 GB/s in chunks of 4 tiles (3 %); decode whose partials are 3 % or
  // less was fastest in one-tile chunks (softcap 2928 against 2783, causal 3359 against 1763).
  int64_t chunk_tiles = 0;
  int64_t max_chunk_tiles = 8;
  double partial_fraction = 0.05;
  int64_t min_chunk_instances = 256;  // two an SM on the H200's 132
  // Rows per tile (rolling update): the row loop around the tile loop is distributed by this
  // factor, so every nest works on a tile of rows. 0 keeps one row at a time.
  int64_t row_tile = 64;
  // The tile of the reduced axis under the rolling update (0: `tile`, which split-K keeps).
  int64_t rolling_tile = 0;
  // A row reduction (softmax, a norm: no reduction along another axis) takes tiles of
  // strip_rows x strip_tile instead, when strip_rows > 0. On the CPU (2 cores, f32 softmax at
  // 1000 x 4096, docs/perf.md) strips of 4 rows x 1024 ran in 5.3 ms against 10.1 ms for
  // 64 x 64 tiles: a tile row is 4 KiB of one page rather than 64 rows of 256 bytes. On CUDA (the
  // H200, docs/perf.md) strips of 1 row x 1024 put one row on a CTA: 4096 CTAs rather than 32 of
  // 128 rows at M = 4096; layer norm at 4096 x 8192 went from 1.33 to 0.156 ms (2048 columns:
  // 0.185, 4096: 0.207).
  int64_t strip_rows = 0;
  int64_t strip_tile = 0;
  // A row reduction whose rows run across memory (a softmax over the first axis, a pooling over
  // time of [B, T, C]: the row is a strided column) takes tiles of column_rows rows (along the
  // contiguous dimension) x column_tile elements of the reduced axis instead, when
  // column_rows > 0. Such a chain is never held whole, on any target. On the CPU (2 cores,
  // docs/perf.md) softmax over the first axis of f32 4096 x 4096 took 646 ms with whole columns,
  // 78 with 1024 x 4 (256 x 16: 119, 4096 x 4: 65 on one grid instance, one core), against 23.7
  // for the softmax of its rows; a pooling over time at 8 x 4096 x 1024, 1331 against 113 ms.
  // CUDA (no column tiles: the element-cyclic layout reduces a tile's rows through shared
  // memory) streams the column with the rolling update or split-K: on the H100, 0.53 ms against
  // 5.37 for whole columns at 4096 x 4096, and 0.50 against 5.89 for the pooling.
  int64_t column_rows = 0;
  int64_t column_tile = 0;
  // A strip is doubled up to this many columns while it stays no longer than the row and the
  // rows times the strips a row still make min_chunk_instances grid instances (0: strip_tile
  // only). On the H200 (docs/perf.md, 4096 rows of 131072) strips of 8192 rather than 1024 took
  // layer norm f16 from 1.91 to 1.24 ms, l2norm from 1.01 to 0.77, rmsnorm_quant from 1.66 to
  // 1.14; one row of 131072 (softmax f32) kept 1024: 0.0095 ms against 0.0119 at 8192.
  int64_t strip_tile_max = 0;
  // A row reduction whose row has at most this many bytes at the sizes decided with (its length
  // times the widest element of the inputs the chain reads) is not fused: each of its reductions
  // runs over the whole row in one tile, and the row is read once (on CUDA, one row a CTA held in
  // registers). 0 fuses every row reduction. Measured on the H200 (docs/perf.md), at 4096 rows:
  // layer norm f16 x 8192 0.039 ms whole against 0.131 in strips, f16 x 16384 0.079 against
  // 0.256, softmax f32 x 8192 0.093 against 0.111; f32 x 16384 0.264 against 0.218. On the CPU
  // (a row a grid instance, in cache up to 1 MiB; 2 cores, docs/perf.md) whole rows won at every
  // size measured: softmax f32 4096 x 8192 17 ms against 45 in strips, 64 x 131072 4.9 against
  // 87, 16 x 262144 2.1 against 6.8; layer norm f16 4096 x 8192 9.8 against 71.
  int64_t whole_row_bytes = 0;
  // Producers along the rows alone of a chain under the rolling update (the queries rotated or
  // RMS-normalised) are computed in the fused nest, for the rows of a tile in front of its walk
  // over the axis; false computes them whole in front of the fused nest (on CUDA a kernel of
  // their own, whose result the fused kernel reads like an input). Measured on an H100
  // (docs/perf.md, causal attention at S = T = 4096, 16 heads, D = 128): rotary attention
  // 0.235 ms whole against 0.264 in the fused kernel, whose CTAs compute their rotated row tile
  // from global memory while their tensor cores wait (0.353 before its loads were batched);
  // QK-norm 0.219 against 0.261.
  bool row_producers_in_tile = true;
  // Rolling update: the elements a grid instance keeps live through a step of the walk, its
  // members' accumulators (rows x their columns) and the tiles of the head and its peers (rows x
  // the axis tile each), at most this many: the axis tile is halved (down to 64) until they fit.
  // 0: no bound. On CUDA they are registers: 24576 elements (192 a thread of a warpgroup) is
  // attention's backward dQ (two score tiles of 64 x 128 and one accumulator) without a spill at
  // head size 128 on sm_90a; dK and dV in one kernel (two of each) spilled 1044 bytes a thread.
  int64_t live_tile_elements = 0;
  // Elements of a row a grid instance of a map nest outside the fused ones takes (step 5); 0
  // leaves one element an instance.
  int64_t map_tile = 1024;
  // Columns a grid instance of a reduction down short columns outside the fused nests takes
  // (step 5c), where a column times the strip is at most column_strip_elements; 0 leaves one
  // column an instance.
  int64_t column_strip = 0;
  int64_t column_strip_elements = 0;
  // Split-K: the combine nests walk the chunks' partial results in tiles of up to this many
  // elements and this many chunks (a power of two of chunks, and no more than there are: a
  // head_dim 128 row of partials takes 64 chunks a tile, a block of 32 columns 256, a scalar
  // partial 2048). 0 walks them one chunk at a time.
  int64_t combine_tile_elements = 8192;
  int64_t combine_tile_chunks = 2048;
  // Split-K: a combine whose innermost loop is data-parallel and wider than this is split by it,
  // the outer part a grid axis, with what reads its result and the combines it reads (a head_dim
  // 128 row of outputs combines in 4 instances). 0 keeps a row in one instance. (Blocks of 8
  // columns, 16 instances a row, measured slower on the H200: 25 us instead of 15 for the
  // grouped decode's combine at T=32768, each instance combining the maximum and sum again.)
  int64_t combine_columns = 32;
  // Sizes to decide with (the run's sizes; the source's `sizes` line when empty).
  std::map<std::string, int64_t> sizes;
  // The params' values (the given ones, else the program's): a row over a param's extent (a group
  // of G columns) is measured at its value when deciding whether it is held whole.
  std::map<std::string, double> params;
};

// How the note of a chain whose fusion failed starts (the driver reports it as a warning).
inline constexpr const char* kFusionAbandoned = "fusion abandoned: ";
// How the note of a chain left unfused on purpose starts: its axis lies inside the tiles of
// another chain, which compute it whole, or its row fits in one tile (not a shortfall). The
// quoted names that follow are its reductions.
inline constexpr const char* kChainComputedWhole = "the chain of ";

// The options a target ("cpu" or "cuda") schedules with: rows per tile follow its layout. The
// CUDA tensor-core writer runs a 128-row tile on four warps of two m16 blocks each, so that every
// key and value fragment it reads from shared memory feeds two mma (FlashAttention-2's 128 x 64
// tiles at head_dim 128); the CPU keeps 64. Row reductions take strips on both (strip_rows).
AutoScheduleOptions target_schedule_options(const std::string& target);

Schedule auto_schedule(const ir::LoopProgram& program, const AutoScheduleOptions& options,
                       std::vector<std::string>* notes);

}  // namespace kintsugi::schedule
