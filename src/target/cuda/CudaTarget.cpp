// \file CudaTarget.cpp
// CudaTarget::parse and arch (CudaTarget.h).
//
// Invariant established: parse(t.arch()) == t for every parsed t.
#include "target/cuda/CudaTarget.h"

#include <charconv>

#include "support/Error.h"

namespace kintsugi::cuda {

CudaTarget CudaTarget::parse(const std::string& arch) {
  CudaTarget t;
  bool ok = arch.rfind("sm_", 0) == 0;
  if (ok) {
    const char* begin = arch.data() + 3;
    const char* end = arch.data() + arch.size();
    auto [rest, ec] = std::from_chars(begin, end, t.sm);
    ok = ec == std::errc() && rest != begin && t.sm > 0 &&
         (rest == end || (rest + 1 == end && (*rest == 'a' || *rest == 'f')));
    if (ok && rest != end) t.suffix = *rest;
  }
  if (!ok)
    arg_error << "'" << arch
              << "' is not a CUDA architecture: write sm_<compute capability>, e.g. sm_80, or "
                 "sm_90a for the architecture-specific instructions of H100/H200";
  return t;
}

std::string CudaTarget::arch() const {
  std::string s = "sm_" + std::to_string(sm);
  if (suffix) s += suffix;
  return s;
}

}  // namespace kintsugi::cuda
