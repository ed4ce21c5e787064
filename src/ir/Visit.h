// \file Visit.h
// Generic traversals of expressions and statements: pre-order visits, bottom-up rewrites and
// variable substitution. Passes use these instead of per-node visitor classes; a pass that needs
// to stop descending returns false from its visitor.
#pragma once

#include <functional>
#include <map>

#include "ir/Stmt.h"

namespace kintsugi::ir {

// Calls f on every node, parents first; when f returns false the node's operands are skipped.
void visit(const Expr& e, const std::function<bool(const Expr&)>& f);
// Rebuilds e bottom-up: operands first, then f on the node with rewritten operands. f returns
// the replacement (or the node itself). Nodes whose operands did not change are shared.
Expr mutate(const Expr& e, const std::function<Expr(const Expr&)>& f);
// Replaces variables by name.
Expr substitute(const Expr& e, const std::map<std::string, Expr>& vars);
// e computed in f32 where it computes in a narrower float type (f16, bf16, fp8): loads and
// literals of such types are read as f32, an explicit cast to one still rounds and its result is
// read as f32, and arithmetic is rebuilt so that it takes its operands' f32 type.
Expr widen_to_f32(const Expr& e);
// True when e mentions the variable `name`.
bool uses_var(const Expr& e, const std::string& name);
// True when e is an integer made of literals and dims only (a value fixed for a whole run).
bool over_sizes(const Expr& e);
// True when e is an integer made of literals, dims and params only (fixed for a kernel's launch).
bool over_sizes_and_params(const Expr& e);

// Calls f on every statement, parents first; when f returns false the children are skipped.
void visit(const Stmt& s, const std::function<bool(const Stmt&)>& f);
// Calls f on every expression held directly by a statement (extents, bindings, indices, values).
void visit_exprs(const Stmt& s, const std::function<void(const Expr&)>& f);
// Rewrites every expression held by the statements of s with f (through `mutate`).
Stmt mutate_exprs(const Stmt& s, const std::function<Expr(const Expr&)>& f);
// Rebuilds s bottom-up with f applied to every statement after its children were rebuilt.
Stmt mutate(const Stmt& s, const std::function<Stmt(const Stmt&)>& f);

}  // namespace kintsugi::ir
