// \file AutoSchedule.cpp
// The auto-scheduler (see AutoSchedule.h).
#include "schedule/AutoSchedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/ReductionChains.h"
#include "schedule/primitive/ComputeAt.h"
#include "schedule/primitive/Fusion.h"
#include "schedule/primitive/MaskedTerm.h"
#include "schedule/primitive/RebaseJoin.h"

namespace kintsugi::schedule {

namespace {

// Blocks in program order.
std::vector<const ir::StmtNode*> ordered_blocks(const ir::LoopProgram& p) {
  return blocks_under(p.body);
}

// The first block writing each buffer.
std::map<std::string, const ir::StmtNode*> first_writers(const ir::LoopProgram& p) {
  std::map<std::string, const ir::StmtNode*> out;
  for (const ir::StmtNode* b : ordered_blocks(p))
    for (const std::string& w : block_writes(*b)) out.emplace(w, b);
  return out;
}

// Every block that `block` depends on, transitively.
std::set<std::string> producer_closure(const ir::LoopProgram& p, const ir::StmtNode& block) {
  const std::map<std::string, const ir::StmtNode*> writers = first_writers(p);
  std::set<std::string> out;
  std::vector<const ir::StmtNode*> work = {&block};
  while (!work.empty()) {
    const ir::StmtNode* b = work.back();
    work.pop_back();
    for (const std::string& r : block_reads(*b)) {
      if (block_writes(*b).count(r)) continue;
      auto w = writers.find(r);
      if (w != writers.end() && !out.count(w->second->name)) {
        out.insert(w->second->name);
        work.push_back(w->second);
      }
    }
  }
  return out;
}

// Every block that depends on one of `blocks`, transitively (not those themselves, unless they
// depend on one another).
std::set<std::string> dependents(const ir::LoopProgram& p, const std::set<std::string>& blocks) {
  const std::map<std::string, const ir::StmtNode*> writers = first_writers(p);
  std::set<std::string> out;
  for (bool grew = true; grew;) {
    grew = false;
    for (const ir::StmtNode* b : ordered_blocks(p)) {
      if (out.count(b->name)) continue;
      for (const std::string& r : block_reads(*b)) {
        auto w = writers.find(r);
        if (block_writes(*b).count(r) || w == writers.end()) continue;
        if (blocks.count(w->second->name) || out.count(w->second->name)) {
          out.insert(b->name);
          grew = true;
          break;
        }
      }
    }
  }
  return out;
}

// The head of the chain whose first reduction is `first` (reduction variable `axis`): the
// earliest block of `closure` (its producers) that iterates along the axis and along every row
// (spatial variable) of `first`, as the loads from `first` back to it index them (Fusion.h,
// axis_iterations): its name and its variable along the axis. Which variable runs along the axis
// follows from the indices, never from extents, so a program whose rows and axis have one extent
// (self-attention over one length) finds the right one. A producer that runs along the axis but
// not along the rows (a definition on the key side) is not the head: it stays a producer,
// complete before the row loop. Nothing when no producer qualifies. The later producers that
// qualify as well and do not read the head are its peers: computed at the tile loop beside it
// (the second dot of a score made of two, as in latent attention's
// `sum[l](QC * C) + sum[e](QR * R)`).
struct ChainHead {
  std::string block, var;
  std::set<std::string> rows;      // the spatial variables of `first` the head runs along
  std::set<std::string> row_vars;  // the head's variables along them
  std::set<std::string> peers;     // the other producers that run along the axis and every row
};
std::optional<ChainHead> chain_head(const ir::LoopProgram& p, const ir::StmtNode& first,
                                    const std::string& axis, const std::set<std::string>& closure) {
  std::vector<std::string> between;  // producers first
  for (const ir::StmtNode* b : ordered_blocks(p))
    if (closure.count(b->name) && b->body && b->body->kind == ir::StmtKind::Store)
      between.push_back(b->name);
  std::map<std::string, AxisIteration> along = axis_iterations(p, first.name, axis, between);
  // The last row along which no producer iterates (the column of the values that a weighted sum
  // reads from an input alone) asks nothing of the head. An earlier one (the queries' rows of
  // Q . (K^T V) in linear attention) does: a head that does not run along it would be computed
  // again for every tile of those rows.
  std::string last_row;
  for (const ir::IterVar& iv : first.iters)
    if (iv.kind == ir::IterKind::Spatial) last_row = iv.name;
  std::map<std::string, std::map<std::string, AxisIteration>> rows;
  for (const ir::IterVar& iv : first.iters) {
    if (iv.kind != ir::IterKind::Spatial) continue;
    std::map<std::string, AxisIteration> r = axis_iterations(p, first.name, iv.name, between);
    if (std::any_of(between.begin(), between.end(),
                    [&](const std::string& b) { return r.count(b) > 0; }))
      rows[iv.name] = r;
    else if (iv.name != last_row)
      return std::nullopt;
  }
  std::optional<ChainHead> head;
  for (const std::string& b : between) {
    auto it = along.find(b);
    if (it == along.end()) continue;
    bool covers = std::all_of(rows.begin(), rows.end(), [&](const auto& r) {
      return r.second.count(b) > 0 && r.second.at(b).var != it->second.var;
    });
    if (!covers) continue;
    if (head) {
      head->peers.insert(b);
      continue;
    }
    head = ChainHead{b, it->second.var, {}, {}, {}};
    for (const auto& [v, r] : rows) {
      head->rows.insert(v);
      head->row_vars.insert(r.at(b).var);
    }
  }
  if (head && !head->peers.empty()) {
    const std::set<std::string> reads_head = dependents(p, {head->block});
    std::erase_if(head->peers, [&](const std::string& b) { return reads_head.count(b) > 0; });
  }
  return head;
}

// The loop around the tile loop `tile_loop` (a row tile's), if any.
std::optional<LoopRef> row_loop_around(const Schedule& s, const LoopRef& tile_loop) {
  std::vector<const ir::StmtNode*> loops = loops_on(find_loop(s.program().body, tile_loop, "auto"));
  if (loops.size() < 2) return std::nullopt;
  return LoopRef{tile_loop.block, loops[loops.size() - 2]->var};
}

// What the blocks of the root nest holding `block` write.
std::set<std::string> nest_writes(const ir::LoopProgram& p, const std::string& block) {
  std::set<std::string> out;
  for (const ir::StmtNode* b :
       blocks_under(p.body->stmts[root_index(p, find_block(p.body, block, "auto"))]))
    for (const std::string& w : block_writes(*b)) out.insert(w);
  return out;
}

// The least power of two at least `n`.
int64_t ceil_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// Whether a strip of the rows of `row_loop` would only make the walk `tile_loop`'s tiles larger:
// some buffer that the walk streams (reads through its loop, and does not write) is indexed by the
// rows and by a third axis besides the walked one (the keys of a decode step in caches of each
// head's own, [heads, keys, head dimension] a strip), and none is shared by the rows (not indexed
// by them: the keys of an attention, which a strip of query rows reads once) or holds them side by
// side (its last index is the rows': a reduction over the middle axis of [A, N, C], whose strip
// along C reads whole lines of memory). A row reduction's strip of [rows, columns] tiles stays.
bool strip_of_rows_is_wasted(const ir::LoopProgram& p, const LoopRef& tile_loop,
                             const LoopRef& row_loop) {
  const ir::StmtNode& walk = *find_loop(p.body, tile_loop, "auto").back();
  std::set<std::string> written, inner;
  for (const ir::StmtNode* b : blocks_under(walk.body))
    for (const std::string& w : block_writes(*b)) written.insert(w);
  ir::visit(walk.body, [&](const ir::Stmt& st) {
    if (st->kind == ir::StmtKind::For) inner.insert(st->var);
    return true;
  });
  bool pays = false, wide = false;
  for (const ir::StmtNode* b : blocks_under(walk.body)) {
    std::map<std::string, ir::Expr> bindings;
    for (const ir::IterVar& iv : b->iters)
      if (iv.binding) bindings[iv.name] = iv.binding;
    auto uses = [&](const ir::Expr& index, const std::string& loop) {
      return ir::uses_var(ir::substitute(index, bindings), loop);
    };
    ir::visit(b->body, [&](const ir::Stmt& st) {
      ir::visit_exprs(st, [&](const ir::Expr& e) {
        ir::visit(e, [&](const ir::Expr& x) {
          if (x->op != ir::Op::Load || written.count(x->name) || x->args.empty()) return true;
          bool streamed = false, per_row = false, third = false;
          for (const ir::Expr& a : x->args) {
            streamed = streamed || uses(a, walk.var);
            per_row = per_row || uses(a, row_loop.var);
            if (!uses(a, walk.var))
              for (const std::string& v : inner) third = third || uses(a, v);
          }
          pays = pays || (streamed && (!per_row || uses(x->args.back(), row_loop.var)));
          wide = wide || (streamed && per_row && third);
          return true;
        });
      });
      return true;
    });
  }
  return wide && !pays;
}

// The rows of a group that spans a whole row axis of `n` rows: up to one warp's 16 the extent,
// past it the next power of two, at most `max_rows`.
int64_t whole_group_rows(int64_t n, int64_t max_rows) {
  return n <= 16 ? n : std::min(ceil_pow2(n), max_rows);
}

// Step 4 (see AutoSchedule.h): the nests after the fused one that read what it writes join the
// row loop around the tile loop, and the row loop is distributed over `rows` rows. Consumers that
// only recompute elementwise values of a row are inlined into what reads them (no row-length
// buffer a row tile), and a consumer nest that runs over a whole row of the chain's axis (of
// extent `axis`) walks it in tiles of `tile` (a serial loop outside the row strip), so each nest
// works on rows x tile. A row axis of at most 16 rows takes strips of at most `short_rows`.
// Returns the rows of a strip (0: the rows are not tiled).
int64_t tile_rows(Schedule& s, const LoopRef& tile_loop, int64_t rows, const ir::Expr& axis,
                  int64_t tile, const std::map<std::string, int64_t>& sizes,
                  const std::function<void(const std::string&)>& note, int64_t short_rows) {
  std::optional<LoopRef> around = row_loop_around(s, tile_loop);
  if (!around) return 0;
  const LoopRef row_loop = *around;
  const ir::LoopProgram& p = s.program();
  size_t fused = root_index(p, find_block(p.body, tile_loop.block, "auto"));
  std::set<std::string> written = nest_writes(p, tile_loop.block);
  // The nests after the fused one that read what it writes; an intermediate one inlined into its
  // readers (layernorm's mean, a division of the running sum) makes them consumers in turn.
  // (A consumer of a consumer joins too: the norm of an attention's output rows reads the sum of
  // their squares, which reads the output.)
  std::vector<std::string> kept;
  for (bool inlined = true; inlined;) {
    inlined = false;
    kept.clear();
    std::set<std::string> reached = written;
    const ir::LoopProgram& now = s.program();
    for (size_t k = fused + 1; k < now.body->stmts.size() && !inlined; ++k)
      for (const ir::StmtNode* b : blocks_under(now.body->stmts[k])) {
        std::set<std::string> reads = block_reads(*b);
        if (std::none_of(reads.begin(), reads.end(),
                         [&](const std::string& r) { return reached.count(r) > 0; }))
          continue;
        for (const std::string& w : block_writes(*b)) reached.insert(w);
        bool intermediate = false;
        for (const std::string& w : block_writes(*b))
          if (const ir::Buffer* buf = now.find_buffer(w))
            intermediate = buf->role == ir::BufferRole::Intermediate;
        if (intermediate) {
          try {
            s.compute_inline(b->name);
            inlined = true;  // the program changed: walk it again
            break;
          } catch (const ScheduleError&) {
            // not elementwise: it keeps its own nest
          }
        }
        kept.push_back(b->name);
      }
  }
  // The loops around the row loop: the grid's axes, unless a consumer reduces along one of them.
  std::set<std::string> around_rows;
  {
    std::vector<const ir::StmtNode*> loops = loops_on(find_loop(p.body, row_loop, "auto"));
    for (size_t k = 0; k + 1 < loops.size(); ++k) around_rows.insert(loops[k]->var);
  }
  // What each tile of the walk along the chain's axis writes for that tile alone (the scores of
  // a key tile): a consumer that reads it (an attention's probabilities, an output) needs the
  // whole row after the walk, so it stays a nest of its own, and what it reads stays in memory.
  std::set<std::string> per_tile;
  {
    const ir::StmtNode& walk = *find_loop(s.program().body, tile_loop, "auto").back();
    for (const ir::StmtNode* b : blocks_under(walk.body))
      for (const ir::IterVar& iv : b->iters)
        if (iv.kind == ir::IterKind::Spatial && iv.binding && ir::uses_var(iv.binding, walk.var))
          for (const std::string& w : block_writes(*b)) per_tile.insert(w);
  }
  std::vector<std::string> joined;
  for (const std::string& b : kept) {
    std::string tile_value;
    for (const std::string& r : block_reads(*find_block(s.program().body, b, "auto").back()))
      if (per_tile.count(r)) tile_value = r;
    if (!tile_value.empty()) {
      note("'" + b + "' stays outside the row tiles: it reads '" + tile_value +
           "' of every tile of the walk along the chain's axis, after the walk");
      continue;
    }
    const Schedule before = s;
    try {
      s.reverse_compute_at(b, row_loop);
    } catch (const ScheduleError& e) {
      note("'" + b + "' stays outside the row tiles: " + e.what());
      continue;
    }
    // A consumer that reduces along a loop around the row loop (a mean over the heads of an
    // attention's output) would make that loop serial: it stays a nest of its own.
    const ir::StmtNode& moved = *find_block(s.program().body, b, "auto").back();
    std::string serial;
    for (const ir::IterVar& iv : moved.iters)
      for (const std::string& v : around_rows)
        if (iv.kind != ir::IterKind::Spatial && iv.binding && ir::uses_var(iv.binding, v))
          serial = v;
    if (!serial.empty()) {
      s = before;
      note("'" + b + "' stays outside the row tiles: it reduces along loop '" + serial +
           "' around them, which would run serially");
      continue;
    }
    joined.push_back(b);
  }
  // A row axis shorter than the strip is strided by at most its extent. A literal one (the one
  // query of a decode step written Q[b, h, 1, d]) must be: its buffers are compacted to the rows
  // that exist, and a strip past them would index rows no buffer holds; up to 16 rows make one
  // strip (what a warp's m16 block holds), more the largest power of two that fits. A size of at
  // most 16 at the sizes scheduled for (S = 1 of a decode step) makes one strip too: a strip of
  // 128 rows would compute one of them and read the keys once for it.
  const ir::Expr row_extent = find_loop(s.program().body, row_loop, "auto").back()->extent;
  if (strip_of_rows_is_wasted(s.program(), tile_loop, row_loop)) {
    // One row a grid instance: the row loop stays whole, so that rows grouped by what they
    // share (query heads over a key/value head, group_rows) can still be.
    note("rows are not tiled: what loop '" + tile_loop.var + "' streams is indexed by row loop '" +
         row_loop.var + "' and a third axis, and nothing is shared by the rows");
    return 1;
  }
  if (row_extent->op == ir::Op::IntImm && row_extent->int_value < rows) {
    const int64_t n = row_extent->int_value;
    rows = n <= 16 ? std::min(n, short_rows)
                   : int64_t{1} << (63 - __builtin_clzll(static_cast<uint64_t>(n)));
  } else if (row_extent->op != ir::Op::IntImm) {
    try {
      const int64_t n = ir::eval_int(row_extent, sizes);
      if (n > 0 && n <= 16 && n < rows) rows = std::min(n, short_rows);
    } catch (const UserError&) {
      // a size not given (a dynamic one): the strip stays
    }
  }
  std::vector<LoopRef> strip;
  try {
    strip = s.distribute(row_loop, rows);
  } catch (const ScheduleError& e) {
    note(std::string("rows are not tiled: ") + e.what());
    return 0;
  }
  for (const std::string& b : joined) {
    std::vector<const ir::StmtNode*> on = loops_on(find_block(s.program().body, b, "auto"));
    auto outer = std::find_if(on.begin(), on.end(),
                              [&](const ir::StmtNode* l) { return l->var == strip[0].var; });
    if (outer == on.end() || on.back() == *outer || !ir::equal(on.back()->extent, axis)) continue;
    try {
      std::vector<LoopRef> parts = s.split(LoopRef{b, on.back()->var}, tile);
      std::vector<std::string> order = {parts[0].var};
      for (auto l = outer + 1; l + 1 != on.end(); ++l) order.push_back((*l)->var);
      order.push_back(parts[1].var);
      s.reorder(b, order);
    } catch (const ScheduleError& e) {
      note("'" + b + "' walks its rows whole: " + e.what());
    }
  }
  return rows;
}

// Step 2 (see AutoSchedule.h): the loops of the head's nest inside its axis loop that drive rows
// of the chain (the keys' positions of a weighted sum over the queries, attention's dV or dK
// written over S x T scores) move outside it, so that the rows are loops around the tile loop
// as when the program names them first. A nest that is not perfect there keeps its order.
void rows_outside_axis(Schedule& s, const std::string& head, const std::string& axis_loop,
                       const std::set<std::string>& row_vars) {
  const ir::StmtNode& h = *find_block(s.program().body, head, "auto").back();
  std::set<std::string> row_loops;
  for (const ir::IterVar& iv : h.iters)
    if (row_vars.count(iv.name) && iv.binding && iv.binding->op == ir::Op::Var)
      row_loops.insert(iv.binding->name);
  std::vector<const ir::StmtNode*> loops = loops_on(find_block(s.program().body, head, "auto"));
  auto at = std::find_if(loops.begin(), loops.end(),
                         [&](const ir::StmtNode* l) { return l->var == axis_loop; });
  auto last = std::find_if(loops.rbegin(), loops.rend(),
                           [&](const ir::StmtNode* l) { return row_loops.count(l->var) > 0; });
  if (at == loops.end() || last == loops.rend() || last.base() <= at + 1) return;
  std::vector<std::string> rows_first, others;
  for (auto l = at; l != last.base(); ++l)
    (row_loops.count((*l)->var) ? rows_first : others).push_back((*l)->var);
  rows_first.insert(rows_first.end(), others.begin(), others.end());
  try {
    s.reorder(head, rows_first);
  } catch (const ScheduleError&) {
    // not a perfect nest: the rows stay inside the axis loop
  }
}

// Step 2 (see AutoSchedule.h): what the chain reads without depending on the head or on a
// member of the chain is complete before the tile loop; nests of it that come after the head's
// nest move before it, in program order (move_nest checks that they are independent of the
// nests they cross). A block that reads a member (the log-probabilities of a second softmax over
// the same rows) is fused with the chain, never complete. The head's peers move too, to be
// computed at the tile loop once what reads them is there.
void hoist_complete_producers(Schedule& s, const std::string& head,
                              const std::vector<std::string>& members) {
  const ir::LoopProgram& p = s.program();
  std::set<std::string> chain(members.begin(), members.end());
  chain.insert(head);
  const std::set<std::string> fused = dependents(p, chain);
  std::set<std::string> complete;
  for (const std::string& m : members)
    for (const std::string& b : producer_closure(p, *find_block(p.body, m, "auto").back()))
      if (!chain.count(b) && !fused.count(b)) complete.insert(b);
  std::vector<std::string> late;
  size_t head_nest = root_index(p, find_block(p.body, head, "auto"));
  for (const ir::StmtNode* b : ordered_blocks(p))
    if (complete.count(b->name) && root_index(p, find_block(p.body, b->name, "auto")) > head_nest)
      late.push_back(b->name);
  for (const std::string& b : late) s.move_nest(b, head);
}

// Whether a block only reads (loads, through casts): computing it where it is used costs no
// more than reading its inputs there.
bool reads_only(const ir::StmtNode& block) {
  if (!block.body || block.body->kind != ir::StmtKind::Store) return false;
  ir::Expr v = block.body->value;
  while (v->op == ir::Op::Cast) v = v->args[0];
  return v->op == ir::Op::Load;
}

// How many times block `name` computes each of its elements: the product of the extents (at
// `sizes`) of its enclosing loops that none of its iteration variables depends on; nullopt when
// a size is not known.
std::optional<int64_t> recomputation(const ir::LoopProgram& p, const std::string& name,
                                     const std::map<std::string, int64_t>& sizes) {
  StmtPath path = find_block(p.body, name, "auto");
  const ir::StmtNode& block = *path.back();
  int64_t times = 1;
  for (const ir::StmtNode* loop : loops_on(path)) {
    bool bound = std::any_of(block.iters.begin(), block.iters.end(), [&](const ir::IterVar& iv) {
      return ir::uses_var(iv.binding, loop->var);
    });
    if (bound) continue;
    try {
      times *= std::max<int64_t>(1, ir::eval_int(loop->extent, sizes));
    } catch (const UserError&) {
      return std::nullopt;
    }
  }
  return times;
}

// Step 4 (see AutoSchedule.h): the producers of the head that run along the axis but not along
// the rows (a definition on the key side: keys copied, rotated or normalised, a key's norm, a
// reduction over the head dimension) are computed at the tile loop, over the tile of the axis
// its blocks read, latest first (compute_at needs every reader under the loop): one kernel,
// without a whole buffer of them. That computes them again for every row tile: a producer that
// computes more than it reads (keys rotated or normalised) stays whole before the fused loop
// when there is more than one row tile at `sizes` (prefill; decode has one), computed once and
// read like an input. Producers that do not run along the axis (the queries' norms, rotated
// queries) are computed at the row tile under the rolling update (`row_tiles`), once for its rows
// before the walk over the axis; elsewhere they stay whole before the fused loop, computed once
// rather than once a tile.
void compute_axis_producers(Schedule& s, const LoopRef& tile_loop, const std::string& head,
                            const std::string& axis, bool row_tiles,
                            const std::map<std::string, int64_t>& sizes,
                            const std::function<void(const std::string&)>& note) {
  const ir::LoopProgram& p = s.program();
  size_t tile_nest = root_index(p, find_loop(p.body, tile_loop, "auto"));
  std::set<std::string> producers = producer_closure(p, *find_block(p.body, head, "auto").back());
  std::vector<std::string> before;
  for (size_t k = 0; k < tile_nest; ++k)
    for (const ir::StmtNode* b : blocks_under(p.body->stmts[k]))
      if (producers.count(b->name)) before.push_back(b->name);
  std::map<std::string, AxisIteration> along = axis_iterations(p, head, axis, before);
  // Producers along the rows alone (the queries rotated) last, apart.
  auto rows_alone = std::stable_partition(before.begin(), before.end(),
                                          [&](const std::string& b) { return along.count(b) > 0; });
  const std::vector<std::string> across(rows_alone, before.end());
  before.erase(rows_alone, before.end());
  std::set<std::string> whole;  // producers of a producer kept whole stay whole with it
  auto keep_whole = [&](const std::string& b) {
    std::set<std::string> inputs =
        producer_closure(s.program(), *find_block(s.program().body, b, "auto").back());
    whole.insert(inputs.begin(), inputs.end());
  };
  for (auto it = before.rbegin(); it != before.rend(); ++it) {
    // A copy to return to when the producer costs more computed per row tile than whole.
    bool copy_like = reads_only(*find_block(s.program().body, *it, "auto").back());
    std::optional<Schedule> saved;
    if (!copy_like) saved = s;
    try {
      s.compute_at(*it, tile_loop);
    } catch (const ScheduleError& e) {
      if (!whole.count(*it))
        note("'" + *it + "' is computed whole before the fused loop: " + e.what());
      keep_whole(*it);
      continue;
    }
    if (copy_like) continue;
    std::optional<int64_t> times = recomputation(s.program(), *it, sizes);
    if (times && *times > 1) {
      s = *saved;
      keep_whole(*it);
      note("'" + *it + "' is computed whole before the fused loop, once, not again for each of " +
           std::to_string(*times) + " row tiles at these sizes");
    }
  }
  // Under the rolling update (`row_tiles`; a split-K chunk is a grid instance of its own, which
  // would compute them again), a producer along the rows alone is computed at the loop around
  // the tile loop, for the rows of a tile before their walk over the axis, where that computes
  // each element once: one kernel, no whole buffer written and read back (the rotated queries
  // of rotary attention took a kernel of their own).
  std::optional<LoopRef> rows = row_loop_around(s, tile_loop);
  if (!row_tiles || !rows) return;
  for (auto it = across.rbegin(); it != across.rend(); ++it) {
    if (whole.count(*it)) continue;
    Schedule saved = s;
    try {
      s.compute_at(*it, *rows);
    } catch (const ScheduleError& e) {
      note("'" + *it + "' is computed whole before the fused loop: " + e.what());
      keep_whole(*it);
      continue;
    }
    std::optional<int64_t> times = recomputation(s.program(), *it, sizes);
    if (!times || *times > 1) {
      s = saved;
      keep_whole(*it);
    }
  }
}

// The divisor E of a floor division `v / E` of spatial iteration variable `v` in what `block`
// reads or writes, when E is over sizes; null when there is none.
ir::Expr group_divisor(const ir::StmtNode& block, const std::string& v) {
  ir::Expr found;
  auto look = [&](const ir::Expr& e) {
    ir::visit(e, [&](const ir::Expr& x) {
      if (!found && x->op == ir::Op::Div && x->args[0]->op == ir::Op::Var &&
          x->args[0]->name == v && ir::over_sizes(x->args[1]))
        found = x->args[1];
      return !found;
    });
  };
  ir::visit(block.body, [&](const ir::Stmt& st) {
    if (st->kind != ir::StmtKind::Store) return true;
    for (const ir::Expr& i : st->indices) look(i);
    look(st->value);
    return false;
  });
  return found;
}

// Whether every buffer that `block` reads along the tile loop `tile_var` (a load whose indices
// use an iteration variable bound through that loop) is read without spatial variable `v`, and
// there is one: every row along `v` reads the same tiles (one key/value head shared by every
// query head, written without a head axis). A block that also streams something per row (a
// norm's rows, read with a weight vector shared by them) does not qualify, unless what the rows
// share is a matrix, along the axis and a column of the block's own (a projection's weights
// W[c, n] behind a norm of the rows it multiplies): each row reading it whole costs more than
// the rows' own reads. A column is a variable driven by one of `inner_loops`, the loops inside
// the tile loop (none given: a shared matrix does not qualify).
bool shared_along_rows(const ir::StmtNode& block, const std::string& v, const std::string& tile_var,
                       const std::set<std::string>& inner_loops) {
  std::set<std::string> along;
  for (const ir::IterVar& iv : block.iters)
    if (ir::uses_var(iv.binding, tile_var)) along.insert(iv.name);
  int shared = 0, own = 0, shared_matrices = 0;
  ir::visit(block.body, [&](const ir::Stmt& st) {
    if (st->kind != ir::StmtKind::Store) return true;
    ir::visit(st->value, [&](const ir::Expr& x) {
      if (x->op != ir::Op::Load || x->name == st->buffer ||
          std::none_of(along.begin(), along.end(),
                       [&](const std::string& a) { return ir::uses_var(x, a); }))
        return true;
      if (ir::uses_var(x, v)) {
        ++own;
        return true;
      }
      ++shared;
      // (A column: a spatial variable driven by a loop inside the tile loop, not a row's.)
      shared_matrices += std::any_of(block.iters.begin(), block.iters.end(), [&](const auto& iv) {
        return iv.kind == ir::IterKind::Spatial && !along.count(iv.name) &&
               ir::uses_var(x, iv.name) &&
               std::any_of(inner_loops.begin(), inner_loops.end(),
                           [&](const std::string& l) { return ir::uses_var(iv.binding, l); });
      });
      return true;
    });
    return false;
  });
  return shared > 0 && (own == 0 || shared_matrices > 0);
}

// Step 3, split-K (see AutoSchedule.h): a row loop around the tile loop that the chain's blocks
// read through a floor division `h / E` (grouped-query attention: E = HQ / HK query heads share
// one key/value head) is distributed over groups of E rows, so that every nest of a chunk covers
// the whole group and each tile of keys and values is loaded once for it. A row loop whose
// variable a block's loads along the keys do not use at all (the key/value head written without
// a head axis) groups its whole extent alike.
struct RowGroup {
  LoopRef loop;      // the row loop to distribute
  ir::Expr divisor;  // its group's extent
  int64_t size = 1;  // at the sizes scheduled for
};
// With `largest`, of the row loops that could be grouped the one of the largest group, not the
// first: a decode step's S queries share every key, and where they outnumber the query heads of a
// key/value group (or the heads are not grouped, HQ = HK), grouping them has each chunk read by
// fewer instances (under split-K 16 queries ran one an instance: 3.50 ms at B=1, HQ=HK=32, S=16,
// T=32768 on the H200, for 0.54 GB of keys and values).
// A whole extent grouped takes at most `max_whole_rows` rows (where the rows' accumulators are
// wide: latent attention's 512 value columns a query head).
std::optional<RowGroup> find_row_group(const Schedule& s, const LoopRef& tile_loop,
                                       const std::map<std::string, int64_t>& sizes,
                                       int64_t max_whole_rows, bool largest = false) {
  std::optional<RowGroup> best;
  StmtPath path = find_loop(s.program().body, tile_loop, "auto");
  std::vector<const ir::StmtNode*> loops = loops_on(path);
  loops.pop_back();  // the tile loop itself
  std::set<std::string> inner_loops;
  ir::visit(path.back()->body, [&](const ir::Stmt& st) {
    if (st->kind == ir::StmtKind::For) inner_loops.insert(st->var);
    return true;
  });
  for (const ir::StmtNode* b : blocks_under(path.back()->body))
    for (const ir::IterVar& iv : b->iters) {
      if (iv.kind != ir::IterKind::Spatial || iv.binding->op != ir::Op::Var) continue;
      bool row = std::any_of(loops.begin(), loops.end(),
                             [&](const ir::StmtNode* l) { return l->var == iv.binding->name; });
      ir::Expr divisor = row ? group_divisor(*b, iv.name) : nullptr;
      bool whole = false;
      if (!divisor && row && shared_along_rows(*b, iv.name, tile_loop.var, inner_loops)) {
        divisor = iv.extent;
        whole = true;
      }
      if (!divisor) continue;
      int64_t group = 0;
      try {
        group = ir::eval_int(divisor, sizes);
      } catch (const UserError&) {
        return std::nullopt;  // a size not given: the group is unknown
      }
      if (group <= 1 && (whole || largest)) continue;  // one row along it: look further
      if (group <= 1) return std::nullopt;
      // A whole extent is tiled by a constant, the tail masked, so that its rows are a tile
      // (and the value head size of a chunk's rows one tile axis too, which a symbolic row
      // extent kept from being): up to one warp's 16 rows the extent at these sizes, past it
      // the next power of two (a tile of 33 or 48 rows fits no warp layout nor splits its
      // copies evenly over the warps).
      if (whole) {
        group = whole_group_rows(group, max_whole_rows);
        divisor = ir::make_int(group);
      }
      RowGroup g{LoopRef{tile_loop.block, iv.binding->name}, divisor, group};
      if (!largest) return g;
      if (!best || group > best->size) best = g;
    }
  return best;
}

int64_t group_rows(Schedule& s, const LoopRef& tile_loop,
                   const std::map<std::string, int64_t>& sizes, int64_t max_whole_rows,
                   const std::function<void(const std::string&)>& note, bool largest = false) {
  std::optional<RowGroup> g = find_row_group(s, tile_loop, sizes, max_whole_rows, largest);
  if (!g) return 1;
  try {
    s.distribute(g->loop, g->divisor);
    note("rows grouped by " + ir::to_string(g->divisor) + " (" + std::to_string(g->size) +
         " at these sizes): a chunk's keys and values are read once for the group");
    return g->size;
  } catch (const ScheduleError& e) {
    note("rows are not grouped: " + std::string(e.what()));
  }
  return 1;
}

// Step 3, split-K (see AutoSchedule.h): the combine nests after the chunk nest run over few
// rows, each as one grid instance. A combine whose innermost loop is data-parallel and spans
// more than `width` iterations at `sizes` (a head_dim row of partial outputs) is split by
// `width`, and the outer part moves out of its serial chunk loop, so that it becomes a grid axis:
// each row's columns are combined by several instances. The nests that read its result join it
// there (reverse_compute_at), and the combines it reads are computed there again for each
// column block (compute_at), so that the whole combine is one kernel over the wider grid and its
// scalar results (the maximum, the sum) never leave the instance.
void spread_columns(Schedule& s, const LoopRef& tile_loop, int64_t width,
                    const std::map<std::string, int64_t>& sizes,
                    const std::function<void(const std::string&)>& note) {
  auto nests_after = [&](const std::string& block) {
    const ir::LoopProgram& p = s.program();
    size_t first = root_index(p, find_block(p.body, block, "auto")) + 1;
    std::vector<std::string> out;
    for (size_t k = first; k < p.body->stmts.size(); ++k)
      for (const ir::StmtNode* b : blocks_under(p.body->stmts[k])) out.push_back(b->name);
    return out;
  };
  // The combines: the nests after the fused one that read what it writes, directly or through
  // one another (not the nests of another chain that follows, which a column block would
  // otherwise compute again and take out of their own fusion).
  const ir::LoopProgram& p0 = s.program();
  std::set<std::string> group_writes = nest_writes(p0, tile_loop.block);
  std::vector<std::string> combines;
  for (const std::string& name : nests_after(tile_loop.block)) {
    std::set<std::string> reads = block_reads(*find_block(p0.body, name, "auto").back());
    if (std::none_of(reads.begin(), reads.end(),
                     [&](const std::string& r) { return group_writes.count(r) > 0; }))
      continue;
    combines.push_back(name);
    for (const std::string& w : block_writes(*find_block(p0.body, name, "auto").back()))
      group_writes.insert(w);
  }
  for (const std::string& name : combines) {
    StmtPath path = find_block(s.program().body, name, "auto");
    const ir::StmtNode& b = *path.back();
    std::vector<const ir::StmtNode*> loops = loops_on(path);
    auto parallel = [&](const ir::StmtNode* l) {
      return std::none_of(b.iters.begin(), b.iters.end(), [&](const ir::IterVar& iv) {
        return iv.kind != ir::IterKind::Spatial && ir::uses_var(iv.binding, l->var);
      });
    };
    if (loops.empty() || !parallel(loops.back()) ||
        std::all_of(loops.begin(), loops.end(), parallel))
      continue;
    int64_t extent = 0;
    try {
      extent = ir::eval_int(loops.back()->extent, sizes);
    } catch (const UserError&) {
      continue;
    }
    if (extent <= width) continue;
    try {
      std::vector<LoopRef> parts = s.split(LoopRef{name, loops.back()->var}, width);
      std::vector<std::string> order = {parts[0].var};
      bool serial = false;
      for (size_t k = 0; k + 1 < loops.size(); ++k) {
        serial = serial || !parallel(loops[k]);
        if (serial) order.push_back(loops[k]->var);
      }
      s.reorder(name, order);
      std::set<std::string> written =
          block_writes(*find_block(s.program().body, name, "auto").back());
      for (const std::string& c : nests_after(name)) {
        std::set<std::string> reads = block_reads(*find_block(s.program().body, c, "auto").back());
        if (std::any_of(reads.begin(), reads.end(),
                        [&](const std::string& r) { return written.count(r) > 0; }))
          s.reverse_compute_at(c, parts[0]);
      }
      for (auto it = combines.rbegin(); it != combines.rend(); ++it) {
        const ir::LoopProgram& p = s.program();
        if (*it == name || root_index(p, find_block(p.body, *it, "auto")) >=
                               root_index(p, find_block(p.body, name, "auto")))
          continue;
        s.compute_at(*it, parts[0]);
      }
    } catch (const ScheduleError& e) {
      note("the columns of '" + name + "' are not spread: " + e.what());
    }
    return;
  }
}

// Step 3, split-K (see AutoSchedule.h): the combine nest of `block` walks the chunks in tiles of
// as many chunks as keep a tile of partials (the chunks times what the loops inside the chunk
// loop span, at `sizes`) within `elements`: a power of two, at least one chunk, at most
// `max_chunks` and at most the chunks there are at `sizes` (rounded up to a power of two).
void tile_combine(Schedule& s, const std::string& block, int64_t elements, int64_t max_chunks,
                  const std::map<std::string, int64_t>& sizes,
                  const std::function<void(const std::string&)>& note) {
  StmtPath path = find_block(s.program().body, block, "auto");
  const ir::StmtNode& b = *path.back();
  for (const ir::IterVar& iv : b.iters) {
    if (iv.kind != ir::IterKind::Reduce || iv.binding->op != ir::Op::Var) continue;
    int64_t per_chunk = 1;
    bool inside = false;
    for (const ir::StmtNode* l : loops_on(path)) {
      if (inside) {
        try {
          per_chunk *= ir::eval_int(l->extent, sizes);
        } catch (const UserError&) {
          per_chunk *= 128;  // a size not given: assume a head dimension's
        }
      } else if (l->var == iv.binding->name) {
        // No wider than the chunks there are at these sizes (rounded up to a power of two).
        try {
          max_chunks = std::min(max_chunks, ceil_pow2(ir::eval_int(l->extent, sizes)));
        } catch (const UserError&) {
        }
      }
      inside = inside || l->var == iv.binding->name;
    }
    int64_t chunks = 1;
    while (chunks * 2 * per_chunk <= elements && chunks * 2 <= max_chunks) chunks *= 2;
    try {
      s.split(LoopRef{block, iv.binding->name}, chunks);
    } catch (const ScheduleError& e) {
      note("the combine of '" + block + "' walks one chunk at a time: " + e.what());
    }
    return;
  }
}

// What choosing the chunk size (AutoScheduleOptions::chunk_tiles) weighs, measured on the
// schedule with chunks of one tile at the run's sizes.
struct SplitKCosts {
  bool known = false;
  int64_t tiles = 0;         // chunks of one tile
  int64_t row_groups = 0;    // grid instances of each chunk
  double partial_bytes = 0;  // the partial results all chunks write (the combine reads)
  double input_bytes = 0;    // the program's inputs, which the chunks stream

