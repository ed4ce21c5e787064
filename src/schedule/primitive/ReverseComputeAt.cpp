// \file ReverseComputeAt.cpp
// reverse_compute_at(block, loop): moves a consumer's loop nest to the end of `loop`'s body
// (loop belongs to a producer nest) and restricts it to what one iteration of `loop` produced.
// The consumer must read each produced buffer at its own iteration variables, or at one of them
// plus an offset that the loops around both fix (a split-K chunk's partial reads its chunk at
// j0 * C + a); a reduction consumer whose reduction variable is restricted this way accumulates
// tile by tile (its init still runs once, when the reduction variable is 0). The two nests are
// siblings in a sequence: the program's, or a loop body's (the nests of a split-K chunk), where
// the consumer's iteration variables bound to the loops around that sequence keep their values.
#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/ComputeAt.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

void Schedule::reverse_compute_at(const std::string& block, const LoopRef& loop) {
  reverse_compute_at_box(block, loop, {});
}

namespace {

// The deepest sequence that both paths pass through, and the indices of its children on them.
struct Siblings {
  size_t depth = 0;  // of the sequence on both paths
  size_t nest = 0, lnest = 0;
};

Siblings siblings_of(const StmtPath& bpath, const StmtPath& lpath, const std::string& block,
                     const std::string& loop, const std::string& P) {
  size_t common = 0;
  while (common + 1 < bpath.size() && common + 1 < lpath.size() &&
         bpath[common + 1] == lpath[common + 1])
    ++common;
  size_t d = common;
  while (d > 0 && bpath[d]->kind != ir::StmtKind::Seq) --d;
  if (bpath[d]->kind != ir::StmtKind::Seq || d + 1 >= bpath.size() || d + 1 >= lpath.size())
    throw ScheduleError(P, "block '" + block + "' is not in a loop nest of its own");
  if (bpath[d + 1] == lpath[d + 1])
    throw ScheduleError(P, "loop '" + loop + "' belongs to block '" + block + "' itself");
  Siblings out;
  out.depth = d;
  const auto& kids = bpath[d]->stmts;
  for (size_t k = 0; k < kids.size(); ++k) {
    if (kids[k].get() == bpath[d + 1]) out.nest = k;
    if (kids[k].get() == lpath[d + 1]) out.lnest = k;
  }
  auto blocks = blocks_under(kids[out.nest]);
  if (blocks.size() != 1)
    throw ScheduleError(P, "block '" + block + "' shares its loop nest with block '" +
                               (blocks[0]->name == block ? blocks[1]->name : blocks[0]->name) +
                               "'");
  return out;
}

// The iteration variable v of `block` that `index` is v + offset of, offset free of v; "" when
// there is none. `offset` receives the offset.
std::string shifted_variable(const ir::StmtNode& block, const ir::Expr& index, ir::Expr* offset) {
  if (index->op == ir::Op::Var) {
    *offset = ir::make_int(0);
    return index->name;
  }
  for (const ir::IterVar& iv : block.iters) {
    if (!ir::uses_var(index, iv.name)) continue;
    ir::Expr o = ir::simplify(ir::make_binary(ir::Op::Sub, index, var(iv.name)));
    if (ir::uses_var(o, iv.name)) continue;
    *offset = o;
    return iv.name;
  }
  return "";
}

}  // namespace

