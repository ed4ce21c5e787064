// \file SplitKUpdate.cpp
// split_k_update(block, loop): Neptune's Split-K Update, the compiler-derived FlashDecoding.
// Where rolling_update makes `loop` a sequential scan, split_k_update keeps it data-parallel:
// every iteration (a chunk of the reduction axis) computes local partials against the chunk's
// own producer values, and a combine nest after the loop merges them, repairing each partial
// with the derived h against the producer's global value (Theorem 4.4):
//
//   chunk j0:  m.rf[j0] = max_j1 c;  l.rf[j0] = sum_j1 exp(c - m.rf[j0])
//   combine:   m = max_j0 m.rf[j0];  l = sum_j0 h(l.rf[j0], m.rf[j0], m)   (h = t * exp(x - x'))
//
// Steps: (1) the producers of `block` that an earlier split_k_update already split at `loop`
// (their write-back reduces rf partials over `loop`) form the frontier; (2) the elementwise
// blocks in between read the frontier's chunk-local partial instead of its global value and
// move under `loop` (cloned when others still read them), as does `block`; (3) the algebra
// engine derives h, possibly with an augmented state (Welford), whose statistics are then summed
// per chunk next to `block` (add_statistic, rfactor) and passed to h with the chunk's partial;
// (4) rfactor at `loop`; (5) the write-back moves out of the loop into a combine nest placed
// before the first later reader, and applies h to each partial. A chunk whose producer partial
// is still its reducer's identity (fully masked) while the producer's global value is not
// contributes the identity, when h annihilates such contributions (checked numerically).
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

const char* kChunk = "__chunk";
// Where the chunk axis goes in a partial buffer: first, so one chunk's partials are contiguous
// (a row of a partial output is written, and combined, as one run; Neptune's factor_axis 0).
constexpr int kChunkAxis = 0;

// The rf buffer a write-back block combines over `loop_var`, or "" when it is not one. A repaired
// write-back also reads the partials of its producers by chunk (in h); its own partial is the one
// rfactor named after its buffer (`<buffer>.rf`, or a fresh `<buffer>.rf_<k>`).
std::string rf_of(const ir::StmtNode& wb, const std::string& loop_var) {
  ir::Reducer r;
  ir::Expr g;
  if (!wb.body || !match_reduction_update(*wb.body, &r, &g)) return "";
  const ir::IterVar* red = nullptr;
  for (const ir::IterVar& iv : wb.iters)
    if (iv.kind == ir::IterKind::Reduce) red = &iv;
  if (!red || !(red->binding->op == ir::Op::Var && red->binding->name == loop_var)) return "";
  std::vector<std::string> rfs;
  ir::visit(g, [&](const ir::Expr& x) {
    if (x->op == ir::Op::Load && !x->args.empty() && x->args[kChunkAxis]->op == ir::Op::Var &&
        x->args[kChunkAxis]->name == red->name &&
        std::find(rfs.begin(), rfs.end(), x->name) == rfs.end())
      rfs.push_back(x->name);
    return true;
  });
  if (rfs.size() <= 1) return rfs.empty() ? "" : rfs.front();
  const std::string own = wb.body->buffer + ".rf";
  for (const std::string& rf : rfs)
    if (rf == own || rf.rfind(own + "_", 0) == 0) return rf;
  return "";
}

}  // namespace

