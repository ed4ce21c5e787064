// \file CpuCodegen.cpp
// Loop IR -> one C++ translation unit for the host compiler (generate_source in CpuBackend.h).
//
// Invariant established: the emitted code evaluates every expression with the typed
// interpreter's semantics (int64 index arithmetic with floor division, f32 math in float,
// f16/bf16 results rounded after every operation, stores rounded to the buffer dtype), checks
// at run time every index that is not a variable proven in range and every integer divisor that
// is not a non-zero constant, and runs a loop in parallel only when distinct iterations write
// distinct elements (see ParallelAnalysis below).
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "ir/Printer.h"
#include "ir/Visit.h"
#include "target/cpu/CpuBackend.h"
#include "target/cpu/CpuEmitter.h"

namespace kintsugi::cpu {

using namespace ir;

namespace {

// ---------------------------------------------------------------------------------------------
// Parallel analysis.
//
// A loop `var` of a top-level nest may run in parallel when, beneath it:
//  - no Store sits outside a block, and no block is nested in another block;
//  - `var` appears in no binding of a Reduce/Scan iteration variable;
//  - every block has a Spatial iteration variable S whose binding uses `var`, and every Store of
//    the block indexes its buffer with the plain variable S in some dimension p;
//  - every Load (in any block beneath) of a buffer written beneath indexes dimension p with a
//    plain spatial iteration variable whose binding is the same expression as S's.
// `var` may also appear in If conditions and in inner loop bounds (they only filter
// iterations). A buffer allocated beneath the loop (an Allocate node) is private to the
// iteration: its stores and loads are not considered. Bindings of spatial iteration variables are
// assumed injective (as every schedule primitive keeps them); then distinct values of `var` write
// distinct elements and read only elements they wrote themselves.
// ---------------------------------------------------------------------------------------------

struct WriteSite {
  size_t dim;
  Expr binding;
};

// Blocks directly beneath s (not inside another block); false if a Store or a nested block
// makes the nest unsuitable.
bool collect_blocks(const Stmt& s, std::vector<const StmtNode*>* blocks) {
  if (!s) return true;
  switch (s->kind) {
    case StmtKind::Seq:
      for (const Stmt& c : s->stmts)
        if (!collect_blocks(c, blocks)) return false;
      return true;
    case StmtKind::For:
    case StmtKind::Allocate:
      return collect_blocks(s->body, blocks);
    case StmtKind::If:
      return collect_blocks(s->then_case, blocks) && collect_blocks(s->else_case, blocks);
    case StmtKind::Store:
      return false;
    case StmtKind::Block: {
      bool nested = false;
      visit(s->body, [&](const Stmt& n) {
        if (n->kind == StmtKind::Block) nested = true;
        return !nested;
      });
      visit(s->init, [&](const Stmt& n) {
        if (n->kind == StmtKind::Block) nested = true;
        return !nested;
      });
      if (nested) return false;
      blocks->push_back(s.get());
      return true;
    }
  }
  return false;
}

// Every Store and every Load (with its block) under a block's init and body.
void block_accesses(const StmtNode* b, std::vector<const StmtNode*>* stores,
                    std::vector<Expr>* loads) {
  auto on_stmt = [&](const Stmt& n) {
    if (n->kind == StmtKind::Store) stores->push_back(n.get());
    return true;
  };
  auto on_expr = [&](const Expr& e) {
    visit(e, [&](const Expr& x) {
      if (x->op == Op::Load) loads->push_back(x);
      return true;
    });
  };
  for (const Stmt& part : {b->init, b->body}) {
    if (!part) continue;
    visit(part, on_stmt);
    visit_exprs(part, on_expr);
  }
}

// Loads outside blocks beneath s (in If conditions and loop bounds).
void loads_outside_blocks(const Stmt& s, std::vector<Expr>* loads) {
  if (!s || s->kind == StmtKind::Block) return;
  auto grab = [&](const Expr& e) {
    visit(e, [&](const Expr& x) {
      if (x->op == Op::Load) loads->push_back(x);
      return true;
    });
  };
  if (s->min) grab(s->min);
  if (s->extent) grab(s->extent);
  if (s->cond) grab(s->cond);
  for (const Stmt& c : s->stmts) loads_outside_blocks(c, loads);
  loads_outside_blocks(s->body, loads);
  loads_outside_blocks(s->then_case, loads);
  loads_outside_blocks(s->else_case, loads);
}

bool parallel_safe(const std::string& var, const Stmt& body) {
  std::vector<const StmtNode*> blocks;
  if (!collect_blocks(body, &blocks) || blocks.empty()) return false;
  std::set<std::string> priv = allocated_under(body);
  std::map<std::string, WriteSite> writes;
  std::vector<std::pair<const StmtNode*, std::vector<Expr>>> block_loads;
  for (const StmtNode* b : blocks) {
    std::set<std::string> spatial_using;
    for (const IterVar& iv : b->iters) {
      if (!iv.binding || !uses_var(iv.binding, var)) continue;
      if (iv.kind != IterKind::Spatial) return false;
      spatial_using.insert(iv.name);
    }
    if (spatial_using.empty()) return false;
    std::vector<const StmtNode*> stores;
    std::vector<Expr> loads;
    block_accesses(b, &stores, &loads);
    for (const StmtNode* st : stores) {
      if (priv.count(st->buffer)) continue;
      bool found = false;
      for (size_t d = 0; d < st->indices.size() && !found; ++d) {
        const Expr& ix = st->indices[d];
        if (ix->op != Op::Var || !spatial_using.count(ix->name)) continue;
        Expr binding;
        for (const IterVar& iv : b->iters)
          if (iv.name == ix->name) binding = iv.binding;
        auto it = writes.find(st->buffer);
        if (it == writes.end()) {
          writes[st->buffer] = {d, binding};
          found = true;
        } else if (it->second.dim == d && equal(it->second.binding, binding)) {
          found = true;
        }
      }
      if (!found) return false;
    }
    block_loads.push_back({b, std::move(loads)});
  }
  for (const auto& [b, loads] : block_loads) {
    for (const Expr& ld : loads) {
      auto it = writes.find(ld->name);
      if (it == writes.end()) continue;
      if (it->second.dim >= ld->args.size()) return false;
      const Expr& ix = ld->args[it->second.dim];
      if (ix->op != Op::Var) return false;
      bool ok = false;
      for (const IterVar& iv : b->iters)
        if (iv.name == ix->name && iv.kind == IterKind::Spatial &&
            equal(iv.binding, it->second.binding))
          ok = true;
      if (!ok) return false;
    }
  }
  std::vector<Expr> outside;
  loads_outside_blocks(body, &outside);
  for (const Expr& ld : outside)
    if (writes.count(ld->name)) return false;
  return true;
}

// The outermost perfectly nested loops of a top-level nest that may be collapsed into one
// parallel loop: each is ForKind::Parallel or parallel_safe, and no loop's bounds use the
// variables of the loops above it in the chain.
}  // namespace

// Buffers allocated by Allocate nodes beneath s.
std::set<std::string> allocated_under(const Stmt& s) {
  std::set<std::string> out;
  visit(s, [&](const Stmt& n) {
    if (n->kind == StmtKind::Allocate) out.insert(n->buffer);
    return true;
  });
  return out;
}

std::vector<const StmtNode*> parallel_chain(const Stmt& top) {
  std::vector<const StmtNode*> chain;
  Stmt cur = top;
  while (cur && cur->kind == StmtKind::For) {
    bool bounds_ok = true;
    for (const StmtNode* outer : chain)
      if (uses_var(cur->min, outer->var) || uses_var(cur->extent, outer->var)) bounds_ok = false;
    if (!bounds_ok) break;
    if (cur->for_kind != ForKind::Parallel && !parallel_safe(cur->var, cur->body)) break;
    chain.push_back(cur.get());
    Stmt next = cur->body;
    while (next && next->kind == StmtKind::Seq && next->stmts.size() == 1) next = next->stmts[0];
    cur = next;
  }
  return chain;
}

std::string generate_source(const LoopProgram& program) {
  internal_assert(program.body) << "CPU codegen: program " << program.name << " has no body";
  return Codegen(program).run();
}

}  // namespace kintsugi::cpu
