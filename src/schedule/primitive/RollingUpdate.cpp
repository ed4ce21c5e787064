// \file RollingUpdate.cpp
// rolling_update(block, loop): Neptune's Rolling Update. Fuses the reduction `block` under
// `loop` (the tile loop of a producer reduction it consumes), breaking the dependency on the
// producer's final value and repairing the accumulator with a function the algebra engine
// derives from the program. FlashAttention's online softmax is what comes out for attention;
// nothing here knows about attention.
//
// Steps (neptune-algorithms.md section 2), on a scratch copy of the schedule:
//  1. Frontier: the producers of `block` (through elementwise blocks) that are reductions or
//     scans under `loop` with a non-spatial variable driven by it: fused, they are incomplete.
//  2. The blocks between `block` and the frontier are moved under `loop` (reverse_compute_at),
//     producers first; a block that other consumers still need is cloned, not moved (Neptune
//     moves it, which hands partial values to those consumers).
//  3. Frontier reductions become scans (reduce_to_scan): the running value of each iteration.
//  4. The term of `block`, with the moved elementwise blocks inlined, goes to the algebra engine
//     with the scan buffers as incomplete values; an underivable repair is a ScheduleError.
//     When no h(t, r, r') exists but an augmented state does (a variance about a running
//     mean: Welford), each statistic S (a sum of complete values) becomes a reduction
//     `<block>.S` under the loop, rfactored and scanned like a frontier value (add_statistic).
//  5. rfactor(block, loop): a partial per iteration, and a write-back that now reads
//       R = R.rf + select(j0 > 0, h(R, x[j0 - 1], x[j0], S[j0 - 1]), R)        (Eq. 7)
//     where S[j0 - 1] is each statistic over the iterations that R already holds.
// The result computes exactly what the unfused program computes (Theorem 4.1); the tests check
// it by running the reference interpreter before and after.
#include "algebra/Eval.h"
#include "algebra/Repair.h"
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/ReductionChains.h"
#include "schedule/primitive/Fusion.h"
#include "schedule/primitive/Inline.h"
#include "schedule/primitive/Replay.h"
#include "schedule/primitive/Scan.h"

