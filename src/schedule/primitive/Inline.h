// \file Inline.h
// What compute_inline and reverse_compute_inline share: recognising an elementwise block and
// substituting its value for loads of its buffer.
#pragma once

#include <string>
#include <vector>

#include "ir/Stmt.h"

namespace kintsugi::schedule {

struct ElementwiseBlock {
  std::string buffer;
  std::vector<std::string> iters;  // the iteration variables, = the store indices in order
  ir::Expr value;
};

// Throws ScheduleError (naming `primitive`) unless the block is elementwise into an intermediate.
ElementwiseBlock match_elementwise(const ir::LoopProgram& program, const ir::StmtNode& block,
                                   const std::string& primitive);
// Replaces every load of eb.buffer in e by eb.value at the load's indices.
ir::Expr inline_loads(const ir::Expr& e, const ElementwiseBlock& eb);
void remove_buffer(ir::LoopProgram& p, const std::string& name);

}  // namespace kintsugi::schedule
