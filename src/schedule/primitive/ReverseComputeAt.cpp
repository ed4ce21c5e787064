// \file ReverseComputeAt.cpp
// reverse_compute_at(block, loop): moves a consumer's loop nest to the end of `loop`'s body
// (loop belongs to a producer nest) and restricts it to what one iteration of `loop` produced.
// The consumer must read each produced buffer at its own iteration variables; a reduction
// consumer whose reduction variable is restricted this way accumulates tile by tile (its init
// still runs once, when the reduction variable is 0).
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

void Schedule::reverse_compute_at_box(const std::string& block, const LoopRef& loop,
                                      const std::map<std::string, Range>& extra,
                                      const std::map<std::string, std::string>& aliases) {
  const std::string P = "reverse_compute_at";
  size_t nest = sole_nest_of(program_, block, P);
  StmtPath lpath = find_loop(program_.body, loop, P);
  size_t lnest = root_index(program_, lpath);
  if (lnest == nest)
    throw ScheduleError(P, "loop '" + loop.var + "' belongs to block '" + block + "' itself");
  if (lnest > nest)
    throw ScheduleError(P, "block '" + block + "' comes before loop '" + loop.var +
                               "'; reverse_compute_at moves a consumer into an earlier producer");
  const ir::StmtNode& c = *find_block(program_.body, block, P).back();
  const ir::StmtNode& l = *lpath.back();
  // Buffers the consumer reads that are written under the loop; none may be written between.
  std::set<std::string> produced;
  for (const ir::StmtNode* w : blocks_under(l.body))
    for (const std::string& b : block_writes(*w)) produced.insert(b);
  std::set<std::string> reads = block_reads(c);
  for (size_t k = lnest + 1; k < nest; ++k)
    for (const ir::StmtNode* w : blocks_under(program_.body->stmts[k]))
      for (const std::string& b : block_writes(*w))
        if (reads.count(b))
          throw ScheduleError(P, "block '" + block + "' reads '" + b + "', which block '" +
                                     w->name + "' writes after loop '" + loop.var + "'");
  std::map<std::string, Range> box;
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
          const ir::Expr& i = x->args[d];
          if (i->op != ir::Op::Var)
            throw ScheduleError(P, "block '" + block + "' reads " + ir::to_string(x) +
                                       " at a computed index; it must read what loop '" + loop.var +
                                       "' produces at its own iteration variables");
          auto it = box.find(i->name);
          if (it != box.end() && !(ir::equal(it->second.min, region[d].min) &&
                                   ir::equal(it->second.extent, region[d].extent)))
            throw ScheduleError(P, "block '" + block +
                                       "' reads produced buffers at inconsistent positions (" +
                                       i->name + ")");
          box[i->name] = region[d];
        }
        return true;
      });
    });
  }
  if (!any)
    throw ScheduleError(
        P, "block '" + block + "' reads nothing that loop '" + loop.var + "' produces");
  for (const auto& [name, r] : extra) box[name] = r;
  ir::LoopProgram p =
      move_nest_into_loop(program_, lpath, nest_over_box(*this, c, box), false, nest);
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"loop", loop_json(loop)}});
}

void replay_reverse_compute_at(Schedule& s, const nlohmann::json& j) {
  s.reverse_compute_at(j.at("block").get<std::string>(), loop_arg(j.at("loop")));
}

}  // namespace kintsugi::schedule