namespace kintsugi::schedule {

namespace {

const char* kPos = "__position";

// The block writing each buffer.
bool incomplete_under(const ir::StmtNode& b, const std::string& loop_var,
                      const std::set<const ir::StmtNode*>& under) {
  if (!under.count(&b)) return false;
  for (const ir::IterVar& iv : b.iters)
    if (iv.kind != ir::IterKind::Spatial && ir::uses_var(iv.binding, loop_var)) return true;
  return false;
}

// The write-back of `block` reads partial `rf` only where the partial's first element ran (its
// predicate with its reduction variables at 0), and the reducer's identity elsewhere.
void guard_empty_tiles(ir::LoopProgram& p, const std::string& block, const std::string& rf,
                       ir::Reducer reducer, const std::string& P) {
  const ir::StmtNode& part = *find_block(p.body, rf, P).back();
  if (!part.predicate) return;
  std::map<std::string, ir::Expr> first;  // reduction loops at 0
  for (const ir::IterVar& iv : part.iters)
    if (iv.kind != ir::IterKind::Spatial && iv.binding->op == ir::Op::Var)
      first[iv.binding->name] = ir::make_int(0);
  ir::Expr ran = ir::simplify(ir::substitute(part.predicate, first));
  StmtPath wpath = find_block(p.body, block, P);
  ir::StmtNode wb = *wpath.back();
  // In the write-back's iteration variables (the loops it shares with the partial).
  std::map<std::string, ir::Expr> iters;
  for (const ir::IterVar& iv : wb.iters)
    if (iv.binding->op == ir::Op::Var) iters[iv.binding->name] = var(iv.name);
  ran = ir::substitute(ran, iters);
  const ir::StmtNode& st = *wb.body;
  ir::Expr partial = st.value->args[1];
  ir::Expr guarded = ir::make_select(ran, partial, reducer_identity_expr(reducer, partial->type));
  wb.body = ir::make_store(st.buffer, st.indices, combine(reducer, st.value->args[0], guarded));
  p.body = replace_at(wpath, std::make_shared<const ir::StmtNode>(std::move(wb)));
}

}  // namespace

void Schedule::rolling_update(const std::string& block, const LoopRef& loop) {
  const std::string P = "rolling_update";
  Schedule tmp(program_);
  find_block(program_.body, block, P);
  const ir::StmtNode& l0 = *find_loop(program_.body, loop, P).back();
  const std::string lv = l0.var;
  // 1-2. Frontier and the blocks between, producers first.
  std::vector<std::string> between;  // elementwise blocks to bring under the loop
  std::set<std::string> frontier;    // buffers of incomplete producers
  {
    std::set<const ir::StmtNode*> under;
    for (const ir::StmtNode* b : blocks_under(l0.body)) under.insert(b);
    find_frontier(
        program_, *find_block(program_.body, block, P).back(),
        [&](const ir::StmtNode& prod) { return incomplete_under(prod, lv, under); }, &frontier,
        &between);
  }
  // The target's reduction axis and the tile of it that one iteration of the loop covers.
  const ir::StmtNode& target0 = *find_block(program_.body, block, P).back();
  const ir::IterVar* axis = nullptr;
  for (const ir::IterVar& iv : target0.iters)
    if (iv.kind != ir::IterKind::Spatial) {
      if (axis)
        throw ScheduleError(
            P, "block '" + block + "' reduces over several variables; fuse them first");
      axis = &iv;
    }
  if (!axis) throw ScheduleError(P, "block '" + block + "' is not a reduction");
  Range tile;
  bool of_chunk = false;
  if (!find_axis_tile(program_, l0, target0, *axis, &tile, &of_chunk))
    throw ScheduleError(P, "loop '" + lv + "' does not tile an axis of extent " +
                               ir::to_string(axis->extent) + " (the reduction axis of block '" +
                               block + "'); split that axis and use the outer loop");
  // Blocks being fused read the final value of an already scanned producer; they will read its
  // running value instead. Mark those reads with a placeholder buffer that nothing under the
  // loop writes, so that reverse_compute_at does not take them for inputs.
  std::set<std::string> fused_names(between.begin(), between.end());
  fused_names.insert(block);
  std::map<std::string, std::string> placeholder;  // scan buffer -> placeholder name
  for (const std::string& f : frontier) {
    const ir::Buffer* fb = tmp.program_.find_buffer(f);
    if (fb && fb->shape.size() > 0) placeholder[f] = f + ".running";
  }
  tmp.program_.body = ir::mutate(tmp.program_.body, [&](const ir::Stmt& n) -> ir::Stmt {
    if (n->kind != ir::StmtKind::Block || !fused_names.count(n->name)) return n;
    ir::StmtNode c = *n;
    auto fix = [&](const ir::Stmt& part) {
      return part ? ir::mutate_exprs(
                        part,
                        [&](const ir::Expr& e) -> ir::Expr {
                          if (e->op != ir::Op::Load || !placeholder.count(e->name)) return e;
                          const ir::StmtNode* w = block_writers(tmp.program_.body).at(e->name);
                          bool scan = false;
                          for (const ir::IterVar& iv : w->iters)
                            scan |= iv.kind == ir::IterKind::Scan;
                          if (!scan) return e;
                          std::vector<ir::Expr> idx(e->args.begin(),
                                                    e->args.end() - 1);  // drop the final position
                          return ir::make_load(placeholder.at(e->name), e->type, idx);
                        })
                  : part;
    };
    c.init = fix(c.init);
    c.body = fix(c.body);
    return std::make_shared<const ir::StmtNode>(std::move(c));
  });
  // Which iteration variable of each fused block runs along the axis: the target's reduction
  // variable, and in a producer the variable it stores at where a fused consumer reads it with
  // that consumer's axis variable.
  std::map<std::string, AxisIteration> axis_iter =
      axis_iterations(tmp.program(), block, axis->name, between);
  auto box_for = [&](const std::string& name) { return axis_box(axis_iter, name, tile); };
  // A placeholder read is placed like a read of the scan it stands for (a block between that
  // reads a producer's running value and nothing else the loop produces).
  std::map<std::string, std::string> running_reads;
  for (const auto& [scan, ph] : placeholder) running_reads[ph] = scan;
  // Blocks between that others still read are cloned: the fused copy reads running values, the
  // original stays for the others. Decided consumers first: a cloned block's original reads the
  // final values of what it depends on, so its producers among `between` are cloned too.
  std::set<std::string> cloned;
  {
    std::set<std::string> fused(between.begin(), between.end());
    fused.insert(block);
    for (auto it = between.rbegin(); it != between.rend(); ++it) {
      const ir::StmtNode& b = *find_block(program_.body, *it, P).back();
      if (!b.body || b.body->kind != ir::StmtKind::Store) continue;
      for (const ir::StmtNode* r : blocks_under(program_.body))
        if (!fused.count(r->name) && r != &b && block_reads(*r).count(b.body->buffer)) {
          cloned.insert(*it);
          fused.erase(*it);
          break;
        }
    }
  }
  std::map<std::string, std::string> renamed;  // original buffer -> buffer the fused blocks read
  for (const std::string& name : between) {
    const ir::StmtNode& b = *find_block(tmp.program_.body, name, P).back();
    // (A split-K chunk's elementwise block also iterates over the chunk, which it does not
    // store at.)
    if (!b.body || b.body->kind != ir::StmtKind::Store || b.init)
      throw ScheduleError(P, "block '" + name + "' between is not a single store");
    const std::string buffer = b.body->buffer;
    const bool others = cloned.count(name) > 0;
    const ir::StmtNode* lp = find_loop(tmp.program_.body, LoopRef{loop.block, lv}, P).back();
    bool already_under = false;
    for (const ir::StmtNode* u : blocks_under(lp->body)) already_under |= u == &b;
    if (already_under) continue;
    if (others) {
      // Clone the nest under new block and buffer names, and redirect the fused readers.
      std::string nb = tmp.fresh_name(name + ".ru"), nbuf = tmp.fresh_name(buffer + ".ru");
      size_t idx = 0;
      const ir::StmtNode* nest = find_block(tmp.program_.body, name, P)[1];
      for (; idx < tmp.program_.body->stmts.size(); ++idx)
        if (tmp.program_.body->stmts[idx].get() == nest) break;
      ir::Stmt clone =
          ir::mutate(tmp.program_.body->stmts[idx], [&](const ir::Stmt& n) -> ir::Stmt {
            ir::StmtNode c = *n;
            if (c.kind == ir::StmtKind::Block && c.name == name) c.name = nb;
            if (c.kind == ir::StmtKind::Store && c.buffer == buffer) c.buffer = nbuf;
            return std::make_shared<const ir::StmtNode>(std::move(c));
          });
      ir::LoopProgram p = tmp.program_;
      ir::StmtNode root = *p.body;
      root.stmts.insert(root.stmts.begin() + static_cast<long>(idx) + 1, clone);
      p.body = std::make_shared<const ir::StmtNode>(std::move(root));
      ir::Buffer copy = *p.find_buffer(buffer);
      copy.name = nbuf;
      p.buffers.push_back(copy);
      std::set<std::string> redirect(between.begin(), between.end());
      redirect.insert(block);
      p.body = ir::mutate(p.body, [&](const ir::Stmt& n) -> ir::Stmt {
        if (n->kind != ir::StmtKind::Block || !redirect.count(n->name)) return n;
        ir::StmtNode c = *n;
        auto fix = [&](const ir::Stmt& part) {
          return part ? ir::mutate_exprs(part,
                                         [&](const ir::Expr& e) {
                                           return e->op == ir::Op::Load && e->name == buffer
                                                      ? ir::make_load(nbuf, e->type, e->args)
                                                      : e;
                                         })
                      : part;
        };
        c.init = fix(c.init);
        c.body = fix(c.body);
        return std::make_shared<const ir::StmtNode>(std::move(c));
      });
      // The original reads what it read before the placeholders and redirections above, which
      // are the fused copy's: the final values.
      StmtPath original = find_block(p.body, name, P);
      ir::StmtNode restored = *original.back();
      restored.body = find_block(program_.body, name, P).back()->body;
      p.body = replace_at(original, std::make_shared<const ir::StmtNode>(std::move(restored)));
      tmp.program_ = p;
      renamed[buffer] = nbuf;
      tmp.reverse_compute_at_box(nb, LoopRef{loop.block, lv}, box_for(name), running_reads);
      if (axis_iter.count(name)) axis_iter[nb] = axis_iter.at(name);
    } else {
      tmp.reverse_compute_at_box(name, LoopRef{loop.block, lv}, box_for(name), running_reads);
    }
  }
  {
    const ir::StmtNode* lp = find_loop(tmp.program_.body, LoopRef{loop.block, lv}, P).back();
    bool under = false;
    for (const ir::StmtNode* u : blocks_under(lp->body)) under |= u->name == block;
    if (!under) tmp.reverse_compute_at_box(block, LoopRef{loop.block, lv}, box_for(block));
  }
  // The placeholder reads become reads of the running value.
  for (const auto& [scan, ph] : placeholder) {
    StmtPath lp = find_loop(tmp.program_.body, LoopRef{loop.block, lv}, P);
    ir::StmtNode nl = *lp.back();
    nl.body = read_loop_position(
        nl.body, lv, nl.extent,
        [&](const ir::Expr& load, const ir::Expr& position) {
          std::vector<ir::Expr> idx = load->args;
          idx.push_back(position);
          return ir::make_load(scan, load->type, idx);
        },
        ph);
    tmp.program_.body = replace_at(lp, std::make_shared<const ir::StmtNode>(std::move(nl)));
  }
  // 3. Frontier reductions become scans.
  std::map<std::string, std::string> scans;  // producer buffer -> scan buffer
  for (const std::string& f : frontier) {
    const ir::StmtNode* wb = block_writers(tmp.program_.body).at(f);
    bool is_scan = false;
    for (const ir::IterVar& iv : wb->iters) is_scan |= iv.kind == ir::IterKind::Scan;
    scans[f] = is_scan ? f : tmp.reduce_to_scan(wb->name, LoopRef{wb->name, lv});
  }
  // 4. The term, with the fused elementwise blocks inlined, and its repair.
  const ir::StmtNode& target = *find_block(tmp.program_.body, block, P).back();
  ir::Reducer reducer;
  ir::Expr term;
  if (!target.body || !match_reduction_update(*target.body, &reducer, &term))
    throw ScheduleError(P, "block '" + block + "' is not a reduction x[...] = x[...] op g");
  std::set<std::string> scan_bufs;
  for (const auto& [f, s] : scans) scan_bufs.insert(s);
  std::function<ir::Expr(const ir::Expr&)> expand = [&](const ir::Expr& e) -> ir::Expr {
    return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
      if (n->op != ir::Op::Load || scan_bufs.count(n->name)) return n;
      const ir::StmtNode* prod = block_writers(tmp.program_.body).count(n->name)
                                     ? block_writers(tmp.program_.body).at(n->name)
                                     : nullptr;
      bool fused_map = false;
      for (const std::string& b : between)
        if (prod &&
            (prod->name == b || prod->name == b + ".ru" || prod->name.rfind(b + ".ru", 0) == 0))
          fused_map = true;
      if (!fused_map) return n;
      const ir::StmtNode& st = *prod->body;
      std::map<std::string, ir::Expr> sub;
      for (size_t d = 0; d < st.indices.size(); ++d) sub[st.indices[d]->name] = n->args[d];
      // A variable it does not store at is the target's variable bound alike (a split-K
      // chunk), else the loop position.
      for (const ir::IterVar& iv : prod->iters) {
        if (sub.count(iv.name)) continue;
        sub[iv.name] = var(kPos);
        for (const ir::IterVar& tv : target.iters)
          if (ir::equal(tv.binding, iv.binding)) sub[iv.name] = var(tv.name);
      }
      return expand(ir::substitute(st.value, sub));
    });
  };
  ir::Expr g = expand(term);
  algebra::RepairRequest req;
  req.reducer = reducer;
  req.term = g;
  req.incomplete = scan_bufs;
  req.facts = repair_facts(program_);
  for (const auto& [producer, running] : scans)
    if (req.facts.count(producer)) req.facts.emplace(running, req.facts.at(producer));
  req.allow_augmented_state = true;
  req.axis = axis->name;
  const ir::Expr inner_position = ir::make_binary(
      ir::Op::Sub, ir::make_var(axis->name, ir::VarKind::Index, DType::Int), tile.min);
  req.running_sums = running_terms(tmp.program_, scan_bufs, ir::Reducer::Sum, inner_position, lv,
                                   var(kPos), expand);
  req.running_extrema =
      running_extrema(tmp.program_, scan_bufs, inner_position, lv, var(kPos), expand);
  algebra::RepairResult repair = algebra::derive_repair(req);
  if (repair.kind == algebra::RepairResult::Kind::Refused)
    throw ScheduleError(
        P, "block '" + block + "' cannot be fused under loop '" + lv + "': " + repair.reason);
  if (std::string pole =
          repair_pole(repair, req.incomplete, partial_facts(program_, req.facts, scans));
      !pole.empty())
    throw ScheduleError(P,
                        "block '" + block + "' cannot be fused under loop '" + lv + "': " + pole);
  // An augmented state: a running sum it re-bases about is read extrapolated to the whole axis
  // (Fusion.h). (Tiles of a split-K chunk keep the plain running value.)
  std::map<std::string, std::string> extrapolated;  // incomplete value name -> running sum scan
  auto factor = [&](const ir::Expr& position, DType type) {
    ir::Expr end = ir::make_binary(
        ir::Op::Min,
        ir::make_binary(ir::Op::Add, ir::substitute(tile.min, {{lv, position}}), tile.extent),
        axis->extent);
    return extrapolation_factor(
        axis->extent,
        ir::make_binary(ir::Op::Sub, end, ir::substitute(tile.min, {{lv, ir::make_int(0)}})), type);
  };
  if (!repair.statistics.empty() && !of_chunk) {
    for (const std::string& sb : scan_bufs) {
      const ir::StmtNode* w = block_writers(tmp.program_.body).at(sb);
      if (w->body && w->body->value && w->body->value->op == ir::Op::Add)
        extrapolated[sb + ".extrapolated"] = sb;
    }
  }
  if (!extrapolated.empty()) {
    std::set<std::string> sums;
    for (const auto& [x, sb] : extrapolated) sums.insert(sb);
    req.term = extrapolate_sum_reads(
        tmp.program_, find_loop(tmp.program_.body, LoopRef{loop.block, lv}, P), sums,
        [&](const ir::Expr& load) { return factor(load->args.back(), load->type); }, g);
    req.incomplete.clear();
    for (const std::string& sb : scan_bufs)
      req.incomplete.insert(sums.count(sb) ? sb + ".extrapolated" : sb);
    repair = algebra::derive_repair(req);
    if (repair.kind == algebra::RepairResult::Kind::Refused)
      throw ScheduleError(
          P, "block '" + block + "' cannot be fused under loop '" + lv + "': " + repair.reason);
  }
  // The value of an incomplete value's load at a position of the loop.
  auto value_at = [&](const ir::Expr& load, const ir::Expr& position) {
    ir::Expr l = ir::substitute(load, {{kPos, position}});
    auto it = extrapolated.find(l->name);
    if (it == extrapolated.end()) return l;
    return ir::make_binary(ir::Op::Mul, ir::make_load(it->second, l->type, l->args),
                           factor(l->args.back(), l->type));
  };
  // An augmented state: each statistic is summed alongside the block and scanned like a
  // frontier value; the repair at iteration j0 reads its value over the iterations before j0.
  std::map<std::string, std::string> statistic_scans;  // statistic variable -> scan buffer
  refuse_masked_infinite_statistics(
      tmp.program_, repair, P, "block '" + block + "' cannot be fused under loop '" + lv + "'");
  for (const algebra::AugmentedStatistic& stat : repair.statistics) {
    std::string sb;
    tmp.program_ = add_statistic(tmp, block, LoopRef{loop.block, lv}, stat, kPos, P, &sb);
    tmp.rfactor(sb, LoopRef{sb, lv});
    statistic_scans[stat.var] = tmp.reduce_to_scan(sb, LoopRef{sb, lv});
  }
  // 5. Partial results per iteration and the repaired write-back.
  std::string rf = tmp.rfactor(block, LoopRef{block, lv});
  // A tile of a chunk past the axis' end holds no element: its partial never ran its init, and
  // reads as the reducer's identity (the running value keeps what the tiles before it gave).
  if (of_chunk) guard_empty_tiles(tmp.program_, block, rf, reducer, P);
  if (repair.kind == algebra::RepairResult::Kind::Derived) {
    StmtPath wpath = find_block(tmp.program_.body, block, P);
    ir::StmtNode wb = *wpath.back();
    const ir::StmtNode& st = *wb.body;
    ir::Expr pos = var(lv);
    ir::Expr self = st.value->args[0];
    auto at = [&](const ir::Expr& load, const ir::Expr& position) {
      return ir::substitute(load, {{kPos, position}});
    };
    std::map<std::string, ir::Expr> sub{{"t", self}};
    ir::Expr before = ir::make_binary(ir::Op::Sub, pos, ir::make_int(1));
    for (const algebra::IncompleteValue& v : repair.values) {
      sub[v.old_var] = value_at(v.load, before);
      sub[v.new_var] = value_at(v.load, pos);
    }
    for (const auto& [stat, scan] : statistic_scans) {
      std::vector<ir::Expr> idx = st.indices;
      idx.push_back(before);
      sub[stat] = ir::make_load(scan, self->type, idx);
    }
    ir::Expr h = ir::substitute(repair.h, sub);
    std::map<std::string, ir::Reducer> moves;  // old variable -> its producer's max or min
    for (const algebra::IncompleteValue& v : repair.values) {
      if (extrapolated.count(v.load->name)) continue;  // a sum: it moves either way
      const ir::StmtNode* prod = block_writers(tmp.program_.body)
                                     .at(algebra::incomplete_load(v.load, req.incomplete)->name);
      ir::Expr value = prod->body && prod->body->value ? prod->body->value : nullptr;
      if (value && value->op == ir::Op::Max) moves[v.old_var] = ir::Reducer::Max;
      if (value && value->op == ir::Op::Min) moves[v.old_var] = ir::Reducer::Min;
      if (value && value->op == ir::Op::Add && req.facts.count(prod->body->buffer))
        moves[v.old_var] = ir::Reducer::Sum;
    }
    h = guard_scaled_partial(repair, moves, self, h, P,
                             "block '" + block + "' cannot be fused under loop '" + lv + "'");
    // Leading tiles where a producer still holds its reducer's identity (a max of nothing but
    // -inf: fully masked tiles) give terms such as exp(-inf - -inf) = NaN. When the repair maps
    // every such contribution to zero once the producer moves on (h(1, identity, r') = 0, checked
    // numerically here), the running result is replaced by the target's identity at the tile
    // where the producer leaves its identity, so a masked prefix cannot poison the row; a row
    // that never leaves it keeps the NaN the program's own terms give.
    ir::Expr left_identity;
    for (const algebra::IncompleteValue& v : repair.values) {
      if (extrapolated.count(v.load->name)) continue;  // a sum: its identity needs no guard
      const ir::StmtNode* prod = block_writers(tmp.program_.body)
                                     .at(algebra::incomplete_load(v.load, req.incomplete)->name);
      bool scan_store = prod->body && prod->body->value && prod->body->value->args.size() == 2;
      if (!scan_store) continue;
      ir::Reducer pr;
      switch (prod->body->value->op) {
        case ir::Op::Max:
          pr = ir::Reducer::Max;
          break;
        case ir::Op::Min:
          pr = ir::Reducer::Min;
          break;
        case ir::Op::Add:
          pr = ir::Reducer::Sum;
          break;
        default:
          continue;
      }
      if (pr == ir::Reducer::Sum && repair_exponentiates(repair, v))
        throw ScheduleError(P, "block '" + block + "' cannot be fused under loop '" + lv +
                                   "': the repair exponentiates " + prod->body->buffer +
                                   ", a sum whose partials can be far from the row's (exp " +
                                   "overflows or underflows where the program's does not)");
      if (mask_makes_producer_infinite(tmp.program_, prod->body->buffer, pr))
        throw ScheduleError(P, "block '" + block + "' cannot be fused under loop '" + lv +
                                   "': a masked element makes " + prod->body->buffer +
                                   " infinite, and the repair cannot re-base a tile's terms " +
                                   "from a finite value to an infinite one");
      double id = ir::reducer_identity(pr, tmp.program_.find_buffer(prod->body->buffer)->dtype);
      if (!repair_annihilates_identity(repair, v, id)) {
        if (!repair.exact_at_identity && pr != ir::Reducer::Sum &&
            producer_masked(tmp.program_, prod->body->buffer, pr))
          throw ScheduleError(P, "block '" + block + "' cannot be fused under loop '" + lv +
                                     "': a tile that the mask hides from " + prod->body->buffer +
                                     " leaves it at " + ir::format_double(id) +
                                     ", from which the repair cannot re-base the tile's terms");
        continue;
      }
      if (!identity_guard_sound(tmp.program_, prod->body->buffer, pr, term, reducer, renamed,
                                inner_position))
        throw ScheduleError(P, "block '" + block + "' cannot be fused under loop '" + lv +
                                   "': on a tile where " + prod->body->buffer +
                                   " is still its identity its terms are not " +
                                   ir::format_double(ir::reducer_identity(reducer)) +
                                   " (they read what the mask hides from it), so the repair " +
                                   "can neither keep nor drop them");
      ir::Expr old = at(v.load, before), cur = at(v.load, pos);
      ir::Expr left = ir::make_binary(
          ir::Op::And, ir::make_binary(ir::Op::Eq, old, ir::reducer_identity_expr(pr, old->type)),
          ir::make_binary(ir::Op::Ne, cur, ir::reducer_identity_expr(pr, cur->type)));
      left_identity = left_identity ? ir::make_binary(ir::Op::Or, left_identity, left) : left;
    }
    if (left_identity)
      h = ir::make_select(left_identity, reducer_identity_expr(reducer, h->type), h);
    ir::Expr repaired = ir::make_select(ir::make_binary(ir::Op::Gt, pos, ir::make_int(0)), h, self);
    ir::Expr partial = st.value->args[1];
    wb.body = ir::make_store(st.buffer, st.indices, combine(reducer, repaired, partial));
    tmp.program_.body = replace_at(wpath, std::make_shared<const ir::StmtNode>(std::move(wb)));
  }
  nlohmann::json entry = {{"primitive", P}, {"block", block}, {"loop", loop_json(loop)}};
  if (repair.kind == algebra::RepairResult::Kind::Derived)
    entry["repair"] = algebra::to_math(repair.h_unguarded);
  commit(tmp.program_, entry);
}

void replay_rolling_update(Schedule& s, const nlohmann::json& j) {
  s.rolling_update(j.at("block").get<std::string>(), loop_arg(j.at("loop")));
}

}  // namespace kintsugi::schedule