void Schedule::reverse_compute_at_box(const std::string& block, const LoopRef& loop,
                                      const std::map<std::string, Range>& extra,
                                      const std::map<std::string, std::string>& aliases) {
  const std::string P = "reverse_compute_at";
  StmtPath bpath = find_block(program_.body, block, P);
  StmtPath lpath = find_loop(program_.body, loop, P);
  Siblings sib = siblings_of(bpath, lpath, block, loop.var, P);
  const ir::StmtNode& seq = *bpath[sib.depth];
  if (sib.lnest > sib.nest)
    throw ScheduleError(P, "block '" + block + "' comes before loop '" + loop.var +
                               "'; reverse_compute_at moves a consumer into an earlier producer");
  // The loops around the sequence: they fix what they bind in both nests.
  std::set<std::string> around;
  for (size_t k = 0; k < sib.depth; ++k)
    if (bpath[k]->kind == ir::StmtKind::For) around.insert(bpath[k]->var);
  auto fixed_around = [&](const ir::Expr& e) {
    bool only = true;
    ir::visit(e, [&](const ir::Expr& x) {
      if (x->op == ir::Op::Var && x->var_kind == ir::VarKind::Index && !around.count(x->name))
        only = false;
      return true;
    });
    return only;
  };
  const ir::StmtNode& c = *bpath.back();
  const ir::StmtNode& l = *lpath.back();
  // Buffers the consumer reads that are written under the loop; none may be written between.
  std::set<std::string> produced;
  for (const ir::StmtNode* w : blocks_under(l.body))
    for (const std::string& b : block_writes(*w)) produced.insert(b);
  std::set<std::string> reads = block_reads(c);
  for (size_t k = sib.lnest + 1; k < sib.nest; ++k)
    for (const ir::StmtNode* w : blocks_under(seq.stmts[k]))
      for (const std::string& b : block_writes(*w))
        if (reads.count(b))
          throw ScheduleError(P, "block '" + block + "' reads '" + b + "', which block '" +
                                     w->name + "' writes after loop '" + loop.var + "'");
  std::map<std::string, Range> box;
  for (const ir::IterVar& iv : c.iters)
    if (iv.binding->op == ir::Op::Var && around.count(iv.binding->name))
      box[iv.name] = Range{iv.binding, ir::make_int(1)};
  bool any = false;
  for (const std::string& buf : reads) {
    // A read through an alias (a value that will become a produced buffer's partial) is placed
    // by the region of that buffer's dimensions other than the partial's own, which the loop
    // variable indexes.
    std::string source = aliases.count(buf) ? aliases.at(buf) : buf;
    if (!produced.count(source) || block_writes(c).count(buf)) continue;
    std::vector<Range> region;
    if (!access_region(l.body, program_, source, true, &region)) continue;
    if (aliases.count(buf))
      std::erase_if(region, [&](const Range& r) {
        return r.min->op == ir::Op::Var && r.min->name == l.var &&
               ir::equal(ir::simplify(r.extent), ir::make_int(1));
      });
    any = true;
    ir::visit_exprs(c.body, [&](const ir::Expr& e) {
      ir::visit(e, [&](const ir::Expr& x) {
        if (x->op != ir::Op::Load || x->name != buf) return true;
        for (size_t d = 0; d < x->args.size(); ++d) {
          ir::Expr offset;
          std::string v = shifted_variable(c, x->args[d], &offset);
          ir::Expr loop_offset = v.empty() ? nullptr : in_loop_terms(c, offset);
          if (v.empty() || !fixed_around(loop_offset))
            throw ScheduleError(P, "block '" + block + "' reads " + ir::to_string(x) +
                                       " at a computed index; it must read what loop '" + loop.var +
                                       "' produces at its own iteration variables");
          Range r{ir::simplify(ir::make_binary(ir::Op::Sub, region[d].min, loop_offset)),
                  region[d].extent};
          auto it = box.find(v);
          if (it != box.end() &&
              !(ir::equal(it->second.min, r.min) && ir::equal(it->second.extent, r.extent)))
            throw ScheduleError(P, "block '" + block +
                                       "' reads produced buffers at inconsistent positions (" + v +
                                       ")");
          box[v] = r;
        }
        return true;
      });
    });
  }
  // A sibling (a reduction over the same axis that reads nothing the loop produces, such as the
  // second of two softmaxes of the same rows) is placed by the box it was given along the axis
  // and, for each other variable, by the one loop around `loop` of the same extent (none or
  // several: refused). The placement is checked by execution like every other.
  if (!any && !extra.empty()) {
    std::set<std::string> used;
    bool placed = true;
    for (const ir::IterVar& iv : c.iters) {
      if (box.count(iv.name) || extra.count(iv.name)) continue;
      std::vector<std::string> same;
      for (size_t k = 0; k + 1 < lpath.size(); ++k)
        if (lpath[k]->kind == ir::StmtKind::For && !used.count(lpath[k]->var) &&
            ir::provably_equal(lpath[k]->extent, iv.extent) &&
            ir::equal(lpath[k]->min, ir::make_int(0)))
          same.push_back(lpath[k]->var);
      if (same.size() != 1) {
        placed = false;
        break;
      }
      used.insert(same[0]);
      box[iv.name] = Range{var(same[0]), ir::make_int(1)};
    }
    any = placed;
  }
  if (!any)
    throw ScheduleError(
        P, "block '" + block + "' reads nothing that loop '" + loop.var + "' produces");
  for (const auto& [name, r] : extra) box[name] = r;
  // The consumer's nest goes to the end of the loop's body and leaves the sequence.
  ir::StmtNode nl = l;
  nl.body = ir::make_seq({nl.body, nest_over_box(*this, c, box)});
  ir::LoopProgram p = program_;
  p.body = replace_at(lpath, std::make_shared<const ir::StmtNode>(std::move(nl)));
  const ir::StmtNode* old_nest = seq.stmts[sib.nest].get();
  p.body = ir::mutate(p.body, [&](const ir::Stmt& n) -> ir::Stmt {
    if (n->kind != ir::StmtKind::Seq) return n;
    ir::StmtNode q = *n;
    auto it = std::find_if(q.stmts.begin(), q.stmts.end(),
                           [&](const ir::Stmt& k) { return k.get() == old_nest; });
    if (it == q.stmts.end()) return n;
    q.stmts.erase(it);
    return std::make_shared<const ir::StmtNode>(std::move(q));
  });
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"loop", loop_json(loop)}});
}

void replay_reverse_compute_at(Schedule& s, const nlohmann::json& j) {
  s.reverse_compute_at(j.at("block").get<std::string>(), loop_arg(j.at("loop")));
}

}  // namespace kintsugi::schedule
