// \file CudaKernel.cpp
// Compiling and running a tile program on the GPU (CudaKernel in CudaBackend.h): NVRTC through
// compile_cuda (disk-cached), the driver through Driver.h.
//
// run() (host tensors) and run_device() (device memory the caller owns) share one path:
// plan_launch() packs the sizes and params and lists the buffers the caller provides,
// check_operand() checks each tensor (LaunchPlan.h), launch_all() allocates the intermediates,
// launches (run(): after writing twice the L2, so that its timing starts from a cold cache), waits
// and reads back the error site. Invariant: no kernel is launched unless every caller tensor has
// passed its checks (count, dtype, shape against the symbolic buffer shapes; for device memory also
// contiguity, 16-byte alignment and the device), so a kernel only addresses memory of the declared
// extents. run() poisons its outputs (all bits set: NaN for floats) so that an element no kernel
// writes cannot pass verification; run_device() leaves the caller's outputs alone until the kernels
// write them.
#include <iostream>
#include <sstream>

#include "target/cuda/CudaBackend.h"
#include "target/cuda/Driver.h"
#include "target/cuda/LaunchPlan.h"
#include "target/cuda/Nvrtc.h"

namespace kintsugi::cuda {

struct CudaKernel::Impl {
  std::unique_ptr<Module> module;
  std::vector<Function> functions;
  // run(): written between the uploads and the launches (allocated on first use). Mutable state
  // of a const launch_all: a kernel object runs one launch at a time.
  DeviceBuffer l2_flush;
  ir::ProvenRanges proven;  // sizes and params the integer ranges hold at
};

CudaKernel::CudaKernel(const tile::TileProgram& program, const std::string& arch)
    : impl_(new Impl), program_(program), source_(generate_cuda_source(program)) {
  CompiledModule m = compile_cuda(source_.code, program.source.name, arch);
  for (const FunctionResources& f : m.resources.functions)
    if (f.spill_store_bytes > 0 || f.spill_load_bytes > 0)
      std::cerr << "kintsugi: kernel " << f.name << " spills " << f.spill_store_bytes
                << " bytes to local memory\n";
  from_cache_ = m.from_cache;
  compile_seconds_ = m.seconds;
  impl_->module = std::make_unique<Module>(m.cubin);
  for (const KernelLaunch& l : source_.launches) {
    impl_->functions.push_back(impl_->module->function(l.name));
    if (l.dynamic_shared_bytes > 48 * 1024)
      impl_->functions.back().set_max_dynamic_shared_bytes(l.dynamic_shared_bytes);
  }
}

CudaKernel::~CudaKernel() = default;

double CudaKernel::launch_all(LaunchPlan& l, const runtime::SizeMap& sizes, void* stream,
                              bool cold_l2) const {
  std::vector<int64_t> blocks = grid_blocks(source_, sizes);  // every grid, before any launch
  std::vector<DeviceBuffer> scratch;
  scratch.reserve(l.intermediates.size());
  for (const LaunchPlan::Slot& s : l.intermediates)
    l.args.bufs[s.index] = scratch.emplace_back(s.bytes).address();
  DeviceBuffer err(sizeof(int));
  err.fill(0, stream);
  unsigned long long err_ptr = err.address();
  if (cold_l2) {
    // Queued last before the start event, so that the device is busy with it while the host
    // records the event and launches (as do_bench's cache clearing is).
    if (impl_->l2_flush.size() == 0) impl_->l2_flush = DeviceBuffer(2 * size_t(device().l2_bytes));
    impl_->l2_flush.fill(0, stream ? stream : kLegacyStream);
  }
  Event start, stop;
  start.record(stream);
  for (size_t k = 0; k < source_.launches.size(); ++k) {
    const KernelLaunch& kl = source_.launches[k];
    if (blocks[k] <= 0) continue;
    LaunchConfig cfg;
    cfg.grid.x = static_cast<unsigned>(blocks[k]);
    cfg.block.x = static_cast<unsigned>(kl.threads);
    cfg.dynamic_shared_bytes = static_cast<unsigned>(kl.dynamic_shared_bytes);
    cfg.stream = stream;
    impl_->functions[k].launch(cfg, l.args, err_ptr);
  }
  stop.record(stream);
  stop.synchronize();
  double ms = Event::elapsed_ms(start, stop);
  int code = 0;
  err.download(&code, sizeof(code));
  throw_failed_check(program_, source_, code);
  return ms;
}

double CudaKernel::run(const std::vector<runtime::Tensor*>& args, const runtime::SizeMap& sizes,
                       const runtime::ParamMap& params) {
  LaunchPlan l = plan_launch(program_, source_, sizes, params, args.size(), impl_->proven);
  for (size_t i = 0; i < args.size(); ++i)
    check_operand(program_, l, i, args[i]->dtype, args[i]->shape);
  // Device storage for the caller's tensors: inputs uploaded, outputs poisoned.
  std::vector<DeviceBuffer> storage;
  storage.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const LaunchPlan::Slot& o = l.operands[i];
    DeviceBuffer& d = storage.emplace_back(o.bytes);
    if (o.buffer->role == ir::BufferRole::Input)
      d.upload(args[i]->ptr(), args[i]->data.size());
    else
      d.fill(0xff);
    l.args.bufs[o.index] = d.address();
  }
  double ms = launch_all(l, sizes, nullptr, /*cold_l2=*/true);
  for (size_t i = 0; i < args.size(); ++i)
    if (l.operands[i].buffer->role == ir::BufferRole::Output)
      storage[i].download(args[i]->ptr(), args[i]->data.size());
  return ms;
}

double CudaKernel::run_device(const std::vector<DeviceTensorRef>& args,
                              const runtime::SizeMap& sizes, const runtime::ParamMap& params,
                              void* stream) {
  const std::string& name = program_.source.name;
  LaunchPlan l = plan_launch(program_, source_, sizes, params, args.size(), impl_->proven);
  int ordinal = device().ordinal;
  for (size_t i = 0; i < args.size(); ++i) {
    const DeviceTensorRef& t = args[i];
    std::string what = "kernel " + name + ": the tensor for " + buffer_text(*l.operands[i].buffer);
    check_operand(program_, l, i, t.dtype, t.shape);
    if (!runtime::is_row_major(t.shape, t.strides))
      arg_error << what << " is not contiguous row-major (shape " << runtime::shape_string(t.shape)
                << ", strides " << runtime::shape_string(t.strides)
                << " elements); pass a contiguous copy, e.g. x.contiguous() in PyTorch";
    if (t.device != ordinal)
      arg_error << what << " is on CUDA device " << t.device << ", but Kintsugi runs on device "
                << ordinal << "; move it there first, e.g. x.to('cuda:" << ordinal
                << "') in PyTorch";
    if (runtime::checked_numel(t.shape, what) == 0) continue;  // no element is addressed
    if (t.address == 0) arg_error << what << " has no device memory (address 0)";
    if (t.address % 16 != 0) {
      std::ostringstream address;
      address << std::hex << t.address;
      arg_error << what << " starts at device address 0x" << address.str()
                << ", which is not a multiple of 16 bytes; the generated kernels read with "
                   "16-byte vector loads, so every tensor must start 16-byte aligned: pass a "
                   "fresh copy, e.g. x.clone() in PyTorch (a view at an offset, such as x[1:], "
                   "is not aligned)";
    }
    l.args.bufs[l.operands[i].index] = t.address;
  }
  return launch_all(l, sizes, stream);
}

}  // namespace kintsugi::cuda
