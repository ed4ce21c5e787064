// \file IndexBounds.h
// A launch-time proof that a compiled kernel's integer arithmetic stays in 64 bits.
//
// Compiled kernels compute indices and other integer values in int64_t and do not check each
// operation (the reference interpreter does). Before a launch, when every size and param is
// known, check_integer_ranges bounds every integer operation of the kernel's loop program by
// interval arithmetic over the domains of its loops and blocks. Invariant: a kernel that passes
// it never computes an integer outside the int64 range; one that may is refused with a
// RuntimeArgError naming the expression, before it runs. (The bounds are conservative: a value
// that is only reachable in masked-out tails still counts.)
#pragma once

#include <string>

#include "ir/Stmt.h"
#include "runtime/Tensor.h"

namespace kintsugi::ir {

void check_integer_ranges(const LoopProgram& p, const runtime::SizeMap& sizes,
                          const runtime::ParamMap& params, const std::string& kernel);

}  // namespace kintsugi::ir
