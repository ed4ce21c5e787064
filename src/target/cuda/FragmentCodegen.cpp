// \file FragmentCodegen.cpp
// The entry of the tensor-core writer: fragment_writer plans a kernel with FragmentWriter
// (FragmentWriter.h: the layout's kinds, what the emission does, the writer's invariants) and
// hands it to the CUDA back end, or says why the layout does not cover it. The writer's parts,
// by hardware concept: the kernel plan (FragmentPlan.cpp), index and mask analysis
// (FragmentMasks.cpp), the operand stager (FragmentStaging.cpp), the MMA atom
// (FragmentMma.cpp), the emission of the body and its epilogue (FragmentEmit.cpp); the layout
// maps in Fragments.h / Fragments.cpp.
//
// Invariant established: a writer is returned only for a kernel whose plan succeeded.
#include "target/cuda/FragmentWriter.h"

namespace kintsugi::cuda {

std::unique_ptr<KernelWriter> fragment_writer(const tile::TileProgram& p, const tile::Kernel& k,
                                              const CudaTarget& target,
                                              std::vector<std::string>& sites,
                                              KernelLaunch& launch) {
  auto w = std::make_unique<fragment::FragmentWriter>(p, k, target, sites);
  if (!w->plan()) {
    launch.not_tensor_cores = w->why();
    return nullptr;
  }
  launch.not_warpgroup_mma = w->not_warpgroup_mma();
  launch.tensor_maps = w->tensor_maps();
  return w;
}

}  // namespace kintsugi::cuda
