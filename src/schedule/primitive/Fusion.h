// \file Fusion.h
// What rolling_update and split_k_update share.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "algebra/Repair.h"
#include "schedule/Analysis.h"
#include "schedule/Schedule.h"

namespace kintsugi::schedule {

// Neptune's frontier discovery: walks the producers of `target` through elementwise blocks;
// producers for which `is_frontier` holds are recorded in `frontier` (their buffers) and not
// entered; the elementwise blocks on a path to one are recorded in `between`, producers first.
void find_frontier(const ir::LoopProgram& program, const ir::StmtNode& target,
                   const std::function<bool(const ir::StmtNode& producer)>& is_frontier,
                   std::set<std::string>* frontier, std::vector<std::string>* between);

// True when the repair maps a contribution made while incomplete value `v` still held its
// producer's identity to zero once the producer moves on: h(1, identity, r') == 0 for finite r'
// (checked numerically at several r'). Such contributions (fully masked tiles) may then be
// replaced by the target's identity, so that a NaN computed from the identity never leaks.
bool repair_annihilates_identity(const algebra::RepairResult& repair,
                                 const algebra::IncompleteValue& v, double identity);

// The reason to refuse a derived repair that divides by an expression of the incomplete values
// (old or new) that the algebra does not prove positive from `facts` (by buffer name; "" when
// none does). A tile or chunk where that expression is zero (tied inputs, a masked part of a
// max) has already multiplied its terms by zero, or divided them by it: t * x' / x cannot
// recover them at x = 0, nor t * (1 + S) / (1 + S') at S' = -1.
// Whether the repair exponentiates incomplete value `v` (exp or exp2 of an expression of its old
// or new value). Over a value that a sum produces, a chunk's or prefix's partial can be far from
// the row's (a sum is not bounded by its final value, as a running max is), so its terms and the
// factor exp(x - x') overflow or underflow where the program's do not: such repairs are refused.
bool repair_exponentiates(const algebra::RepairResult& repair, const algebra::IncompleteValue& v);

std::string repair_pole(const algebra::RepairResult& repair,
                        const std::set<std::string>& incomplete,
                        const std::map<std::string, std::string>& facts);

// algebra::RepairRequest::running_sums (reducer sum): for each incomplete buffer that holds a
// running reduction by `reducer` (a scan of tile partials, or a chunk's partial, of a reduction
// over the target's axis), the term of the partial reduction reducing into it, with the
// partial's reduction variable at the target's element (`inner_position`, as for
// identity_guard_sound) and loop `loop_var`'s iteration spelled `position` (as the target's
// term reads running values), fused maps inlined by `expand` (the expansion of the target's own
// term) and load indices simplified.
std::map<std::string, ir::Expr> running_terms(
    const ir::LoopProgram& p, const std::set<std::string>& incomplete, ir::Reducer reducer,
    const ir::Expr& inner_position, const std::string& loop_var, const ir::Expr& position,
    const std::function<ir::Expr(const ir::Expr&)>& expand);

// algebra::RepairRequest::running_extrema: running_terms of the max and min reductions.
std::map<std::string, std::pair<ir::Reducer, ir::Expr>> running_extrema(
    const ir::LoopProgram& p, const std::set<std::string>& incomplete,
    const ir::Expr& inner_position, const std::string& loop_var, const ir::Expr& position,
    const std::function<ir::Expr(const ir::Expr&)>& expand);

// The identity guard (repair_annihilates_identity) drops what a tile or chunk contributed while
// an incomplete value's producer held its reducer's identity. That is sound when the target's
// terms are its own identity on the elements that made the producer's terms the identity: where a
// mask did (the producer's partial reduces a term that reads, directly or through maps, a map
// buffer B = select(cond, v, K) and is the identity wherever B is K), the target's `term` with B
// and its copies (`aliases`, the names B was cloned to) replaced by K, everything else random
// finite, must give the target's identity (MaskedTerm.h; what propagate_mask checks of a skipped
// tile). A mask written inline in the producer's partial, select(C, v, identity), is sound when
// the target's term is the identity with each select on a condition that agrees with C taken on
// its hiding side (the target masks the same elements itself). `inner_position` is the target
// element's position in its tile or chunk, in the target's variables (the value of the
// partial's reduction variable at that element); null: inline masks are refused. A term counts as
// masked when some choice of its selects' branches makes it the identity (MaskedTerm.h
// masked_term_can_be): an index predicate beside the mask can hold on a whole chunk. Without a mask
// (the data itself is the identity: -inf inputs) the guard stays. `producer` is the buffer the
// incomplete value reads (a scan, or the result a combine writes); `p` the program that holds it,
// its partial and the maps.
bool identity_guard_sound(const ir::LoopProgram& p, const std::string& producer,
                          ir::Reducer producer_reducer, const ir::Expr& term,
                          ir::Reducer target_reducer,
                          const std::map<std::string, std::string>& aliases,
                          const ir::Expr& inner_position);

// Whether a mask can leave `producer` (the buffer an incomplete value reads) at its reducer's
// identity on a whole tile or chunk: its partial reduces select(cond, v, identity) inline, or a
// term that is the identity wherever a map buffer it reads (directly or through maps) holds its
// select's constant. Where the repair does not annihilate such a contribution (it re-bases
// t = F(g(identity, c)) from an infinite value), the update is refused.
bool producer_masked(const ir::LoopProgram& p, const std::string& producer,
                     ir::Reducer producer_reducer);

// The facts repair_pole may rely on for the partials (`partial_of`: producer -> its partial
// buffer): a partial whose producer's terms a mask drives to 0 (max[j](exp(c)) of
// c = select(.., -inf): exp(-inf) is 0) is zero on a tile or chunk that the mask hides, however
// positive the producer's terms are elsewhere, so it is only nonnegative there.
std::map<std::string, std::string> partial_facts(
    const ir::LoopProgram& p, std::map<std::string, std::string> facts,
    const std::map<std::string, std::string>& partial_of);

// Whether a mask drives a maximum or minimum `producer` to its absorbing infinity (+inf for a
// maximum), or a sum to either infinity: its partial reduces a term that is that infinity
// wherever a map buffer it reads holds its select's constant (max[j](c * c) of
// c = select(.., -inf); sum[j](c)). The row's value is then infinite
// where every chunk's or tile's but the masked one's is finite, and a repair re-basing from a
// finite value to an infinite one (t * F(global) / F(local)) gives inf or NaN where the program's
// terms give 0: the update is refused.
bool mask_makes_producer_infinite(const ir::LoopProgram& p, const std::string& producer,
                                  ir::Reducer producer_reducer);

// Refuses an augmented-state repair one of whose statistics is infinite where a mask sets values
// to an infinity (a ScheduleError of `primitive`: `refusal` and the statistic): its summand
// through the map blocks of `p`, every select(cond, v, K) with K infinite replaced by K, at random
// finite values of everything else. Its sum is then infinite and the repair subtracts infinities
// (NaN where the reference is infinite or finite).
void refuse_masked_infinite_statistics(const ir::LoopProgram& p,
                                       const algebra::RepairResult& repair,
                                       const std::string& primitive, const std::string& refusal);

// True when the repair rescales its partial (h(0, x, x') == 0: h = t * k) by a factor k that can
// exceed 1 where the incomplete values move as their producers can: `moves` maps a value's old
// variable to its producer's reducer (the new value of a max is at least the old one, of a min at
// most; Sum stands for a sum of nonnegative terms, which only grows and is never negative; a value
// missing there moves either way, as does a producer repaired itself: its chunk partial
// sits on a base of its own, max[j](exp(x - a0.rf)) over the chunk's a0, and is not bounded
// by its final value). Checked numerically. A partial computed at a base where it is
// smaller than the program's terms may underflow (to 0, or lose its subnormal digits) where the
// program's terms do not, and k > 1 cannot restore it (log(min[j](exp(x - r))) is -inf where the
// reference is -100). Where k exponentiates an incomplete value a
// modest move of it spans the whole float range, and the callers refuse the update; a ratio k
// (t * s / s') is kept, with a zero partial kept as it is (guard_scaled_partial: 0 * inf is NaN).
bool repair_scale_may_overflow(const algebra::RepairResult& repair,
                               const std::map<std::string, ir::Reducer>& moves);

// `h` (the repair applied to partial `t`) as the update may use it, given how its incomplete
// values move (`moves`, as for repair_scale_may_overflow): h itself where the repair never scales
// t up; select(t == 0, t, h) where a ratio can (a zero partial kept as it is: 0 * inf is NaN);
// a ScheduleError of `primitive` (`refusal`, then why) where an exponential can.
ir::Expr guard_scaled_partial(const algebra::RepairResult& repair,
                              const std::map<std::string, ir::Reducer>& moves, const ir::Expr& t,
                              const ir::Expr& h, const std::string& primitive,
                              const std::string& refusal);

// Augmented-state repairs re-base an accumulator about the old value of a producer, and a partial
// sum (a fraction of the whole: a mean is the whole axis' sum over its extent) is far from the
// data it summarises; re-based about it, the accumulator cancels in the program's types. A
// partial sum over `covered` elements of an axis of `extent` is read extrapolated to the whole
// axis, sum * extent / covered: near the final value from the first tile on, and repaired exactly
// like any old value. The factor, in `type` (covered at least 1: an empty tile reads its sum).
ir::Expr extrapolation_factor(const ir::Expr& extent, const ir::Expr& covered, DType type);

// Rewrites every read of a buffer in `sums` by the blocks under the loop at `loop` (but not those
// that write it) to load * factor(load), and returns `term` with those loads renamed to
// NAME.extrapolated: the incomplete values the repair is then derived over.
ir::Expr extrapolate_sum_reads(ir::LoopProgram& program, const StmtPath& loop,
                               const std::set<std::string>& sums,
                               const std::function<ir::Expr(const ir::Expr& load)>& factor,
                               const ir::Expr& term);

// For each fused block, the iteration variable that runs along the target's reduction axis and
// where it starts: the target's `axis` itself (offset 0), and in each producer (consumers first,
// `between` is producers-first) the variable it stores at where a fused consumer reads it at
// `o + v`, v the consumer's axis variable and o free of v: its offset is the consumer's plus o,
// in loop terms (a split-K chunk's partial reads its chunk at j0 * C + a: offset j0 * C).
struct AxisIteration {
  std::string var;
  ir::Expr offset;
};
// The box that restricts `block` to one tile of the axis: its axis variable over `tile`, moved
// by its offset (empty when the block has none).
std::map<std::string, Range> axis_box(const std::map<std::string, AxisIteration>& axis_iter,
                                      const std::string& block, const Range& tile);
std::map<std::string, AxisIteration> axis_iterations(const ir::LoopProgram& program,
                                                     const std::string& target,
                                                     const std::string& axis,
                                                     const std::vector<std::string>& between);

// One statistic of an augmented-state repair (Welford: the sum of the values and the count) as
// a reduction computed alongside `target` under `loop`: the program with a block `<target>.<var>`
// summing the statistic's term into a new buffer `<target buffer>.<var>` (the target's shape and
// accumulator type), in a copy of the target's nest under the loop, appended to the loop's body.
// The statistic's term is complete: it reads what the target reads, at the target's iteration
// variables; one that needs the loop position (`position`) is a ScheduleError. Its block's name
// goes to *name; rfactor it at the loop to get per-iteration partials.
ir::LoopProgram add_statistic(const Schedule& s, const std::string& target, const LoopRef& loop,
                              const algebra::AugmentedStatistic& statistic,
                              const std::string& position, const std::string& primitive,
                              std::string* name);

}  // namespace kintsugi::schedule