  // The grid instances of chunks of `tiles_a_chunk` tiles.
  int64_t instances(int64_t tiles_a_chunk) const {
    return (tiles + tiles_a_chunk - 1) / tiles_a_chunk * row_groups;
  }
};

int64_t bytes_at(const ir::Buffer& b, const std::map<std::string, int64_t>& sizes) {
  int64_t n = dtype_bytes(b.dtype);
  for (const ir::Expr& e : b.shape) n *= ir::eval_int(e, sizes);
  return n;
}

// The bytes of the program's inputs at `sizes`.
double input_bytes(const ir::LoopProgram& p, const std::map<std::string, int64_t>& sizes) {
  double n = 0;
  for (const ir::Buffer* b : p.inputs()) n += static_cast<double>(bytes_at(*b, sizes));
  return n;
}

// The chunk size: doubled from one tile while the partial results weigh more than
// `partial_fraction` of the inputs and the doubled chunks still make `min_instances` grid
// instances. Each doubling halves what the combine reads, and halves the parallel chunks.
int64_t choose_chunk_tiles(const SplitKCosts& c, const AutoScheduleOptions& o) {
  int64_t chunk = 1;
  while (chunk < o.max_chunk_tiles &&
         c.partial_bytes / static_cast<double>(chunk) > o.partial_fraction * c.input_bytes &&
         c.instances(2 * chunk) >= o.min_chunk_instances)
    chunk *= 2;
  return chunk;
}

Schedule schedule_chain(const ir::LoopProgram& program, const AutoScheduleOptions& options,
                        std::vector<std::string>* notes, SplitKCosts* costs);

}  // namespace

AutoScheduleOptions target_schedule_options(const std::string& target) {
  AutoScheduleOptions o;
  if (target == "cuda")
    o.row_tile = 128, o.strip_rows = 1, o.strip_tile = 1024, o.whole_row_bytes = 32768;
  if (target == "cuda") o.live_tile_elements = 24576, o.split_k_long_walks = true;
  if (target == "cuda") o.column_strip = 128, o.column_strip_elements = 8192;
  if (target == "cuda") o.strip_tile_max = 8192, o.row_producers_in_tile = false;
  if (target == "cpu") o.strip_rows = 4, o.strip_tile = 1024, o.whole_row_bytes = 1 << 20;
  if (target == "cpu") o.column_rows = 1024, o.column_tile = 4;
  // A CPU's cores are filled by far fewer grid instances than an H200's 132 SMs, and split-K
  // costs its combine there (decode_causal at B = 2, H = 64, T = 4096 on 2 cores, docs/perf.md:
  // 15.3 ms under the rolling update, 19.4 under split-K).
  if (target == "cpu") o.split_k_below_instances = 128;
  return o;
}

Schedule auto_schedule(const ir::LoopProgram& program, const AutoScheduleOptions& options,
                       std::vector<std::string>* notes) {
  if (options.chunk_tiles > 0) return schedule_chain(program, options, notes, nullptr);
  AutoScheduleOptions chosen = options;
  chosen.chunk_tiles = 1;
  SplitKCosts costs;
  std::vector<std::string> first_notes;
  Schedule one = schedule_chain(program, chosen, &first_notes, &costs);
  if (costs.known) chosen.chunk_tiles = choose_chunk_tiles(costs, options);
  if (chosen.chunk_tiles == 1) {
    if (notes) notes->insert(notes->end(), first_notes.begin(), first_notes.end());
    return one;
  }
  if (notes) {
    std::ostringstream n;
    n << "chunks of " << chosen.chunk_tiles << " tiles chosen: partial results of one-tile chunks "
      << "weigh " << static_cast<int>(100 * costs.partial_bytes / costs.input_bytes + 0.5)
      << " % of the inputs (at most " << static_cast<int>(100 * options.partial_fraction + 0.5)
      << " % wanted), " << costs.instances(chosen.chunk_tiles) << " grid instances remain";
    notes->push_back(n.str());
  }
  return schedule_chain(program, chosen, notes, nullptr);
}

namespace {

// Whether some input or output spans every dim of `b` (a table the size of the data it goes with,
// a rotary angle [S, D]), as opposed to an S x T matrix of positions that no operand spans.
bool spanned_by_an_operand(const ir::LoopProgram& p, const ir::Buffer& b) {
  return std::any_of(p.buffers.begin(), p.buffers.end(), [&](const ir::Buffer& o) {
    if (o.role == ir::BufferRole::Intermediate) return false;
    return std::all_of(b.shape.begin(), b.shape.end(), [&](const ir::Expr& d) {
      return std::any_of(o.shape.begin(), o.shape.end(),
                         [&](const ir::Expr& e) { return ir::equal(d, e); });
    });
  });
}

// Whether `e` is one read of a tensor, cast or scaled by values that read none (a size, a param,
// a literal): `f32(Q[b, h, i, d]) * rsqrt(f32(D))`. Recomputed where it is read it costs a
// multiply; stored, a buffer written and read again, and a product over it would read the scaled
// f32 copy rather than the f16 or bf16 input the tensor cores take.
bool scaled_read(const ir::Expr& e) {
  auto reads_nothing = [](const ir::Expr& x) {
    bool loads = false;
    ir::visit(x, [&](const ir::Expr& y) {
      loads = loads || y->op == ir::Op::Load;
      return true;
    });
    return !loads;
  };
  switch (e->op) {
    case ir::Op::Load:
      return true;
    case ir::Op::Cast:
      return scaled_read(e->args[0]);
    case ir::Op::Mul:
      return (scaled_read(e->args[0]) && reads_nothing(e->args[1])) ||
             (reads_nothing(e->args[0]) && scaled_read(e->args[1]));
    case ir::Op::Div:
      return scaled_read(e->args[0]) && reads_nothing(e->args[1]);
    default:
      return false;
  }
}

// The reduction variable's extent of a block over one reduction variable (null otherwise).
ir::Expr reduced_extent(const ir::StmtNode& b) {
  ir::Expr extent;
  for (const ir::IterVar& iv : b.iters)
    if (iv.kind != ir::IterKind::Spatial) {
      if (extent) return nullptr;
      extent = iv.extent;
    }
  return extent;
}

// A max (or min) that joins reductions over different axes (a cascade's prefix and suffix,
// max(max[j](sp), max[k](sk))) is complete only after all of them, so no reduction that reads it
// fuses with any. The reductions over each joined axis that read the join are re-based onto the
// join's reduction over that axis (rebase_join): each axis then has a chain of its own.
void rebase_joins(Schedule& s, const std::function<void(const std::string&)>& note) {
  const ir::LoopProgram p = s.program();
  std::vector<std::pair<std::vector<std::string>, std::string>> plans;  // targets, part
  for (const ir::StmtNode* j : ordered_blocks(p)) {
    if (!j->body || j->body->kind != ir::StmtKind::Store) continue;
    std::map<std::string, ir::Expr> parts;  // joined reductions -> their axis' extent
    ir::visit(j->body->value, [&](const ir::Expr& e) {
      if (e->op == ir::Op::Load && join_part(p, *j, e->name))
        if (ir::Expr x = reduced_extent(*block_writers(p.body).at(e->name))) parts[e->name] = x;
      return e->op == ir::Op::Max || e->op == ir::Op::Min;
    });
    bool several_axes = false;
    for (const auto& [a, x] : parts)
      for (const auto& [b, y] : parts) several_axes = several_axes || !ir::equal(x, y);
    if (!several_axes) continue;
    for (const auto& [part, extent] : parts) {
      std::vector<std::string> targets;
      for (const ir::StmtNode* t : ordered_blocks(p)) {
        ir::Expr x = reduced_extent(*t);
        if (t->name == j->name || parts.count(t->body->buffer) || !x || !ir::equal(x, extent))
          continue;
        std::set<std::string> frontier;
        std::vector<std::string> between;
        find_frontier(
            p, *t, [&](const ir::StmtNode& prod) { return prod.name == j->name; }, &frontier,
            &between);
        if (frontier.count(j->body->buffer)) targets.push_back(t->name);
      }
      if (!targets.empty()) plans.emplace_back(targets, part);
    }
  }
  for (const auto& [targets, part] : plans) {
    Schedule next = s;
    try {
      next.rebase_join(targets, part);
      s = next;
    } catch (const ScheduleError& e) {
      note(kFusionAbandoned + std::string(e.what()));
    }
  }
}

// Step 0 (see AutoSchedule.h): an elementwise definition computed from positions, sizes, params
// and inputs alone over dims that no operand spans together (a mask or a bias over positions,
// `allowed[i: S, j: T] = select(j <= i, 1.0, 0.0)`, T5's bucket of j - i, a distance scaled by a
// learned slope) is inlined into what reads it: materialised, it is an S x T buffer read once a
// head, and it hides the mask from the tile tests. (A smaller table, a rotary angle [S, D], stays
// one, computed once, unless it is one input read and scaled: queries scaled before their product
// with the keys are read as they are, scaled on the way.) Then a reduction of a chain that reads an
// incomplete producer in its own term (`sum[v](exp(X[r, v] - m[r]))`) gets that part of its term
// named as an elementwise block (name_term), the form in which fusion moves it under the tile loop:
// writing an expression inline or naming it schedules alike.
Schedule normal_form(const ir::LoopProgram& program,
                     const std::function<void(const std::string&)>& note) {
  Schedule s(program);
  std::set<std::string> kept;  // refused by compute_inline
  for (bool inlined = true; inlined;) {
    inlined = false;
    for (const ir::StmtNode* b : ordered_blocks(s.program())) {
      if (kept.count(b->name)) continue;
      const ir::Buffer* out = nullptr;
      for (const std::string& w : block_writes(*b)) out = s.program().find_buffer(w);
      bool elementwise = std::all_of(b->iters.begin(), b->iters.end(), [](const ir::IterVar& iv) {
        return iv.kind == ir::IterKind::Spatial;
      });
      std::set<std::string> reads = block_reads(*b);
      bool inputs_only = std::all_of(reads.begin(), reads.end(), [&](const std::string& r) {
        const ir::Buffer* in = s.program().find_buffer(r);
        return in && in->role == ir::BufferRole::Input;
      });
      if (!out || out->role != ir::BufferRole::Intermediate || !elementwise || !inputs_only ||
          (spanned_by_an_operand(s.program(), *out) &&
           !(b->body && b->body->kind == ir::StmtKind::Store && scaled_read(b->body->value))))
        continue;
      try {
        s.compute_inline(b->name);
        inlined = true;  // the program changed: walk it again
        break;
      } catch (const ScheduleError& e) {
        note("'" + b->name +
             "' is computed from inputs and positions alone but stays a buffer: " + e.what());
        kept.insert(b->name);
      }
    }
  }
  rebase_joins(s, note);
  const ir::LoopProgram base = s.program();
  for (const ReductionChain& c : find_reduction_chains(base)) {
    if (c.producers.empty()) continue;
    const ir::StmtNode& b = *find_block(base.body, c.target, "auto").back();
    std::set<std::string> direct;
    for (const std::string& r : block_reads(b))
      if (std::find(c.producers.begin(), c.producers.end(), r) != c.producers.end())
        direct.insert(r);
    if (direct.empty()) continue;
    try {
      s.name_term(c.target, direct);
    } catch (const ScheduleError& e) {
      note(std::string("the term of '") + c.target + "' stays inline: " + e.what());
    }
  }
  return s;
}

// Whether `head` is a reduction that exists only to feed the reductions `targets`: every block
// from it to a target (what a target reads that depends on `head`, the head included) is read by
// no block but those and the targets, and every one but the head is elementwise. Fusing such a
// chain means its blocks are never materialised whole; a producer that others read would be
// anyway. (Attention's backward pass: dV and dK both read the probabilities recomputed from the
// scores, and are fused together.)
// (A target that another one reads, the maximum that a chain's sum of exponentials reads, is
// a member like the others, not a reduction between the head and the targets.)
bool private_reduction_head(const ir::LoopProgram& p, const std::set<std::string>& targets,
                            const std::string& head) {
  auto reduces = [&](const std::string& b) {
    const ir::StmtNode& n = *find_block(p.body, b, "auto").back();
    return std::any_of(n.iters.begin(), n.iters.end(),
                       [](const ir::IterVar& iv) { return iv.kind != ir::IterKind::Spatial; });
  };
  if (!reduces(head)) return false;
  std::set<std::string> path = {head};
  const std::set<std::string> after = dependents(p, {head});
  for (const std::string& t : targets)
    for (const std::string& b : producer_closure(p, *find_block(p.body, t, "auto").back()))
      if (after.count(b) && !targets.count(b)) {
        if (reduces(b)) return false;
        path.insert(b);
      }
  std::set<std::string> written;
  for (const ir::StmtNode* b : ordered_blocks(p))
    if (path.count(b->name))
      for (const std::string& w : block_writes(*b)) written.insert(w);
  for (const ir::StmtNode* b : ordered_blocks(p)) {
    if (targets.count(b->name) || path.count(b->name)) continue;
    for (const std::string& r : block_reads(*b))
      if (written.count(r)) return false;
  }
  return true;
}

// The reductions with nothing to repair (not members or producers of a chain that needs a
// repair, nor `skip`) whose term reads a head (chain_head) that something besides each of them
// reads too: by the head's block, then by the head's axis variable and rows.
using SharedHeads =
    std::map<std::string,
             std::map<std::pair<std::string, std::set<std::string>>, std::set<std::string>>>;
SharedHeads shared_heads(const ir::LoopProgram& p, const std::vector<ReductionChain>& chains,
                         const std::function<bool(const std::string&)>& skip) {
  std::set<std::string> in_chains;
  for (const ReductionChain& c : chains)
    if (!c.producers.empty()) {
      in_chains.insert(c.target);
      in_chains.insert(c.producers.begin(), c.producers.end());
    }
  SharedHeads out;
  for (const ReductionChain& c : chains) {
    if (!c.producers.empty() || in_chains.count(c.target) || skip(c.target)) continue;
    const ir::StmtNode& b = *find_block(p.body, c.target, "auto").back();
    std::optional<ChainHead> head = chain_head(p, b, c.axis, producer_closure(p, b));
    if (head && !private_reduction_head(p, {c.target}, head->block))
      out[head->block][{head->var, head->rows}].insert(c.target);
  }
  return out;
}

// Step 1 (see AutoSchedule.h): reductions with nothing to repair that read one head along
// different axes or rows (attention's backward pass: dQ sums dS over the keys, dK and dV sum dS
// and P over the queries) would each find the head read by the others and fuse with none. When
// nothing else reads the chain, the blocks a later group shares with the others are computed
// again for it (recompute), as FlashAttention-2's backward pass recomputes P: each group then
// fuses with a copy of its own.
void recompute_shared_heads(Schedule& s, const std::function<void(const std::string&)>& note) {
  const ir::LoopProgram p = s.program();
  const SharedHeads by_head =
      shared_heads(p, find_reduction_chains(p), [](const std::string&) { return false; });
  auto closure_of = [&](const std::set<std::string>& targets) {
    std::set<std::string> out;
    for (const std::string& t : targets) {
      std::set<std::string> c = producer_closure(p, *find_block(p.body, t, "auto").back());
      out.insert(c.begin(), c.end());
    }
    return out;
  };
  auto first_root = [&](const std::set<std::string>& targets) {
    size_t k = p.body->stmts.size();
    for (const std::string& t : targets)
      k = std::min(k, root_index(p, find_block(p.body, t, "auto")));
    return k;
  };
  for (const auto& [head, groups] : by_head) {
    std::set<std::string> all;
    for (const auto& [key, targets] : groups) all.insert(targets.begin(), targets.end());
    if (groups.size() < 2 || !private_reduction_head(p, all, head)) continue;
    std::vector<std::set<std::string>> ordered;
    for (const auto& [key, targets] : groups) ordered.push_back(targets);
    std::sort(ordered.begin(), ordered.end(),
              [&](const auto& a, const auto& b) { return first_root(a) < first_root(b); });
    for (size_t g = 1; g < ordered.size(); ++g) {
      std::set<std::string> others;
      for (size_t o = 0; o < ordered.size(); ++o)
        if (o != g) others.insert(ordered[o].begin(), ordered[o].end());
      const std::set<std::string> mine = closure_of(ordered[g]), theirs = closure_of(others);
      std::vector<std::string> shared, readers;
      for (const std::string& b : mine)
        if (theirs.count(b)) shared.push_back(b);
      for (const std::string& b : mine)
        if (!theirs.count(b)) readers.push_back(b);
      readers.insert(readers.end(), ordered[g].begin(), ordered[g].end());
      std::string names;
      for (const std::string& t : ordered[g]) names += (names.empty() ? "'" : ", '") + t + "'";
      try {
        s.recompute(shared, readers);
        note("what " + names +
             " share with reductions along another axis is computed again "
             "for them, so that each fuses");
      } catch (const ScheduleError& e) {
        note(names + " read blocks shared with reductions along another axis: " + e.what());
      }
    }
  }
}

// Step 1 (see AutoSchedule.h): the groups of reductions to fuse, each under its own tile loop,
// in program order. Chains that need a repair group with their producers, and groups that share
// a reduction join (a difference of two softmax-weighted sums is two groups; a divergence between
// two softmaxes of the same rows is one, its last reduction reading both). A reduction with
// nothing to repair is a group of its own when its term reads a reduction that runs along its
// axis and every row (chain_head): fused with the identity repair, that producer (the score dot
// of an attention without a normaliser) is never materialised whole; several that read one such
// producer alone are one group (attention's dV and dK); so is one for which
// `streamed_alone` holds (a row reduction whose row is too long to hold whole: an L2 norm of 131072
// columns sums its squares strip by strip, with nothing to repair).
std::vector<std::vector<std::string>> fusion_groups(
    const ir::LoopProgram& program, const std::function<void(const std::string&)>& note,
    const std::function<bool(const std::string&)>& streamed_alone) {
  std::vector<ReductionChain> chains = find_reduction_chains(program);
  std::vector<std::set<std::string>> sets;
  for (const ReductionChain& c : chains) {
    if (c.producers.empty()) continue;
    std::set<std::string> g(c.producers.begin(), c.producers.end());
    g.insert(c.target);
    for (auto it = sets.begin(); it != sets.end();) {
      bool shared =
          std::any_of(it->begin(), it->end(), [&](const std::string& m) { return g.count(m) > 0; });
      if (shared) {
        g.insert(it->begin(), it->end());
        it = sets.erase(it);
      } else {
        ++it;
      }
    }
    sets.push_back(g);
  }
  // A reduction with nothing to repair that reads a chain's head along the chain's axis and
  // rows (the target's logit picked out of the logits, sum[v](select(v == TGT[r], z[r, v], 0)),
  // beside their log-sum-exp) joins the chain: its sum is carried through the walk with the
  // others, rather than the head stored whole for it to read after the walk.
  auto head_of = [&](const std::string& target,
                     const std::string& axis) -> std::optional<ChainHead> {
    const ir::StmtNode& b = *find_block(program.body, target, "auto").back();
    return chain_head(program, b, axis, producer_closure(program, b));
  };
  for (const ReductionChain& c : chains) {
    if (!c.producers.empty() ||
        std::any_of(sets.begin(), sets.end(), [&](const auto& g) { return g.count(c.target) > 0; }))
      continue;
    std::optional<ChainHead> head = head_of(c.target, c.axis);
    if (!head) continue;
    for (std::set<std::string>& g : sets) {
      bool same_head = std::any_of(chains.begin(), chains.end(), [&](const ReductionChain& o) {
        if (!g.count(o.target)) return false;
        std::optional<ChainHead> h = head_of(o.target, o.axis);
        return h && h->block == head->block && h->var == head->var && h->rows == head->rows;
      });
      std::set<std::string> joined = g;
      joined.insert(c.target);
      if (same_head && private_reduction_head(program, joined, head->block)) {
        g = joined;
        break;
      }
    }
  }
  for (const ReductionChain& c : chains) {
    if (!c.producers.empty() ||
        std::any_of(sets.begin(), sets.end(), [&](const auto& g) { return g.count(c.target) > 0; }))
      continue;
    std::optional<ChainHead> head = head_of(c.target, c.axis);
    if ((head && private_reduction_head(program, {c.target}, head->block)) ||
        streamed_alone(c.target))
      sets.push_back({c.target});
  }
  // Reductions with nothing to repair that read one head along the same axis and rows, and
  // that alone (dV and dK of attention's backward pass), are one group.
  auto grouped = [&](const std::string& t) {
    return std::any_of(sets.begin(), sets.end(), [&](const auto& g) { return g.count(t) > 0; });
  };
  for (const auto& [head, by_axis] : shared_heads(program, chains, grouped))
    for (const auto& [key, targets] : by_axis)
      if (targets.size() > 1 && private_reduction_head(program, targets, head))
        sets.push_back(targets);
  std::vector<std::vector<std::string>> groups(sets.size());
  for (const ir::StmtNode* b : ordered_blocks(program))
    for (size_t k = 0; k < sets.size(); ++k)
      if (sets[k].count(b->name)) groups[k].push_back(b->name);
  // A group with a member that heads another group (the score dot of QK-norm attention, a chain
  // over the head dimension with the norms it reads) is inner to it: that group's tiles compute
  // the head whole, so the inner group is not fused along its own axis.
  std::vector<std::string> heads;
  for (const std::vector<std::string>& g : groups) {
    const ir::StmtNode& first = *find_block(program.body, g.front(), "auto").back();
    std::string axis;
    for (const ir::IterVar& iv : first.iters)
      if (iv.kind != ir::IterKind::Spatial) axis = iv.name;
    std::optional<ChainHead> h = chain_head(program, first, axis, producer_closure(program, first));
    heads.push_back(h ? h->block : g.front());
  }
  // A reduction with nothing to repair whose head is a member of a chain (a mean over heads of
  // attention's output) is not fused with it: the chain keeps its tiles, and the reduction reads
  // its complete results after it.
  auto lone = [&](size_t k) {
    return groups[k].size() == 1 &&
           std::none_of(chains.begin(), chains.end(), [&](const ReductionChain& c) {
             return c.target == groups[k].front() && !c.producers.empty();
           });
  };
  auto member = [&](size_t k, const std::string& h) {
    return std::count(groups[k].begin(), groups[k].end(), h) > 0;
  };
  std::vector<bool> after_chain(groups.size(), false);
  for (size_t k = 0; k < groups.size(); ++k)
    for (size_t o = 0; o < groups.size(); ++o)
      if (o != k && lone(k) && !lone(o) && member(o, heads[k])) after_chain[k] = true;
  std::vector<std::vector<std::string>> outer;
  for (size_t k = 0; k < groups.size(); ++k) {
    if (after_chain[k]) {
      note("'" + groups[k].front() + "' is not fused with the chain that computes '" + heads[k] +
           "': it reads that chain's complete results");
      continue;
    }
    std::optional<size_t> inner;
    for (size_t o = 0; o < groups.size() && !inner; ++o)
      if (!after_chain[o] && heads[o] != heads[k] && member(k, heads[o])) inner = o;
    if (!inner) {
      outer.push_back(groups[k]);
      continue;
    }
    std::string names;
    for (const std::string& m : groups[k]) names += (names.empty() ? "'" : ", '") + m + "'";
    note(kChainComputedWhole + names + " is not fused along its own axis: '" + heads[*inner] +
         "' heads another chain, whose tiles compute it whole");
  }
  groups = outer;
  std::sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) {
    const ir::LoopProgram& p = program;
    return root_index(p, find_block(p.body, a.front(), "auto")) <
           root_index(p, find_block(p.body, b.front(), "auto"));
  });
  return groups;
}

