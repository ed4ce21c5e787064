// \file Emulator.h
// Runs the CUDA kernels Kintsugi generates for a tile program on the CPU (kintsugi_emu.h): the
// source from generate_cuda_source, its dynamic shared memory bound to the emulated CTA's,
// compiled by the host compiler against the emulated device headers (include/kintsugi/*.cuh)
// into a shared object whose calls into the emulator's runtime (kemu_runtime.h) resolve, when it
// is loaded, to EmulatorRuntime.cpp in this executable, launched kernel by kernel over its grid
// as CudaKernel launches it on a GPU (LaunchPlan.h).
//
// Invariant established: run() computes what the GPU would, instruction by instruction as the
// emulator models them (kintsugi_emu.h), with the same argument checks, poisoned outputs and
// error sites as CudaKernel::run; a kernel the emulator cannot complete (a barrier not all
// threads reach, a shared access out of bounds) throws an InternalError naming the kernel.
#pragma once

#include <string>
#include <vector>

#include "runtime/Tensor.h"
#include "target/cuda/CudaBackend.h"
#include "target/cuda/LaunchPlan.h"

namespace kintsugi::emu {

// A CUDA source compiled for the emulator (ks_smem bound to the CTA's dynamic shared memory,
// the exact f16 / bf16 conversions and kintsugi_emu.h in front of it), its kernels launched by
// name.
class EmulatedModule {
 public:
  explicit EmulatedModule(const std::string& cuda_source);
  ~EmulatedModule();
  EmulatedModule(const EmulatedModule&) = delete;
  EmulatedModule& operator=(const EmulatedModule&) = delete;

  // Runs `kernel(args, err)` (the generated ABI, CudaBackend.h) on `threads` threads of each of
  // `grid` CTAs; throws InternalError with the emulator's reason when a CTA cannot complete.
  void launch(const std::string& kernel, cuda::KsArgs& args, int* err, unsigned grid,
              unsigned threads, unsigned dynamic_shared_bytes) const;

 private:
  void* library_ = nullptr;
};

class EmulatedCudaKernel {
 public:
  // The kernels generated for `target` (sm_80: mma.sync; sm_90a: wgmma where they can).
  EmulatedCudaKernel(const tile::TileProgram& program, const cuda::CudaTarget& target);

  // Inputs then outputs (host tensors), as CudaKernel::run.
  void run(const std::vector<runtime::Tensor*>& args, const runtime::SizeMap& sizes,
           const runtime::ParamMap& params);

  const cuda::CudaSource& source() const { return source_; }

 private:
  tile::TileProgram program_;
  cuda::CudaSource source_;
  EmulatedModule module_;
  ir::ProvenRanges proven_;
};

}  // namespace kintsugi::emu
