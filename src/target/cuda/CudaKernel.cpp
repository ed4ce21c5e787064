// \file CudaKernel.cpp
// Compiling and running a tile program on the GPU (CudaKernel in CudaBackend.h): NVRTC through
// compile_cuda (disk-cached), the driver through Driver.h.
//
// run() (host tensors) and run_device() (device memory the caller owns) share one path:
// prepare() packs the sizes and params and lists the buffers the caller provides, check_operand()
// checks each tensor, launch_all() allocates the intermediates, launches (run(): after writing
// twice the L2, so that its timing starts from a cold cache), waits and reads back the error
// site. Invariant: no kernel is launched unless every caller tensor has passed its checks
// (count, dtype, shape against the symbolic buffer shapes; for device memory also contiguity,
// 16-byte alignment and the device), so a kernel only addresses memory of the declared extents.
// run() poisons its outputs (all bits set: NaN for floats) so that an element no kernel writes
// cannot pass verification; run_device() leaves the caller's outputs alone until the kernels
// write them.
#include <cstring>
#include <iostream>
#include <sstream>

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "target/cuda/CudaBackend.h"
#include "target/cuda/Driver.h"
#include "target/cuda/Nvrtc.h"

namespace kintsugi::cuda {

namespace {

struct KsArgs {
  unsigned long long bufs[kMaxBuffers];
  long long sizes[kMaxDims];
  double params[kMaxParams];
};

// "input Q" / "output O": how messages name a caller's buffer.
std::string buffer_text(const ir::Buffer& b) {
  return (b.role == ir::BufferRole::Input ? "input " : "output ") + b.name;
}

}  // namespace

// One run: the kernels' parameter block, and the buffers it addresses that are not registers.
struct CudaKernel::Launch {
  struct Slot {
    const ir::Buffer* buffer;
    size_t index;                // in KsArgs::bufs
    std::vector<int64_t> shape;  // at the run's sizes
    size_t bytes;                // at least one element: every buffer has an address
  };
  KsArgs args;
  std::vector<Slot> operands;       // the caller's inputs and outputs, in the order run() takes
  std::vector<Slot> intermediates;  // allocated by launch_all
};

struct CudaKernel::Impl {
  std::unique_ptr<Module> module;
  std::vector<Function> functions;
  // run(): written between the uploads and the launches (allocated on first use). Mutable state
  // of a const launch_all: a kernel object runs one launch at a time.
  DeviceBuffer l2_flush;
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

CudaKernel::Launch CudaKernel::prepare(const runtime::SizeMap& sizes,
                                       const runtime::ParamMap& params, size_t given) const {
  const ir::LoopProgram& p = program_.source;
  Launch l;
  std::memset(&l.args, 0, sizeof(l.args));
  if (p.dims.size() > static_cast<size_t>(kMaxDims) ||
      p.params.size() > static_cast<size_t>(kMaxParams))
    arg_error << "kernel " << p.name << " has more sizes or params than the CUDA back end passes";
  for (size_t d = 0; d < p.dims.size(); ++d) {
    auto it = sizes.find(p.dims[d]);
    if (it == sizes.end()) arg_error << "kernel " << p.name << ": no value for size " << p.dims[d];
    l.args.sizes[d] = it->second;
  }
  tile::check_specialised(program_.specialised, p.name, sizes);
  for (size_t q = 0; q < p.params.size(); ++q) {
    auto it = params.find(p.params[q].name);
    l.args.params[q] = it != params.end() ? it->second : p.params[q].value;
  }
  size_t index = 0;
  for (const ir::Buffer& b : p.buffers) {
    if (tile::is_register(program_, b.name)) continue;
    if (index >= static_cast<size_t>(kMaxBuffers))
      arg_error << "kernel " << p.name << " has more buffers than the CUDA back end passes";
    std::vector<int64_t> shape = ir::eval_shape(b.shape, sizes, params);
    int64_t n = runtime::checked_numel(shape, "buffer " + b.name);
    size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * dtype_bytes(b.dtype);
    Launch::Slot slot{&b, index++, std::move(shape), bytes};
    (b.role == ir::BufferRole::Intermediate ? l.intermediates : l.operands)
        .push_back(std::move(slot));
  }
  if (given != l.operands.size()) {
    std::string names;
    for (const Launch::Slot& o : l.operands) names += (names.empty() ? "" : ", ") + o.buffer->name;
    arg_error << "kernel " << p.name << " takes " << l.operands.size()
              << " tensors (its inputs then outputs, in declaration order: " << names << "), got "
              << given;
  }
  return l;
}

void CudaKernel::check_operand(const Launch& l, size_t i, DType dtype,
                               const std::vector<int64_t>& shape) const {
  const Launch::Slot& o = l.operands[i];
  const ir::Buffer& b = *o.buffer;
  if (dtype != b.dtype)
    arg_error << "kernel " << program_.source.name << ": the tensor for " << buffer_text(b)
              << " has dtype " << dtype_name(dtype) << ", expected " << dtype_name(b.dtype)
              << "; pass a tensor of dtype " << dtype_name(b.dtype);
  if (shape != o.shape)
    arg_error << "kernel " << program_.source.name << ": the tensor for " << buffer_text(b)
              << " has shape " << runtime::shape_string(shape) << ", expected "
              << ir::shape_to_string(b.shape) << " = " << runtime::shape_string(o.shape)
              << " at the sizes of this run";
}

double CudaKernel::launch_all(Launch& l, const runtime::SizeMap& sizes, void* stream,
                              bool cold_l2) const {
  const ir::LoopProgram& p = program_.source;
  std::vector<int64_t> blocks(source_.launches.size(), 1);  // every grid, before any launch
  for (size_t k = 0; k < source_.launches.size(); ++k) {
    for (const ir::Expr& e : source_.launches[k].grid) blocks[k] *= ir::eval_int(e, sizes);
    if (blocks[k] > 0x7fffffff)
      arg_error << "kernel " << source_.launches[k].name << ": grid too large";
  }
  std::vector<DeviceBuffer> scratch;
  scratch.reserve(l.intermediates.size());
  for (const Launch::Slot& s : l.intermediates)
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
  if (code != 0) {
    std::string where = code - 1 < static_cast<int>(source_.sites.size())
                            ? source_.sites[static_cast<size_t>(code - 1)]
                            : std::string("?");
    arg_error << "kernel " << p.name << ": an index or integer division failed at " << where;
  }
  return ms;
}

double CudaKernel::run(const std::vector<runtime::Tensor*>& args, const runtime::SizeMap& sizes,
                       const runtime::ParamMap& params) {
  Launch l = prepare(sizes, params, args.size());
  for (size_t i = 0; i < args.size(); ++i) check_operand(l, i, args[i]->dtype, args[i]->shape);
  // Device storage for the caller's tensors: inputs uploaded, outputs poisoned.
  std::vector<DeviceBuffer> storage;
  storage.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Launch::Slot& o = l.operands[i];
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
  Launch l = prepare(sizes, params, args.size());
  int ordinal = device().ordinal;
  for (size_t i = 0; i < args.size(); ++i) {
    const DeviceTensorRef& t = args[i];
    std::string what = "kernel " + name + ": the tensor for " + buffer_text(*l.operands[i].buffer);
    check_operand(l, i, t.dtype, t.shape);
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
