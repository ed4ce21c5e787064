// \file Limits.cpp
// Value ranges of params (see Limits.h).
#include "ir/Limits.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace kintsugi::ir {

std::string param_value_problem(DType type, double value) {
  std::ostringstream why;
  if (is_int(type)) {
    double lo = type == DType::I8 ? -128.0 : -2147483648.0;
    double hi = type == DType::I8 ? 127.0 : 2147483647.0;
    if (!std::isfinite(value) || value != std::trunc(value))
      why << "an integer param (" << dtype_name(type) << ") needs an integer value";
    else if (value < lo || value > hi)
      why << "the value is outside the range of " << dtype_name(type) << ", ["
          << static_cast<long long>(lo) << ", " << static_cast<long long>(hi) << "]";
    return why.str();
  }
  if (std::isnan(value)) return "a param cannot be NaN";
  if (std::isfinite(value) &&
      std::isinf(round_to_dtype(value, type == DType::Unknown ? DType::F32 : type)))
    why << "the value overflows " << dtype_name(type) << " (it would become "
        << (value > 0 ? "inf" : "-inf") << "); write inf explicitly if that is meant";
  return why.str();
}

std::string param_value_text(double value) {
  char buf[64];
  if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 1e18)
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(value));
  else
    std::snprintf(buf, sizeof(buf), "%.17g", value);
  return buf;
}

}  // namespace kintsugi::ir
