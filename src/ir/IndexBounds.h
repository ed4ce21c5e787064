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

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ir/Stmt.h"
#include "runtime/Tensor.h"

namespace kintsugi::ir {

void check_integer_ranges(const LoopProgram& p, const runtime::SizeMap& sizes,
                          const runtime::ParamMap& params, const std::string& kernel);

// Whether every integer division or modulo by a value other than a literal in `p` has operands a
// 32-bit division takes, for every size anywhere in [its value, its value + overrun] (the tiles
// of a compiled kernel run up to `overrun` past a loop's end) and every integer param anywhere in
// its type's range. A kernel generated with 32-bit divisions on this proof is launched only at
// sizes where it holds again (ProvenRanges::check).
bool divisions_fit_int32(const LoopProgram& p, const runtime::SizeMap& sizes, int64_t overrun);

// The size and param values at which a compiled kernel's integer ranges were proven: check() runs
// check_integer_ranges once for each (the proof is most of a small call's host time) and after
// that only looks the values up. Thread-safe; keeps the last 64.
class ProvenRanges {
 public:
  // int32_division_overrun >= 0: the kernel divides in 32 bits (divisions_fit_int32 with this
  // overrun must hold too).
  void check(const LoopProgram& p, const runtime::SizeMap& sizes, const runtime::ParamMap& params,
             const std::string& kernel, int64_t int32_division_overrun = -1);

 private:
  std::mutex mu_;
  std::vector<std::pair<runtime::SizeMap, runtime::ParamMap>> proven_;
};

}  // namespace kintsugi::ir
