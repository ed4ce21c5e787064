// \file CudaKernel.cpp
// Compiling and running a tile program on the GPU (CudaKernel in CudaBackend.h): NVRTC through
// compile_cuda (disk-cached), the driver through Driver.h. Arguments are checked before any
// launch (count, dtypes, shapes against the symbolic buffer shapes, the specialised dims); every
// buffer that is not a register lives in device memory for the run; outputs are poisoned (all
// bits set: NaN for floats) so that an element no kernel writes cannot pass verification.
#include <cstring>
#include <iostream>

#include "ir/Interpreter.h"
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

}  // namespace

struct CudaKernel::Impl {
  std::unique_ptr<Module> module;
  std::vector<Function> functions;
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

double CudaKernel::run(const std::vector<runtime::Tensor*>& args, const runtime::SizeMap& sizes,
                       const runtime::ParamMap& params) {
  const ir::LoopProgram& p = program_.source;
  KsArgs ka;
  std::memset(&ka, 0, sizeof(ka));
  if (p.dims.size() > static_cast<size_t>(kMaxDims) ||
      p.params.size() > static_cast<size_t>(kMaxParams))
    arg_error << "kernel " << p.name << " has more sizes or params than the CUDA back end passes";
  for (size_t d = 0; d < p.dims.size(); ++d) {
    auto it = sizes.find(p.dims[d]);
    if (it == sizes.end()) arg_error << "kernel " << p.name << ": no value for size " << p.dims[d];
    ka.sizes[d] = it->second;
    tile::check_specialised(program_.specialised, p.name, p.dims[d], it->second);
  }
  for (size_t q = 0; q < p.params.size(); ++q) {
    auto it = params.find(p.params[q].name);
    ka.params[q] = it != params.end() ? it->second : p.params[q].value;
  }
  // Device storage for every buffer that is not a register.
  std::vector<DeviceBuffer> storage;
  std::vector<std::pair<runtime::Tensor*, size_t>> outputs;  // host tensor, storage index
  size_t arg = 0;
  for (const ir::Buffer& b : p.buffers) {
    if (tile::is_register(program_, b.name)) continue;
    if (storage.size() >= static_cast<size_t>(kMaxBuffers))
      arg_error << "kernel " << p.name << " has more buffers than the CUDA back end passes";
    std::vector<int64_t> shape = ir::eval_shape(b.shape, sizes);
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * dtype_bytes(b.dtype);
    storage.emplace_back(bytes);
    if (b.role == ir::BufferRole::Intermediate) {
      ka.bufs[storage.size() - 1] = storage.back().address();
      continue;
    }
    if (arg >= args.size()) arg_error << "kernel " << p.name << " expects a tensor for " << b.name;
    runtime::Tensor* t = args[arg++];
    if (t->dtype != b.dtype || t->shape != shape)
      arg_error << "kernel " << p.name << ": tensor for " << b.name
                << " has the wrong dtype or shape";
    if (b.role == ir::BufferRole::Input) {
      storage.back().upload(t->ptr(), t->data.size());
    } else {
      storage.back().fill(0xff);
      outputs.push_back({t, storage.size() - 1});
    }
    ka.bufs[storage.size() - 1] = storage.back().address();
  }
  DeviceBuffer err(sizeof(int));
  err.fill(0);
  unsigned long long err_ptr = err.address();
  Event start, stop;
  start.record();
  for (size_t k = 0; k < source_.launches.size(); ++k) {
    const KernelLaunch& l = source_.launches[k];
    int64_t blocks = 1;
    for (const ir::Expr& e : l.grid) blocks *= ir::eval_int(e, sizes);
    if (blocks <= 0) continue;
    if (blocks > 0x7fffffff) arg_error << "kernel " << l.name << ": grid too large";
    LaunchConfig cfg;
    cfg.grid.x = static_cast<unsigned>(blocks);
    cfg.block.x = static_cast<unsigned>(l.threads);
    cfg.dynamic_shared_bytes = static_cast<unsigned>(l.dynamic_shared_bytes);
    impl_->functions[k].launch(cfg, ka, err_ptr);
  }
  stop.record();
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
  for (auto& [t, s] : outputs) storage[s].download(t->ptr(), t->data.size());
  return ms;
}

}  // namespace kintsugi::cuda
