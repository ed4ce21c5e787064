// \file Schedule.h
// The schedule state: a loop program being transformed by primitives, and the trace of the
// primitives applied (a JSON list that replays on a fresh program to the same result).
//
// Handles are names, so that traces are plain data: a block is named by its name (unique in the
// program), a loop by the block it encloses and its variable ({"block": "o", "loop": "j"}).
// Every primitive checks its preconditions first and throws a ScheduleError that names the
// primitive and the offending block or loop; a primitive that throws leaves the state unchanged.
// Every primitive preserves the program's meaning, and the tests check that by running the
// reference interpreter before and after it on random inputs.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ir/Stmt.h"
#include "schedule/Region.h"
#include "support/Error.h"

namespace kintsugi::schedule {

// The loop with variable `var` among the loops that enclose block `block`.
struct LoopRef {
  std::string block;
  std::string var;
};

// A schedule primitive was applied where its preconditions do not hold.
class ScheduleError : public UserError {
 public:
  ScheduleError(const std::string& primitive, const std::string& message)
      : UserError(primitive + ": " + message), primitive_(primitive) {}
  const std::string& primitive() const { return primitive_; }

 private:
  std::string primitive_;
};

class Schedule {
 public:
  explicit Schedule(ir::LoopProgram program);

  const ir::LoopProgram& program() const { return program_; }
  // The primitives applied so far, in order: [{"primitive": "split", ...arguments}, ...].
  const nlohmann::json& trace() const { return trace_; }
  std::vector<std::string> primitive_names() const;

  // --- loop transformations
  // Splits a loop into an outer and an inner loop, the inner one of extent `factor` (a constant
  // or an integer expression over sizes); blocks get a predicate for the tail when `factor` may
  // not divide the extent. Returns {outer, inner}.
  std::vector<LoopRef> split(const LoopRef& loop, const ir::Expr& factor);
  std::vector<LoopRef> split(const LoopRef& loop, int64_t factor) {
    return split(loop, ir::make_int(factor));
  }
  // Cuts the innermost loop of a map's nest into whole groups of `factor` (an integer over sizes
  // and params) and a tail nest of its own; where the map reads `v / factor` it reads the group
  // (see primitive/SplitGroups.cpp). Returns {groups, within a group}.
  std::vector<LoopRef> split_groups(const LoopRef& loop, const ir::Expr& factor);
  // Strip-mines a data-parallel loop by `factor` and pushes the inner strip loop into every
  // leaf nest of its body, so that each nest covers `factor` iterations at once (see
  // primitive/Distribute.cpp). Returns {outer, inner}.
  std::vector<LoopRef> distribute(const LoopRef& loop, const ir::Expr& factor);
  std::vector<LoopRef> distribute(const LoopRef& loop, int64_t factor) {
    return distribute(loop, ir::make_int(factor));
  }
  // Reorders perfectly nested loops enclosing `block` into the given order (outermost first).
  void reorder(const std::string& block, const std::vector<std::string>& order);
  // Fuses a loop with the loop directly inside it into one loop; returns the new loop.
  LoopRef fuse(const LoopRef& outer, const std::string& inner);
  // Merges a reduction's several reduced axes, bound to its innermost loops, into one axis of the
  // product of their extents, read back as quotients and remainders (see
  // primitive/MergeReduceAxes.cpp); returns the merged axis's name.
  std::string merge_reduce_axes(const std::string& block);
  // Merges the innermost `count` axes of a map into one and flattens the intermediate buffer it
  // stores there, every access of it included (see primitive/MergeMapAxes.cpp); returns the
  // merged axis's name.
  std::string merge_map_axes(const std::string& block, int count);
  // Binds a data-parallel loop to a grid axis ("grid.x", "grid.y", "grid.z"): it runs in
  // parallel (CTAs on a GPU, threads on the CPU).
  void bind(const LoopRef& loop, const std::string& axis);

