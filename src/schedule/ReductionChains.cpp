// \file ReductionChains.cpp
// Reduction chains and their repairs (see ReductionChains.h).
#include "schedule/ReductionChains.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "ir/Printer.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"

namespace kintsugi::schedule {

namespace {

using ir::Expr;
using ir::Op;

// What the analysis needs to know about each block of the unscheduled program.
struct BlockInfo {
  const ir::StmtNode* block = nullptr;
  bool is_reduction = false;
  ir::Reducer reducer = ir::Reducer::Sum;
  const ir::IterVar* reduce_iter = nullptr;  // set when exactly one reduce iter var
  std::vector<const ir::IterVar*> reduce_iters;
  Expr value;  // map: the stored value; reduction: the term g
};

std::map<std::string, BlockInfo> collect_blocks(const ir::LoopProgram& p,
                                                std::vector<std::string>* order) {
  std::map<std::string, BlockInfo> out;
  ir::visit(p.body, [&](const ir::Stmt& s) {
    if (s->kind != ir::StmtKind::Block) return true;
    BlockInfo info;
    info.block = s.get();
    int reduce_count = 0;
    for (const ir::IterVar& iv : s->iters)
      if (iv.kind != ir::IterKind::Spatial) {
        ++reduce_count;
        info.reduce_iter = &iv;
        info.reduce_iters.push_back(&iv);
      }
    if (reduce_count != 1) info.reduce_iter = nullptr;
    const ir::Stmt& body = s->body;
    if (body->kind != ir::StmtKind::Store) return false;
    if (reduce_count > 0) {
      info.is_reduction = match_reduction_update(*body, &info.reducer, &info.value);
    } else {
      info.value = body->value;
    }
    out[body->buffer] = info;
    order->push_back(body->buffer);
    return false;
  });
  return out;
}

class ChainFinder {
 public:
  explicit ChainFinder(const ir::LoopProgram& p) : p_(p) { blocks_ = collect_blocks(p, &order_); }

  // Reductions over several axes that read an earlier reduction over axes of the same extents,
  // not indexed by them (see several_axis_chains).
  std::vector<SeveralAxisChain> several_axes() {
    std::vector<SeveralAxisChain> out;
    for (size_t k = 0; k < order_.size(); ++k) {
      const BlockInfo& t = blocks_.at(order_[k]);
      if (!t.is_reduction || t.reduce_iters.size() < 2) continue;
      auto same_extents = [&](const BlockInfo& b) {
        if (b.reduce_iters.size() != t.reduce_iters.size()) return false;
        for (size_t a = 0; a < b.reduce_iters.size(); ++a)
          if (!ir::equal(b.reduce_iters[a]->extent, t.reduce_iters[a]->extent)) return false;
        return true;
      };
      std::set<std::string> candidates;
      for (size_t e = 0; e < k; ++e)
        if (blocks_.at(order_[e]).is_reduction && same_extents(blocks_.at(order_[e])))
          candidates.insert(order_[e]);
      SeveralAxisChain c;
      c.target = order_[k];
      for (const ir::IterVar* iv : t.reduce_iters) c.axes.push_back(iv->name);
      std::set<std::string> read;
      ir::visit(inline_term(t.value, candidates), [&](const Expr& n) {
        if (n->op != Op::Load || !candidates.count(n->name)) return true;
        bool moves = false;
        for (const Expr& i : n->args)
          for (const std::string& a : c.axes) moves |= ir::uses_var(i, a);
        if (!moves) read.insert(n->name);
        return true;
      });
      c.producers.assign(read.begin(), read.end());
      if (!c.producers.empty()) out.push_back(c);
    }
    return out;
  }

  std::vector<ReductionChain> run() {
    std::vector<ReductionChain> out;
    for (size_t k = 0; k < order_.size(); ++k) {
      const BlockInfo& t = blocks_.at(order_[k]);
      if (!t.is_reduction || !t.reduce_iter) continue;
      out.push_back(analyze(order_[k], t, k));
    }
    return out;
  }

 private:
  const ir::LoopProgram& p_;
  std::map<std::string, BlockInfo> blocks_;
  std::vector<std::string> order_;

