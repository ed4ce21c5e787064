// \file Kernel.h
// The compiled-kernel object behind `kintsugi.compile` (no Python types here: Module.cpp converts
// DLPack tensors to ArgViews and back).
//
// A Kernel holds one lowered program and compiles it per size binding: schedule (auto or none),
// loop-to-tile translation (the scalar loop path when the program has no tile form), then for
// target cpu CPU code generation and the host compiler, for target cuda CUDA code generation and
// NVRTC (both with disk caches that make a binding seen before cheap). A call binds every dim
// from the shapes of its tensors, checks dtypes, ranks and shapes against the program's
// declarations, and runs the variant compiled for exactly those sizes, compiling it first if
// needed.
//
// Memory: target cpu reads and writes host memory. Target cuda takes either every tensor in
// device memory, passed to the kernels by address without a copy (CudaKernel::run_device), or
// every tensor in host memory, copied to the GPU and back (CudaKernel::run); a call that mixes
// the two is refused.
//
// Invariant: a kernel only ever runs on tensors whose dtype and shape match the buffers of the
// program it was compiled from, at the sizes it was compiled for, all in the memory its path
// reads; every mismatch is a RuntimeArgError that names the tensor, what it expected and what it
// got.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "driver/Driver.h"
#include "ir/Stmt.h"
#include "runtime/Tensor.h"
#include "target/cpu/CpuBackend.h"
#include "target/cuda/CudaBackend.h"
#include "target/cuda/Driver.h"

namespace kintsugi::python {

// Where a tensor's elements are: host memory, or the memory of a CUDA device.
enum class Memory { Host, Cuda };

// A caller's tensor, contiguous row-major, as the binding sees it.
struct ArgView {
  DType dtype = DType::Unknown;  // Unknown: not a Kintsugi storage type (see dtype_name)
  std::string dtype_name;        // the producer's dtype: float16, bfloat16, float64, int64, ...
  std::vector<int64_t> shape;
  void* data = nullptr;  // first element (a device address for Memory::Cuda)
  Memory memory = Memory::Host;
  int device = 0;                            // the CUDA device ordinal (Memory::Cuda)
  std::shared_ptr<runtime::Tensor> storage;  // set for Kintsugi's own host tensors (used in place)
};

// A tensor in device memory that Kintsugi allocated (an output of target cuda): stream-ordered
// memory on the stream of the call that wrote it, shared with the streams of the calls and DLPack
// consumers that use it (cuda::StreamBuffer).
struct DeviceTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int device = 0;  // CUDA device ordinal
  cuda::StreamBuffer buffer;
};

// A tensor that Kintsugi allocated: exactly one of `host` and `device` is set.
struct OwnedTensor {
  std::shared_ptr<runtime::Tensor> host;
  std::shared_ptr<DeviceTensor> device;

  DType dtype() const { return host ? host->dtype : device->dtype; }
  const std::vector<int64_t>& shape() const { return host ? host->shape : device->shape; }
  size_t nbytes() const { return host ? host->data.size() : device->buffer.size(); }
  // The elements in host memory: this tensor's own storage, or a copy of the device's.
  std::shared_ptr<runtime::Tensor> to_host() const;
};

// The target cannot run on this machine (target cuda without NVRTC in the build, a driver or a
// device). Not a UserError: no argument is wrong (Python: RuntimeError, not ValueError).
class TargetUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct KernelOptions {
  std::string target = "cpu";     // "cpu" or "cuda"
  std::string arch;               // cuda: the NVRTC arch; empty: the device's own (sm_90a on 9.0)
  std::string schedule = "auto";  // "auto" or "none"
  runtime::SizeMap shape;         // size hints (kintsugi.compile(shape=...))
  runtime::ParamMap params;       // param overrides
  std::string name;               // program name for source text (default "program")
  int64_t chunk_tiles = 0;  // split-K: key tiles a chunk walks with the rolling update; 0: chosen
  int64_t whole_row_bytes = -1;      // rows up to this many bytes computed whole; -1: the target's
  std::vector<std::string> require;  // require=[...]: fused, tile, tensor-core (driver/Driver.h)
  std::optional<bool> check_launches;  // cuda: wait for and check every launch; unset: the env's
  // Sizes that vary from call to call (dynamic=[...]): one variant serves every value of them,
  // scheduled as if each were driver::kDynamicScheduleSize.
  std::vector<std::string> dynamic;
};

// One compiled variant: the program scheduled and compiled for one size binding.
struct Variant {
  runtime::SizeMap sizes;
  ir::LoopProgram scheduled;
  std::shared_ptr<cpu::CpuKernel> kernel;  // target cpu
  std::shared_ptr<cuda::CudaKernel> gpu;   // target cuda
  std::vector<std::string> schedule;       // primitive names, in order
  std::vector<std::string> notes;          // the auto-scheduler's notes, and why not tile form
  std::vector<std::string> warnings;       // a schedule rejected by validation, a slower code path
  std::string form;                        // "tile" or "loop"
  std::vector<driver::FusedReduction> fusion;  // every reduction and the update that fused it
  std::vector<driver::KernelPath> kernels;     // the code path of every kernel

  // The generated C++ (cpu) or CUDA C++ (cuda).
  const std::string& source() const { return gpu ? gpu->source() : kernel->source(); }
};

