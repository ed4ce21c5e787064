// \file Lower.h
// Lowering of a checked tensor-expression program to the loop IR: one loop nest per reduction
// or elementwise definition.
#pragma once

#include "ir/Stmt.h"
#include "te/Program.h"

namespace kintsugi::te {

// Every reduction nested inside a larger expression is first hoisted into a definition of its
// own, named `<def>.<reducer><k>` and indexed by the enclosing indices it uses; so every block of
// the result is either a pure map (spatial iters only) or a single reduction
// `x[i] = x[i] op body` with an init `x[i] = identity`. A top-level reduction whose result type
// differs from the declared storage type (an f16 output of an f32 sum) is hoisted too, so that
// accumulation happens in the reduction's own type.
ir::LoopProgram lower(const Program& program);

}  // namespace kintsugi::te