  // Producers among the reductions reachable from `e` through elementwise blocks.
  bool reaches_producer(const Expr& e, const std::set<std::string>& candidates,
                        std::set<std::string>& seen) {
    bool found = false;
    ir::visit(e, [&](const Expr& n) {
      if (n->op != Op::Load || found) return !found;
      if (candidates.count(n->name)) {
        found = true;
        return false;
      }
      auto it = blocks_.find(n->name);
      if (it == blocks_.end() || it->second.is_reduction || seen.count(n->name)) return true;
      seen.insert(n->name);
      found = reaches_producer(it->second.value, candidates, seen);
      return !found;
    });
    return found;
  }

  // Inlines elementwise blocks that reach a producer; the others stay loads.
  Expr inline_term(const Expr& e, const std::set<std::string>& candidates) {
    return ir::mutate(e, [&](const Expr& n) -> Expr {
      if (n->op != Op::Load || candidates.count(n->name)) return n;
      auto it = blocks_.find(n->name);
      if (it == blocks_.end() || it->second.is_reduction) return n;
      std::set<std::string> seen;
      if (!reaches_producer(it->second.value, candidates, seen)) return n;
      const ir::StmtNode& block = *it->second.block;
      const ir::StmtNode& store = *block.body;
      // The block stores at its own iteration variables: substitute them by the load's indices.
      std::map<std::string, Expr> sub;
      for (size_t d = 0; d < store.indices.size(); ++d) {
        const Expr& idx = store.indices[d];
        internal_assert(idx->op == Op::Var)
            << "elementwise block " << block.name << " stores at a computed index";
        sub[idx->name] = n->args[d];
      }
      return inline_term(ir::substitute(it->second.value, sub), candidates);
    });
  }

  ReductionChain analyze(const std::string& name, const BlockInfo& t, size_t position) {
    ReductionChain c;
    c.target = name;
    c.reducer = t.reducer;
    c.axis = t.reduce_iter->name;
    c.extent = t.reduce_iter->extent;
    // Candidate producers: earlier reductions over an axis of the same extent.
    std::set<std::string> candidates;
    for (size_t k = 0; k < position; ++k) {
      const BlockInfo& b = blocks_.at(order_[k]);
      if (b.is_reduction && b.reduce_iter && ir::equal(b.reduce_iter->extent, c.extent))
        candidates.insert(order_[k]);
    }
    c.term = inline_term(t.value, candidates);
    // A producer read at an index that moves with the target's axis is complete per element.
    std::set<std::string> incomplete;
    ir::visit(c.term, [&](const Expr& n) {
      if (n->op == Op::Load && candidates.count(n->name)) {
        bool moves = false;
        for (const Expr& i : n->args) moves |= ir::uses_var(i, c.axis);
        if (!moves) incomplete.insert(n->name);
      }
      return true;
    });
    c.producers.assign(incomplete.begin(), incomplete.end());
    algebra::RepairRequest req;
    req.reducer = c.reducer;
    req.term = c.term;
    req.incomplete = incomplete;
    req.allow_augmented_state = true;
    req.axis = c.axis;
    req.facts = repair_facts(p_);
    req.running_sums = running_terms(c, incomplete, candidates, ir::Reducer::Sum);
    for (ir::Reducer r : {ir::Reducer::Max, ir::Reducer::Min})
      for (auto& [buffer, element] : running_terms(c, incomplete, candidates, r))
        req.running_extrema[buffer] = {r, element};
    c.repair = algebra::derive_repair(req);
    return c;
  }

