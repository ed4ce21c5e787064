// \file Stmt.cpp
// Loop IR factories and program look-ups.
#include "ir/Stmt.h"

namespace kintsugi::ir {

namespace {
Stmt node(StmtNode n) {
  return std::make_shared<const StmtNode>(std::move(n));
}
}  // namespace

Stmt make_seq(std::vector<Stmt> stmts) {
  StmtNode n;
  n.kind = StmtKind::Seq;
  n.stmts = std::move(stmts);
  return node(std::move(n));
}

Stmt make_for(const std::string& var, Expr min, Expr extent, ForKind kind, Stmt body) {
  StmtNode n;
  n.kind = StmtKind::For;
  n.var = var;
  n.min = std::move(min);
  n.extent = std::move(extent);
  n.for_kind = kind;
  n.body = std::move(body);
  return node(std::move(n));
}

Stmt make_block(const std::string& name, std::vector<IterVar> iters, Stmt init, Stmt body,
                Expr predicate) {
  StmtNode n;
  n.predicate = std::move(predicate);
  n.kind = StmtKind::Block;
  n.name = name;
  n.iters = std::move(iters);
  n.init = std::move(init);
  n.body = std::move(body);
  return node(std::move(n));
}

Stmt make_store(const std::string& buffer, std::vector<Expr> indices, Expr value) {
  StmtNode n;
  n.kind = StmtKind::Store;
  n.buffer = buffer;
  n.indices = std::move(indices);
  n.value = std::move(value);
  return node(std::move(n));
}

Stmt make_if(Expr cond, Stmt then_case, Stmt else_case) {
  StmtNode n;
  n.kind = StmtKind::If;
  n.cond = std::move(cond);
  n.then_case = std::move(then_case);
  n.else_case = std::move(else_case);
  return node(std::move(n));
}

Stmt make_allocate(const std::string& buffer, Stmt body) {
  StmtNode n;
  n.kind = StmtKind::Allocate;
  n.buffer = buffer;
  n.body = std::move(body);
  return node(std::move(n));
}

const Buffer* LoopProgram::find_buffer(const std::string& name) const {
  for (const Buffer& b : buffers)
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<const Buffer*> LoopProgram::inputs() const {
  std::vector<const Buffer*> out;
  for (const Buffer& b : buffers)
    if (b.role == BufferRole::Input) out.push_back(&b);
  return out;
}

std::map<std::string, double> LoopProgram::param_values(
    const std::map<std::string, double>& given) const {
  std::map<std::string, double> out = given;
  for (const Param& q : params) out.emplace(q.name, q.value);
  return out;
}

std::vector<const Buffer*> LoopProgram::outputs() const {
  std::vector<const Buffer*> out;
  for (const Buffer& b : buffers)
    if (b.role == BufferRole::Output) out.push_back(&b);
  return out;
}

}  // namespace kintsugi::ir
