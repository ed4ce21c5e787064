// \file Passes.h
// The target-independent tile passes, in the order `optimize` runs them:
//   1. fuse_kernels     (passes/FuseKernels.cpp)
//                                              consecutive kernels over one grid that share only
//                                              instance-private elements are one kernel (the
//                                              split-K combines and the normalisation)
//   2. cse              (passes/Cse.cpp)       identical operations computed once; register reads
//                                              and loads are reused only until a write or store
//   3. promote_loop_buffers (passes/Promote.cpp)
//                                              a buffer a loop loads and stores at one
//                                              loop-invariant region lives in a register for the
//                                              loop (the split-K combine's running state)
//   4. forward_stores   (passes/StoreForward.cpp)
//                                              a load of the region the same code just stored,
//                                              whole and unrounded, is the stored value (the
//                                              split-K partial maximum read back)
//   5. forward_registers (passes/Forward.cpp)
//                                              a register read after a write in the same code is
//                                              the written value; a register scoped to a loop
//                                              holds nothing at the start of an iteration, so a
//                                              masked update of it is the new value alone; the
//                                              per-iteration scratch registers (the score tiles
//                                              of the key loop) disappear
//   6. factor_uniform_sums (passes/UniformSums.cpp)
//                                              a sum of a scalar times a tile is the tile's sum
//                                              times the scalar, a sum of a masked scalar the
//                                              scalar times the mask's count (a rolling update's
//                                              scaled and constant statistics)
//   7. pad_dot_extents  (passes/PadDots.cpp)   a dot's K or N that is a multiple of 8 but not
//                                              of the target's dot_multiple (head sizes 40,
//                                              72) is widened to the next multiple in every
//                                              tile tied to it, the extra positions read as 0
//                                              past the buffers' ends and masked where a
//                                              reduction or a dot combines positions; after
//                                              the uniform factors left the dots, so that their
//                                              operands are 16-bit tiles the masks go under
//   8. drop_redundant_tail_selects (passes/TailSelect.cpp)
//                                              a select against zero under a tail mask is its
//                                              operand when that is 0 there already (the
//                                              masked V tile, a decode chunk's masked PV terms)
//   9. cancel_permutes  (passes/CancelPermutes.cpp)
//                                              a permute of elementwise operations on a permuted
//                                              tile moves onto their loads, where it cancels the
//                                              inner permute (scores masked by a key-major mask)
//  10. fold_permutes_into_reduces (passes/ReducePermute.cpp)
//                                              a reduction of a permuted tile reduces the tile
//                                              along the corresponding axis (the split-K PV sum)
//  11. residues_along_axes (passes/Residues.cpp)
//                                              a test that a sum of row and column terms is a
//                                              multiple of a scalar compares their residues,
//                                              computed on the vectors (a strided sparse mask)
//  12. cse              again: forwarding makes reads of one value identical
//  13. reciprocal_of_broadcast_divisors (passes/Reciprocal.cpp)
//                                              an f32 division by a product of broadcasts is a
//                                              product with their reciprocals, computed on the
//                                              vectors (cosine attention's norms)
//  14. hoist_invariants (passes/Hoist.cpp)     operations that do not change across a serial
//                                              loop move in front of it (the Q tile is loaded
//                                              once per grid instance)
//  15. drop_overwritten_stores (passes/OverwrittenStores.cpp)
//                                              a store that a later store of the same code
//                                              overwrites whole before anything reads its buffer
//                                              is dropped (a split-K chunk's partials, set before
//                                              a walk that may run no tile)
//  16. eliminate_dead   (passes/Dce.cpp)       values nothing uses are dropped
//  17. pipeline_streams (passes/Pipeline.cpp)  loads that walk a serial loop through an input
//                                              (the K/V stream) are marked as a stream of that
//                                              loop with two stages: each back end issues the
//                                              next iteration's load before this iteration's
//                                              compute (double buffering)
// Tail masking and dead-tile skipping are already explicit when translation ends (region
// bounds checks, store masks, and the loop bounds that mask propagation narrowed).
// Every pass keeps the program verifiable (TileIR.h's verify runs after each). The driver runs
// them after translation and checks the result by execution (driver::validate_tiles).
#pragma once

#include <vector>

#include "tile/TileIR.h"

namespace kintsugi::tile {

void fuse_kernels(TileProgram& p);
void cse(TileProgram& p);
void promote_loop_buffers(TileProgram& p);
void forward_stores(TileProgram& p);
void forward_registers(TileProgram& p);
void factor_uniform_sums(TileProgram& p);
void pad_dot_extents(TileProgram& p);
void drop_redundant_tail_selects(TileProgram& p);
void cancel_permutes(TileProgram& p);
void fold_permutes_into_reduces(TileProgram& p);
void residues_along_axes(TileProgram& p);
void reciprocal_of_broadcast_divisors(TileProgram& p);
void hoist_invariants(TileProgram& p);
void drop_overwritten_stores(TileProgram& p);
void eliminate_dead(TileProgram& p);
void pipeline_streams(TileProgram& p);

// The passes above, in order, with their names (for a validation failure that names one).
struct NamedPass {
  const char* name;
  void (*run)(TileProgram&);
};
const std::vector<NamedPass>& passes();

// All of the above, in order, verifying the program after each.
void optimize(TileProgram& p);

}  // namespace kintsugi::tile