  // The term of each incomplete producer that reduces by `reducer`, in the target's variables:
  // its reduction variable is the target's, its other variables the indices the target reads it
  // at.
  std::map<std::string, Expr> running_terms(const ReductionChain& c,
                                            const std::set<std::string>& incomplete,
                                            const std::set<std::string>& candidates,
                                            ir::Reducer reducer) {
    std::map<std::string, Expr> out;
    for (const std::string& name : incomplete) {
      const BlockInfo& b = blocks_.at(name);
      if (b.reducer != reducer || !b.reduce_iter) continue;
      Expr load;
      ir::visit(c.term, [&](const Expr& n) {
        if (!load && n->op == Op::Load && n->name == name) load = n;
        return !load;
      });
      std::map<std::string, Expr> sub = {
          {b.reduce_iter->name, ir::make_var(c.axis, ir::VarKind::Index, DType::Int)}};
      const std::vector<Expr>& at = b.block->body->indices;
      for (size_t d = 0; d < at.size() && d < load->args.size(); ++d)
        if (at[d]->op == Op::Var) sub[at[d]->name] = load->args[d];
      out[name] = inline_term(ir::substitute(b.value, sub), candidates);
    }
    return out;
  }
};

}  // namespace

std::map<std::string, std::string> repair_facts(const ir::LoopProgram& program) {
  std::map<std::string, std::string> facts;
  for (const ir::Param& q : program.params)
    if (q.value > 0)
      facts[q.name] = "positive";
    else if (q.value >= 0)
      facts[q.name] = "nonnegative";
  for (const std::string& d : program.dims) facts[d] = "positive";
  std::vector<std::string> order;                   // buffers by their first writer
  std::map<std::string, std::vector<Expr>> stored;  // buffer -> the values its writers store
  for (const ir::StmtNode* b : blocks_under(program.body)) {
    if (!b->body || b->body->kind != ir::StmtKind::Store || !is_float(b->body->value->type))
      continue;
    ir::Reducer reducer;
    Expr term;
    const std::string& buffer = b->body->buffer;
    if (!stored.count(buffer)) order.push_back(buffer);
    stored[buffer].push_back(match_reduction_update(*b->body, &reducer, &term) ? term
                                                                               : b->body->value);
  }
  for (const std::string& buffer : order)
    for (const char* sign : {"positive", "nonnegative"}) {
      std::map<std::string, std::string> assumed = facts;
      assumed[buffer] = sign;
      bool holds =
          std::all_of(stored.at(buffer).begin(), stored.at(buffer).end(), [&](const Expr& v) {
            std::string s = algebra::sign_fact(v, assumed);
            return s == sign || s == "positive";
          });
      if (holds) {
        facts[buffer] = sign;
        break;
      }
    }
  return facts;
}

std::vector<ReductionChain> find_reduction_chains(const ir::LoopProgram& program) {
  return ChainFinder(program).run();
}

std::vector<SeveralAxisChain> several_axis_chains(const ir::LoopProgram& program) {
  return ChainFinder(program).several_axes();
}

std::string format_reduction_chains(const ir::LoopProgram& p,
                                    const std::vector<ReductionChain>& chains) {
  std::ostringstream out;
  out << "repairs of " << p.name
      << " (reductions that read an earlier reduction over an axis of the same extent)\n";
  for (const ReductionChain& c : chains) {
    out << "\n"
        << c.target << ": " << ir::reducer_name(c.reducer) << " over " << c.axis << " (extent "
        << ir::to_string(c.extent) << ")\n";
    out << "  term g:     " << algebra::to_math(c.term) << "\n";
    if (c.producers.empty()) {
      out << "  producers:  none; fuses without a repair\n";
      continue;
    }
    out << "  incomplete: ";
    for (size_t k = 0; k < c.repair.values.size(); ++k)
      out << (k ? ", " : "") << ir::to_string(c.repair.values[k].load) << " ("
          << c.repair.values[k].old_var << " -> " << c.repair.values[k].new_var << ")";
    if (c.repair.values.empty())
      for (size_t k = 0; k < c.producers.size(); ++k) out << (k ? ", " : "") << c.producers[k];
    out << "\n";
    switch (c.repair.kind) {
      case algebra::RepairResult::Kind::Derived: {
        out << "  repair h:   " << algebra::to_math(c.repair.h_unguarded) << "\n";
        out << "  guarded:    " << algebra::to_math(c.repair.h) << "\n";
        for (const auto& st : c.repair.statistics)
          out << "  statistic:  " << st.var << " = " << ir::reducer_name(c.reducer) << " over "
              << c.axis << " of " << algebra::to_math(st.term) << "\n";
        out << "  method:     " << c.repair.method << "; verified "
            << (c.repair.verified_symbolic ? "symbolically and " : "")
            << (c.repair.verified_numeric ? "numerically" : "(not numerically!)") << "\n";
        break;
      }
      case algebra::RepairResult::Kind::Identity:
        out << "  repair h:   t (the term does not depend on them)\n";
        break;
      case algebra::RepairResult::Kind::Refused:
        out << "  no repair:  " << c.repair.reason << "\n";
        break;
    }
  }
  return out.str();
}

}  // namespace kintsugi::schedule