// The sizes the auto-scheduler decides with: the options', else the program's size hints.
const std::map<std::string, int64_t>& decision_sizes(const ir::LoopProgram& program,
                                                     const AutoScheduleOptions& options) {
  return options.sizes.empty() ? program.size_hints : options.sizes;
}

// Whether a group is a row reduction: no block of the chain (`members`) or of its producers
// (`closure`) reduces along an axis other than the chain's, of extent `axis`, and no member has
// more rows than the first: softmax and norms, not attention, whose scores reduce along the head
// dimension and whose P.V has a row a value column.
bool row_reduction(const ir::LoopProgram& program, const std::set<std::string>& closure,
                   const std::vector<std::string>& members, const ir::Expr& axis) {
  if (!axis) return false;
  // A member with more rows than the first (attention's P.V over its value columns, after scores
  // that are not a dot) contracts the axis against a matrix: not a row reduction.
  auto rows = [&](const std::string& name) {
    const std::vector<ir::IterVar>& iters = find_block(program.body, name, "auto").back()->iters;
    return std::count_if(iters.begin(), iters.end(),
                         [](const ir::IterVar& iv) { return iv.kind == ir::IterKind::Spatial; });
  };
  for (const std::string& m : members)
    if (rows(m) > rows(members.front())) return false;
  std::set<std::string> blocks = closure;
  blocks.insert(members.begin(), members.end());
  for (const std::string& name : blocks)
    for (const ir::IterVar& iv : find_block(program.body, name, "auto").back()->iters)
      if (iv.kind != ir::IterKind::Spatial && ir::to_string(iv.extent) != ir::to_string(axis))
        return false;
  return true;
}

