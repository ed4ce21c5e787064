// \file ValidateSchedule.h
// Translation validation of a schedule: the scheduled loop program and the original are run by
// the reference interpreter on small instances of the same program and must agree; and of the
// tile program made from the scheduled program, run by the tile interpreter against it.
//
// The instances are shrunk from the sizes the schedule was chosen at so that every kind of tile the
// schedule creates occurs: the fused reduction axis spans several chunks of several tiles and ends
// in a partial tile (in the instance with few rows: in a chunk of one element), the rows span more
// than one row tile and end in a partial one (when the run has that many), and the other sizes are
// scaled down together by one power of two (so that ratios such as query heads per key/value head
// survive). The instance with two row tiles runs random normal values; one with a few rows (a
// partial row tile) runs every input set: random values, rows offset far from zero (|mean| / std of
// 1e4, or what the dtype resolves), ties (a handful of distinct values), and -inf and NaN scattered
// in the float inputs.
//
// The original runs in exact mode (the definition of the semantics); the scheduled program runs
// in typed mode (every operation rounded to its type, as compiled code does), so that a repair
// that is exact in real arithmetic but cancels catastrophically in f32 fails too. The outputs are
// compared with the tolerance `kintsugi run --verify` uses, and NaN / infinity must sit where the
// reference has them. With non-finite inputs one relaxation holds, and only then: where the
// reference is NaN, a schedule may produce any value (a NaN that reaches an output only through a
// term multiplied by zero, a masked key, is poison that a schedule skipping the masked tile
// refines; docs/language.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ir/Interpreter.h"
#include "ir/Stmt.h"
#include "runtime/Tensor.h"
#include "tile/TileIR.h"

namespace kintsugi::driver {

// What the schedule was built with: the tile sizes that determine the shrunk instances.
struct ValidationOptions {
  runtime::SizeMap sizes;    // the sizes the schedule was chosen at (the run's)
  runtime::ParamMap params;  // param values (the program's own where absent)
  int64_t axis_tile = 64;    // the tile of the fused reduction axis
  int64_t chunk_tiles = 1;   // split-K: tiles a chunk walks
  int64_t row_tile = 64;     // rows a tile (rolling update)
  uint64_t seed = 1;
  // The dim of the fused axis and of the rows around it (driver: from the schedule's first split);
  // empty: guessed from the program (a dim that two reductions reduce over).
  std::string axis_dim, row_dim;
};

struct ValidationReport {
  bool ran = false;  // false: no instance of the program could be run (`failure` says why)
  bool ok = true;
  std::string failure;        // the instance, input set and output that disagreed
  runtime::SizeMap shrunk;    // the sizes of the instance with two row tiles
  runtime::SizeMap few_rows;  // the sizes of the instance with a few rows (every input set)
  // Two row tiles over the axis of the few rows: where the tile program is checked (the head
  // size at its specialised value makes the instance of `shrunk` costly).
  runtime::SizeMap row_tiles;
  // The param values of the instances: the run's, but a param that the schedule tiles as a fused
  // axis's extent (the first L positions of a cache) shrunk as that axis's dim would be, the
  // dims it bounds at the run kept at least as long. Empty: the run's.
  runtime::ParamMap params;
  double seconds = 0.0;
};

// Runs `original` and `scheduled` on the shrunk instances; ok when every output agrees.
ValidationReport validate_schedule(const ir::LoopProgram& original,
                                   const ir::LoopProgram& scheduled, const ValidationOptions& o);

// Translation validation of tile programs: the tile program of `scheduled` that `tiles_at`
// makes at given sizes (translated and optimised as the compiler does) is run by the tile
// interpreter on the instances of `schedule_report` (two row tiles, and a few rows with every
// input set) against `scheduled` run by the reference interpreter; ok when every output agrees.
// The tile program is made at each instance's sizes: a tile program is symbolic in every size
// but the ones it is specialised for (the head size as a tile extent), which the instance
// shrinks with the rest, so the program checked is the one that runs but for that constant (the
// reference at a head size of 128 would cost seconds). Not run (`ran` false, `failure` says why)
// when the program is not in tile form at those sizes.
ValidationReport validate_tiles(
    const ir::LoopProgram& scheduled,
    const std::function<tile::TileProgram(const runtime::SizeMap&)>& tiles_at,
    const ValidationReport& schedule_report, const runtime::ParamMap& params, uint64_t seed = 1);

// The first disagreement of an output `got` with the reference `ref` ("" when they agree): the
// largest error over the largest finite |reference| (an absolute error of one for integer
// outputs) within `tolerance`, NaN and infinities at the same places; `relaxed`: any value may
// stand where the reference is NaN (non-finite inputs).
std::string first_disagreement(const ir::InterpBuffer& ref, const ir::InterpBuffer& got,
                               DType dtype, double tolerance, bool relaxed);

// How the shrunk fused axis ends after its two tiles (or chunks): in a partial tile of several
// elements, or in a tile (and chunk) of one element.
enum class AxisEnd { PartialTile, OneElement };

// The shrunk sizes (exposed for tests): the fused axis over two tiles (or chunks) and the end
// `end`, the rows capped at `rows_cap`, the other sizes divided by 2^scale_exponent. `keep_order`:
// rows as many as the axis stay as many, more rows than the axis stay more (by up to rows_cap).
runtime::SizeMap shrink_sizes(const ir::LoopProgram& original, const ValidationOptions& o,
                              int64_t scale_exponent, int64_t rows_cap, bool keep_order,
                              AxisEnd end = AxisEnd::PartialTile);

}  // namespace kintsugi::driver
