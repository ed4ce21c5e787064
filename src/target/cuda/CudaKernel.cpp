// \file CudaKernel.cpp
// Compiling and running a tile program on the GPU (CudaKernel in CudaBackend.h): NVRTC through
// compile_cuda (disk-cached), the driver through Driver.h.
//
// run() (host tensors) and enqueue() (device memory the caller owns) share one path:
// plan_launch() packs the sizes and params and lists the buffers the caller provides,
// check_operand() checks each tensor (LaunchPlan.h), launch_kernels() places the intermediates in
// the kernel's workspace and queues the launches. run() then waits (its launches are timed with
// events, after writing twice the L2, so that the timing starts from a cold cache) and reads back
// the error word; enqueue() returns at once, and the error word is read by check() (or after every
// launch when launches are checked). Invariant: no kernel is launched unless every caller tensor
// has passed its checks (count, dtype, shape against the symbolic buffer shapes; for device memory
// also contiguity, 16-byte alignment and the device), so a kernel only addresses memory of the
// declared extents. run() poisons its outputs (all bits set: NaN for floats) so that an element no
// kernel writes cannot pass verification; enqueue() leaves the caller's outputs alone until the
// kernels write them.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>

#include "target/cuda/CudaBackend.h"
#include "target/cuda/Driver.h"
#include "target/cuda/LaunchPlan.h"
#include "target/cuda/Nvrtc.h"

