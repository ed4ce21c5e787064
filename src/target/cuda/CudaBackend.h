// \file CudaBackend.h
// The CUDA back end: tile IR -> CUDA C++ (CudaCodegen.cpp) -> NVRTC -> a module launched through
// the driver (CudaKernel.cpp).
//
// First-light code generation: one CTA of kThreads threads per grid instance, every tile value
// spread over the CTA element-cyclically (thread t holds elements t, t + kThreads, ...), in
// registers; operations that move elements between threads (broadcast, permute, reduce, dot)
// go through shared memory. Correct for every tile program; the tensor-core path (MMA layouts,
// ldmatrix, cp.async pipelines) replaces the data movement later without changing this ABI.
//
// Generated kernel ABI: `extern "C" __global__ void <kernel name>(KsArgs args, int* err)` per
// tile kernel, launched in order with a 1-D grid over the flattened grid axes (the last axis
// fastest) and `dynamic_shared_bytes` of shared memory. KsArgs holds the device address of every
// buffer that is not a register (LoopProgram::buffers order), the sizes (dims order) and the
// params. `err` receives 1 + the error site of the first failed index or division check.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/Tensor.h"
#include "tile/TileIR.h"

namespace kintsugi::cuda {

constexpr int kThreads = 128;
constexpr int kMaxBuffers = 32, kMaxDims = 32, kMaxParams = 16;

struct KernelLaunch {
  std::string name;
  std::vector<ir::Expr> grid;  // extents of the grid axes
  int threads = kThreads;      // per CTA
  int dynamic_shared_bytes = 0;
};

struct CudaSource {
  std::string code;
  std::vector<KernelLaunch> launches;
  std::vector<std::string> sites;  // error site texts
};

CudaSource generate_cuda_source(const tile::TileProgram& program);

class CudaKernel {
 public:
  // Generates and compiles for `arch` (e.g. "sm_90a"); NVRTC errors throw.
  CudaKernel(const tile::TileProgram& program, const std::string& arch);
  ~CudaKernel();
  CudaKernel(const CudaKernel&) = delete;
  CudaKernel& operator=(const CudaKernel&) = delete;

  // Inputs then outputs (host tensors), as CpuKernel::run. Outputs are poisoned on the device
  // before the launches, so an element no kernel writes reads as NaN. Returns the device time of
  // the launches (events), in milliseconds.
  double run(const std::vector<runtime::Tensor*>& args, const runtime::SizeMap& sizes,
             const runtime::ParamMap& params);

  const std::string& source() const { return source_.code; }
  bool from_cache() const { return from_cache_; }
  double compile_seconds() const { return compile_seconds_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  tile::TileProgram program_;
  CudaSource source_;
  bool from_cache_ = false;
  double compile_seconds_ = 0;
};

}  // namespace kintsugi::cuda
