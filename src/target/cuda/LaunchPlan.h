// \file LaunchPlan.h
// What a run of a CUDA tile program passes its kernels, worked out on the host before any launch:
// the KsArgs parameter block (the layout program_preamble gives the generated kernels), the
// buffers the caller provides and those allocated for the run, each tensor checked against its
// buffer, the CTA count of every kernel, and the message of a failed index or division check.
// CudaKernel (the GPU) and the emulator the tests run generated kernels on (tests/emu) share it.
//
// Invariant established: a plan's operands are exactly the program's inputs then outputs, in
// declaration order, with their shapes at the run's sizes; a tensor that passed check_operand
// has the dtype and shape of its buffer, so a kernel only addresses the declared extents.
#pragma once

#include <string>
#include <vector>

#include "ir/IndexBounds.h"
#include "target/cuda/CudaBackend.h"
#include "target/cuda/Driver.h"

namespace kintsugi::cuda {

struct KsArgs {
  unsigned long long bufs[kMaxBuffers];
  long long sizes[kMaxDims];
  double params[kMaxParams];
  TensorMap maps[kMaxTensorMaps];  // the launched kernel's (KernelLaunch::tensor_maps)
};

struct LaunchPlan {
  struct Slot {
    const ir::Buffer* buffer;
    size_t index;                // in KsArgs::bufs
    std::vector<int64_t> shape;  // at the run's sizes
    size_t bytes;                // at least one element: every buffer has an address
  };
  KsArgs args;                      // sizes and params filled in; bufs by the caller
  std::vector<Slot> operands;       // the caller's inputs and outputs, in the order run() takes
  std::vector<Slot> intermediates;  // allocated for the run
};

// "input Q" / "output O": how messages name a caller's buffer.
std::string buffer_text(const ir::Buffer& b);

// The plan of one run of `source` (generated from `program`); throws RuntimeArgError unless
// `given` tensors are exactly the inputs and outputs, or a size is missing or outside a
// specialisation.
// `proven`: the values at which the kernel's integer ranges were proven already.
LaunchPlan plan_launch(const tile::TileProgram& program, const CudaSource& source,
                       const runtime::SizeMap& sizes, const runtime::ParamMap& params, size_t given,
                       ir::ProvenRanges& proven);
// Throws RuntimeArgError unless a caller's tensor has the dtype and shape of operand `i`.
void check_operand(const tile::TileProgram& program, const LaunchPlan& plan, size_t i, DType dtype,
                   const std::vector<int64_t>& shape);
// The CTA count of every launch of `source` at `sizes` and `params` (a grid axis may run over an
// extent of integer params, N / G), before any launch: a grid too large for a 1-D launch throws.
std::vector<int64_t> grid_blocks(const CudaSource& source, const runtime::SizeMap& sizes,
                                 const runtime::ParamMap& params);
// The tensor maps of launch `launch` of a run planned as `plan` (its buffers placed), in the
// order of KernelLaunch::tensor_maps. A map over a buffer with an extent of 0 has address 0 and
// is not encoded (no copy reads it: its loop runs no iteration).
std::vector<TensorMapSpec> tensor_map_specs(const tile::TileProgram& program,
                                            const LaunchPlan& plan, const KernelLaunch& launch);
// Throws the RuntimeArgError of error code `code` (1 + site) that a kernel wrote; 0 returns.
void throw_failed_check(const tile::TileProgram& program, const CudaSource& source, int code);

}  // namespace kintsugi::cuda
