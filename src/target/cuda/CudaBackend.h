// \file CudaBackend.h
// The CUDA back end: tile IR -> CUDA C++ (CudaCodegen.cpp) -> NVRTC -> a module launched through
// the driver (CudaKernel.cpp).
//
// Code generation: one CTA per grid instance. Kernels with tensor-core dots get the accumulator
// layout (Fragments.h: R / 16 warps, cp.async or TMA + ldmatrix or wgmma operand tiles,
// double-buffered streams);
// every other kernel runs on kThreads threads with every tile value spread element-cyclically
// (thread t holds elements t, t + kThreads, ...) and shared memory for data movement.
//
// Generated kernel ABI: `extern "C" __global__ void <kernel name>(KsArgs args, int* err)` per
// tile kernel, launched in order with a 1-D grid over the flattened grid axes (the last axis
// fastest) and `dynamic_shared_bytes` of shared memory. KsArgs holds the device address of every
// buffer that is not a register (LoopProgram::buffers order), the sizes (dims order), the params
// and the TMA tensor maps of the kernel launched (KernelLaunch::tensor_maps; a __grid_constant__
// parameter, so that cp.async.bulk.tensor may take their addresses). `err` receives 1 + the error
// site of the first failed index or division check.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/Tensor.h"
#include "target/cuda/CudaTarget.h"
#include "tile/TileIR.h"

namespace kintsugi::cuda {

struct LaunchPlan;  // one run's parameter block and buffers (LaunchPlan.h)

constexpr int kThreads = 128;
// Dynamic shared memory one CTA may use on every supported architecture (sm_80's 163 KiB; a
// target's own bound is CudaTarget::max_shared_bytes).
constexpr int kMaxSharedBytes = CudaTarget{}.max_shared_bytes();
constexpr int kMaxBuffers = 32, kMaxDims = 32, kMaxParams = 16, kMaxTensorMaps = 4;

// A tensor map a kernel reads tiles through (TMA): over the whole of program buffer `buffer`
// (LoopProgram::buffers order), its extents and strides those of the run; boxes of `box`
// elements (innermost first, one extent a dimension of the buffer) in a swizzle of
// `swizzle_bytes` (0, 32, 64 or 128). The launch encodes it into KsArgs::maps at its index.
struct TensorMapUse {
  size_t buffer = 0;
  std::vector<uint32_t> box;
  int swizzle_bytes = 0;
};

struct KernelLaunch {
  std::string name;
  std::vector<ir::Expr> grid;  // extents of the grid axes
  int threads = kThreads;      // per CTA
  // Grid instances a CTA runs, on lanes of a warp each (short rows:
  // KernelWriter::instances_per_cta); the launch has ceil(instances / instances_per_cta) CTAs.
  int instances_per_cta = 1;
  int dynamic_shared_bytes = 0;
  // Written by the tensor-core writer (Fragments.h), else by the element-cyclic one; for a kernel
  // with a dot of f16 or bf16 values that the tensor-core writer does not take, why not (empty
  // without such a dot).
  bool tensor_cores = false;
  std::string not_tensor_cores;
  // On sm_90a, for a tensor-core kernel whose row tile fills warpgroups: why its dots run as
  // mma.sync rather than wgmma (empty when they run as wgmma).
  std::string not_warpgroup_mma;
  std::vector<TensorMapUse> tensor_maps;  // at most kMaxTensorMaps
};

// Where a buffer of the program is at a launch, by declaration order: a register of its kernel
// (no argument), memory, or an argument slot left 0 (an intermediate no kernel touches: its
// stores were dead).
enum class BufferSlot : uint8_t { Register, Memory, Unused };

struct CudaSource {
  std::string code;
  std::vector<KernelLaunch> launches;
  std::vector<std::string> sites;   // error site texts
  std::vector<BufferSlot> buffers;  // by the program's buffer order (KsArgs::bufs skips registers)
};

// The kernels of `program` for `target`: on sm_90a the tensor-core writer's dots run as wgmma where
// every dot of a kernel can (Fragments.h), elsewhere as mma.sync.
CudaSource generate_cuda_source(const tile::TileProgram& program, const CudaTarget& target);

class CudaKernel {
 public:
  // A tensor in device memory that the caller owns (run_device): contiguous row-major, on the
  // device whose primary context Kintsugi uses (Driver.h), starting at a 16-byte boundary.
  struct DeviceTensorRef {
    DType dtype = DType::Unknown;
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;  // in elements; empty means contiguous row-major
    uint64_t address = 0;          // CUdeviceptr of the first element
    int device = 0;                // CUDA device ordinal
  };