// Whether the rows of reduction `first` run across memory: its loads index their innermost
// dimension by a spatial variable and never by the reduced one (m[j] = max[i](X[i, j])), so that
// a row is a strided column and the rows next to each other share their lines.
bool column_reduction(const ir::StmtNode& first) {
  std::string reduced;
  for (const ir::IterVar& iv : first.iters)
    if (iv.kind != ir::IterKind::Spatial) reduced = iv.name;
  if (reduced.empty()) return false;
  int along = 0, across = 0;
  ir::visit_exprs(first.body, [&](const ir::Expr& e) {
    ir::visit(e, [&](const ir::Expr& x) {
      if (x->op != ir::Op::Load || x->args.empty()) return true;
      const ir::Expr& last = x->args.back();
      if (ir::uses_var(last, reduced)) {
        ++along;
      } else {
        for (const ir::IterVar& iv : first.iters)
          if (iv.kind == ir::IterKind::Spatial && ir::uses_var(last, iv.name)) {
            ++across;
            break;
          }
      }
      return true;
    });
  });
  return across > 0 && along == 0;
}

// The options a group is scheduled with: `given`, with tiles of strip_rows x strip_tile when the
// target asks for strips and the group is a row reduction (column_rows x column_tile when its
// rows run across memory).
AutoScheduleOptions strip_options(const AutoScheduleOptions& given, const ir::LoopProgram& program,
                                  const std::set<std::string>& closure,
                                  const std::vector<std::string>& members, const ir::Expr& axis) {
  if (given.strip_rows <= 0 || !row_reduction(program, closure, members, axis)) return given;
  AutoScheduleOptions strips = given;
  strips.row_tile = given.strip_rows;
  strips.tile = given.strip_tile;
  strips.rolling_tile = 0;  // the strip is the tile, rolling or not
  const ir::StmtNode& first = *find_block(program.body, members.front(), "auto").back();
  if (given.column_rows > 0 && column_reduction(first)) {
    strips.row_tile = given.column_rows;
    strips.tile = given.column_tile;
    return strips;
  }
  // Longer strips while every row still makes enough grid instances: fewer block reductions and
  // more bytes in flight a CTA, without starving the grid of few long rows.
  const std::map<std::string, int64_t>& sizes = decision_sizes(program, given);
  try {
    int64_t rows = 1;
    for (const ir::IterVar& iv : first.iters)
      if (iv.kind == ir::IterKind::Spatial) rows *= ir::eval_int(iv.extent, sizes);
    const int64_t length = ir::eval_int(axis, sizes);
    // A row read at (r / E, r % E) (two dimensions flattened into one) is read a run of E at a
    // time where the strip divides E (tile::within_run): doubling stops before it would not.
    std::vector<int64_t> runs;
    for (const std::string& m : members) {
      const ir::StmtNode& b = *find_block(program.body, m, "auto").back();
      std::set<std::string> reduced;
      for (const ir::IterVar& iv : b.iters)
        if (iv.kind != ir::IterKind::Spatial) reduced.insert(iv.name);
      ir::visit(b.body->value, [&](const ir::Expr& e) {
        if ((e->op == ir::Op::Div || e->op == ir::Op::Mod) && e->args[0]->op == ir::Op::Var &&
            reduced.count(e->args[0]->name) && ir::over_sizes(e->args[1]))
          runs.push_back(ir::eval_int(e->args[1], sizes));
        return true;
      });
    }
    auto within_runs = [&](int64_t tile) {
      return std::all_of(runs.begin(), runs.end(), [&](int64_t e) { return e % tile == 0; });
    };
    // A strip longer than a run halves (down to 64) until it divides the runs.
    for (int64_t t = strips.tile; !within_runs(strips.tile) && t > 64;)
      if (within_runs(t /= 2)) strips.tile = t;
    while (2 * strips.tile <= given.strip_tile_max && 2 * strips.tile <= length &&
           rows * ((length + 2 * strips.tile - 1) / (2 * strips.tile)) >=
               given.min_chunk_instances &&
           (within_runs(2 * strips.tile) || !within_runs(strips.tile)))
      strips.tile *= 2;
  } catch (const UserError&) {
    // A size without a value: the strip tile as given.
  }
  return strips;
}

