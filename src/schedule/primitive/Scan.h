// \file Scan.h
// Shared by reduce_to_scan and split_scan_buffer: rewriting the reads of a buffer inside the
// blocks under a loop in terms of the loop's current position.
#pragma once

#include <functional>
#include <string>

#include "ir/Stmt.h"

namespace kintsugi::schedule {

// Rewrites every load of `buffer` in the blocks under s with rewrite(load, position), where
// position is the block's iteration variable bound to `loop_var` (added as a spatial iteration
// variable when the block has none).
ir::Stmt read_loop_position(
    const ir::Stmt& s, const std::string& loop_var, const ir::Expr& loop_extent,
    const std::function<ir::Expr(const ir::Expr& load, const ir::Expr& position)>& rewrite,
    const std::string& buffer);

}  // namespace kintsugi::schedule