namespace kintsugi::cuda {

namespace {
// Offsets of intermediates in the workspace: a multiple of 256 bytes, the alignment cuMemAlloc
// gives each allocation (the kernels' vector loads need 16).
constexpr size_t kWorkspaceAlignment = 256;

size_t align_up(size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}
}  // namespace

struct CudaKernel::Impl {
  std::unique_ptr<Module> module;
  std::vector<Function> functions;
  ir::ProvenRanges proven;  // sizes and params the integer ranges hold at
  // The word a kernel writes the site of a failed index or division check into (LaunchPlan.h):
  // zeroed when allocated and after each read.
  DeviceBuffer error_word;
  // The intermediates of every launch, at aligned offsets of one allocation that is reused and
  // only grows (to at least twice its size, so that a growing decode loop reallocates rarely). An
  // outgrown allocation is kept until the kernel is destroyed: queued work, or a CUDA graph that
  // captured the launches, may still use it; so no launch waits for the device.
  DeviceBuffer workspace;
  std::vector<DeviceBuffer> outgrown;
  // The stream of the last launches outside a graph capture. A launch on another stream reuses
  // the workspace, so it waits for an event recorded on that stream then (after everything
  // queued there, the last launches included): no event is recorded on the common path.
  bool launched = false;
  StreamHandle last_stream = nullptr;
  std::optional<Event> stream_switch;
  // The plan of the last launch (the sizes and params it was made for): a call at the same
  // sizes reuses it with the caller's addresses, without evaluating a shape again.
  std::optional<LaunchPlan> last_plan;
  runtime::SizeMap plan_sizes;
  runtime::ParamMap plan_params;
  std::vector<int64_t> plan_blocks;
  // Each launch's tensor maps as last encoded, with the address and extents they were encoded
  // for: a call at the same addresses and sizes encodes none again.
  std::vector<std::vector<std::pair<TensorMapSpec, TensorMap>>> encoded;
  DeviceBuffer l2_flush;  // run(): written between the uploads and the launches
  std::mutex mu;          // one launch sequence at a time (they share the workspace)
};

CudaKernel::CudaKernel(const tile::TileProgram& program, const std::string& arch)
    : impl_(new Impl),
      program_(program),
      source_(generate_cuda_source(program, CudaTarget::parse(arch))) {
  CompiledModule m = compile_cuda(source_.code, program.source.name, arch);
  // A cubin runs on the major version it was compiled for; code for an older one (sm_80 on an
  // H200, the mma.sync path measured against wgmma) loads as its PTX, which the driver compiles
  // for the device.
  const int sm = CudaTarget::parse(arch).sm;
  const bool native = sm / 10 == device().cc_major;
  for (const FunctionResources& f : m.resources.functions)
    if (f.spill_store_bytes > 0 || f.spill_load_bytes > 0)
      std::cerr << "kintsugi: kernel " << f.name << " spills " << f.spill_store_bytes
                << " bytes to local memory\n";
  from_cache_ = m.from_cache;
  compile_seconds_ = m.seconds;
  impl_->module = std::make_unique<Module>(native ? m.cubin : m.ptx);
  for (const KernelLaunch& l : source_.launches) {
    impl_->functions.push_back(impl_->module->function(l.name));
    if (l.dynamic_shared_bytes > 48 * 1024)
      impl_->functions.back().set_max_dynamic_shared_bytes(l.dynamic_shared_bytes);
  }
  impl_->error_word = DeviceBuffer(sizeof(int));
  impl_->error_word.fill(0);
  const char* env = std::getenv("KINTSUGI_CHECK_LAUNCHES");
  check_each_launch_ = env && *env && std::string(env) != "0";
}

CudaKernel::~CudaKernel() {
  // The workspace is freed below: wait for the launches that use it (errors are dropped).
  if (impl_->launched) {
    try {
      Event done(/*timing=*/false);
      done.record(impl_->last_stream);
      done.synchronize();
    } catch (...) {
    }
  }
}

LaunchPlan& CudaKernel::plan(const runtime::SizeMap& sizes, const runtime::ParamMap& params,
                             size_t given) const {
  Impl& i = *impl_;
  if (!i.last_plan || sizes != i.plan_sizes || params != i.plan_params) {
    i.last_plan.reset();
    LaunchPlan l = plan_launch(program_, source_, sizes, params, given, i.proven);
    i.plan_blocks = grid_blocks(source_, sizes, params);  // every grid, before any launch
    i.last_plan = std::move(l);
    i.plan_sizes = sizes;
    i.plan_params = params;
  } else if (given != i.last_plan->operands.size()) {
    plan_launch(program_, source_, sizes, params, given, i.proven);  // throws the count's error
  }
  return *i.last_plan;
}

void CudaKernel::launch_kernels(LaunchPlan& l, StreamHandle stream) const {
  Impl& i = *impl_;
  size_t total = 0;
  for (const LaunchPlan::Slot& s : l.intermediates) total += align_up(s.bytes);
  // The capture state is asked only where it matters: before an allocation, and on a switch of
  // streams (a capture's launches are ordered by the graph, not by events).
  if (total > i.workspace.size()) {
    if (stream_capturing(stream))
      arg_error << "kernel " << program_.source.name << " needs a workspace of " << total
                << " bytes at these sizes, more than it has (" << i.workspace.size()
                << "), and cannot allocate while its stream captures a CUDA graph: call it once "
                   "with the largest sizes the graph uses before capturing";
    size_t grown = 2 * i.workspace.size();
    if (grown > 0) i.outgrown.push_back(std::move(i.workspace));
    i.workspace = DeviceBuffer(std::max(total, grown));
  }
  size_t offset = 0;
  for (const LaunchPlan::Slot& s : l.intermediates) {
    l.args.bufs[s.index] = i.workspace.address() + offset;
    offset += align_up(s.bytes);
  }
  bool switched = !i.launched || i.last_stream != stream;
  if (switched && !stream_capturing(stream)) {
    if (i.launched && !stream_capturing(i.last_stream)) {
      if (!i.stream_switch) i.stream_switch.emplace(/*timing=*/false);
      i.stream_switch->record(i.last_stream);
      i.stream_switch->block(stream);
    }
    i.launched = true;
    i.last_stream = stream;
  }
  unsigned long long err_ptr = i.error_word.address();
  for (size_t k = 0; k < source_.launches.size(); ++k) {
    const KernelLaunch& kl = source_.launches[k];
    if (i.plan_blocks[k] <= 0) continue;
    LaunchConfig cfg;
    cfg.grid.x = static_cast<unsigned>(i.plan_blocks[k]);
    cfg.block.x = static_cast<unsigned>(kl.threads);
    cfg.dynamic_shared_bytes = static_cast<unsigned>(kl.dynamic_shared_bytes);
    cfg.stream = stream;
    if (kl.tensor_maps.empty()) {
      i.functions[k].launch(cfg, l.args, err_ptr);
      continue;
    }
    i.encoded.resize(source_.launches.size());
    std::vector<TensorMapSpec> specs = tensor_map_specs(program_, l, kl);
    std::vector<std::pair<TensorMapSpec, TensorMap>>& cached = i.encoded[k];
    cached.resize(specs.size());
    KsArgs args = l.args;
    for (size_t m = 0; m < specs.size(); ++m) {
      const TensorMapSpec &now = specs[m], &was = cached[m].first;
      if (now.address != 0 &&
          (now.address != was.address || now.dims != was.dims || now.strides != was.strides))
        cached[m] = {now, encode_tensor_map(now)};
      args.maps[m] = cached[m].second;
    }
    i.functions[k].launch(cfg, args, err_ptr);
  }
}

void CudaKernel::read_error_word() const {
  int code = 0;
  impl_->error_word.download(&code, sizeof(code));
  if (code == 0) return;
  impl_->error_word.fill(0);
  throw_failed_check(program_, source_, code);
}

double CudaKernel::run(const std::vector<runtime::Tensor*>& args, const runtime::SizeMap& sizes,
                       const runtime::ParamMap& params) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  LaunchPlan& l = plan(sizes, params, args.size());
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
  // Queued last before the start event, so that the device is busy with it while the host records
  // the event and launches (as do_bench's cache clearing is).
  if (impl_->l2_flush.size() == 0) impl_->l2_flush = DeviceBuffer(2 * size_t(device().l2_bytes));
  impl_->l2_flush.fill(0, kLegacyStream);
  Event start, stop;
  start.record(kLegacyStream);
  launch_kernels(l, kLegacyStream);
  stop.record(kLegacyStream);
  double ms = Event::elapsed_ms(start, stop);
  read_error_word();
  for (size_t i = 0; i < args.size(); ++i)
    if (l.operands[i].buffer->role == ir::BufferRole::Output)
      storage[i].download(args[i]->ptr(), args[i]->data.size());
  return ms;
}

