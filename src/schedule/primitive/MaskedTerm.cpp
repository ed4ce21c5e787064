// \file MaskedTerm.cpp
// The value of a reduction's term on masked elements (see MaskedTerm.h).
#include "schedule/primitive/MaskedTerm.h"

#include <map>
#include <random>
#include <string>

#include "ir/Printer.h"

namespace kintsugi::schedule {

std::optional<double> masked_term_differs(const ir::Expr& term, double expected,
                                          const algebra::LeafFn& fixed) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> dist(-4.0, 4.0);
  for (int trial = 0; trial < 8; ++trial) {
    std::map<std::string, double> values;
    double v = algebra::eval_ir(term, [&](const ir::Expr& n, double* out) {
      if (fixed && fixed(n, out)) return true;
      if (n->op != ir::Op::Load && n->op != ir::Op::Var) return false;
      std::string key = ir::to_string(n);
      if (!values.count(key)) values[key] = dist(rng);
      *out = values[key];
      return true;
    });
    if (!(v == expected)) return v;
  }
  return std::nullopt;
}

}  // namespace kintsugi::schedule
