// \file Bound.h
// Stores masked by their own region's bound. A tile whose last rows or columns may run past its
// buffer (a group of query heads when HQ / HK need not divide HQ, a spread of head_dim columns)
// is stored with the mask `index < extent` along those dimensions, on top of the tail check of
// its region. Such a store writes every element of its region inside the buffer, and a load of
// the region reads 0 past it: store forwarding and buffer promotion rely on this to treat the
// store like an unmasked store of an untailed region.
#pragma once

#include "tile/TileIR.h"

namespace kintsugi::tile {

// Whether `store` (in kernel `k`) is masked by exactly its region's bound: every conjunct of its
// mask is arange(start_d) < extent_d along the tile axis of a bounds-checked dimension d whose
// start is non-negative (literals, sizes and grid indices), every bounds-checked dimension has
// one, and the stored dtype is the buffer's.
bool masked_by_its_bound(const Kernel& k, const TileOp& store, const ir::LoopProgram& source);

// Whether `store` writes nothing past its region's bound: some conjuncts of its mask are those of
// masked_by_its_bound, and the others (a first-iteration condition) only narrow it.
bool masked_within_its_bound(const Kernel& k, const TileOp& store, const ir::LoopProgram& source);

// Whether `store` writes every element of its region inside the buffer when loop variable `var`
// is `value`: unmasked with no tail, or masked by exactly its bound and conditions that hold
// there (a split-K chunk's init at the first tile: `j10 == 0`).
bool writes_its_whole_bound_at(const Kernel& k, const TileOp& store, const ir::LoopProgram& source,
                               const std::string& var, const ir::Expr& value);

}  // namespace kintsugi::tile