void CudaKernel::enqueue(const std::vector<DeviceTensorRef>& args, const runtime::SizeMap& sizes,
                         const runtime::ParamMap& params, StreamHandle stream) {
  const std::string& name = program_.source.name;
  std::lock_guard<std::mutex> lock(impl_->mu);
  LaunchPlan& l = plan(sizes, params, args.size());
  int ordinal = device().ordinal;
  for (size_t i = 0; i < args.size(); ++i) {
    const DeviceTensorRef& t = args[i];
    check_operand(program_, l, i, t.dtype, t.shape);
    auto what = [&] {
      return "kernel " + name + ": the tensor for " + buffer_text(*l.operands[i].buffer);
    };
    if (!runtime::is_row_major(t.shape, t.strides))
      arg_error << what() << " is not contiguous row-major (shape "
                << runtime::shape_string(t.shape) << ", strides "
                << runtime::shape_string(t.strides)
                << " elements); pass a contiguous copy, e.g. x.contiguous() in PyTorch";
    if (t.device != ordinal)
      arg_error << what() << " is on CUDA device " << t.device << ", but Kintsugi runs on device "
                << ordinal << "; move it there first, e.g. x.to('cuda:" << ordinal
                << "') in PyTorch";
    if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end())
      continue;  // no element is addressed (the shape is checked: its product fits)
    if (t.address == 0) arg_error << what() << " has no device memory (address 0)";
    if (t.address % 16 != 0) {
      std::ostringstream address;
      address << std::hex << t.address;
      arg_error << what() << " starts at device address 0x" << address.str()
                << ", which is not a multiple of 16 bytes; the generated kernels read with "
                   "16-byte vector loads, so every tensor must start 16-byte aligned: pass a "
                   "fresh copy, e.g. x.clone() in PyTorch (a view at an offset, such as x[1:], "
                   "is not aligned)";
    }
    l.args.bufs[l.operands[i].index] = t.address;
  }
  launch_kernels(l, stream);
  if (check_each_launch_ && !stream_capturing(stream)) {
    Event done(/*timing=*/false);
    done.record(stream);
    done.synchronize();
    read_error_word();
  }
}

void CudaKernel::check() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  // The whole device: replays of CUDA graphs that captured the launches write the word too.
  synchronize();
  read_error_word();
}

}  // namespace kintsugi::cuda
