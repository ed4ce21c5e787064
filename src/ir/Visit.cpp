// \file Visit.cpp
// Generic traversals (see Visit.h).
#include "ir/Visit.h"

namespace kintsugi::ir {

void visit(const Expr& e, const std::function<bool(const Expr&)>& f) {
  if (!e || !f(e)) return;
  for (const Expr& a : e->args) visit(a, f);
  for (const Axis& ax : e->axes) visit(ax.extent, f);
}

Expr mutate(const Expr& e, const std::function<Expr(const Expr&)>& f) {
  if (!e) return e;
  bool changed = false;
  std::vector<Expr> args;
  args.reserve(e->args.size());
  for (const Expr& a : e->args) {
    args.push_back(mutate(a, f));
    changed |= args.back() != a;
  }
  Expr rebuilt = changed ? with_args(e, std::move(args)) : e;
  return f(rebuilt);
}

Expr substitute(const Expr& e, const std::map<std::string, Expr>& vars) {
  return mutate(e, [&](const Expr& n) -> Expr {
    if (n->op == Op::Var) {
      auto it = vars.find(n->name);
      if (it != vars.end()) return it->second;
    }
    return n;
  });
}

Expr widen_to_f32(const Expr& e) {
  auto narrow = [](DType t) { return is_float(t) && t != DType::F32; };
  return mutate(e, [&](const Expr& n) -> Expr {
    switch (n->op) {
      case Op::Load:
      case Op::Cast:
      case Op::Var:
        return narrow(n->type) ? make_cast(DType::F32, n) : n;
      case Op::FloatImm:
        return narrow(n->type) ? make_float(n->float_value, DType::F32) : n;
      case Op::Call:
        return narrow(n->type) ? make_call(n->fn, n->args) : n;
      case Op::Select:
        return narrow(n->type) ? make_select(n->args[0], n->args[1], n->args[2]) : n;
      default:
        if (!narrow(n->type)) return n;
        if (n->args.size() == 1) return make_unary(n->op, n->args[0]);
        if (n->args.size() == 2) return make_binary(n->op, n->args[0], n->args[1]);
        return n;
    }
  });
}

bool uses_var(const Expr& e, const std::string& name) {
  bool found = false;
  visit(e, [&](const Expr& n) {
    if (n->op == Op::Var && n->name == name) found = true;
    return !found;
  });
  return found;
}

namespace {
bool integer_over(const Expr& e, bool params) {
  bool ok = e->type == DType::Int;
  visit(e, [&](const Expr& n) {
    ok = ok && n->op != Op::Load &&
         (n->op != Op::Var || n->var_kind == VarKind::Dim ||
          (params && n->var_kind == VarKind::Param));
    return ok;
  });
  return ok;
}
}  // namespace

bool over_sizes(const Expr& e) {
  return integer_over(e, false);
}

bool over_sizes_and_params(const Expr& e) {
  return integer_over(e, true);
}

void visit(const Stmt& s, const std::function<bool(const Stmt&)>& f) {
  if (!s || !f(s)) return;
  for (const Stmt& c : s->stmts) visit(c, f);
  visit(s->init, f);
  visit(s->body, f);
  visit(s->then_case, f);
  visit(s->else_case, f);
}

void visit_exprs(const Stmt& s, const std::function<void(const Expr&)>& f) {
  visit(s, [&](const Stmt& n) {
    if (n->min) f(n->min);
    if (n->extent) f(n->extent);
    for (const IterVar& iv : n->iters) {
      f(iv.extent);
      f(iv.binding);
    }
    if (n->predicate) f(n->predicate);
    for (const Expr& i : n->indices) f(i);
    if (n->value) f(n->value);
    if (n->cond) f(n->cond);
    return true;
  });
}

Stmt mutate(const Stmt& s, const std::function<Stmt(const Stmt&)>& f) {
  if (!s) return s;
  StmtNode n = *s;
  bool changed = false;
  for (Stmt& c : n.stmts) {
    Stmt m = mutate(c, f);
    changed |= m != c;
    c = m;
  }
  for (Stmt* child : {&n.init, &n.body, &n.then_case, &n.else_case}) {
    Stmt m = mutate(*child, f);
    changed |= m != *child;
    *child = m;
  }
  Stmt rebuilt = changed ? std::make_shared<const StmtNode>(std::move(n)) : s;
  return f(rebuilt);
}

Stmt mutate_exprs(const Stmt& s, const std::function<Expr(const Expr&)>& f) {
  return mutate(s, [&](const Stmt& st) -> Stmt {
    StmtNode n = *st;
    auto m = [&](Expr& e) {
      if (e) e = mutate(e, f);
    };
    m(n.min);
    m(n.extent);
    for (IterVar& iv : n.iters) {
      m(iv.extent);
      m(iv.binding);
    }
    m(n.predicate);
    for (Expr& i : n.indices) m(i);
    m(n.value);
    m(n.cond);
    return std::make_shared<const StmtNode>(std::move(n));
  });
}

}  // namespace kintsugi::ir