  // Generates and compiles for `arch` (e.g. "sm_90a"); NVRTC errors throw.
  CudaKernel(const tile::TileProgram& program, const std::string& arch);
  ~CudaKernel();
  CudaKernel(const CudaKernel&) = delete;
  CudaKernel& operator=(const CudaKernel&) = delete;

  // Inputs then outputs (host tensors), as CpuKernel::run. Outputs are poisoned on the device
  // before the launches, so an element no kernel writes reads as NaN. Returns the device time of
  // the launches (events), in milliseconds, from a cold L2: twice its size is written between the
  // uploads and the launches, as the peers' benchmark (triton's do_bench) does before each run,
  // so that no input is read from the cache its upload left it in.
  double run(const std::vector<runtime::Tensor*>& args, const runtime::SizeMap& sizes,
             const runtime::ParamMap& params);

  // The same on device memory the caller owns, without copies, asynchronously: `args` are the
  // inputs and outputs in the order run() takes them. Every tensor is checked on the host before
  // any launch (count, dtype, shape, contiguity, 16-byte alignment, device); each check names the
  // buffer and says how to fix the tensor. The launches are queued on `stream` (a CUstream;
  // nullptr: the default stream) and enqueue returns without waiting for them: no device
  // synchronisation, no copy to the host and, once the workspace has reached the size the
  // largest sizes need, no allocation. Outputs are written in place and not poisoned. The calls
  // may be captured into a CUDA graph; the kernel object must outlive its replays. A stream a
  // call used must stay valid until a call on another stream (which records an event on it to
  // order the shared workspace) or the kernel's destruction (which waits for it). A failed index
  // or division check inside a kernel is reported by check(), or by this call itself when
  // launches are checked (set_check_each_launch, or KINTSUGI_CHECK_LAUNCHES=1 in the environment
  // when the kernel was created), which then waits for the launches.
  void enqueue(const std::vector<DeviceTensorRef>& args, const runtime::SizeMap& sizes,
               const runtime::ParamMap& params, void* stream = nullptr);
  // Waits for all work on the device and throws the RuntimeArgError of the first failed index or
  // division check a kernel of this object reported since the last check (then clears it).
  void check();
  void set_check_each_launch(bool on) { check_each_launch_ = on; }
  bool check_each_launch() const { return check_each_launch_; }

  const std::string& source() const { return source_.code; }
  const std::vector<KernelLaunch>& launches() const { return source_.launches; }
  bool from_cache() const { return from_cache_; }
  double compile_seconds() const { return compile_seconds_; }

 private:
  struct Impl;
  // The launch plan at `sizes` and `params` (checked, with the grids), made once for a run of
  // calls at the same sizes; `given`: the caller's tensor count. Holds impl_->mu.
  LaunchPlan& plan(const runtime::SizeMap& sizes, const runtime::ParamMap& params,
                   size_t given) const;
  // Places the intermediates in the workspace (growing it) and queues every kernel of `launch`
  // on `stream` (ordered after the previous launches when they went to another stream). Holds
  // impl_->mu.
  void launch_kernels(LaunchPlan& launch, void* stream) const;
  // Reads the error word (waiting for the device to write it) and throws a failed check's error.
  void read_error_word() const;

  std::unique_ptr<Impl> impl_;
  tile::TileProgram program_;
  CudaSource source_;
  bool from_cache_ = false;
  bool check_each_launch_ = false;
  double compile_seconds_ = 0;
};

}  // namespace kintsugi::cuda