// DLPack/NumPy spelling of a Kintsugi storage type: f16 -> float16, bf16 -> bfloat16, ...
std::string array_dtype_name(DType t);

class Kernel {
 public:
  // `text` is .te source (`is_source`) or the path of a .te file. Parses, checks, lowers and
  // validates the options; compiles right away when `shape` binds every dim (otherwise the first
  // call's tensors bind the sizes).
  Kernel(const std::string& text, bool is_source, KernelOptions options);

  // The rule of kintsugi.compile for a string: source text when it contains a newline or does
  // not end in ".te", else a path.
  static bool is_source_text(const std::string& text);

  // Why target cuda cannot run here, or "" when it can (NVRTC in this build, a driver, a device).
  static std::string cuda_unavailable_reason();

  // Runs on `inputs` (in the program's input order). With `outs` null the outputs are allocated
  // (in the memory of the inputs) and returned; otherwise the results are written into `outs`
  // (one per output, in order) and nothing is returned. Target cuda queues the launches on
  // `stream` (a CUstream; nullptr: the legacy default stream) when the tensors are in device
  // memory; they have finished when run returns. Thread-safe; compiles when the sizes are new.
  std::vector<OwnedTensor> run(const std::vector<ArgView>& inputs, const std::vector<ArgView>* outs,
                               cuda::StreamHandle stream = nullptr);

  // The sizes a call with these tensors binds (checks dtypes, ranks, consistency and shapes).
  runtime::SizeMap bind(const std::vector<ArgView>& inputs, const std::vector<ArgView>* outs) const;

  // The variant of the last call, or (before any call) the one for the size hints: `shape`, then
  // the source's `sizes` line; compiles it if needed.
  std::shared_ptr<const Variant> current();
  // The sizes a call at `sizes` is compiled for: `sizes` with every dynamic size at
  // driver::kDynamicScheduleSize.
  runtime::SizeMap schedule_sizes(const runtime::SizeMap& sizes) const;
  // The variant for `sizes` (compiled at schedule_sizes(sizes)), compiled on first use.
  std::shared_ptr<const Variant> variant(const runtime::SizeMap& sizes);

  const ir::LoopProgram& program() const { return program_; }
  const KernelOptions& options() const { return options_; }
  const runtime::ParamMap& params() const { return params_; }  // every param, with overrides
  std::vector<runtime::SizeMap> compiled_sizes() const;        // every binding compiled so far
  // The output shapes of a call with inputs of these shapes (declaration order), with the sizes
  // they bind; inconsistent or missing sizes throw as a call's would.
  std::vector<std::vector<int64_t>> output_shapes(
      const std::vector<std::vector<int64_t>>& input_shapes) const;
  // Target cuda: waits for the device, then throws the first failed check a kernel of a variant
  // reported since the last check (CudaKernel::check). Target cpu: nothing (calls check).
  void check() const;
  // The warnings of the variants compiled since the last call (each variant's once), for the
  // front end to report (Python: warnings.warn).
  std::vector<std::string> take_warnings();
  // "softmax(X: f32[M, N]) -> Y: f32[M, N]"
  std::string signature() const;

 private:
  // A tensor of the call with what messages call it ("input 'Q'", "out 'O'").
  struct NamedArg {
    const ir::Buffer* buffer;
    const ArgView* view;
    std::string what;
  };
  std::vector<NamedArg> named_args(const std::vector<ArgView>& inputs,
                                   const std::vector<ArgView>* outs) const;
  // The memory every tensor of the call is in; throws when the target cannot read it or the
  // tensors disagree.
  Memory call_memory(const std::vector<NamedArg>& args) const;
  std::shared_ptr<const Variant> compile_variant(const runtime::SizeMap& sizes) const;
  // Records `v` as the variant of `sizes` and the last one, its warnings as not yet reported;
  // mu_ held.
  std::shared_ptr<const Variant> add_variant(const runtime::SizeMap& sizes,
                                             std::shared_ptr<const Variant> v);
  // The call on host memory for the CPU back end: `in_view` and `out_view` (the outputs given,
  // by name; the others are allocated and returned when `given_outs` is false).
  std::vector<OwnedTensor> run_host(const Variant& v, const runtime::SizeMap& sizes,
                                    const std::map<std::string, const ArgView*>& in_view,
                                    const std::map<std::string, const ArgView*>& out_view,
                                    bool given_outs) const;
  // The call on device memory (target cuda): outputs in `outs`, else allocated and returned.
  std::vector<OwnedTensor> run_device(const Variant& v, const runtime::SizeMap& sizes,
                                      const std::vector<ArgView>& inputs,
                                      const std::vector<ArgView>* outs,
                                      cuda::StreamHandle stream) const;

  ir::LoopProgram program_;
  KernelOptions options_;
  runtime::ParamMap params_;

  mutable std::mutex mu_;  // guards variants_ and last_
  std::map<runtime::SizeMap, std::shared_ptr<const Variant>> variants_;
  std::shared_ptr<const Variant> last_;
  std::vector<std::string> unreported_;  // warnings take_warnings has not returned yet
  std::set<driver::Requirement> require_;
  std::mutex compile_mu_;  // one compile at a time per kernel
};

}  // namespace kintsugi::python
