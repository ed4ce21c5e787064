// \file CompactBuffer.cpp
// compact_buffer(): shrinks every intermediate buffer to the part that one iteration of the
// loop where it lives touches, and places its allocation inside that loop (an Allocate node:
// fresh storage per iteration, per thread under a parallel loop). This is what leaves a fused
// attention with a [1, 1, 1, BN] score tile per KV tile instead of an S x T buffer.
//
// For each intermediate buffer X (inputs and outputs are never compacted):
//  1. Placement. The candidate loops are those that enclose every block reading or writing X,
//     innermost first; the root (whole program, no Allocate) always qualifies. Loop L qualifies
//     when no value of X flows from one iteration of L to the next, checked conservatively:
//      - a block that writes X with reduce/scan iteration variables (it accumulates into X)
//        binds them only to loops strictly inside L, so the whole reduction happens in one
//        iteration of L;
//      - every other read of X is covered by a writer that runs before it in the same
//        iteration: for a reader block R there is a writer block W, earlier in program order in
//        the same Seq (not the other branch of an If), whose box of X written per iteration of
//        their innermost common loop contains R's box read per iteration of that loop
//        (bounds compared by the integer simplifier; anything it cannot prove rejects L).
//     A reduction block with an init that reads X only to accumulate needs no other writer.
//  2. Region. The box of X accessed (reads and writes merged) per iteration of L, by interval
//     arithmetic over the loops inside L (Region.h). A dimension shrinks only to a constant
//     extent smaller than its old one, or to the symbolic extent of a loop inside L (a group of
//     rows split by a size, HQ / HK); any other symbolic extent keeps the whole dimension (boxes
//     are not clipped, so a tiled region at the root would be larger than the buffer). The buffer
//     is compacted only if some dimension shrinks (otherwise it is left untouched).
//  3. Index rewrite. The new index at dimension d is `old - min_d`. Blocks see only their
//     iteration variables, while min_d is an expression over the loops at or outside L, so:
//      - min_d = 0, or min_d made of dims/params only: the block writes `old - min_d` directly;
//      - `old` in loop terms minus min_d simplifies to a constant c (the usual case for a
//        dimension of extent 1, e.g. b - b): the index is c;
//      - otherwise the block indexes with `old - v`, where v is an iteration variable bound to
//        min_d: one the block already has (e.g. the base of another compacted buffer) or a new
//        Spatial one `X.base<d>` bound to min_d (extent: X's old extent at d, which the offset lies
//        in), and indexes with `old - X.base<d>`. Such a variable is an offset, not a dimension to
//        iterate over: compact_buffer is meant to run last (after compute_at and friends), as in
//        Neptune's schedule templates.
//  4. The body of L is wrapped in `alloc X` and X's scope becomes "local" (a scope the user
//     chose with cache_read/cache_write, such as "shared", is kept).
// Invariant established: every intermediate buffer is either program-wide (as before) or
// allocated inside the loop that owns it, sized to what one iteration touches; the program's
// meaning is unchanged (the interpreter poisons each fresh allocation with NaN, so the tests
// would see any value that crossed iterations).
#include <functional>

#include "ir/Printer.h"
#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/Region.h"
#include "schedule/primitive/Replay.h"