// The row of group `members` when the group is a row reduction and the sizes decided with give its
// length: the axis, its length and the widest element of the inputs the chain reads.
struct RowSize {
  ir::Expr extent;
  int64_t length = 0;
  int elem_bytes = 1;
  int64_t bytes() const { return length * elem_bytes; }
};

std::optional<RowSize> row_size(const ir::LoopProgram& program,
                                const std::vector<std::string>& members,
                                const AutoScheduleOptions& options) {
  const ir::StmtNode& first = *find_block(program.body, members.front(), "auto").back();
  RowSize row;
  for (const ir::IterVar& iv : first.iters)
    if (iv.kind != ir::IterKind::Spatial) row.extent = iv.extent;
  std::set<std::string> blocks = producer_closure(program, first);
  if (!row_reduction(program, blocks, members, row.extent)) return std::nullopt;
  const std::map<std::string, int64_t>& sizes = decision_sizes(program, options);
  try {
    row.length = ir::eval_int(row.extent, sizes, program.param_values(options.params));
  } catch (const UserError&) {
    return std::nullopt;
  }
  blocks.insert(members.begin(), members.end());
  for (const std::string& name : blocks)
    ir::visit_exprs(find_block(program.body, name, "auto").back()->body, [&](const ir::Expr& e) {
      ir::visit(e, [&](const ir::Expr& x) {
        if (x->op != ir::Op::Load) return true;
        const ir::Buffer* b = program.find_buffer(x->name);
        if (b && b->role == ir::BufferRole::Input)
          row.elem_bytes = std::max(row.elem_bytes, dtype_bytes(b->dtype));
        return true;
      });
    });
  return row;
}

// Whether group `members` is a row reduction whose row, at the sizes decided with, has at most
// options.whole_row_bytes bytes of the widest input element the chain reads: then it is left
// unfused (notes why), and translation computes each of its reductions over the whole row in one
// tile, reading the row once.
bool row_fits_whole(const ir::LoopProgram& program, const std::vector<std::string>& members,
                    const AutoScheduleOptions& options,
                    const std::function<void(const std::string&)>& note) {
  if (options.whole_row_bytes <= 0) return false;
  // A whole row would be a strided column. (Measured on the H100, CUDA: softmax over the first
  // axis of f32 4096 x 4096, whole columns in four kernels 5.37 ms, the chain fused along the
  // columns 0.526; docs/perf.md.)
  if (column_reduction(*find_block(program.body, members.front(), "auto").back())) return false;
  std::optional<RowSize> row = row_size(program, members, options);
  if (!row || row->bytes() > options.whole_row_bytes) return false;
  std::string names;
  for (const std::string& m : members) names += (names.empty() ? "'" : ", '") + m + "'";
  note(kChainComputedWhole + names + " is not fused: its row fits in one tile (" +
       ir::to_string(row->extent) + " = " + std::to_string(row->length) + " elements of " +
       std::to_string(row->elem_bytes) + " bytes, at most " +
       std::to_string(options.whole_row_bytes) +
       " bytes), so each reduction runs over the whole row, which is read once");
  return true;
}

// The row of a chain over several reduced axes whose reduction `target` reads its producers:
// the product of the target's reduced extents, its length at the sizes decided with (none when a
// size is not given) and the widest element of the inputs the chain reads.
struct SeveralAxisRow {
  ir::Expr extent;
  std::optional<int64_t> length;
  int elem_bytes = 1;
  bool fits_whole(const AutoScheduleOptions& o) const {
    return length && o.whole_row_bytes > 0 && *length * elem_bytes <= o.whole_row_bytes;
  }
};

SeveralAxisRow several_axis_row(const ir::LoopProgram& program, const std::string& target,
                                const AutoScheduleOptions& options) {
  const ir::StmtNode& b = *find_block(program.body, target, "auto").back();
  SeveralAxisRow row;
  for (const ir::IterVar& iv : b.iters)
    if (iv.kind != ir::IterKind::Spatial)
      row.extent = row.extent ? ir::make_binary(ir::Op::Mul, row.extent, iv.extent) : iv.extent;
  row.extent = ir::simplify(row.extent);
  std::set<std::string> blocks = producer_closure(program, b);
  blocks.insert(target);
  for (const std::string& name : blocks)
    for (const std::string& r : block_reads(*find_block(program.body, name, "auto").back()))
      if (const ir::Buffer* in = program.find_buffer(r); in && in->role == ir::BufferRole::Input)
        row.elem_bytes = std::max(row.elem_bytes, dtype_bytes(in->dtype));
  try {
    row.length = ir::eval_int(row.extent, decision_sizes(program, options),
                              program.param_values(options.params));
  } catch (const UserError&) {
    // a size not given: the row may be of any length
  }
  return row;
}

// A chain over several reduced axes (SeveralAxisChain) whose row does not fit the whole-row
// bound has its reductions' axes merged into one (merge_reduce_axes), which fusion then follows:
// a group norm's mean and variance over (c, p) become reductions over c_p, read at
// (c_p / P, c_p % P). `unflattened` gets the innermost extent of each merge (P), along which the
// maps over the axes as written (the normalised output over (c, p)) are tiled. A chain whose
// blocks cannot all be merged is left as it is (note_several_axis_chains says so).
void merge_several_axis_chains(Schedule& s, const AutoScheduleOptions& options,
                               std::set<std::string>* unflattened,
                               const std::function<void(const std::string&)>& note) {
  std::set<std::string> merged_maps;  // by an earlier chain that reads them too
  for (const SeveralAxisChain& c : several_axis_chains(s.program())) {
    if (several_axis_row(s.program(), c.target, options).fits_whole(options)) continue;
    Schedule next = s;
    std::vector<std::string> blocks = c.producers;
    blocks.push_back(c.target);
    std::vector<ir::Expr> extents;  // of the chain's reduced axes, outermost first
    for (const ir::IterVar& iv : find_block(s.program().body, c.target, "auto").back()->iters)
      if (iv.kind == ir::IterKind::Reduce) extents.push_back(iv.extent);
    try {
      for (const std::string& b : blocks) {
        const ir::StmtNode& block = *find_block(next.program().body, b, "auto").back();
        ir::Expr inner;  // the innermost reduced axis's extent (the iterations follow the loops)
        int reduced = 0;
        for (const ir::IterVar& iv : block.iters)
          if (iv.kind == ir::IterKind::Reduce) inner = iv.extent, ++reduced;
        if (reduced < 2) continue;  // merged with an earlier chain that shares it
        next.merge_reduce_axes(b);
        unflattened->insert(ir::to_string(inner));
      }
      // A map over the same axes that the merged reductions read (a softmax's exponentials over
      // (y, x) between its maximum and its sums) is merged too, its buffer flattened: they then
      // read it at the merged axis.
      std::set<std::string> read;
      for (const std::string& b : blocks)
        for (const std::string& r : block_reads(*find_block(next.program().body, b, "auto").back()))
          read.insert(r);
      std::vector<std::string> maps;
      for (const ir::StmtNode* m : blocks_under(next.program().body)) {
        const ir::Buffer* out = m->body && m->body->kind == ir::StmtKind::Store
                                    ? next.program().find_buffer(m->body->buffer)
                                    : nullptr;
        // Over the chain's axes: its innermost iterations have their extents.
        bool over_axes = m->iters.size() >= extents.size();
        for (size_t a = 0; over_axes && a < extents.size(); ++a)
          over_axes = ir::equal(m->iters[m->iters.size() - extents.size() + a].extent, extents[a]);
        if (out && out->role == ir::BufferRole::Intermediate && read.count(out->name) &&
            over_axes && !merged_maps.count(m->name) &&
            std::all_of(m->iters.begin(), m->iters.end(),
                        [](const ir::IterVar& iv) { return iv.kind == ir::IterKind::Spatial; }))
          maps.push_back(m->name);
      }
      for (const std::string& m : maps) {
        try {
          next.merge_map_axes(m, static_cast<int>(c.axes.size()));
          merged_maps.insert(m);
        } catch (const ScheduleError& e) {
          note("the map '" + m + "' between merged reductions keeps its axes: " + e.what());
        }
      }
      s = next;
    } catch (const ScheduleError& e) {
      note("the several axes of '" + c.target + "' stay apart: " + e.what());
    }
  }
}

// Chains over several reduced axes (SeveralAxisChain) left after merge_several_axis_chains are
// not fused: fusion follows one axis. Where the row fits the whole-row bound it is noted as a
// chain left unfused on purpose (each reduction reads the row again, from the caches); past it,
// as a fusion abandoned (a warning). Returns whether there was any.
bool note_several_axis_chains(const ir::LoopProgram& program, const AutoScheduleOptions& options,
                              const std::function<void(const std::string&)>& note) {
  const std::vector<SeveralAxisChain> chains = several_axis_chains(program);
  // The readers of the same producers form one chain: one note names them all.
  std::map<std::vector<std::string>, std::vector<const SeveralAxisChain*>> by_producers;
  std::vector<std::vector<std::string>> order;
  for (const SeveralAxisChain& c : chains) {
    if (!by_producers.count(c.producers)) order.push_back(c.producers);
    by_producers[c.producers].push_back(&c);
  }
  for (const std::vector<std::string>& producers : order) {
    const std::vector<const SeveralAxisChain*>& targets = by_producers.at(producers);
    const SeveralAxisRow row = several_axis_row(program, targets.front()->target, options);
    const ir::Expr& extent = row.extent;
    std::string axes, names, readers;
    for (const std::string& a : targets.front()->axes) axes += (axes.empty() ? "" : ", ") + a;
    for (const std::string& m : producers) names += "'" + m + "', ";
    for (const SeveralAxisChain* t : targets)
      readers += (readers.empty() ? "'" : ", '") + t->target + "'";
    if (row.fits_whole(options))
      note(kChainComputedWhole + names + readers + " is not fused: its row over (" + axes +
           ") fits in one tile (" + ir::to_string(extent) + " = " + std::to_string(*row.length) +
           " elements of " + std::to_string(row.elem_bytes) + " bytes, at most " +
           std::to_string(options.whole_row_bytes) +
           " bytes), so each reduction runs over the whole row, one after another");
    else
      note(kFusionAbandoned + readers + " reduce" + (targets.size() > 1 ? "" : "s") +
           " over several axes (" + axes + ") and read" + (targets.size() > 1 ? "" : "s") +
           " the running value of " + names.substr(0, names.size() - 2) +
           " over the same axes; fusion follows one reduced axis, so the reductions run one "
           "after another over rows of " +
           ir::to_string(extent) + " elements");
  }
  return !chains.empty();
}

// In front of a chain whose rows run across memory, a map computed from inputs alone (a mask
// applied first: c[a, t, k] = select(MSK[a, t, k] > 0, X[a, t, k], -inf)) is inlined into its
// readers, the chain's passes and the outputs after it, even where an input spans it (where
// normal_form keeps it a buffer): its nest runs the reduced axis outside the rows, and kept, it
// would be a buffer of every element of the reduced axis a tile of rows, read again by the
// output's pass.
void inline_column_producers(Schedule& s, const std::vector<std::string>& members) {
  for (bool inlined = true; inlined;) {
    inlined = false;
    const ir::LoopProgram& p = s.program();
    const ir::StmtNode& first = *find_block(p.body, members.front(), "auto").back();
    if (!column_reduction(first)) return;
    for (const std::string& name : producer_closure(p, first)) {
      const ir::StmtNode& b = *find_block(p.body, name, "auto").back();
      std::set<std::string> reads = block_reads(b);
      const ir::Buffer* out = p.find_buffer(name);
      if (!out || out->role != ir::BufferRole::Intermediate ||
          !std::all_of(b.iters.begin(), b.iters.end(),
                       [](const ir::IterVar& iv) { return iv.kind == ir::IterKind::Spatial; }) ||
          !std::all_of(reads.begin(), reads.end(), [&](const std::string& r) {
            const ir::Buffer* in = p.find_buffer(r);
            return in && in->role == ir::BufferRole::Input;
          }))
        continue;
      try {
        s.compute_inline(name);
        inlined = true;
        break;
      } catch (const ScheduleError&) {
        // kept a buffer: the fusion below says why it fails, if it does
      }
    }
  }
}