  // --- block transformations
  // The blocks' values computed again for `readers` alone, by copies of their nests placed in
  // front of the first reader (Recompute.cpp); returns the copies' block names.
  std::vector<std::string> recompute(const std::vector<std::string>& blocks,
                                     const std::vector<std::string>& readers);
  // The reduction or map `block` computed again at the one point each instance of `reader` reads
  // of it (a loss's logit at a target id), in a nest placed in front of the reader's
  // (RecomputePoint.cpp); returns the new block's name.
  std::string recompute_point(const std::string& block, const std::string& reader);
  // A reduction over a group's members e and further axes that reads e only as the member
  // g * E + e of its group g becomes a reduction over the further axes for every member, then a
  // sum of the members over each group (FactorGroup.cpp); returns the members' block.
  std::string factor_group(const std::string& block);
  // Inlines an elementwise block into every block that reads it and removes it.
  void compute_inline(const std::string& block);
  // Inlines an elementwise block into the elementwise block that produces its only input.
  void reverse_compute_inline(const std::string& block);
  // Moves the root-level nest holding `block` right before the root-level nest holding
  // `before`, when the nests it crosses are independent of it (checked on block reads/writes).
  void move_nest(const std::string& block, const std::string& before);
  // Moves a producer's nest into a consumer's loop, shrunk to the region read per iteration.
  void compute_at(const std::string& block, const LoopRef& loop);
  // Moves a consumer's nest into a producer's loop, restricted to what one iteration produces.
  void reverse_compute_at(const std::string& block, const LoopRef& loop);
  // reverse_compute_at with some iteration variables' ranges given (used by rolling_update,
  // which restricts the fused blocks to the current tile of the reduction axis).
  // `aliases` maps buffers the block reads to produced buffers that place them.
  void reverse_compute_at_box(const std::string& block, const LoopRef& loop,
                              const std::map<std::string, Range>& box,
                              const std::map<std::string, std::string>& aliases = {});
  // Splits a reduction at `loop` into partial results (a new block `<block>.rf` writing
  // `<buffer>.rf`, data-parallel over `loop`) and a write-back that reduces them over `loop`.
  // The rf buffer is the buffer with `loop`'s axis inserted at position `factor_axis` (-1: last).
  // Returns the rf block's name.
  std::string rfactor(const std::string& block, const LoopRef& loop, int factor_axis = -1);
  // Turns a reduction over `loop` into a scan `<buffer>.scan` holding every running value;
  // returns the scan buffer's name.
  std::string reduce_to_scan(const std::string& block, const LoopRef& loop);
  // Names each maximal subexpression of reduction `block`'s term that reads one of `buffers`
  // along a reduction variable (and along no variable wider than those reads and the reduction
  // variables) as an elementwise block `<block>.term<k>` before it; returns their names (see
  // primitive/NameTerm.cpp).
  std::vector<std::string> name_term(const std::string& block,
                                     const std::set<std::string>& buffers);
  // Neptune's Rolling Update: fuses reduction `block` under `loop` (the tile loop of a producer
  // reduction it consumes) and repairs its accumulator with a derived repair function.
  void rolling_update(const std::string& block, const LoopRef& loop);
  // Re-bases reductions `blocks`, which read a max or min joining reduction `part` with
  // reductions over other axes, onto `part` alone, each repaired once the join is known (see
  // primitive/RebaseJoin.cpp): each join's axis then carries a chain of its own.
  void rebase_join(const std::vector<std::string>& blocks, const std::string& part);
  // Replaces the scan buffer of a scan block by a loop-carried pair `.prev` / `.next`.
  void split_scan_buffer(const std::string& block, const LoopRef& loop);
  // Neptune's Split-K Update (FlashDecoding): chunk-local partials under a data-parallel
  // `loop`, combined after it with the derived repair.
  void split_k_update(const std::string& block, const LoopRef& loop);
  // Narrows a tile loop to the tiles a mask leaves alive (checked: dead tiles must contribute
  // identities to every reduction that reads the masked values).
  void propagate_mask(const std::string& block, const LoopRef& loop);
  // Moves the init of a reduction block into a block of its own, placed before `loop`; returns
  // the name of the init block.
  std::string decompose_reduction(const std::string& block, const LoopRef& loop);
  // Inserts a copy block `<buffer>.<scope>` (its own nest, right before `block`'s nest) that
  // copies `buffer` into a new buffer of that name and scope, read by `block` instead; returns
  // the copy block's name. Scopes: "global", "shared", "local".
  std::string cache_read(const std::string& block, const std::string& buffer,
                         const std::string& scope);
  // Makes `block` write a new buffer `<buffer>.<scope>` and inserts a copy block of that name
  // (its own nest, right after `block`'s nest) that writes the original buffer from it; returns
  // the copy block's name.
  std::string cache_write(const std::string& block, const std::string& scope);
  // Shrinks every intermediate buffer to the region one iteration of its innermost owning loop
  // touches and allocates it inside that loop (see primitive/CompactBuffer.cpp).
  void compact_buffer();

  // Replaces the program (used by primitives) and appends a trace entry.
  void commit(ir::LoopProgram program, nlohmann::json entry);
  // Fresh names for loops, blocks and buffers.
  std::string fresh_name(const std::string& base) const;

 private:
  ir::LoopProgram program_;
  nlohmann::json trace_ = nlohmann::json::array();
};

// Applies a trace to a fresh program; throws ScheduleError on an unknown primitive or bad
// arguments.
Schedule replay(const ir::LoopProgram& program, const nlohmann::json& trace);

}  // namespace kintsugi::schedule
