// \file Translate.h
// Loop IR -> tile IR (Neptune's loop-to-tile translation).
//
// Each root-level statement of a scheduled program becomes a kernel. Its outer data-parallel
// loops become the grid; allocations become registers (scoped to the innermost serial loop around
// the allocation, if any); loops that hold more than one nest stay serial loops; every leaf nest
// (loops around one block) becomes tile operations over the nest's tile axes: its innermost loops
// of constant extent, or of a dimension that the schedule leaves whole as a reduction (which is
// then specialised). Inside a leaf nest:
//   - a buffer access whose indices are a start plus at most one tile axis each is a region
//     (load/store) or a whole register (read/write);
//   - the order of a value's axes follows the buffer it came from; operands are reconciled to
//     the order an operation needs with permute and broadcast (Kᵀ is a permute, a row vector
//     used against a tile is a broadcast);
//   - an index used as a value is an arange; a loop-invariant scalar is a `full`;
//   - a sum over one tile axis of a product of two operands that each span it and one other
//     output axis is a dot; any other reduction over tile axes is an elementwise term then a
//     reduce (masked terms contribute the reducer's identity);
//   - a block predicate masks the store (tails, dead rows), and its conjuncts over reduction
//     axes mask the reduction's operands; a conjunct `v + rest < limit` over a serial loop v of
//     the nest (and what is bound outside it) bounds that loop instead, so that no load runs in
//     an iteration where the loop program's block does nothing.
// Anything else is not in tile form: translate throws NotTileForm with the reason, and the
// caller keeps the scalar loop path.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

#include <set>

#include "runtime/Tensor.h"
#include "tile/TileIR.h"

namespace kintsugi::tile {

class NotTileForm : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `sizes`: the sizes the kernel will run at (only the specialised dims are taken from them).
// `dynamic`: sizes whose values at `sizes` are not assumed (no divisibility is recorded for an
// extent that uses one), so that the program runs at any value of them.
// `tile_budget` > 0: the most elements a tile outside a contraction's operands may materialise
// (a target's registers); a loop that would take a tile past it is walked in chunks.
// `params`: the param values the kernels will run with where not the program's own (integer params
// in a tile's start are recorded in TileProgram::divisible by their values).
TileProgram translate(const ir::LoopProgram& program, const std::map<std::string, int64_t>& sizes,
                      const std::set<std::string>& dynamic = {}, int64_t tile_budget = 0,
                      const runtime::ParamMap& params = {});

}  // namespace kintsugi::tile
