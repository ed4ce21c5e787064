// \file PtxasLog.h
// Parses the resource report that ptxas writes into the NVRTC program log under
// --ptxas-options=-v: registers, barriers, stack, spills and static shared memory per function,
// and the ptxas warnings.
//
// What NVRTC 13.0 prints, per entry function and per non-inlined device function:
//   ptxas info    : Compiling entry function 'k' for 'sm_80'
//   ptxas info    : Function properties for k
//   ptxas         .     8 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads
//   ptxas info    : Used 24 registers, used 1 barriers, 8 bytes cumulative stack size,
//                   1024 bytes smem, 368 bytes cmem[0]          (one line; smem only if used)
// (device functions get only the two "Function properties" lines), and warnings such as
//   ptxas warning : Registers are spilled to local memory in function 'k', ...
//   ptxas warning : (C7511) Potential Performance Loss: wgmma.mma_async instructions are ...
//
// Invariant established: every function the report names appears once, in order of first
// mention; numbers are taken only from the line kinds above (anything else is ignored).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kintsugi::cuda {

struct FunctionResources {
  std::string name;                 // as ptxas prints it: mangled unless declared extern "C"
  bool entry = false;               // a __global__ function
  int registers = -1;               // per thread; -1 if not reported (device functions)
  int barriers = 0;                 // named barriers used
  int64_t stack_frame_bytes = 0;    // per thread
  int64_t spill_store_bytes = 0;    // per thread
  int64_t spill_load_bytes = 0;     // per thread
  int64_t static_shared_bytes = 0;  // __shared__ arrays of the kernel (not dynamic shared memory)
};

struct PtxasReport {
  std::vector<FunctionResources> functions;
  std::vector<std::string> warnings;  // the text after "ptxas warning : "

  // The function named `name`, or null.
  const FunctionResources* find(std::string_view name) const;
};

PtxasReport parse_ptxas_log(std::string_view log);

}  // namespace kintsugi::cuda
