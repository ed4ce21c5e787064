// \file Analysis.cpp
// Shared queries and rewrites for schedule primitives (see Analysis.h).
#include "schedule/Analysis.h"

#include <functional>

#include "ir/Simplify.h"
#include "ir/Visit.h"

namespace kintsugi::schedule {

using ir::Expr;
using ir::Stmt;
using ir::StmtKind;
using ir::StmtNode;

namespace {
// Depth-first search for a node satisfying `match`, recording the path.
bool search(const Stmt& s, const std::function<bool(const StmtNode&)>& match, StmtPath& path) {
  if (!s) return false;
  path.push_back(s.get());
  if (match(*s)) return true;
  for (const Stmt& c : s->stmts)
    if (search(c, match, path)) return true;
  if (s->kind != StmtKind::Block) {  // blocks are leaves for the purposes of scheduling
    if (search(s->body, match, path) || search(s->then_case, match, path) ||
        search(s->else_case, match, path))
      return true;
  }
  path.pop_back();
  return false;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}
}  // namespace

StmtPath find_block(const Stmt& root, const std::string& name, const std::string& primitive) {
  StmtPath path;
  if (!search(
          root, [&](const StmtNode& n) { return n.kind == StmtKind::Block && n.name == name; },
          path))
    throw ScheduleError(primitive, "there is no block named '" + name +
                                       "' (blocks: " + join(all_block_names(root)) + ")");
  return path;
}

StmtPath find_loop(const Stmt& root, const LoopRef& loop, const std::string& primitive) {
  StmtPath path = find_block(root, loop.block, primitive);
  std::set<std::string> vars;
  for (size_t k = 0; k < path.size(); ++k) {
    if (path[k]->kind != StmtKind::For) continue;
    if (path[k]->var == loop.var) {
      path.resize(k + 1);
      return path;
    }
    vars.insert(path[k]->var);
  }
  throw ScheduleError(primitive, "block '" + loop.block + "' is not inside a loop '" + loop.var +
                                     "' (its loops: " + (vars.empty() ? "none" : join(vars)) + ")");
}

std::vector<const StmtNode*> loops_on(const StmtPath& path) {
  std::vector<const StmtNode*> out;
  for (const StmtNode* n : path)
    if (n->kind == StmtKind::For) out.push_back(n);
  return out;
}

std::vector<const StmtNode*> blocks_under(const Stmt& s) {
  std::vector<const StmtNode*> out;
  ir::visit(s, [&](const Stmt& n) {
    if (n->kind == StmtKind::Block) {
      out.push_back(n.get());
      return false;
    }
    return true;
  });
  return out;
}

std::set<std::string> all_loop_vars(const Stmt& root) {
  std::set<std::string> out;
  ir::visit(root, [&](const Stmt& n) {
    if (n->kind == StmtKind::For) out.insert(n->var);
    return true;
  });
  return out;
}

std::set<std::string> all_block_names(const Stmt& root) {
  std::set<std::string> out;
  for (const StmtNode* b : blocks_under(root)) out.insert(b->name);
  return out;
}

namespace {
Stmt rebuild(const StmtPath& path, size_t depth, Stmt replacement) {
  const StmtNode* node = path[depth];
  if (depth + 1 == path.size()) return replacement;
  const StmtNode* child = path[depth + 1];
  StmtNode n = *node;
  auto swap_child = [&](Stmt& slot) {
    if (slot.get() != child) return false;
    slot = rebuild(path, depth + 1, replacement);
    return true;
  };
  bool done = false;
  for (size_t k = 0; k < n.stmts.size() && !done; ++k) {
    if (n.stmts[k].get() != child) continue;
    Stmt r = rebuild(path, depth + 1, replacement);
    if (r)
      n.stmts[k] = r;
    else
      n.stmts.erase(n.stmts.begin() + static_cast<long>(k));
    done = true;
  }
  if (!done)
    done = swap_child(n.body) || swap_child(n.then_case) || swap_child(n.else_case) ||
           swap_child(n.init);
  internal_assert(done) << "replace_at: broken path";
  // A loop or If whose body disappeared disappears too.
  if ((n.kind == StmtKind::For && !n.body) || (n.kind == StmtKind::If && !n.then_case))
    return nullptr;
  if (n.kind == StmtKind::Seq && n.stmts.empty() && depth > 0) return nullptr;
  return std::make_shared<const StmtNode>(std::move(n));
}
}  // namespace

Stmt replace_at(const StmtPath& path, Stmt replacement) {
  internal_assert(!path.empty()) << "replace_at: empty path";
  Stmt root = rebuild(path, 0, std::move(replacement));
  return root ? root : ir::make_seq({});
}

Stmt substitute_loop_var(const Stmt& s, const std::string& name, const Expr& value) {
  if (!s) return s;
  std::map<std::string, Expr> sub{{name, value}};
  auto e = [&](const Expr& x) { return x ? ir::simplify(ir::substitute(x, sub)) : x; };
  StmtNode n = *s;
  switch (s->kind) {
    case StmtKind::Seq:
      for (Stmt& c : n.stmts) c = substitute_loop_var(c, name, value);
      break;
    case StmtKind::For:
      n.min = e(n.min);
      n.extent = e(n.extent);
      if (n.var != name) n.body = substitute_loop_var(n.body, name, value);
      break;
    case StmtKind::Block:
      for (ir::IterVar& iv : n.iters) iv.binding = e(iv.binding);
      n.predicate = e(n.predicate);
      break;
    case StmtKind::Store:
      for (Expr& i : n.indices) i = e(i);
      n.value = e(n.value);
      break;
    case StmtKind::If:
      n.cond = e(n.cond);
      n.then_case = substitute_loop_var(n.then_case, name, value);
      n.else_case = substitute_loop_var(n.else_case, name, value);
      break;
    case StmtKind::Allocate:
      n.body = substitute_loop_var(n.body, name, value);
      break;
  }
  return std::make_shared<const StmtNode>(std::move(n));
}

Stmt add_block_predicate(const Stmt& s, const Expr& pred) {
  return ir::mutate(s, [&](const Stmt& n) -> Stmt {
    if (n->kind != StmtKind::Block) return n;
    StmtNode b = *n;
    b.predicate = b.predicate ? ir::make_binary(ir::Op::And, b.predicate, pred) : pred;
    return std::make_shared<const StmtNode>(std::move(b));
  });
}

namespace {
void collect_accesses(const StmtNode& block, std::set<std::string>* reads,
                      std::set<std::string>* writes) {
  for (const Stmt& part : {block.init, block.body}) {
    if (!part) continue;
    ir::visit(part, [&](const Stmt& n) {
      if (n->kind == StmtKind::Store && writes) writes->insert(n->buffer);
      return true;
    });
    ir::visit_exprs(part, [&](const Expr& e) {
      ir::visit(e, [&](const Expr& x) {
        if (x->op == ir::Op::Load && reads) reads->insert(x->name);
        return true;
      });
    });
  }
}
}  // namespace

std::set<std::string> block_reads(const StmtNode& block) {
  std::set<std::string> out;
  collect_accesses(block, &out, nullptr);
  return out;
}

std::set<std::string> block_writes(const StmtNode& block) {
  std::set<std::string> out;
  collect_accesses(block, nullptr, &out);
  return out;
}

bool match_reduction_update(const StmtNode& store, ir::Reducer* r, Expr* g) {
  if (store.kind != StmtKind::Store || !store.value) return false;
  const Expr& v = store.value;
  if (v->args.size() != 2) return false;
  const Expr& acc = v->args[0];
  if (acc->op != ir::Op::Load || acc->name != store.buffer ||
      acc->args.size() != store.indices.size())
    return false;
  for (size_t k = 0; k < acc->args.size(); ++k)
    if (!ir::equal(acc->args[k], store.indices[k])) return false;
  switch (v->op) {
    case ir::Op::Add:
      *r = ir::Reducer::Sum;
      break;
    case ir::Op::Mul:
      *r = ir::Reducer::Prod;
      break;
    case ir::Op::Max:
      *r = ir::Reducer::Max;
      break;
    case ir::Op::Min:
      *r = ir::Reducer::Min;
      break;
    default:
      return false;
  }
  *g = v->args[1];
  return true;
}

Expr var(const std::string& name) {
  return ir::make_var(name, ir::VarKind::Index, DType::Int);
}

ir::Stmt nest_over(const std::vector<ir::IterVar>& iters, ir::Stmt body) {
  for (auto it = iters.rbegin(); it != iters.rend(); ++it)
    body = ir::make_for(it->name, ir::make_int(0), it->extent, ir::ForKind::Serial, body);
  return body;
}

std::map<std::string, const ir::StmtNode*> block_writers(const ir::Stmt& root) {
  std::map<std::string, const ir::StmtNode*> out;
  for (const ir::StmtNode* b : blocks_under(root))
    for (const std::string& w : block_writes(*b)) out[w] = b;
  return out;
}

}  // namespace kintsugi::schedule