// Steps 2 to 4 (see AutoSchedule.h) for one group: `members`, its reductions in program order,
// fused under one tile loop of `s`. Throws ScheduleError when a step's preconditions fail.
void fuse_group(Schedule& s, const std::vector<std::string>& members,
                const AutoScheduleOptions& given,
                const std::function<void(const std::string&)>& note, SplitKCosts* costs) {
  inline_column_producers(s, members);
  const ir::LoopProgram program = s.program();
  // The first member leads, unless the members read none of one another (reductions with nothing
  // to repair that share a head: attention's dV and dK) and one's producers hold every other's:
  // that one leads (dK reads the probabilities of dV and the product dP besides).
  std::vector<std::set<std::string>> closures;
  for (const std::string& m : members)
    closures.push_back(producer_closure(program, *find_block(program.body, m, "auto").back()));
  std::string lead = members.front();
  std::set<std::string> closure = closures.front();
  const bool independent = std::none_of(closures.begin(), closures.end(), [&](const auto& c) {
    return std::any_of(members.begin(), members.end(),
                       [&](const std::string& o) { return c.count(o) > 0; });
  });
  for (size_t k = 0; independent && k < members.size(); ++k)
    if (closures[k].size() > closure.size() &&
        std::includes(closures[k].begin(), closures[k].end(), closure.begin(), closure.end()))
      lead = members[k], closure = closures[k];
  const ir::StmtNode& first = *find_block(program.body, lead, "auto").back();
  // 2. The head: the earliest block of the first reduction's producers running along the axis
  // and along every row of the first reduction.
  std::string head = lead;
  std::string axis;
  ir::Expr extent;
  for (const ir::IterVar& iv : first.iters)
    if (iv.kind != ir::IterKind::Spatial) axis = iv.name, extent = iv.extent;
  std::optional<ChainHead> found = chain_head(program, first, axis, closure);
  if (found) {
    head = found->block;
    axis = found->var;
  }
  const AutoScheduleOptions options = strip_options(given, program, closure, members, extent);
  const ir::StmtNode& h = *find_block(program.body, head, "auto").back();
  std::string axis_loop;
  for (const ir::IterVar& iv : h.iters)
    if (iv.name == axis && iv.binding->op == ir::Op::Var) axis_loop = iv.binding->name;
  if (axis_loop.empty())
    throw ScheduleError("auto", "the axis of block '" + head + "' is not driven by a single loop");
  hoist_complete_producers(s, head, members);
  // Rows that run in parallel without splitting the axis: those of the first reduction that
  // the head runs along (not the columns of the values a weighted sum reads).
  const std::map<std::string, int64_t>& sizes = decision_sizes(program, options);
  // A group of rows keeps an accumulator of every member's columns a row (the value head size of
  // an attention): at most kGroupAccumulator of them a group. (Latent attention's 128 query
  // heads of 512 columns took 256 KiB, the register file of an SM; its shared tiles did not fit.)
  constexpr int64_t kGroupAccumulator = 16384;
  // A group is one tile's rows: at most kGroupRows, the rows of eight warps on the tensor cores.
  // (A fused linear cross-entropy's rows share the whole weight matrix, one sum and one maximum a
  // row: under split-K its 2048 rows made one group, no tile.)
  constexpr int64_t kGroupRows = 128;
  int64_t columns = 1;
  for (const std::string& m : members) {
    int64_t c = 1;
    for (const ir::IterVar& iv : find_block(program.body, m, "auto").back()->iters) {
      if (iv.kind != ir::IterKind::Spatial ||
          std::any_of(first.iters.begin(), first.iters.end(),
                      [&](const ir::IterVar& r) { return r.name == iv.name; }))
        continue;
      try {
        c *= ir::eval_int(iv.extent, sizes);
      } catch (const UserError&) {
        // a size not given: the columns are not counted
      }
    }
    columns = std::max(columns, c);
  }
  const int64_t max_whole_rows = std::clamp<int64_t>(
      int64_t{1} << (63 - __builtin_clzll(static_cast<uint64_t>(
                              std::max<int64_t>(1, kGroupAccumulator / columns)))),
      16, kGroupRows);
  int64_t rows = 1, innermost = 0, head_group = 1;
  bool known = true;
  for (const ir::IterVar& iv : first.iters) {
    if (iv.kind != ir::IterKind::Spatial || (found && !found->rows.count(iv.name))) continue;
    try {
      rows *= innermost = ir::eval_int(iv.extent, sizes);
    } catch (const UserError&) {
      known = false;
    }
  }
  // The rolling update runs a short query axis (at most 16 at these sizes, a decode step's few
  // queries) with heads grouped by a division (h / (HQ / HK) in what the chain reads) as one
  // query a grid instance, the heads of a group its rows (tile_rows, group_rows): there the
  // instances, not the rows, must fill the machine. (B = 1, 64 query heads over 8, S = 4 ran 32
  // instances, 0.84 ms at T = 32768; split-K 0.094.)
  for (const std::string& name : closure) {
    const ir::StmtNode& b = *find_block(program.body, name, "auto").back();
    for (const ir::IterVar& iv : b.iters) {
      ir::Expr divisor = iv.kind == ir::IterKind::Spatial ? group_divisor(b, iv.name) : nullptr;
      try {
        if (divisor) head_group = std::max(head_group, ir::eval_int(divisor, sizes));
      } catch (const UserError&) {
        // a size not given: the rows alone decide
      }
    }
  }
  // So does a row axis that the keys and values are read without (a prefix cache shared by the
  // sequences of a batch, one key/value head written without a head axis): its whole extent is
  // a group (group_rows). (A shared prefix grouped by its 16 sequences ran 32 instances at
  // B = 16, H = 32: 1.19 TB/s.)
  for (const ir::IterVar& iv : h.iters) {
    if (iv.kind != ir::IterKind::Spatial || iv.name == axis || !iv.binding ||
        iv.binding->op != ir::Op::Var || !shared_along_rows(h, iv.name, axis_loop, {}))
      continue;
    try {
      const int64_t n = ir::eval_int(iv.extent, sizes);
      head_group = std::max(head_group, whole_group_rows(n, max_whole_rows));
    } catch (const UserError&) {
      // a size not given: the rows alone decide
    }
  }
  // Rows that share no streamed tile: every row axis longer than 1 picks the row's own keys, and
  // the keys are read across a third axis (the head dimension of a dot): a decode step written
  // without a query axis, one head a row. The rolling update runs them one row a grid instance
  // (strip_of_rows_is_wasted), as it runs a decode step's few queries.
  bool rows_share = head_group > 1, third_axis = false;
  for (const ir::IterVar& iv : h.iters) {
    if (iv.kind != ir::IterKind::Spatial || iv.name == axis || !iv.binding ||
        iv.binding->op != ir::Op::Var || (found && !found->rows.count(iv.name)))
      continue;
    try {
      rows_share = rows_share || (ir::eval_int(iv.extent, sizes) > 1 &&
                                  shared_along_rows(h, iv.name, axis_loop, {}));
    } catch (const UserError&) {
      rows_share = true;  // a size not given: taken as shared
    }
  }
  ir::visit(h.body, [&](const ir::Stmt& st) {
    ir::visit_exprs(st, [&](const ir::Expr& e) {
      ir::visit(e, [&](const ir::Expr& x) {
        if (x->op == ir::Op::Load && ir::uses_var(x, axis))
          for (const ir::IterVar& iv : h.iters)
            third_axis = third_axis || (iv.kind != ir::IterKind::Spatial && iv.name != axis &&
                                        ir::uses_var(x, iv.name));
        return true;
      });
    });
    return true;
  });
  // In a chain whose keys are read across a third axis (a dot), a decode step's few queries (at
  // most 16) run under the rolling update one group of heads, or one head's queries, a grid
  // instance, and so do rows that share nothing, each streaming its
  // whole row of keys: below split_k_below_instances (two an SM) they leave the machine idle,
  // and split-K fills it (B = 2, H = 64, one query a head: 128 instances read an int8 cache at
  // 0.57 TB/s on the H100). Longer query axes run strips of 64 or 128 rows, and split-K takes
  // fewer than split_k_below_rows.
  const bool few_queries = third_axis && ((innermost > 0 && innermost <= 16) || !rows_share);
  const int64_t instances = !few_queries                       ? rows
                            : head_group > 1                   ? rows / head_group
                            : innermost > 0 && innermost <= 16 ? rows / innermost
                                                               : rows;
  bool split_k = known && instances < (few_queries ? options.split_k_below_instances
                                                   : options.split_k_below_rows);
  bool long_walks = false;  // split-K for the strips' long walks, not for few rows
  if (known && !few_queries && !split_k && options.split_k_long_walks && options.row_tile > 0) {
    try {
      const int64_t strip = head_group > 1 ? head_group : options.row_tile;
      const int64_t strips = (rows + strip - 1) / strip;
      const int64_t walk = (ir::eval_int(extent, sizes) + options.tile - 1) / options.tile;
      // A member's partial result a row and chunk: its elements over the rows.
      int64_t all_columns = 0;
      for (const std::string& m : members) {
        int64_t elements = 1;
        for (const ir::IterVar& iv : find_block(program.body, m, "auto").back()->iters)
          if (iv.kind == ir::IterKind::Spatial) elements *= ir::eval_int(iv.extent, sizes);
        all_columns += std::max<int64_t>(1, elements / rows);
      }
      const double inputs = input_bytes(program, sizes);
      // (in chunks of max_chunk_tiles tiles, the most the chunk size is doubled to; at least two
      // chunks, or nothing runs in parallel)
      const int64_t chunks =
          (walk + options.max_chunk_tiles - 1) / std::max<int64_t>(1, options.max_chunk_tiles);
      const double partials = 4.0 * static_cast<double>(rows * chunks * all_columns);
      long_walks = 2 * strips < options.split_k_below_instances && chunks >= 2 &&
                   partials <= options.partial_fraction * inputs;
      if (long_walks)
        note("split-K: " + std::to_string(strips) + " strips of " + std::to_string(strip) +
             " rows leave the machine idle, and chunks' partial results weigh " +
             std::to_string(static_cast<int64_t>(100 * partials / inputs)) + " % of the inputs");
    } catch (const UserError&) {
      // the axis's size not given: the rows alone decide
    }
    split_k = long_walks;
  }
  // With chunks of several tiles, the tile loop is the loop inside a chunk; the elementwise
  // blocks join it, the split-K updates take the chunk loop, the rolling updates the tile loop.
  bool chunked = split_k && options.chunk_tiles > 1;
  int64_t axis_tile = !split_k && options.rolling_tile > 0 ? options.rolling_tile : options.tile;
  if (found) rows_outside_axis(s, head, axis_loop, found->row_vars);
  // Accumulators wider than the bound alone for the fewest rows a tile has (a norm fused into a
  // projection to 4096 columns, every column a running sum of each row) are no tile of a grid
  // instance: the chain is not fused, and the product walks its reduced axis with its columns
  // spread over instances. (Past the bound for the row tile but within it for the fewest rows,
  // the tile is kept, as before.)
  // (The fewest: 64, or a group's rows as above: latent attention's 32 heads of 512 columns.)
  const int64_t fewest_rows = std::min<int64_t>(64, max_whole_rows);
  if (!split_k && options.live_tile_elements > 0 &&
      fewest_rows * columns > options.live_tile_elements)
    throw ScheduleError("rolling_update",
                        "a member's accumulators hold " + std::to_string(columns) +
                            " columns a row, more than a grid instance keeps live (" +
                            std::to_string(options.live_tile_elements) + " elements for " +
                            std::to_string(fewest_rows) + " rows)");
  if (!split_k && found && options.live_tile_elements > 0) {
    int64_t accumulators = 0;
    for (const std::string& m : members) {
      int64_t c = 1;
      for (const ir::IterVar& iv : find_block(program.body, m, "auto").back()->iters)
        if (iv.kind == ir::IterKind::Spatial && !found->rows.count(iv.name)) try {
            c *= ir::eval_int(iv.extent, sizes);
          } catch (const UserError&) {
            // a size not given: not counted
          }
      accumulators += c;
    }
    const int64_t steps = 1 + static_cast<int64_t>(found->peers.size());
    const int64_t chosen = axis_tile;
    auto live = [&] { return options.row_tile * (accumulators + steps * axis_tile); };
    while (axis_tile > 64 && live() > options.live_tile_elements) axis_tile /= 2;
    if (axis_tile != chosen)
      note("tiles of " + std::to_string(axis_tile) + " along the axis, not " +
           std::to_string(chosen) + ": " + std::to_string(steps) + " tiles a step and " +
           std::to_string(accumulators) + " accumulator columns a row stay within " +
           std::to_string(options.live_tile_elements) + " live elements");
  }
  auto tiles = s.split(LoopRef{head, axis_loop}, axis_tile * (chunked ? options.chunk_tiles : 1));
  LoopRef tile_loop = tiles[0];
  LoopRef chunk_tile_loop;
  if (chunked) chunk_tile_loop = s.split(tiles[1], options.tile)[0];
  const LoopRef fuse_under = chunked ? chunk_tile_loop : tile_loop;
  // 3. Elementwise blocks between the head and the first reduction, then the chain.
  bool after_head = false;
  for (const ir::StmtNode* b : ordered_blocks(s.program())) {
    if (b->name == head) {
      after_head = true;
      continue;
    }
    if (!after_head || b->name == members.front()) {
      if (b->name == members.front()) break;
      continue;
    }
    if (closure.count(b->name)) s.reverse_compute_at(b->name, fuse_under);
  }
  // The head's peers, moved before the head's nest with what is complete, read nothing of the
  // tile loop: each is computed at it once the blocks that read it are there (latest first).
  if (found && !found->peers.empty()) {
    std::vector<std::string> peers;
    for (const ir::StmtNode* b : ordered_blocks(s.program()))
      if (found->peers.count(b->name)) peers.push_back(b->name);
    for (auto it = peers.rbegin(); it != peers.rend(); ++it) s.compute_at(*it, fuse_under);
  }
  if (few_queries)
    note(std::string(split_k ? "split-K" : "rolling update") + ": " + std::to_string(rows) +
         " independent rows, " + std::to_string(instances) +
         " grid instances under the rolling update (split-K below " +
         std::to_string(options.split_k_below_instances) + ")");
  else if (!long_walks)
    note(std::string(split_k ? "split-K" : "rolling update") + ": " +
         (known ? std::to_string(rows) : std::string("unknown")) +
         " independent rows (split-K below " + std::to_string(options.split_k_below_rows) + ")");
  std::set<std::string> scanned;  // scans of the groups fused before
  for (const ir::StmtNode* b : blocks_under(s.program().body))
    for (const ir::IterVar& iv : b->iters)
      if (iv.kind == ir::IterKind::Scan) scanned.insert(b->name);
  for (const std::string& m : members) {
    if (split_k)
      s.split_k_update(m, tile_loop);
    else
      s.rolling_update(m, tile_loop);
    // Split-K moves the head's own write-back out of the tile loop: name the loop through the
    // head's partial block, which stays inside it.
    if (m == tile_loop.block && split_k)
      tile_loop.block = s.fresh_name(m + ".rf") == m + ".rf" ? m : m + ".rf";
  }
  if (chunked) {
    for (const std::string& m : members) s.rolling_update(m + ".rf", chunk_tile_loop);
    note("chunks of " + std::to_string(options.chunk_tiles) +
         " tiles, each walked with the rolling update");
  }
  std::vector<std::string> scans;
  for (const ir::StmtNode* b : blocks_under(s.program().body))
    for (const ir::IterVar& iv : b->iters)
      if (iv.kind == ir::IterKind::Scan && !scanned.count(b->name)) scans.push_back(b->name);
  for (const std::string& b : scans) s.split_scan_buffer(b, LoopRef{b, fuse_under.var});
  // Masks that kill whole tiles: skip those tiles of the rolling update, and of the walk
  // inside a split-K chunk (a chunk whose tiles are all dead keeps the identities its combine
  // takes for a chunk the mask hides; one-tile chunks are combined whole).
  // Under split-K (few rows: a decode step's queries) a mask of positions and sizes alone (the
  // causal one) kills key tiles past the last query's position only, which the axis's end already
  // bounds: its chunks keep their constant walk. One that reads a param or a tensor (a window, a
  // sequence's cache length) may kill whole chunks.
  auto worth_skipping = [&](const ir::Expr& value) {
    if (!split_k) return true;
    bool reads = false;
    ir::visit(constant_mask(value)->kept, [&](const ir::Expr& x) {
      reads = reads || x->op == ir::Op::Load ||
              (x->op == ir::Op::Var && x->var_kind == ir::VarKind::Param);
      return !reads;
    });
    return reads;
  };
  if (!split_k || chunked) {
    std::vector<std::string> masked;
    const ir::StmtNode* tl = find_loop(s.program().body, fuse_under, "auto").back();
    for (const ir::StmtNode* b : blocks_under(tl->body))
      if (b->body && b->body->kind == ir::StmtKind::Store && constant_mask(b->body->value) &&
          worth_skipping(b->body->value))
        masked.push_back(b->name);
    for (const std::string& b : masked) {
      try {
        s.propagate_mask(b, fuse_under);
      } catch (const ScheduleError& e) {
        note(std::string("tiles are not skipped: ") + e.what());
      }
    }
  }
  if (!split_k && options.row_tile > 0) {
    // A strip of a few rows (the one query of a decode step at many heads and sequences): the
    // query heads that share a key/value head join it, as under split-K, so that each tile of
    // keys and values is read once for the group rather than once a head.
    // The rows of a group and of a strip are two row axes of one tile, which the tensor-core
    // writer does not take: a short strip that a group would join is one query a grid instance
    // (as under split-K), the group its rows.
    const bool grouped = find_row_group(s, tile_loop, sizes, max_whole_rows).has_value();
    int64_t strip =
        tile_rows(s, tile_loop, options.row_tile, extent, axis_tile, sizes, note, grouped ? 1 : 16);
    if (strip > 0 && strip <= 16) group_rows(s, tile_loop, sizes, max_whole_rows, note);
  }
  if (split_k) {
    int64_t group = group_rows(s, tile_loop, sizes, max_whole_rows, note, /*largest=*/true);
    if (costs && !costs->known) {
      try {
        costs->tiles = (ir::eval_int(extent, sizes) + options.tile - 1) / options.tile;
        costs->row_groups = (rows + group - 1) / group;
        costs->input_bytes = input_bytes(s.program(), sizes);
        for (const std::string& m : members)
          if (const ir::Buffer* b = s.program().find_buffer(m + ".rf"))
            costs->partial_bytes += static_cast<double>(bytes_at(*b, sizes));
        costs->known = costs->input_bytes > 0;
      } catch (const UserError&) {
        costs->known = false;  // a size not given: chunks of one tile
      }
    }
  }
  if (split_k && options.combine_columns > 0)
    spread_columns(s, tile_loop, options.combine_columns, sizes, note);
  if (split_k && options.combine_tile_elements > 0)
    for (const std::string& m : members)
      tile_combine(s, m, options.combine_tile_elements, options.combine_tile_chunks, sizes, note);
  compute_axis_producers(s, tile_loop, head, axis, !split_k && options.row_producers_in_tile, sizes,
                         note);
}