void Schedule::split_k_update(const std::string& block, const LoopRef& loop) {
  const std::string P = "split_k_update";
  Schedule tmp(program_);
  find_block(program_.body, block, P);
  StmtPath lpath0 = find_loop(program_.body, loop, P);
  const ir::StmtNode& l0 = *lpath0.back();
  const std::string lv = l0.var;
  // (1) Frontier: write-backs over `loop` of earlier split-K updates, and the elementwise blocks
  // between them and `block`.
  std::map<std::string, std::string> frontier;  // global buffer -> its rf buffer
  std::vector<std::string> between;
  {
    std::set<std::string> found;
    find_frontier(
        program_, *find_block(program_.body, block, P).back(),
        [&](const ir::StmtNode& prod) { return !rf_of(prod, lv).empty(); }, &found, &between);
    auto w = block_writers(program_.body);
    for (const std::string& g : found) frontier[g] = rf_of(*w.at(g), lv);
  }
  const ir::StmtNode& target0 = *find_block(program_.body, block, P).back();
  const ir::IterVar* axis = nullptr;
  for (const ir::IterVar& iv : target0.iters)
    if (iv.kind != ir::IterKind::Spatial) {
      if (axis) throw ScheduleError(P, "block '" + block + "' reduces over several variables");
      axis = &iv;
    }
  if (!axis) throw ScheduleError(P, "block '" + block + "' is not a reduction");
  // (2) Fused blocks read the chunk-local partial of each frontier buffer: mark the reads with a
  // placeholder until the blocks sit under the loop.
  std::set<std::string> fused(between.begin(), between.end());
  fused.insert(block);
  std::map<std::string, std::string> renamed;
  // Consumers first: a block cloned for its later readers stays outside the loop and reads the
  // global values of what it depends on, so its producers among `between` are cloned too.
  for (auto rit = between.rbegin(); rit != between.rend(); ++rit) {
    const std::string name = *rit;
    const ir::StmtNode& b = *find_block(tmp.program_.body, name, P).back();
    ElementwiseBlock eb = match_elementwise(tmp.program_, b, P);
    bool others = false;
    for (const ir::StmtNode* r : blocks_under(tmp.program_.body))
      if (!fused.count(r->name) && r != &b && block_reads(*r).count(eb.buffer)) others = true;
    if (!others) continue;
    std::string nb = tmp.fresh_name(name + ".sk"), nbuf = tmp.fresh_name(eb.buffer + ".sk");
    const ir::StmtNode* nest = find_block(tmp.program_.body, name, P)[1];
    size_t idx = 0;
    for (; idx < tmp.program_.body->stmts.size(); ++idx)
      if (tmp.program_.body->stmts[idx].get() == nest) break;
    ir::Stmt clone = ir::mutate(tmp.program_.body->stmts[idx], [&](const ir::Stmt& n) -> ir::Stmt {
      ir::StmtNode c = *n;
      if (c.kind == ir::StmtKind::Block && c.name == name) c.name = nb;
      if (c.kind == ir::StmtKind::Store && c.buffer == eb.buffer) c.buffer = nbuf;
      return std::make_shared<const ir::StmtNode>(std::move(c));
    });
    ir::StmtNode root = *tmp.program_.body;
    root.stmts.insert(root.stmts.begin() + static_cast<long>(idx) + 1, clone);
    tmp.program_.body = std::make_shared<const ir::StmtNode>(std::move(root));
    ir::Buffer copy = *tmp.program_.find_buffer(eb.buffer);
    copy.name = nbuf;
    tmp.program_.buffers.push_back(copy);
    renamed[eb.buffer] = nbuf;
    fused.erase(name);
    fused.insert(nb);
    std::replace(between.begin(), between.end(), name, nb);
  }
  std::map<std::string, std::string> placeholder;
  for (const auto& [g, rf] : frontier) placeholder[g] = g + ".local";
  tmp.program_.body = ir::mutate(tmp.program_.body, [&](const ir::Stmt& n) -> ir::Stmt {
    if (n->kind != ir::StmtKind::Block || !fused.count(n->name)) return n;
    ir::StmtNode c = *n;
    auto fix = [&](const ir::Stmt& part) {
      return part ? ir::mutate_exprs(
                        part,
                        [&](const ir::Expr& e) -> ir::Expr {
                          if (e->op != ir::Op::Load) return e;
                          if (renamed.count(e->name))
                            return ir::make_load(renamed.at(e->name), e->type, e->args);
                          if (placeholder.count(e->name))
                            return ir::make_load(placeholder.at(e->name), e->type, e->args);
                          return e;
                        })
                  : part;
    };
    c.init = fix(c.init);
    c.body = fix(c.body);
    return std::make_shared<const ir::StmtNode>(std::move(c));
  });
  // Move the fused blocks under the loop, restricted to the chunk of the axis.
  Range tile;
  if (!find_axis_tile(program_, l0, target0, *axis, &tile))
    throw ScheduleError(P, "loop '" + lv + "' does not tile an axis of extent " +
                               ir::to_string(axis->extent) + " (the reduction axis of block '" +
                               block + "'); split that axis and use the outer loop");
  std::map<std::string, AxisIteration> axis_iter =
      axis_iterations(tmp.program(), block, axis->name, between);
  for (const std::string& name : between) {
    std::map<std::string, Range> box = axis_box(axis_iter, name, tile);
    std::map<std::string, std::string> aliases;
    for (const auto& [g, ph] : placeholder) aliases[ph] = frontier.at(g);
    tmp.reverse_compute_at_box(name, LoopRef{loop.block, lv}, box, aliases);
  }
  {
    const ir::StmtNode* lp = find_loop(tmp.program_.body, LoopRef{loop.block, lv}, P).back();
    bool under = false;
    for (const ir::StmtNode* u : blocks_under(lp->body)) under |= u->name == block;
    if (!under) tmp.reverse_compute_at_box(block, LoopRef{loop.block, lv}, {{axis->name, tile}});
  }
  for (const auto& [g, ph] : placeholder) {
    StmtPath lp = find_loop(tmp.program_.body, LoopRef{loop.block, lv}, P);
    ir::StmtNode nl = *lp.back();
    std::string rf = frontier.at(g);
    nl.body = read_loop_position(
        nl.body, lv, nl.extent,
        [&](const ir::Expr& load, const ir::Expr& position) {
          std::vector<ir::Expr> idx = load->args;
          idx.insert(idx.begin() + kChunkAxis, position);
          return ir::make_load(rf, load->type, idx);
        },
        ph);
    tmp.program_.body = replace_at(lp, std::make_shared<const ir::StmtNode>(std::move(nl)));
  }
  // (3) The repair: the term with the fused elementwise blocks inlined, rf loads incomplete.
  const ir::StmtNode& target = *find_block(tmp.program_.body, block, P).back();
  ir::Reducer reducer;
  ir::Expr term;
  if (!target.body || !match_reduction_update(*target.body, &reducer, &term))
    throw ScheduleError(P, "block '" + block + "' is not a reduction x[...] = x[...] op g");
  std::set<std::string> rf_bufs;
  for (const auto& [g, rf] : frontier) rf_bufs.insert(rf);
  auto writers_now = block_writers(tmp.program_.body);
  std::function<ir::Expr(const ir::Expr&)> expand = [&](const ir::Expr& e) -> ir::Expr {
    return ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
      if (n->op != ir::Op::Load || rf_bufs.count(n->name) || !writers_now.count(n->name)) return n;
      const ir::StmtNode* prod = writers_now.at(n->name);
      // A fused block, or its chunk-local copy (what a producer's own partial reads).
      if (std::none_of(between.begin(), between.end(), [&](const std::string& b) {
            return prod->name == b || prod->name.rfind(b + ".sk", 0) == 0;
          }))
        return n;
      const ir::StmtNode& st = *prod->body;
      std::map<std::string, ir::Expr> sub;
      for (size_t d = 0; d < st.indices.size(); ++d) sub[st.indices[d]->name] = n->args[d];
      for (const ir::IterVar& iv : prod->iters)
        if (!sub.count(iv.name)) sub[iv.name] = var(kChunk);
      return expand(ir::substitute(st.value, sub));
    });
  };
  algebra::RepairRequest req;
  req.reducer = reducer;
  req.term = expand(term);
  req.incomplete = rf_bufs;
  req.facts = repair_facts(program_);
  for (const auto& [producer, running] : frontier)
    if (req.facts.count(producer)) req.facts.emplace(running, req.facts.at(producer));
  req.allow_augmented_state = true;
  req.axis = axis->name;
  const ir::Expr inner_position = ir::make_binary(
      ir::Op::Sub, ir::make_var(axis->name, ir::VarKind::Index, DType::Int), tile.min);
  req.running_sums = running_terms(tmp.program_, rf_bufs, ir::Reducer::Sum, inner_position, lv,
                                   var(kChunk), expand);
  req.running_extrema =
      running_extrema(tmp.program_, rf_bufs, inner_position, lv, var(kChunk), expand);
  algebra::RepairResult repair = algebra::derive_repair(req);
  if (repair.kind == algebra::RepairResult::Kind::Refused)
    throw ScheduleError(
        P, "block '" + block + "' cannot be split at loop '" + lv + "': " + repair.reason);
  if (std::string pole =
          repair_pole(repair, req.incomplete, partial_facts(program_, req.facts, frontier));
      !pole.empty())
    throw ScheduleError(P, "block '" + block + "' cannot be split at loop '" + lv + "': " + pole);
  // An augmented state: a chunk's sum it re-bases about is read extrapolated to the whole axis
  // (Fusion.h), over the chunk's own elements.
  std::map<std::string, std::string> extrapolated;  // incomplete value name -> rf buffer
  auto factor = [&](const ir::Expr& chunk, DType type) {
    ir::Expr start = ir::substitute(tile.min, {{lv, chunk}});
    ir::Expr end = ir::make_binary(ir::Op::Min, ir::make_binary(ir::Op::Add, start, tile.extent),
                                   axis->extent);
    return extrapolation_factor(axis->extent, ir::make_binary(ir::Op::Sub, end, start), type);
  };
  if (!repair.statistics.empty()) {
    auto writers = block_writers(tmp.program_.body);
    for (const auto& [g, rf] : frontier) {
      ir::Reducer pr;
      ir::Expr pg;
      if (match_reduction_update(*writers.at(g)->body, &pr, &pg) && pr == ir::Reducer::Sum)
        extrapolated[rf + ".extrapolated"] = rf;
    }
  }
  if (!extrapolated.empty()) {
    std::set<std::string> sums;
    for (const auto& [x, rf] : extrapolated) sums.insert(rf);
    req.term = extrapolate_sum_reads(
        tmp.program_, find_loop(tmp.program_.body, LoopRef{loop.block, lv}, P), sums,
        [&](const ir::Expr& load) { return factor(load->args[kChunkAxis], load->type); }, req.term);
    req.incomplete.clear();
    for (const std::string& rf : rf_bufs)
      req.incomplete.insert(sums.count(rf) ? rf + ".extrapolated" : rf);
    repair = algebra::derive_repair(req);
    if (repair.kind == algebra::RepairResult::Kind::Refused)
      throw ScheduleError(
          P, "block '" + block + "' cannot be split at loop '" + lv + "': " + repair.reason);
  }
  // An augmented state: each statistic is summed per chunk alongside the block; the combine
  // repairs a chunk's partial with the chunk's statistics, so their write-backs are dropped.
  std::map<std::string, std::string> statistic_partials;  // statistic variable -> rf buffer
  refuse_masked_infinite_statistics(tmp.program_, repair, P,
                                    "block '" + block + "' cannot be split at loop '" + lv + "'");
  for (const algebra::AugmentedStatistic& stat : repair.statistics) {
    std::string sb;
    tmp.program_ = add_statistic(tmp, block, LoopRef{loop.block, lv}, stat, kChunk, P, &sb);
    std::string rf = tmp.rfactor(sb, LoopRef{sb, lv}, kChunkAxis);
    statistic_partials[stat.var] =
        *block_writes(*find_block(tmp.program_.body, rf, P).back()).begin();
    StmtPath sw = find_block(tmp.program_.body, sb, P);
    std::string total = sw.back()->body->buffer;
    tmp.program_.body = replace_at(sw, nullptr);
    remove_buffer(tmp.program_, total);
  }
  // (4) Partials per chunk.
  tmp.rfactor(block, LoopRef{block, lv}, kChunkAxis);
  // (5) The write-back leaves the loop for a combine nest and repairs each partial.
  StmtPath wpath = find_block(tmp.program_.body, block, P);
  ir::StmtNode wb = *wpath.back();
  const ir::StmtNode& st = *wb.body;
  ir::Expr partial = st.value->args[1];
  ir::Expr self = st.value->args[0];
  if (repair.kind == algebra::RepairResult::Kind::Derived) {
    std::map<std::string, ir::Expr> sub{{"t", partial}};
    ir::Expr at_identity;
    std::map<std::string, ir::Reducer> moves;  // old variable -> its producer's max or min
    for (const algebra::IncompleteValue& v : repair.values) {
      ir::Expr local = ir::substitute(v.load, {{kChunk, var(lv)}});
      // The global value: the rf load without its chunk index, read from the global buffer (in
      // a composite value, max(SINK[h], m.rf[..]), the rf load inside it).
      const ir::Expr rf_load = algebra::incomplete_load(v.load, req.incomplete);
      std::string global, rf_name = rf_load->name;
      if (auto x = extrapolated.find(rf_name); x != extrapolated.end()) {
        if (rf_load != v.load)
          throw ScheduleError(P, "block '" + block + "' repairs " + algebra::to_math(v.load) +
                                     ", a max or min of a sum that is extrapolated");
        rf_name = x->second;
        local = ir::make_binary(ir::Op::Mul, ir::make_load(rf_name, local->type, local->args),
                                factor(local->args[kChunkAxis], local->type));
      }
      for (const auto& [g, rf] : frontier)
        if (rf == rf_name) global = g;
      std::vector<ir::Expr> gidx = rf_load->args;
      gidx.erase(gidx.begin() + kChunkAxis);
      ir::Expr global_load = ir::make_load(global, rf_load->type, gidx);
      sub[v.old_var] = local;
      sub[v.new_var] = ir::mutate(
          v.load, [&](const ir::Expr& n) { return ir::equal(n, rf_load) ? global_load : n; });
      const ir::StmtNode* prod = writers_now.at(global);
      ir::Reducer pr;
      ir::Expr pg;
      if (!match_reduction_update(*prod->body, &pr, &pg)) continue;
      if (pr == ir::Reducer::Sum && repair_exponentiates(repair, v))
        throw ScheduleError(P, "block '" + block + "' cannot be split at loop '" + lv +
                                   "': the repair exponentiates " + global +
                                   ", a sum whose partials can be far from the row's (exp " +
                                   "overflows or underflows where the program's does not)");
      // A producer repaired itself (its combine reads more than its partial) moves either way.
      if (pg->op == ir::Op::Load && pg->name == rf_name) {
        if (pr == ir::Reducer::Max || pr == ir::Reducer::Min) moves[v.old_var] = pr;
        if (pr == ir::Reducer::Sum && req.facts.count(global)) moves[v.old_var] = pr;
      }
      if (mask_makes_producer_infinite(tmp.program_, global, pr))
        throw ScheduleError(P, "block '" + block + "' cannot be split at loop '" + lv +
                                   "': a masked element makes " + global +
                                   " infinite, and the repair cannot re-base a chunk's terms " +
                                   "from a finite value to an infinite one");
      double id = ir::reducer_identity(pr, tmp.program_.find_buffer(global)->dtype);
      if (extrapolated.count(v.load->name)) continue;  // a sum: its identity needs no guard
      bool annihilates = repair_annihilates_identity(repair, v, id);
      if (!annihilates && !repair.exact_at_identity && pr != ir::Reducer::Sum &&
          producer_masked(tmp.program_, global, pr))
        throw ScheduleError(P, "block '" + block + "' cannot be split at loop '" + lv +
                                   "': a chunk that the mask hides from " + global +
                                   " leaves it at " + ir::format_double(id) +
                                   ", from which the repair cannot re-base the chunk's terms");
      if (annihilates &&
          !identity_guard_sound(tmp.program_, global, pr, term, reducer, renamed, inner_position))
        throw ScheduleError(P, "block '" + block + "' cannot be split at loop '" + lv +
                                   "': on a chunk where " + global +
                                   " is still its identity its terms are not " +
                                   ir::format_double(ir::reducer_identity(reducer)) +
                                   " (they read what the mask hides from it), so the repair " +
                                   "can neither keep nor drop them");
      if (annihilates) {
        // Only where the global value moved off the identity: a row whose producer is the
        // identity everywhere (fully masked) keeps h's value, as the program's own terms do
        // (exp(-inf - -inf) is NaN).
        ir::Expr is_id = ir::make_binary(
            ir::Op::And,
            ir::make_binary(ir::Op::Eq, local, ir::reducer_identity_expr(pr, local->type)),
            ir::make_binary(ir::Op::Ne, sub[v.new_var],
                            ir::reducer_identity_expr(pr, local->type)));
        at_identity = at_identity ? ir::make_binary(ir::Op::Or, at_identity, is_id) : is_id;
      }
    }
    for (const auto& [stat, rf] : statistic_partials) {
      std::vector<ir::Expr> idx = st.indices;
      idx.insert(idx.begin() + kChunkAxis, var(lv));
      sub[stat] = ir::make_load(rf, self->type, idx);
    }
    // In f32 where the block's type is narrower, as its partials are (rfactor).
    ir::Expr h = ir::widen_to_f32(ir::substitute(repair.h, sub));
    partial = guard_scaled_partial(repair, moves, partial, h, P,
                                   "block '" + block + "' cannot be split at loop '" + lv + "'");
    if (at_identity)
      partial =
          ir::make_select(at_identity, reducer_identity_expr(reducer, partial->type), partial);
  }
  wb.body = ir::make_store(st.buffer, st.indices, combine(reducer, self, partial));
  // Its nest: the loops of its path that drive its iteration variables, in order.
  ir::Stmt nest = std::make_shared<const ir::StmtNode>(wb);
  std::vector<const ir::StmtNode*> loops = loops_on(wpath);
  for (auto it = loops.rbegin(); it != loops.rend(); ++it) {
    bool used = false;
    for (const ir::IterVar& iv : wb.iters) used |= ir::uses_var(iv.binding, (*it)->var);
    if (wb.predicate) used |= ir::uses_var(wb.predicate, (*it)->var);
    if (used) nest = ir::make_for((*it)->var, (*it)->min, (*it)->extent, ir::ForKind::Serial, nest);
  }
  ir::LoopProgram p = tmp.program_;
  p.body = replace_at(wpath, nullptr);
  // Before the first later root statement that reads the result.
  ir::StmtNode root = *p.body;
  size_t at = root.stmts.size();
  size_t loop_nest = 0;
  for (size_t k = 0; k < root.stmts.size(); ++k)
    if (!blocks_under(root.stmts[k]).empty())
      for (const ir::StmtNode* b : blocks_under(root.stmts[k]))
        if (b->name == loop.block) loop_nest = k;
  for (size_t k = loop_nest + 1; k < root.stmts.size() && at == root.stmts.size(); ++k)
    for (const ir::StmtNode* b : blocks_under(root.stmts[k]))
      if (block_reads(*b).count(st.buffer)) at = k;
  root.stmts.insert(root.stmts.begin() + static_cast<long>(at), nest);
  p.body = std::make_shared<const ir::StmtNode>(std::move(root));
  nlohmann::json entry = {{"primitive", P}, {"block", block}, {"loop", loop_json(loop)}};
  if (repair.kind == algebra::RepairResult::Kind::Derived)
    entry["repair"] = algebra::to_math(repair.h_unguarded);
  commit(std::move(p), entry);
}

void replay_split_k_update(Schedule& s, const nlohmann::json& j) {
  s.split_k_update(j.at("block").get<std::string>(), loop_arg(j.at("loop")));
}

}  // namespace kintsugi::schedule
