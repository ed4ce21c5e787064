// \file ReduceToScan.cpp
// reduce_to_scan(block, loop): turns a reduction whose only reduction variable is `loop` into a
// scan that keeps every running value:
//
//   for j0: R[i] = R[i] (+) v(j0)                       (init R[i] = identity)
// becomes
//   for j0: R.scan[i, j0] = select(j0 > 0, R.scan[i, j0 - 1], identity) (+) v(j0)
//
// A repaired write-back (rolling_update's R[i] = h(R[i], ..) (+) v(j0)) scans the same way, its
// reads of R[i] taken from the previous position.
//
// Readers under `loop` now see the running value of the current iteration (R.scan[i, j0]; they
// get an iteration variable bound to `loop` if they lack one), readers after it the final value
// R.scan[i, extent - 1]. This is the step that makes a producer "incomplete" on purpose, so that
// rolling_update can repair its consumers. The original buffer must be an intermediate.
#include <map>

#include "ir/Simplify.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/primitive/Replay.h"
#include "schedule/primitive/Scan.h"

namespace kintsugi::schedule {

ir::Stmt read_loop_position(
    const ir::Stmt& s, const std::string& loop_var, const ir::Expr& loop_extent,
    const std::function<ir::Expr(const ir::Expr& load, const ir::Expr& position)>& rewrite,
    const std::string& buffer) {
  return ir::mutate(s, [&](const ir::Stmt& n) -> ir::Stmt {
    if (n->kind != ir::StmtKind::Block) return n;
    bool reads = false;
    for (const ir::Stmt& part : {n->init, n->body})
      if (part)
        ir::visit_exprs(part, [&](const ir::Expr& e) {
          reads |= ir::uses_var(e, buffer) || [&] {
            bool r = false;
            ir::visit(e, [&](const ir::Expr& x) {
              r |= x->op == ir::Op::Load && x->name == buffer;
              return !r;
            });
            return r;
          }();
        });
    if (!reads) return n;
    ir::StmtNode b = *n;
    // The block's view of the loop position: an iteration variable bound to the loop variable.
    std::string pos_name;
    for (const ir::IterVar& iv : b.iters)
      if (iv.binding->op == ir::Op::Var && iv.binding->name == loop_var) pos_name = iv.name;
    if (pos_name.empty()) {
      pos_name = loop_var;
      std::set<std::string> names;
      for (const ir::IterVar& iv : b.iters) names.insert(iv.name);
      for (int k = 1; names.count(pos_name); ++k) pos_name = loop_var + "_" + std::to_string(k);
      b.iters.push_back(ir::IterVar{pos_name, loop_extent, ir::IterKind::Spatial, var(loop_var)});
    }
    ir::Expr position = var(pos_name);
    auto fix = [&](const ir::Stmt& part) {
      return part ? ir::mutate_exprs(part,
                                     [&](const ir::Expr& e) {
                                       return e->op == ir::Op::Load && e->name == buffer
                                                  ? rewrite(e, position)
                                                  : e;
                                     })
                  : part;
    };
    b.init = fix(b.init);
    b.body = fix(b.body);
    return std::make_shared<const ir::StmtNode>(std::move(b));
  });
}

namespace {

// x[...] = A op g where g does not read x and A reads x only at the stored indices: a reduction
// (A = x) or its repaired write-back after rolling_update (A = h(x, r, r')).
bool match_running_update(const ir::StmtNode& store, ir::Reducer* r, ir::Expr* running,
                          ir::Expr* g) {
  ir::Expr direct;
  if (match_reduction_update(store, r, &direct)) {
    *running = store.value->args[0];
    *g = direct;
    return true;
  }
  const ir::Expr& v = store.value;
  if (store.kind != ir::StmtKind::Store || !v || v->args.size() != 2) return false;
  const std::map<ir::Op, ir::Reducer> reducers = {{ir::Op::Add, ir::Reducer::Sum},
                                                  {ir::Op::Mul, ir::Reducer::Prod},
                                                  {ir::Op::Max, ir::Reducer::Max},
                                                  {ir::Op::Min, ir::Reducer::Min}};
  auto it = reducers.find(v->op);
  if (it == reducers.end()) return false;
  auto reads = [&](const ir::Expr& e, bool* elsewhere) {
    bool any = false;
    ir::visit(e, [&](const ir::Expr& x) {
      if (x->op == ir::Op::Load && x->name == store.buffer) {
        any = true;
        bool same = x->args.size() == store.indices.size();
        for (size_t k = 0; same && k < x->args.size(); ++k)
          same = ir::equal(x->args[k], store.indices[k]);
        *elsewhere = *elsewhere || !same;
      }
      return true;
    });
    return any;
  };
  bool elsewhere = false;
  if (!reads(v->args[0], &elsewhere) || reads(v->args[1], &elsewhere) || elsewhere) return false;
  *r = it->second;
  *running = v->args[0];
  *g = v->args[1];
  return true;
}

}  // namespace

std::string Schedule::reduce_to_scan(const std::string& block, const LoopRef& loop) {
  const std::string P = "reduce_to_scan";
  if (loop.block != block) throw ScheduleError(P, "the loop must enclose block '" + block + "'");
  StmtPath path = find_block(program_.body, block, P);
  StmtPath lpath = find_loop(program_.body, loop, P);
  const ir::StmtNode& w = *path.back();
  const ir::StmtNode& l = *lpath.back();
  ir::Reducer reducer;
  ir::Expr term, running;
  if (!w.body || !match_running_update(*w.body, &reducer, &running, &term))
    throw ScheduleError(P, "block '" + block + "' is not a reduction x[...] = x[...] op g");
  int reduce_count = 0;
  const ir::IterVar* red = nullptr;
  for (const ir::IterVar& iv : w.iters)
    if (iv.kind != ir::IterKind::Spatial) {
      ++reduce_count;
      red = &iv;
    }
  if (reduce_count != 1 || !(red->binding->op == ir::Op::Var && red->binding->name == l.var))
    throw ScheduleError(P, "block '" + block +
                               "' must have exactly one reduction variable, bound to loop '" +
                               loop.var + "' itself (rfactor the reduction at that loop first)");
  const ir::StmtNode& st = *w.body;
  const ir::Buffer* buf = program_.find_buffer(st.buffer);
  if (buf->role != ir::BufferRole::Intermediate)
    throw ScheduleError(P, "block '" + block + "' writes '" + st.buffer +
                               "', which is an output; cache_write it first");
  for (const ir::StmtNode* b : blocks_under(program_.body))
    if (b != &w && block_writes(*b).count(st.buffer))
      throw ScheduleError(P,
                          "buffer '" + st.buffer + "' is also written by block '" + b->name + "'");
  std::string scan = fresh_name(st.buffer + ".scan");
  ir::Expr init_value = w.init && w.init->kind == ir::StmtKind::Store
                            ? w.init->value
                            : ir::make_load(st.buffer, term->type, st.indices);
  if (!w.init)
    throw ScheduleError(
        P, "block '" + block + "' has no init (it was decomposed); reduce_to_scan needs it");
  DType acc_type = st.value->args[0]->type;
  ir::Expr pos = var(red->name);
  auto at = [&](const ir::Expr& position) {
    std::vector<ir::Expr> idx = st.indices;
    idx.push_back(position);
    return idx;
  };
  ir::Expr prev =
      ir::make_load(scan, acc_type, at(ir::make_binary(ir::Op::Sub, pos, ir::make_int(1))));
  ir::Expr start =
      ir::make_select(ir::make_binary(ir::Op::Gt, pos, ir::make_int(0)), prev, init_value);
  ir::StmtNode nb = w;
  nb.init = nullptr;
  for (ir::IterVar& iv : nb.iters)
    if (iv.kind != ir::IterKind::Spatial) iv.kind = ir::IterKind::Scan;
  // The running value, repaired or not, read from the previous position of the scan.
  ir::Expr self = ir::make_load(st.buffer, acc_type, st.indices);
  ir::Expr carried =
      ir::mutate(running, [&](const ir::Expr& e) { return ir::equal(e, self) ? start : e; });
  nb.body = ir::make_store(scan, at(pos), combine(reducer, carried, term));
  ir::LoopProgram p = program_;
  auto shape = buf->shape;
  shape.push_back(l.extent);
  p.buffers.push_back(ir::Buffer{scan, buf->dtype, shape, ir::BufferRole::Intermediate, "global"});
  p.body = replace_at(path, std::make_shared<const ir::StmtNode>(std::move(nb)));
  // Readers under the loop: the running value; readers elsewhere: the final value.
  StmtPath np = find_loop(p.body, loop, P);
  ir::StmtNode nl = *np.back();
  auto to_scan = [&](const ir::Expr& load, const ir::Expr& position) {
    std::vector<ir::Expr> idx = load->args;
    idx.push_back(position);
    return ir::make_load(scan, load->type, idx);
  };
  nl.body = read_loop_position(nl.body, l.var, l.extent, to_scan, st.buffer);
  p.body = replace_at(np, std::make_shared<const ir::StmtNode>(std::move(nl)));
  ir::Expr last = ir::simplify(ir::make_binary(ir::Op::Sub, l.extent, ir::make_int(1)));
  p.body = ir::mutate(p.body, [&](const ir::Stmt& n) -> ir::Stmt {
    if (n->kind != ir::StmtKind::Block) return n;
    ir::StmtNode b = *n;
    auto fix = [&](const ir::Stmt& part) {
      return part ? ir::mutate_exprs(part,
                                     [&](const ir::Expr& e) {
                                       return e->op == ir::Op::Load && e->name == st.buffer
                                                  ? to_scan(e, last)
                                                  : e;
                                     })
                  : part;
    };
    b.init = fix(b.init);
    b.body = fix(b.body);
    return std::make_shared<const ir::StmtNode>(std::move(b));
  });
  for (auto it = p.buffers.begin(); it != p.buffers.end(); ++it)
    if (it->name == st.buffer) {
      p.buffers.erase(it);
      break;
    }
  commit(std::move(p), {{"primitive", P}, {"block", block}, {"loop", loop.var}});
  return scan;
}

void replay_reduce_to_scan(Schedule& s, const nlohmann::json& j) {
  s.reduce_to_scan(j.at("block").get<std::string>(), loop_arg(j));
}

}  // namespace kintsugi::schedule