// Whether map `b` reads what the block in front of it (`producer`) writes, over the same
// spatial loops (a key's rsqrt of its sum of squares after that sum): both run one element a grid
// instance and the tile passes make them one kernel (fuse_kernels), which a split map would not
// join.
bool joins_producer(const ir::LoopProgram& p, const ir::StmtNode& producer, const ir::StmtNode& b) {
  std::set<std::string> written = block_writes(producer), read = block_reads(b);
  if (std::none_of(read.begin(), read.end(),
                   [&](const std::string& r) { return written.count(r) > 0; }))
    return false;
  std::vector<std::string> extents, producer_extents;
  for (const ir::StmtNode* l : loops_on(find_block(p.body, b.name, "auto")))
    extents.push_back(ir::to_string(l->extent));
  for (const ir::IterVar& iv : producer.iters)
    if (iv.kind == ir::IterKind::Spatial) producer_extents.push_back(ir::to_string(iv.extent));
  return extents == producer_extents;
}

// A map that reads a reduction's result per group of its innermost loop's elements, through
// `v / E` where E is the extent the reduction reduces over (a quantisation's scale per block of
// 128 columns, `amax[r, c / G]` of `max[k: G](X[r, g * G + k])`), is cut into whole groups of
// E and a tail (split_groups): it then reads one value a group, and its groups run over the
// reduction's grid, so the tile passes make the two one kernel (fuse_kernels) in which X is
// read once from memory and the map's scale is not gathered element by element.
void split_maps_by_groups(Schedule& s, const std::function<void(const std::string&)>& note) {
  std::map<std::string, ir::Expr> reduced_extent;  // a reduction's buffer -> its reduce extent
  std::vector<std::pair<std::string, ir::Expr>> splits;
  const ir::LoopProgram& p = s.program();
  for (const ir::StmtNode* b : blocks_under(p.body)) {
    std::vector<const ir::IterVar*> reduce;
    for (const ir::IterVar& iv : b->iters)
      if (iv.kind != ir::IterKind::Spatial) reduce.push_back(&iv);
    if (reduce.size() == 1 && reduce[0]->kind == ir::IterKind::Reduce)
      for (const std::string& w : block_writes(*b)) reduced_extent[w] = reduce[0]->extent;
    if (!reduce.empty()) continue;
    std::vector<const ir::StmtNode*> loops = loops_on(find_block(p.body, b->name, "auto"));
    if (loops.empty() || loops.back()->body.get() != b) continue;
    const ir::IterVar* v = nullptr;
    for (const ir::IterVar& iv : b->iters)
      if (iv.binding->op == ir::Op::Var && iv.binding->name == loops.back()->var) v = &iv;
    ir::Expr group;
    ir::visit(b->body->value, [&](const ir::Expr& e) {
      if (e->op != ir::Op::Load || group || !reduced_extent.count(e->name) || !v) return !group;
      for (const ir::Expr& i : e->args)
        if (i->op == ir::Op::Div && i->args[0]->op == ir::Op::Var && i->args[0]->name == v->name &&
            ir::equal(i->args[1], reduced_extent.at(e->name)))
          group = i->args[1];
      return !group;
    });
    if (group) splits.emplace_back(b->name, group);
  }
  for (const auto& [b, group] : splits) {
    std::string var = loops_on(find_block(s.program().body, b, "auto")).back()->var;
    try {
      s.split_groups(LoopRef{b, var}, group);
    } catch (const ScheduleError& e) {
      note("'" + b + "' reads its groups' values element by element: " + e.what());
    }
  }
}

// Step 5 (see AutoSchedule.h): a nest left outside the fused ones that only maps (one block, no
// reduction: a split-K output, an elementwise output after a combine) and whose innermost loop
// runs along a fused chain's axis (of an extent in `axes`) is split by `tile` there, so that the
// tile IR gives each grid instance a tile of the row (masked at the tail) rather than one
// element. (Other maps, such as decode's output along the head dimension, join the combine.) A map
// that joins its producer's kernel (joins_producer) is left whole.
void tile_maps(Schedule& s, int64_t tile, const std::set<std::string>& axes,
               const std::function<void(const std::string&)>& note) {
  std::vector<std::string> maps;
  const ir::LoopProgram& p = s.program();
  const ir::StmtNode* before = nullptr;  // the single block of the nest in front, if any
  for (const ir::Stmt& root : p.body->stmts) {
    std::vector<const ir::StmtNode*> blocks = blocks_under(root);
    const ir::StmtNode* previous = before;
    before = blocks.size() == 1 ? blocks[0] : nullptr;
    if (blocks.size() != 1 || root->kind != ir::StmtKind::For) continue;
    const ir::StmtNode& b = *blocks[0];
    if (std::any_of(b.iters.begin(), b.iters.end(),
                    [](const ir::IterVar& iv) { return iv.kind != ir::IterKind::Spatial; }))
      continue;
    std::vector<const ir::StmtNode*> loops = loops_on(find_block(p.body, b.name, "auto"));
    if (loops.empty() || !axes.count(ir::to_string(loops.back()->extent))) continue;
    if (previous && joins_producer(p, *previous, b)) continue;
    maps.push_back(b.name);
  }
  for (const std::string& b : maps) {
    const ir::LoopProgram& now = s.program();
    std::string var = loops_on(find_block(now.body, b, "auto")).back()->var;
    try {
      s.split(LoopRef{b, var}, tile);
    } catch (const ScheduleError& e) {
      note("'" + b + "' runs one element a grid instance: " + e.what());
    }
  }
}

// Whether an extent over sizes is longer than `bound` at the sizes decided with (not one of a
// size given no value there, a dynamic one).
bool longer_than(const ir::Expr& extent, int64_t bound,
                 const std::map<std::string, int64_t>& sizes) {
  if (!ir::over_sizes(extent)) return false;
  try {
    return ir::eval_int(extent, sizes) > bound;
  } catch (const UserError&) {
    return false;
  }
}

// The widest columns a product's tile takes whole (a head size of 128 or 256 of a query
// projection; wgmma's N is at most 256), and the tiles of wider ones.
constexpr int64_t kWholeColumns = 256, kColumnTile = 128;

// Step 5b: a nest left outside the fused ones that is a matrix product, `y[.., m, n] =
// sum[k](A[.., m, k] * B[.., k, n])` (a projection in front of attention: q = x Wq), its loops
// ending m, n, k, each bound to its own index, is split by `rows` along m where m is longer than
// that at the sizes decided with, so that the tile IR gives each grid instance a product of
// `rows` rows on the target's dot (tensor cores, the CPU's micro-kernel) rather than a
// vector-matrix product a row; a map of the product over the same nest is split alike (its
// kernel then has the product's grid, and the tile passes join the two, and the attention whose
// row tile it feeds). Columns wider than kWholeColumns take tiles of kColumnTile across grid
// instances (a projection to a model dimension of 4096).
void tile_contractions(Schedule& s, int64_t rows, const std::map<std::string, int64_t>& sizes,
                       const std::function<void(const std::string&)>& note) {
  if (rows <= 1) return;
  std::vector<std::pair<std::string, std::string>> products;  // block, its m loop (and maps)
  std::vector<std::pair<std::string, std::string>> wide;      // block, its n loop
  const ir::LoopProgram& p = s.program();
  for (const ir::Stmt& root : p.body->stmts) {
    std::vector<const ir::StmtNode*> blocks = blocks_under(root);
    if (blocks.size() != 1 || root->kind != ir::StmtKind::For) continue;
    const ir::StmtNode& b = *blocks[0];
    std::vector<const ir::StmtNode*> loops = loops_on(find_block(p.body, b.name, "auto"));
    ir::Reducer reducer = ir::Reducer::Sum;
    ir::Expr term;
    if (loops.size() < 3 || !b.body || !match_reduction_update(*b.body, &reducer, &term) ||
        reducer != ir::Reducer::Sum || term->op != ir::Op::Mul)
      continue;
    auto along = [&](int factor, const ir::IterVar& iv) {
      return ir::uses_var(term->args[static_cast<size_t>(factor)], iv.name);
    };
    // A product summed over several axes (an output projection over heads and head dimension)
    // has them merged into one first, read back as quotient and remainder (k / D, k % D), and is
    // then a product over one reduced axis like any other. Where they cannot be merged it is not
    // split: the tile IR would hold every reduced axis as a tile axis. Said, not hidden.
    if (std::count_if(b.iters.begin(), b.iters.end(),
                      [](const ir::IterVar& iv) { return iv.kind != ir::IterKind::Spatial; }) > 1) {
      bool rows_a = false, cols_b = false;
      for (const ir::IterVar& iv : b.iters) {
        if (iv.kind != ir::IterKind::Spatial) continue;
        rows_a = rows_a || (along(0, iv) && !along(1, iv));
        cols_b = cols_b || (along(1, iv) && !along(0, iv));
      }
      if (!rows_a || !cols_b) continue;
      Schedule merged = s;
      try {
        merged.merge_reduce_axes(b.name);
      } catch (const ScheduleError& e) {
        note("'" + b.name +
             "' is a matrix product summed over several axes: it runs a vector-matrix product "
             "a row (" +
             e.what() + ")");
        continue;
      }
      s = merged;
      tile_contractions(s, rows, sizes, note);
      return;
    }
    // The iteration variable bound to each of the last three loops, and their kinds.
    std::vector<const ir::IterVar*> last;
    for (size_t l = loops.size() - 3; l < loops.size(); ++l)
      for (const ir::IterVar& iv : b.iters)
        if (iv.binding->op == ir::Op::Var && iv.binding->name == loops[l]->var) last.push_back(&iv);
    if (last.size() != 3 || last[0]->kind != ir::IterKind::Spatial ||
        last[1]->kind != ir::IterKind::Spatial || last[2]->kind != ir::IterKind::Reduce ||
        std::count_if(b.iters.begin(), b.iters.end(),
                      [](const ir::IterVar& iv) { return iv.kind != ir::IterKind::Spatial; }) != 1)
      continue;
    auto uses = [&](int factor, const ir::IterVar* iv) {
      return ir::uses_var(term->args[static_cast<size_t>(factor)], iv->name);
    };
    // One factor along m and k, the other along k and n (in either order).
    bool product =
        uses(0, last[2]) && uses(1, last[2]) &&
        ((uses(0, last[0]) && !uses(0, last[1]) && uses(1, last[1]) && !uses(1, last[0])) ||
         (uses(1, last[0]) && !uses(1, last[1]) && uses(0, last[1]) && !uses(0, last[0])));
    // Rows fewer than a tile (a head size of 32 as the rows of K^T V) stay one tile, whole.
    const ir::Expr& m_extent = loops[loops.size() - 3]->extent;
    if (!product || !ir::over_sizes(m_extent) || ir::eval_int(m_extent, sizes) <= rows) continue;
    products.emplace_back(b.name, loops[loops.size() - 3]->var);
    const ir::Expr& n_extent = loops[loops.size() - 2]->extent;
    if (longer_than(n_extent, kWholeColumns, sizes))
      wide.emplace_back(b.name, loops[loops.size() - 2]->var);
    // A map of the product over the same rows and columns (its rounding to f16, q = f16(x Wq))
    // is split alike, so that its kernel has the product's grid and joins it.
    for (const ir::Stmt& other : p.body->stmts) {
      std::vector<const ir::StmtNode*> readers = blocks_under(other);
      if (readers.size() != 1 || other->kind != ir::StmtKind::For) continue;
      const ir::StmtNode& r = *readers[0];
      std::vector<const ir::StmtNode*> rl = loops_on(find_block(p.body, r.name, "auto"));
      bool same_nest =
          rl.size() + 1 == loops.size() &&
          std::all_of(r.iters.begin(), r.iters.end(),
                      [](const ir::IterVar& iv) { return iv.kind == ir::IterKind::Spatial; }) &&
          block_reads(r).count(b.body->buffer) > 0;
      for (size_t l = 0; same_nest && l < rl.size(); ++l)
        same_nest = ir::equal(rl[l]->extent, loops[l]->extent);
      if (!same_nest) continue;
      products.emplace_back(r.name, rl[rl.size() - 2]->var);
      if (longer_than(n_extent, kWholeColumns, sizes)) wide.emplace_back(r.name, rl.back()->var);
    }
  }
  for (const auto& [b, var] : products) {
    try {
      s.split(LoopRef{b, var}, rows);
    } catch (const ScheduleError& e) {
      note("'" + b + "' runs a vector-matrix product a row: " + e.what());
    }
  }
  // The loops become (outer, row tile, column tile; rows, columns and k within the tiles).
  for (const auto& [b, n] : wide) {
    try {
      std::vector<const ir::StmtNode*> loops = loops_on(find_block(s.program().body, b, "auto"));
      auto n_at = std::find_if(loops.begin(), loops.end(),
                               [&](const ir::StmtNode* l) { return l->var == n; });
      internal_assert(n_at != loops.begin() && n_at != loops.end())
          << "no row loop before '" << n << "' of '" << b << "'";
      std::vector<LoopRef> parts = s.split(LoopRef{b, n}, kColumnTile);
      std::vector<std::string> order;
      for (auto l = loops.begin(); l + 1 != n_at; ++l) order.push_back((*l)->var);
      order.push_back(parts[0].var);
      order.push_back((*(n_at - 1))->var);
      order.push_back(parts[1].var);
      for (auto l = n_at + 1; l != loops.end(); ++l) order.push_back((*l)->var);
      s.reorder(b, order);
    } catch (const ScheduleError& e) {
      note("'" + b + "' takes its columns whole: " + e.what());
    }
  }
}

// The longest reduced axis a product's tile takes whole (head sizes up to 256, the latent
// dimension of 512 of multi-head latent attention), and the tile of longer ones.
constexpr int64_t kWholeReduce = 512, kReduceTile = 64;

// Step 5d: a sum of products over one axis k longer than kWholeReduce at the sizes decided with
// (a model dimension of 4096: a projection, or the logits of a vocabulary from hidden states
// inside a fused cross-entropy), its innermost loop k below two loops of its tile, is walked in
// tiles of kReduceTile: k is split and its outer loop moved above the tile's two loops, so that
// the tile IR sums the product of a tile of k at a time into its accumulator and the operands'
// tiles stay within the shared memory and registers of one grid instance.
void walk_long_products(Schedule& s, const std::map<std::string, int64_t>& sizes,
                        const std::function<void(const std::string&)>& note) {
  std::vector<std::pair<std::string, size_t>> long_products;  // block, loops k goes above
  for (const ir::StmtNode* b : blocks_under(s.program().body)) {
    ir::Reducer reducer = ir::Reducer::Sum;
    ir::Expr term;
    if (!b->body || !match_reduction_update(*b->body, &reducer, &term) ||
        reducer != ir::Reducer::Sum || term->op != ir::Op::Mul ||
        std::count_if(b->iters.begin(), b->iters.end(),
                      [](const ir::IterVar& iv) { return iv.kind != ir::IterKind::Spatial; }) != 1)
      continue;
    std::vector<const ir::StmtNode*> loops =
        loops_on(find_block(s.program().body, b->name, "auto"));
    if (loops.size() < 3) continue;
    const ir::IterVar* k = nullptr;
    for (const ir::IterVar& iv : b->iters)
      if (iv.kind != ir::IterKind::Spatial && iv.binding->op == ir::Op::Var &&
          iv.binding->name == loops.back()->var)
        k = &iv;
    if (!k || !longer_than(loops.back()->extent, kWholeReduce, sizes)) continue;
    // A matrix product: both factors read a tensor along k, and one of them along the columns
    // of the tile (the iteration variables that the loop above k drives), the other not; not a
    // sum of squares, nor of values times their positions. k's outer loop goes above that loop,
    // and above the one over it too where that loop (the tile's rows) is the other factor's
    // alone (not where it is a split-K chunk's walk along the columns, for a single row).
    auto reads_along = [&](size_t factor, const std::function<bool(const ir::IterVar&)>& var) {
      bool found = false;
      ir::visit(term->args[factor], [&](const ir::Expr& e) {
        if (e->op == ir::Op::Load)
          for (const ir::Expr& index : e->args)
            for (const ir::IterVar& iv : b->iters)
              found = found || (var(iv) && ir::uses_var(index, iv.name));
        return true;
      });
      return found;
    };
    auto driven_by = [](const std::string& loop) {
      return [loop](const ir::IterVar& iv) {
        return iv.kind == ir::IterKind::Spatial && ir::uses_var(iv.binding, loop);
      };
    };
    auto is_k = [&](const ir::IterVar& iv) { return iv.name == k->name; };
    const auto n = driven_by(loops[loops.size() - 2]->var);
    const auto m = driven_by(loops[loops.size() - 3]->var);
    if (!reads_along(0, is_k) || !reads_along(1, is_k) || reads_along(0, n) == reads_along(1, n))
      continue;
    const size_t columns = reads_along(0, n) ? 0 : 1;
    long_products.emplace_back(b->name,
                               reads_along(1 - columns, m) && !reads_along(columns, m) ? 2 : 1);
  }
  for (const auto& [b, loops_above] : long_products) {
    std::string why;
    for (size_t above = loops_above; above > 0; --above) {
      Schedule next = s;
      try {
        std::vector<const ir::StmtNode*> loops =
            loops_on(find_block(next.program().body, b, "auto"));
        std::vector<LoopRef> parts = next.split(LoopRef{b, loops.back()->var}, kReduceTile);
        std::vector<std::string> order = {parts[0].var};
        for (size_t l = loops.size() - 1 - above; l + 1 < loops.size(); ++l)
          order.push_back(loops[l]->var);
        order.push_back(parts[1].var);
        next.reorder(b, order);
        s = next;
        why.clear();
        break;
      } catch (const ScheduleError& e) {
        why = e.what();
      }
    }
    if (!why.empty()) note("'" + b + "' takes its reduced axis whole: " + why);
  }
}

