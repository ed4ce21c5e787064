// \file RowSample.cpp
// Independence of a program along a size, and the rows of a sample (RowSample.h).
#include "runtime/RowSample.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "ir/Visit.h"

namespace kintsugi::runtime {

namespace {

bool is_size(const ir::Expr& e, const std::string& size) {
  return e && e->op == ir::Op::Var && e->var_kind == ir::VarKind::Dim && e->name == size;
}

// Whether the accesses of one block keep its rows apart: every access of a buffer of `rows`
// indexes its first dimension by the same spatial iteration variable of extent `size`, the block
// writes such a buffer if it reads one, and `size` appears in no expression of the block.
bool block_keeps_rows(const ir::StmtNode& block, const std::string& size,
                      const std::set<std::string>& rows) {
  std::set<std::string> row_iters;
  for (const ir::IterVar& iv : block.iters) {
    if (iv.binding && ir::uses_var(iv.binding, size)) return false;
    if (is_size(iv.extent, size) && iv.kind == ir::IterKind::Spatial)
      row_iters.insert(iv.name);
    else if (ir::uses_var(iv.extent, size))
      return false;
  }
  if (block.predicate && ir::uses_var(block.predicate, size)) return false;
  std::string row_var;  // the iteration variable every row access uses
  bool ok = true, reads_rows = false, writes_rows = false;
  auto access = [&](const std::string& buffer, const std::vector<ir::Expr>& indices) {
    if (!rows.count(buffer)) return;
    const ir::Expr& first = indices.empty() ? nullptr : indices.front();
    if (!first || first->op != ir::Op::Var || !row_iters.count(first->name) ||
        (!row_var.empty() && row_var != first->name))
      ok = false;
    else
      row_var = first->name;
  };
  auto expression = [&](const ir::Expr& e) {
    ir::visit(e, [&](const ir::Expr& x) {
      if (is_size(x, size)) ok = false;
      if (x->op == ir::Op::Load && rows.count(x->name)) {
        reads_rows = true;
        access(x->name, x->args);
      }
      return true;
    });
  };
  auto walk = [&](const ir::Stmt& s) {
    if (!s) return;
    ir::visit(s, [&](const ir::Stmt& t) {
      if (t->kind == ir::StmtKind::Block) {
        ok = ok && block_keeps_rows(*t, size, rows);
        return false;
      }
      if (t->kind == ir::StmtKind::Store) {
        writes_rows = writes_rows || rows.count(t->buffer);
        access(t->buffer, t->indices);
        for (const ir::Expr& i : t->indices) expression(i);
        expression(t->value);
        return false;
      }
      if (t->kind == ir::StmtKind::If) expression(t->cond);
      if (t->kind == ir::StmtKind::For &&
          (ir::uses_var(t->min, size) || ir::uses_var(t->extent, size)))
        ok = false;
      return true;
    });
  };
  walk(block.init);
  walk(block.body);
  return ok && (!reads_rows || writes_rows);
}

bool independent_along(const ir::LoopProgram& p, const std::string& size) {
  std::set<std::string> rows;
  for (const ir::Buffer& b : p.buffers)
    for (size_t d = 0; d < b.shape.size(); ++d) {
      if (!ir::uses_var(b.shape[d], size)) continue;
      if (d != 0 || !is_size(b.shape[d], size)) return false;
      rows.insert(b.name);
    }
  bool any_output = false;
  for (const ir::Buffer* b : p.outputs()) any_output = any_output || rows.count(b->name);
  if (!any_output) return false;
  bool ok = true;
  // Outside blocks only loops, whose extents may be the size, hold expressions.
  ir::visit(p.body, [&](const ir::Stmt& s) {
    if (s->kind == ir::StmtKind::Block) {
      ok = ok && block_keeps_rows(*s, size, rows);
      return false;
    }
    if (s->kind == ir::StmtKind::Store || s->kind == ir::StmtKind::If) ok = false;
    return true;
  });
  return ok;
}

}  // namespace

std::string independent_size(const ir::LoopProgram& p) {
  for (const std::string& d : p.dims)
    if (independent_along(p, d)) return d;
  return "";
}

std::vector<int64_t> sample_rows(int64_t extent, int64_t count, uint64_t seed) {
  std::set<int64_t> rows;
  if (extent <= count) {
    for (int64_t r = 0; r < extent; ++r) rows.insert(r);
    return {rows.begin(), rows.end()};
  }
  const int64_t ends = std::min<int64_t>(8, count / 4);
  for (int64_t r = 0; r < ends; ++r) rows.insert({r, extent - 1 - r});
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> pick(0, extent - 1);
  while (static_cast<int64_t>(rows.size()) < count) rows.insert(pick(gen));
  return {rows.begin(), rows.end()};
}

std::map<std::string, Tensor> take_rows(const ir::LoopProgram& p, const std::string& size,
                                        const std::map<std::string, Tensor>& tensors,
                                        const std::vector<int64_t>& rows) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : tensors) {
    const ir::Buffer* b = p.find_buffer(name);
    if (!b || b->shape.empty() || !is_size(b->shape.front(), size)) {
      out.emplace(name, t);
      continue;
    }
    std::vector<int64_t> shape = t.shape;
    shape.front() = static_cast<int64_t>(rows.size());
    Tensor sliced(t.dtype, shape);
    const size_t row_bytes = t.data.size() / static_cast<size_t>(t.shape.front());
    for (size_t k = 0; k < rows.size(); ++k)
      std::memcpy(sliced.data.data() + k * row_bytes,
                  t.data.data() + static_cast<size_t>(rows[k]) * row_bytes, row_bytes);
    out.emplace(name, std::move(sliced));
  }
  return out;
}

}  // namespace kintsugi::runtime