namespace kintsugi::schedule {

namespace {

using ir::Expr;
using ir::Op;
using ir::Stmt;
using ir::StmtKind;
using ir::StmtNode;

// A block with the statements above it (root first) and its position in program order.
struct Site {
  const StmtNode* block = nullptr;
  std::vector<const StmtNode*> anc;
  size_t order = 0;
};

void collect_sites(const Stmt& s, std::vector<const StmtNode*>& anc, std::vector<Site>* out) {
  if (!s) return;
  if (s->kind == StmtKind::Block) {
    out->push_back(Site{s.get(), anc, out->size()});
    return;
  }
  anc.push_back(s.get());
  for (const Stmt& c : s->stmts) collect_sites(c, anc, out);
  collect_sites(s->body, anc, out);
  collect_sites(s->then_case, anc, out);
  collect_sites(s->else_case, anc, out);
  anc.pop_back();
}

// Calls f on the index list of every access of `buffer` in a block (loads and/or stores).
void for_accesses(const StmtNode& b, const std::string& buffer, bool reads, bool writes,
                  const std::function<void(const std::vector<Expr>&)>& f) {
  for (const Stmt& part : {b.init, b.body}) {
    if (!part) continue;
    if (writes)
      ir::visit(part, [&](const Stmt& st) {
        if (st->kind == StmtKind::Store && st->buffer == buffer) f(st->indices);
        return true;
      });
    if (reads)
      ir::visit_exprs(part, [&](const Expr& e) {
        ir::visit(e, [&](const Expr& x) {
          if (x->op == Op::Load && x->name == buffer) f(x->args);
          return true;
        });
      });
  }
}

Expr simp(Op op, const Expr& a, const Expr& b) {
  return ir::simplify(ir::make_binary(op, a, b));
}

// The box of `buffer` a site accesses per iteration of `loop` (null: the whole program), or an
// empty vector when the site makes no such access.
std::vector<Interval> site_box(const Site& site, const StmtNode* loop, const std::string& buffer,
                               size_t rank, bool reads, bool writes) {
  std::map<std::string, Range> varying;
  bool below = loop == nullptr;
  for (const StmtNode* a : site.anc) {
    if (below && a->kind == StmtKind::For) varying[a->var] = Range{a->min, a->extent};
    if (a == loop) below = true;
  }
  std::vector<Interval> box;
  for_accesses(*site.block, buffer, reads, writes, [&](const std::vector<Expr>& idx) {
    bool first = box.empty();
    if (first) box.resize(rank);
    for (size_t d = 0; d < rank; ++d) {
      Interval iv = bound(in_loop_terms(*site.block, idx[d]), varying);
      if (first) {
        box[d] = iv;
      } else if (!box[d].ok || !iv.ok) {
        box[d] = Interval{};
      } else {
        if (!ir::equal(box[d].lo, iv.lo)) box[d].lo = simp(Op::Min, box[d].lo, iv.lo);
        if (!ir::equal(box[d].hi, iv.hi)) box[d].hi = simp(Op::Max, box[d].hi, iv.hi);
      }
    }
  });
  return box;
}

bool provably_nonneg(const Expr& e) {
  auto c = ir::as_const_int(ir::simplify(e));
  return c && *c >= 0;
}

// inner ⊆ outer, dimension by dimension.
bool contains(const std::vector<Interval>& outer, const std::vector<Interval>& inner) {
  if (outer.size() != inner.size()) return false;
  for (size_t d = 0; d < outer.size(); ++d) {
    if (!outer[d].ok || !inner[d].ok) return false;
    if (!provably_nonneg(ir::make_binary(Op::Sub, inner[d].lo, outer[d].lo)) ||
        !provably_nonneg(ir::make_binary(Op::Sub, outer[d].hi, inner[d].hi)))
      return false;
  }
  return true;
}

bool uses_any(const Expr& e, const std::set<std::string>& names) {
  for (const std::string& n : names)
    if (ir::uses_var(e, n)) return true;
  return false;
}

// Rule 1 of the header: may X live inside `loop` (fresh per iteration)?
bool private_to_iteration(const StmtNode* loop, const std::vector<const Site*>& sites,
                          const std::string& buffer, size_t rank) {
  auto writes = [&](const Site* s) { return block_writes(*s->block).count(buffer) > 0; };
  auto reads = [&](const Site* s) { return block_reads(*s->block).count(buffer) > 0; };
  for (const Site* s : sites) {
    if (!writes(s)) continue;
    // Loops at or above `loop`: accumulation must not be driven by them.
    std::set<std::string> outer;
    for (const StmtNode* a : s->anc) {
      if (a->kind == StmtKind::For) outer.insert(a->var);
      if (a == loop) break;
    }
    for (const ir::IterVar& iv : s->block->iters)
      if (iv.kind != ir::IterKind::Spatial && uses_any(iv.binding, outer)) return false;
  }
  for (const Site* r : sites) {
    if (!reads(r)) continue;
    bool accumulates = writes(r) && r->block->init;
    if (accumulates) {
      bool reduction = false;
      for (const ir::IterVar& iv : r->block->iters) reduction |= iv.kind != ir::IterKind::Spatial;
      if (reduction) continue;
    }
    bool covered = false;
    for (const Site* w : sites) {
      if (w == r || w->order > r->order || !writes(w)) continue;
      // Divergence point: the first ancestor where the chains differ must be a Seq child.
      size_t k = 0;
      while (k < w->anc.size() && k < r->anc.size() && w->anc[k] == r->anc[k]) ++k;
      if (k == 0 || w->anc[k - 1]->kind != StmtKind::Seq) continue;
      const StmtNode* common = nullptr;  // innermost common loop
      for (size_t q = 0; q < k; ++q)
        if (w->anc[q]->kind == StmtKind::For) common = w->anc[q];
      std::vector<Interval> rb = site_box(*r, common, buffer, rank, true, false);
      std::vector<Interval> wb = site_box(*w, common, buffer, rank, false, true);
      if (contains(wb, rb)) {
        covered = true;
        break;
      }
    }
    if (!covered) return false;
  }
  return true;
}

struct Compaction {
  std::string buffer;
  const StmtNode* loop = nullptr;  // null: the root
  std::vector<Expr> min;           // per dimension, over loops at or outside `loop`
  std::vector<Expr> shape;
  std::vector<Expr> old_shape;
};

bool is_loop_free(const Expr& e) {
  bool ok = true;
  ir::visit(e, [&](const Expr& x) {
    if (x->op == Op::Var && x->var_kind == ir::VarKind::Index) ok = false;
    return ok;
  });
  return ok;
}

// Rewrites the accesses of c.buffer in one block (step 3 of the header).
Stmt rewrite_block(const StmtNode& block, const Compaction& c) {
  StmtNode b = block;
  std::map<size_t, std::string> bases;  // dimension -> base iteration variable
  auto base_var = [&](size_t d) {
    auto it = bases.find(d);
    if (it != bases.end()) return var(it->second);
    // An iteration variable already bound to the offset (another buffer's base) serves as well.
    for (const ir::IterVar& iv : b.iters)
      if (iv.kind == ir::IterKind::Spatial && ir::equal(iv.binding, c.min[d])) {
        bases[d] = iv.name;
        return var(iv.name);
      }
    std::string name = c.buffer + ".base" + std::to_string(d);
    for (int k = 1;; ++k) {
      bool taken = false;
      for (const ir::IterVar& iv : b.iters) taken |= iv.name == name;
      if (!taken) break;
      name = c.buffer + ".base" + std::to_string(d) + "_" + std::to_string(k);
    }
    ir::IterVar iv;
    iv.name = name;
    iv.kind = ir::IterKind::Spatial;
    iv.extent = c.old_shape[d];
    iv.binding = c.min[d];
    b.iters.push_back(iv);
    bases[d] = name;
    return var(name);
  };
  auto index = [&](const std::vector<Expr>& old) {
    std::vector<Expr> out;
    for (size_t d = 0; d < old.size(); ++d) {
      const Expr& m = c.min[d];
      if (ir::as_const_int(m) && *ir::as_const_int(m) == 0) {
        out.push_back(old[d]);
      } else if (is_loop_free(m)) {
        out.push_back(simp(Op::Sub, old[d], m));
      } else {
        Expr diff = simp(Op::Sub, in_loop_terms(block, old[d]), m);
        if (ir::as_const_int(diff))
          out.push_back(diff);
        else
          out.push_back(simp(Op::Sub, old[d], base_var(d)));
      }
    }
    return out;
  };
  auto fix = [&](const Stmt& part) -> Stmt {
    if (!part) return part;
    Stmt s = ir::mutate_exprs(part, [&](const Expr& x) -> Expr {
      if (x->op != Op::Load || x->name != c.buffer) return x;
      return ir::with_args(x, index(x->args));
    });
    return ir::mutate(s, [&](const Stmt& st) -> Stmt {
      if (st->kind != StmtKind::Store || st->buffer != c.buffer) return st;
      StmtNode n = *st;
      n.indices = index(n.indices);
      return std::make_shared<const StmtNode>(std::move(n));
    });
  };
  b.init = fix(block.init);
  b.body = fix(block.body);
  return std::make_shared<const StmtNode>(std::move(b));
}

// Whether `extent` is the (symbolic) extent of a loop inside `loop`: a group of rows that a split
// by a size made a loop of its own, which one iteration of `loop` spans whole. An extent that
// varies with an enclosing loop (a tile range narrowed per row by a mask) is no buffer size.
bool spans_inner_loop(const StmtNode& loop, const Expr& extent) {
  bool loop_invariant = true;
  ir::visit(extent, [&](const Expr& x) {
    loop_invariant = loop_invariant && !(x->op == Op::Var && x->var_kind == ir::VarKind::Index);
    return loop_invariant;
  });
  if (!loop_invariant) return false;
  bool found = false;
  ir::visit(loop.body, [&](const Stmt& s) {
    found = found || (s->kind == StmtKind::For && !ir::as_const_int(s->extent) &&
                      ir::provably_equal(s->extent, extent));
    return !found;
  });
  return found;
}

}  // namespace

void Schedule::compact_buffer() {
  const std::string P = "compact_buffer";
  std::vector<Site> sites;
  std::vector<const StmtNode*> anc;
  collect_sites(program_.body, anc, &sites);
  std::vector<Compaction> plans;
  for (const ir::Buffer& buf : program_.buffers) {
    if (buf.role != ir::BufferRole::Intermediate) continue;
    size_t rank = buf.shape.size();
    std::vector<const Site*> users;
    for (const Site& s : sites)
      if (block_reads(*s.block).count(buf.name) || block_writes(*s.block).count(buf.name))
        users.push_back(&s);
    if (users.empty()) continue;
    // Loops enclosing every user, innermost first.
    size_t common = users[0]->anc.size();
    for (const Site* u : users) {
      size_t k = 0;
      while (k < common && k < u->anc.size() && u->anc[k] == users[0]->anc[k]) ++k;
      common = k;
    }
    std::vector<const StmtNode*> candidates;
    for (size_t k = common; k-- > 0;)
      if (users[0]->anc[k]->kind == StmtKind::For) candidates.push_back(users[0]->anc[k]);
    candidates.push_back(nullptr);
    const StmtNode* loop = nullptr;
    for (const StmtNode* c : candidates)
      if (!c || private_to_iteration(c, users, buf.name, rank)) {
        loop = c;
        break;
      }
    // The box per iteration of `loop`, reads and writes merged.
    std::vector<Interval> box(rank);
    bool first = true;
    for (const Site* u : users) {
      std::vector<Interval> b = site_box(*u, loop, buf.name, rank, true, true);
      if (b.empty()) continue;
      for (size_t d = 0; d < rank; ++d) {
        if (first) {
          box[d] = b[d];
        } else if (!box[d].ok || !b[d].ok) {
          box[d] = Interval{};
        } else {
          if (!ir::equal(box[d].lo, b[d].lo)) box[d].lo = simp(Op::Min, box[d].lo, b[d].lo);
          if (!ir::equal(box[d].hi, b[d].hi)) box[d].hi = simp(Op::Max, box[d].hi, b[d].hi);
        }
      }
      first = false;
    }
    Compaction c{buf.name, loop, {}, {}, buf.shape};
    bool shrinks = false;
    for (size_t d = 0; d < rank; ++d) {
      Expr min = ir::make_int(0), extent = buf.shape[d];
      if (box[d].ok) {
        Expr e = simp(Op::Add, simp(Op::Sub, box[d].hi, box[d].lo), ir::make_int(1));
        auto ce = ir::as_const_int(e), cold = ir::as_const_int(buf.shape[d]);
        bool constant = ce && *ce >= 0 && !(cold && *cold <= *ce);
        if (constant || (loop && spans_inner_loop(*loop, e))) {
          min = box[d].lo;
          extent = e;
        }
      }
      bool same = ir::provably_equal(extent, buf.shape[d]) && ir::as_const_int(min) &&
                  *ir::as_const_int(min) == 0;
      shrinks |= !same;
      if (same) min = ir::make_int(0), extent = buf.shape[d];
      c.min.push_back(min);
      c.shape.push_back(extent);
    }
    if (shrinks) plans.push_back(std::move(c));
  }

  ir::LoopProgram p = program_;
  std::map<const StmtNode*, std::vector<const Compaction*>> by_block, by_loop;
  for (const Compaction& c : plans) {
    if (c.loop) by_loop[c.loop].push_back(&c);
    for (const Site& s : sites)
      if (block_reads(*s.block).count(c.buffer) || block_writes(*s.block).count(c.buffer))
        by_block[s.block].push_back(&c);
    for (ir::Buffer& b : p.buffers) {
      if (b.name != c.buffer) continue;
      b.shape = c.shape;
      if (c.loop && b.scope == "global") b.scope = "local";
    }
  }
  std::function<Stmt(const Stmt&)> rebuild = [&](const Stmt& s) -> Stmt {
    if (!s) return s;
    if (s->kind == StmtKind::Block) {
      auto it = by_block.find(s.get());
      if (it == by_block.end()) return s;
      Stmt out = s;
      for (const Compaction* c : it->second) out = rewrite_block(*out, *c);
      return out;
    }
    StmtNode n = *s;
    for (Stmt& c : n.stmts) c = rebuild(c);
    n.body = rebuild(n.body);
    n.then_case = rebuild(n.then_case);
    n.else_case = rebuild(n.else_case);
    auto it = by_loop.find(s.get());
    if (it != by_loop.end())
      for (auto c = it->second.rbegin(); c != it->second.rend(); ++c)
        n.body = ir::make_allocate((*c)->buffer, n.body);
    return std::make_shared<const StmtNode>(std::move(n));
  };
  p.body = rebuild(program_.body);
  commit(std::move(p), {{"primitive", P}});
}

void replay_compact_buffer(Schedule& s, const nlohmann::json&) {
  s.compact_buffer();
}

}  // namespace kintsugi::schedule