// Step 5c: a nest left outside the fused ones that is a reduction down short columns,
// `y[.., c] = sum[k](X[.., k, c])` (the sum over a group of heads of their partial gradients, a
// pooling over a few positions), its loops ending c, k with c the innermost dimension of what it
// reads, takes a strip of `width` columns a grid instance: c is split by `width` (where it is not
// a constant of at most that) and k moved between the two, so that the tile IR gives the
// instance a [k, width] tile whose rows are runs of memory, reduced along k, rather than one
// column of strided elements. Only where the column times the strip stays within `budget`
// elements at the sizes decided with (a long column stays one an instance, streamed), and not
// where the nest joins other kernels as it stands (fuse_kernels): a nest writing what it reads
// runs over its loops outside c (a key's features summed after they are computed, grid (b, h)),
// one reading what it writes runs c at the same depth and something else inside (a masked
// mean's count of positions a row, read by that row's sums), or another reduction that is no
// such column runs over its loops through c and more (the sums beside that count). A map over
// its loops reading it (a cast of the sums) is walked along c in tiles anyway.
void tile_short_columns(Schedule& s, int64_t width, int64_t budget,
                        const std::map<std::string, int64_t>& sizes,
                        const std::function<void(const std::string&)>& note) {
  if (width <= 0) return;
  std::vector<std::string> columns;
  const ir::LoopProgram& p = s.program();
  auto extents = [&](const ir::StmtNode& b) {
    std::vector<std::string> out;
    for (const ir::StmtNode* l : loops_on(find_block(p.body, b.name, "auto")))
      out.push_back(ir::to_string(l->extent));
    return out;
  };
  auto starts_with = [](const std::vector<std::string>& a, const std::vector<std::string>& prefix) {
    return a.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), a.begin());
  };
  for (const ir::Stmt& root : p.body->stmts) {
    std::vector<const ir::StmtNode*> blocks = blocks_under(root);
    if (blocks.size() != 1 || root->kind != ir::StmtKind::For || !blocks[0]->body ||
        blocks[0]->body->kind != ir::StmtKind::Store)
      continue;
    const ir::StmtNode* candidate = blocks[0];
    const ir::StmtNode& b = *candidate;
    const std::vector<std::string> own = extents(b);
    if (own.size() < 2) continue;
    const std::vector<std::string> outside(own.begin(), own.end() - 2),
        through_c(own.begin(), own.end() - 1);
    bool joins = false;
    for (const ir::StmtNode* other : blocks_under(p.body)) {
      if (other == candidate || !other->body || other->body->kind != ir::StmtKind::Store) continue;
      const std::vector<std::string> theirs = extents(*other);
      if (block_reads(b).count(other->body->buffer) && starts_with(theirs, outside)) joins = true;
      if (block_reads(*other).count(b.body->buffer) && starts_with(theirs, through_c) &&
          theirs.size() > through_c.size())
        joins = true;
    }
    if (joins) continue;
    std::vector<const ir::StmtNode*> loops = loops_on(find_block(p.body, b.name, "auto"));
    if (loops.size() < 2 || std::count_if(b.iters.begin(), b.iters.end(), [](const auto& iv) {
                              return iv.kind != ir::IterKind::Spatial;
                            }) != 1)
      continue;
    const ir::IterVar *k = nullptr, *c = nullptr;
    for (const ir::IterVar& iv : b.iters) {
      if (iv.binding->op != ir::Op::Var) continue;
      if (iv.binding->name == loops.back()->var) k = &iv;
      if (iv.binding->name == loops[loops.size() - 2]->var) c = &iv;
    }
    if (!k || !c || k->kind != ir::IterKind::Reduce || c->kind != ir::IterKind::Spatial ||
        !column_reduction(b))
      continue;
    bool innermost = true;  // every load's innermost index runs along c
    ir::visit_exprs(b.body, [&](const ir::Expr& e) {
      ir::visit(e, [&](const ir::Expr& x) {
        if (x->op == ir::Op::Load && !x->args.empty() && x->name != b.body->buffer)
          innermost = innermost && ir::uses_var(x->args.back(), c->name);
        return true;
      });
    });
    try {
      if (!innermost || ir::eval_int(loops.back()->extent, sizes) * width > budget) continue;
    } catch (const std::exception&) {
      continue;  // a column over a size not given: not known to be short
    }
    columns.push_back(b.name);
  }
  // (The loops through c of each column, against the reductions that are no column.)
  std::erase_if(columns, [&](const std::string& name) {
    const std::vector<std::string> own = extents(*find_block(p.body, name, "auto").back());
    const std::vector<std::string> through_c(own.begin(), own.end() - 1);
    for (const ir::StmtNode* other : blocks_under(p.body)) {
      const std::vector<std::string> theirs = extents(*other);
      if (std::count(columns.begin(), columns.end(), other->name) == 0 &&
          std::any_of(other->iters.begin(), other->iters.end(),
                      [](const ir::IterVar& iv) { return iv.kind != ir::IterKind::Spatial; }) &&
          theirs.size() > through_c.size() && starts_with(theirs, through_c))
        return true;
    }
    return false;
  });
  for (const std::string& b : columns) {
    try {
      std::vector<const ir::StmtNode*> loops = loops_on(find_block(s.program().body, b, "auto"));
      const std::string c = loops[loops.size() - 2]->var, k = loops.back()->var;
      std::optional<int64_t> extent = ir::as_const_int(loops[loops.size() - 2]->extent);
      std::string strip = c;
      std::vector<std::string> order;
      for (size_t l = 0; l + 2 < loops.size(); ++l) order.push_back(loops[l]->var);
      if (!extent || *extent > width) {
        std::vector<LoopRef> parts = s.split(LoopRef{b, c}, width);
        order.push_back(parts[0].var);
        strip = parts[1].var;
      }
      order.push_back(k);
      order.push_back(strip);
      s.reorder(b, order);
    } catch (const ScheduleError& e) {
      note("'" + b + "' reduces one column a grid instance: " + e.what());
    }
  }
}

// Step 0b: a reduction over several axes whose first reduced variable e it reads only as the
// member g * E + e of a group g (the query heads of a key/value head in grouped-query attention's
// dK and dV, summed over the group and the queries) is factored (factor_group): each member's
// partial over the other axes, a reduction over one axis that can fuse with the member's chain,
// then their sum over the group. The members' nests then run one after another, in front of the
// first group's sum (dK's partials beside dV's, as when written so), where nothing between
// depends on them.
void factor_groups(Schedule& s, const std::function<void(const std::string&)>& note) {
  std::vector<std::string> members, sums;
  for (bool factored = true; factored;) {
    factored = false;
    for (const ir::StmtNode* b : blocks_under(s.program().body)) {
      if (std::count_if(b->iters.begin(), b->iters.end(),
                        [](const ir::IterVar& iv) { return iv.kind != ir::IterKind::Spatial; }) < 2)
        continue;
      Schedule next = s;
      try {
        members.push_back(next.factor_group(b->name));
      } catch (const ScheduleError&) {
        continue;  // not a sum over a group's members
      }
      sums.push_back(b->name);
      note("'" + b->name + "' sums each member of its group apart, then the group");
      s = next;
      factored = true;
      break;
    }
  }
  for (size_t k = 1; k < members.size(); ++k) {
    Schedule next = s;
    try {
      next.move_nest(members[k], sums.front());
      s = next;
    } catch (const ScheduleError&) {
      // it depends on a nest in between: it stays in front of its own sum
    }
  }
}

// Step 1 (see AutoSchedule.h): a map with fewer variables than a reduction, which reads it at one
// point an instance (a loss's logit at its target, z[r, TGT[r]]; a token's probability at a fixed
// id, z[r, YES]) while other blocks read the reduction too (the chain over the vocabulary), has
// that point computed again for it (recompute_point): a sum of C products a row, where reading
// the stored reduction keeps the whole of it (R x V logits) in memory for the map alone. So does
// a map read so (a scaled score read on the diagonal, s[i, i]), and then what that reads.
void recompute_read_points(Schedule& s, const std::function<void(const std::string&)>& note) {
  std::vector<std::pair<std::string, std::string>> found;  // (producer, the map reading a point)
  const ir::LoopProgram& p = s.program();
  for (const ir::StmtNode* r : blocks_under(p.body)) {
    if (!r->body || r->body->kind != ir::StmtKind::Store) continue;
    const std::string& z = r->body->buffer;
    size_t spatial = 0, readers = 0;
    for (const ir::IterVar& iv : r->iters) spatial += iv.kind == ir::IterKind::Spatial;
    std::string reading;
    for (const ir::StmtNode* b : blocks_under(p.body)) {
      if (b == r || !block_reads(*b).count(z)) continue;
      ++readers;
      const bool map = std::all_of(b->iters.begin(), b->iters.end(), [](const ir::IterVar& iv) {
        return iv.kind == ir::IterKind::Spatial;
      });
      if (map && b->iters.size() < spatial && reading.empty()) reading = b->name;
    }
    if (!reading.empty() && readers > 1) found.emplace_back(r->name, reading);
  }
  for (const auto& [producer, map] : found) {
    try {
      const std::string at = s.recompute_point(producer, map);
      note("'" + map + "' reads '" + producer + "' at one point an instance: '" + at +
           "' computes that point again for it");
      // A map computed again reads what it reads at the point: a reduction, computed again too.
      recompute_read_points(s, note);
      return;
    } catch (const ScheduleError& e) {
      note("'" + map + "' reads '" + producer + "' at one point an instance: " + e.what());
    }
  }
}

Schedule schedule_chain(const ir::LoopProgram& original, const AutoScheduleOptions& options,
                        std::vector<std::string>* notes, SplitKCosts* costs) {
  Schedule unscheduled(original);
  auto note = [&](const std::string& n) {
    if (notes) notes->push_back(n);
  };
  Schedule normal = normal_form(original, note);
  factor_groups(normal, note);
  std::set<std::string> unflattened;
  merge_several_axis_chains(normal, options, &unflattened, note);
  recompute_shared_heads(normal, note);
  recompute_read_points(normal, note);
  // 1. The groups to fuse, each under its own tile loop.
  // A lone row reduction is streamed where the target holds rows whole up to a bound its row
  // exceeds: held whole, a row that long would not fit (on CUDA it spilled from registers). (Not
  // one over a param's extent, a group of G columns: translation walks a long group in chunks
  // within the target's tile budget, and the maps that read the group's result join its kernel,
  // split_groups, which a streamed reduction's would not.)
  auto streamed_alone = [&](const std::string& reduction) {
    if (options.whole_row_bytes <= 0) return false;
    std::optional<RowSize> row = row_size(normal.program(), {reduction}, options);
    return row && ir::over_sizes(row->extent) && row->bytes() > options.whole_row_bytes;
  };
  std::vector<std::vector<std::string>> groups =
      fusion_groups(normal.program(), note, streamed_alone);
  const bool several_axes = note_several_axis_chains(normal.program(), options, note);
  // The program with no chain fused: a map along an axis that no reduction runs over or along
  // (an elementwise program, a dequantisation that reads a scale per group of columns, a
  // softmax's outputs per group) gets no tile of it from the tile IR, which holds only reduced
  // axes whole: it is cut into the groups it reads values of, and walked in tiles of map_tile,
  // one element a grid instance else. (A map along a reduction's rows, a scale per row, joins
  // its kernel.)
  auto unfused = [&] {
    std::set<std::string> axes;
    for (const ir::StmtNode* b : blocks_under(original.body)) {
      std::vector<const ir::StmtNode*> loops = loops_on(find_block(original.body, b->name, "auto"));
      if (!loops.empty() && !ir::as_const_int(loops.back()->extent))
        axes.insert(ir::to_string(loops.back()->extent));
    }
    for (const ir::StmtNode* b : blocks_under(original.body))
      if (std::any_of(b->iters.begin(), b->iters.end(),
                      [](const ir::IterVar& iv) { return iv.kind != ir::IterKind::Spatial; }))
        for (const ir::IterVar& iv : b->iters) axes.erase(ir::to_string(iv.extent));
    split_maps_by_groups(unscheduled, note);
    tile_maps(unscheduled, options.map_tile, axes, note);
    tile_contractions(unscheduled, options.row_tile, decision_sizes(original, options), note);
    walk_long_products(unscheduled, decision_sizes(original, options), note);
    tile_short_columns(unscheduled, options.column_strip, options.column_strip_elements,
                       decision_sizes(original, options), note);
    return unscheduled;
  };
  if (groups.empty()) {
    if (!several_axes)
      note("no reduction reads another reduction over the same axis: nothing to fuse");
    return unfused();
  }
  Schedule s = normal;
  bool fused = false;
  for (const std::vector<std::string>& members : groups) {
    if (row_fits_whole(normal.program(), members, options, note)) continue;
    Schedule next = s;
    try {
      fuse_group(next, members, options, note, costs);
      s = next;
      fused = true;
    } catch (const ScheduleError& e) {
      if (options.chunk_tiles > 1) {
        note(std::string("chunks of one tile: ") + e.what());
        AutoScheduleOptions one = options;
        one.chunk_tiles = 1;
        return schedule_chain(original, one, notes, nullptr);
      }
      std::string merged;
      for (const nlohmann::json& t : normal.trace())
        if (t.at("primitive") == "merge_reduce_axes" &&
            std::count(members.begin(), members.end(), t.at("block").get<std::string>()))
          merged += (merged.empty() ? "'" : ", '") + t.at("block").get<std::string>() + "'";
      note(kFusionAbandoned +
           (merged.empty() ? std::string()
                           : "the reduced axes of " + merged +
                                 " were merged into one, and the chain still does not fuse: ") +
           e.what());
    }
  }
  if (!fused) return unfused();
  if (options.map_tile > 0) {
    std::set<std::string> axes;
    for (const ReductionChain& c : find_reduction_chains(normal.program()))
      for (const std::vector<std::string>& g : groups)
        if (std::count(g.begin(), g.end(), c.target)) axes.insert(ir::to_string(c.extent));
    axes.insert(unflattened.begin(), unflattened.end());
    tile_maps(s, options.map_tile, axes, note);
  }
  tile_contractions(s, options.row_tile, decision_sizes(original, options), note);
  walk_long_products(s, decision_sizes(original, options), note);
  tile_short_columns(s, options.column_strip, options.column_strip_elements,
                     decision_sizes(original, options), note);
  try {
    s.compact_buffer();
  } catch (const ScheduleError& e) {
    note(kFusionAbandoned + std::string(e.what()));
    return unscheduled;
  }
  return s;
}

}  // namespace

}  // namespace kintsugi::schedule
