// \file CudaTarget.h
// What the CUDA code generator generates for: a target description parsed once from an
// architecture name ("sm_80", "sm_90a"), asked for the instruction families it offers, instead
// of architecture strings compared where code is written.
//
// Invariant established: a CudaTarget names a well-formed architecture (sm_<N> with an optional
// suffix 'a' or 'f'); whether NVRTC compiles for it is NVRTC's check (compile_cuda).
#pragma once

#include <string>

namespace kintsugi::cuda {

struct CudaTarget {
  int sm = 80;      // compute capability, major * 10 + minor
  char suffix = 0;  // 'a' (architecture-specific instructions), 'f' (family), or 0
  // "sm_<N>", "sm_<N>a" or "sm_<N>f"; anything else is a user error saying how to spell one.
  static CudaTarget parse(const std::string& arch);
  std::string arch() const;  // the name NVRTC takes
  // wgmma.mma_async, setmaxnreg and the tensor-map copies' swizzled operands: sm_90a alone
  // (sm_100a and later have other tensor-core instructions, and plain sm_90 has none of these).
  bool warpgroup_mma() const { return sm == 90 && suffix == 'a'; }
  // cvt.rn.satfinite.e4m3x2.f32: sm_89 and later.
  bool fp8_conversions() const { return sm >= 89; }
  // Dynamic shared memory one CTA may use: 227 KiB on sm_90; 163 KiB (sm_80's) below it.
  constexpr int max_shared_bytes() const { return sm >= 90 ? 227 * 1024 : 163 * 1024; }
};

}  // namespace kintsugi::cuda
