// \file Analysis.h
// Queries and rewrites on the loop IR that schedule primitives share: finding blocks and loops
// by name, replacing a statement inside the tree, substituting a loop variable, and listing the
// buffers a block reads and writes.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/Stmt.h"
#include "schedule/Schedule.h"

namespace kintsugi::schedule {

// The chain of statements from the root down to (and including) a node.
using StmtPath = std::vector<const ir::StmtNode*>;

// Finds a block by name; throws ScheduleError (naming `primitive`) when there is none.
StmtPath find_block(const ir::Stmt& root, const std::string& name, const std::string& primitive);
// Finds the loop `loop.var` enclosing block `loop.block`; the path ends at the loop.
StmtPath find_loop(const ir::Stmt& root, const LoopRef& loop, const std::string& primitive);
// The loops on a path (outermost first).
std::vector<const ir::StmtNode*> loops_on(const StmtPath& path);
// Every block under s, in program order.
std::vector<const ir::StmtNode*> blocks_under(const ir::Stmt& s);
// Every loop variable name in the program.
std::set<std::string> all_loop_vars(const ir::Stmt& root);
// Every block name in the program.
std::set<std::string> all_block_names(const ir::Stmt& root);

// Rebuilds root with the node at the end of `path` replaced by `replacement` (null removes it
// from its Seq; a loop left empty is removed too).
ir::Stmt replace_at(const StmtPath& path, ir::Stmt replacement);

// Substitutes a loop variable in the statements under s: loop bounds, If conditions, block
// bindings and predicates. Block bodies are not entered: inside a block only its iteration
// variables are visible.
ir::Stmt substitute_loop_var(const ir::Stmt& s, const std::string& var, const ir::Expr& value);
// Conjoins `pred` to the predicate of every block under s.
ir::Stmt add_block_predicate(const ir::Stmt& s, const ir::Expr& pred);

// Recognises a reduction update `x[i] = combine(x[i], g)`: the reducer and the term g.
bool match_reduction_update(const ir::StmtNode& store, ir::Reducer* reducer, ir::Expr* term);

using ir::combine;
using ir::reducer_identity_expr;

// Buffers read and written by a block (init included).
std::set<std::string> block_reads(const ir::StmtNode& block);
std::set<std::string> block_writes(const ir::StmtNode& block);
// The block that writes each buffer.
std::map<std::string, const ir::StmtNode*> block_writers(const ir::Stmt& root);

ir::Expr var(const std::string& name);  // an Int loop/iteration variable
// `body` inside serial loops over `iters` from 0, outermost first, each loop named after its
// iteration variable (a new nest whose block binds each variable to its own loop).
ir::Stmt nest_over(const std::vector<ir::IterVar>& iters, ir::Stmt body);

}  // namespace kintsugi::schedule
