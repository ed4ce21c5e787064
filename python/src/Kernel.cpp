// \file Kernel.cpp
// The compiled-kernel object of the Python module (see Kernel.h): options, per-size variants for
// the cpu and cuda targets, argument binding and checks, and the host and device call paths.
#include "Kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "driver/Driver.h"
#include "ir/Interpreter.h"
#include "ir/Limits.h"
#include "ir/Printer.h"
#include "support/Error.h"
#include "target/cuda/CudaTarget.h"
#include "target/cuda/Nvrtc.h"
#include "te/Lower.h"
#include "te/Program.h"

namespace kintsugi::python {

namespace {

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string declaration(const ir::Buffer& b) {
  return b.name + ": " + dtype_name(b.dtype) + ir::shape_to_string(b.shape);
}

std::string sizes_text(const runtime::SizeMap& sizes) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : sizes) parts.push_back(name + "=" + std::to_string(value));
  return join(parts);
}

int64_t bytes_of(const ArgView& v) {
  int64_t n = 1;
  for (int64_t d : v.shape) n *= d;
  return n * dtype_bytes(v.dtype);
}

std::string memory_text(const ArgView& v) {
  return v.memory == Memory::Host ? std::string("host memory")
                                  : "CUDA device memory (cuda:" + std::to_string(v.device) + ")";
}

// Throws unless code compiled for `arch` loads on the device (a cubin runs on the major version
// it targets, at that minor version or later; an "a" target only on exactly its version).
void check_arch(const std::string& arch) {
  const cuda::DeviceInfo& d = cuda::device();
  cuda::CudaTarget t;
  try {
    t = cuda::CudaTarget::parse(arch);
  } catch (const UserError&) {
    arg_error << "arch='" << arch << "' is not an NVRTC target; use the form sm_80 or sm_90a, or "
              << "arch=None for this GPU's own (" << d.arch() << ")";
  }
  const int major = t.sm / 10, minor = t.sm % 10;
  bool runs = major == d.cc_major && (t.suffix == 'a' ? minor == d.cc_minor : minor <= d.cc_minor);
  if (!runs)
    arg_error << "arch='" << arch << "' does not run on " << d.name << " (compute capability "
              << d.cc_major << "." << d.cc_minor << "); use arch=None for this GPU's own ("
              << d.arch() << ")";
}

}  // namespace

std::shared_ptr<runtime::Tensor> OwnedTensor::to_host() const {
  if (host) return host;
  auto t = std::make_shared<runtime::Tensor>(device->dtype, device->shape);
  device->buffer.download(t->ptr(), t->data.size());
  return t;
}

std::string Kernel::cuda_unavailable_reason() {
  if (!cuda::nvrtc_available())
    return "this build of Kintsugi has no NVRTC (the CUDA toolkit was not found when it was "
           "configured): install the CUDA toolkit and rebuild";
  std::string why;
  if (!cuda::driver_available(&why)) return "no usable NVIDIA GPU here: " + why;
  return "";
}

std::string array_dtype_name(DType t) {
  switch (t) {
    case DType::F16:
      return "float16";
    case DType::BF16:
      return "bfloat16";
    case DType::F8E4M3:
      return "float8_e4m3fn";
    case DType::F8E5M2:
      return "float8_e5m2";
    case DType::F32:
      return "float32";
    case DType::I32:
      return "int32";
    case DType::I8:
      return "int8";
    default:
      return dtype_name(t);
  }
}

bool Kernel::is_source_text(const std::string& text) {
  bool te_suffix = text.size() >= 3 && text.compare(text.size() - 3, 3, ".te") == 0;
  return text.find('\n') != std::string::npos || !te_suffix;
}

Kernel::Kernel(const std::string& text, bool is_source, KernelOptions options)
    : options_(std::move(options)) {
  if (options_.target != "cpu" && options_.target != "cuda")
    arg_error << "unknown target '" << options_.target << "'; use target='cpu' or 'cuda'";
  if (options_.schedule != "auto" && options_.schedule != "none")
    arg_error << "unknown schedule '" << options_.schedule << "'; use schedule='auto' or 'none'";
  if (options_.target == "cpu" && !options_.arch.empty())
    arg_error << "arch='" << options_.arch << "' applies to target='cuda' only; leave it out";
  if (options_.target == "cuda") {
    if (std::string why = cuda_unavailable_reason(); !why.empty())
      throw TargetUnavailable("kintsugi.compile(..., target='cuda'): " + why +
                              ". Run on a machine with an NVIDIA GPU and its driver, or use "
                              "target='cpu'");
    if (options_.schedule != "auto")
      arg_error << "target='cuda' runs scheduled programs only; use schedule='auto'";
    if (options_.arch.empty())
      options_.arch = cuda::device().arch();
    else
      check_arch(options_.arch);
  }

  require_ = driver::parse_requirements(options_.require, "require");
  te::Program p = is_source ? te::parse("<string>", text) : te::parse_file(text);
  if (is_source) p.name = options_.name.empty() ? "program" : options_.name;
  if (!is_source && !options_.name.empty()) p.name = options_.name;
  te::check(p);
  program_ = te::lower(p);

  for (const auto& [name, value] : options_.shape) {
    if (std::find(program_.dims.begin(), program_.dims.end(), name) == program_.dims.end())
      arg_error << "shape names '" << name << "', which is not a size of " << program_.name
                << " (its sizes are: "
                << (program_.dims.empty() ? std::string("none") : join(program_.dims)) << ")";
    if (value <= 0) arg_error << "shape " << name << "=" << value << ": sizes must be positive";
  }
  for (const ir::Param& q : program_.params) params_[q.name] = q.value;
  for (const auto& [name, value] : options_.params) {
    const ir::Param* decl = nullptr;
    for (const ir::Param& q : program_.params)
      if (q.name == name) decl = &q;
    if (!decl) {
      std::vector<std::string> names;
      for (const ir::Param& q : program_.params) names.push_back(q.name);
      arg_error << "params names '" << name << "', which is not a param of " << program_.name
                << " (its params are: " << (names.empty() ? std::string("none") : join(names))
                << ")";
    }
    if (std::string why = ir::param_value_problem(decl->dtype, value); !why.empty())
      arg_error << "params " << name << "=" << ir::param_value_text(value) << ": " << why
                << " (param '" << name << "' is " << dtype_name(decl->dtype) << ")";
    params_[name] = value;
  }

  for (const std::string& d : options_.dynamic)
    if (std::find(program_.dims.begin(), program_.dims.end(), d) == program_.dims.end())
      arg_error << "dynamic names '" << d << "', which is not a size of " << program_.name
                << " (its sizes are: "
                << (program_.dims.empty() ? std::string("none") : join(program_.dims)) << ")";

  // Every dim given (or dynamic): compile now, so that errors and compile time show up here.
  bool all_given =
      std::all_of(program_.dims.begin(), program_.dims.end(), [&](const std::string& d) {
        return options_.shape.count(d) ||
               std::count(options_.dynamic.begin(), options_.dynamic.end(), d);
      });
  if (all_given && !(options_.shape.empty() && options_.dynamic.empty())) {
    runtime::SizeMap sizes = schedule_sizes(options_.shape);
    std::shared_ptr<const Variant> v = compile_variant(sizes);
    std::lock_guard<std::mutex> lock(mu_);
    add_variant(sizes, v);
  }
}

std::shared_ptr<const Variant> Kernel::compile_variant(const runtime::SizeMap& sizes) const {
  auto v = std::make_shared<Variant>();
  v->sizes = sizes;
  driver::ScheduleOptions o;
  o.target = driver::Target::parse(options_.target, options_.arch);
  o.schedule = options_.schedule;
  o.sizes = sizes;
  o.params = params_;
  o.chunk_tiles = options_.chunk_tiles;
  o.whole_row_bytes = options_.whole_row_bytes;
  o.require = require_;
  o.require_who = "require";
  o.dynamic.insert(options_.dynamic.begin(), options_.dynamic.end());
  driver::Scheduled s = driver::schedule_program(program_, o);
  v->scheduled = s.program;
  v->schedule = s.primitives;
  v->notes = s.notes;
  v->warnings = s.warnings;
  v->fusion = s.fusion;
  driver::Built b = driver::build_kernel(s, o.target, sizes);
  v->warnings.insert(v->warnings.end(), b.warnings.begin(), b.warnings.end());
  v->kernels = b.kernels;
  v->kernel = b.cpu;
  v->gpu = b.gpu;
  if (v->gpu && options_.check_launches) v->gpu->set_check_each_launch(*options_.check_launches);
  v->form = b.form;
  return v;
}

std::shared_ptr<const Variant> Kernel::add_variant(const runtime::SizeMap& sizes,
                                                   std::shared_ptr<const Variant> v) {
  unreported_.insert(unreported_.end(), v->warnings.begin(), v->warnings.end());
  return last_ = variants_[sizes] = std::move(v);
}

std::vector<std::string> Kernel::take_warnings() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(unreported_, {});
}

runtime::SizeMap Kernel::schedule_sizes(const runtime::SizeMap& sizes) const {
  return driver::schedule_sizes(sizes, {options_.dynamic.begin(), options_.dynamic.end()});
}

std::shared_ptr<const Variant> Kernel::variant(const runtime::SizeMap& call_sizes) {
  runtime::SizeMap sizes = schedule_sizes(call_sizes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = variants_.find(sizes); it != variants_.end()) return last_ = it->second;
  }
  std::lock_guard<std::mutex> compiling(compile_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);  // compiled by another thread meanwhile?
    if (auto it = variants_.find(sizes); it != variants_.end()) return last_ = it->second;
  }
  std::shared_ptr<const Variant> v = compile_variant(sizes);
  std::lock_guard<std::mutex> lock(mu_);
  return add_variant(sizes, v);
}

std::shared_ptr<const Variant> Kernel::current() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (last_) return last_;
  }
  runtime::SizeMap sizes;
  std::vector<std::string> missing;
  for (const std::string& d : program_.dims) {
    if (auto it = options_.shape.find(d); it != options_.shape.end())
      sizes[d] = it->second;
    else if (auto h = program_.size_hints.find(d); h != program_.size_hints.end())
      sizes[d] = h->second;
    else
      missing.push_back(d);
  }
  if (!missing.empty())
    arg_error << program_.name << " has not been compiled yet and size"
              << (missing.size() > 1 ? "s " : " ") << join(missing)
              << (missing.size() > 1 ? " have" : " has")
              << " no value: call the kernel (its tensors bind the sizes) or pass shape={'"
              << missing[0] << "': ...} to kintsugi.compile";
  return variant(sizes);
}

std::vector<runtime::SizeMap> Kernel::compiled_sizes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<runtime::SizeMap> out;
  for (const auto& [sizes, v] : variants_) out.push_back(sizes);
  return out;
}

std::vector<std::vector<int64_t>> Kernel::output_shapes(
    const std::vector<std::vector<int64_t>>& input_shapes) const {
  std::vector<const ir::Buffer*> in_bufs = program_.inputs();
  if (input_shapes.size() != in_bufs.size())
    arg_error << program_.name << " takes " << in_bufs.size() << " inputs, got "
              << input_shapes.size() << " shapes";
  std::vector<ArgView> inputs(in_bufs.size());
  for (size_t i = 0; i < in_bufs.size(); ++i) {
    inputs[i].dtype = in_bufs[i]->dtype;
    inputs[i].dtype_name = array_dtype_name(in_bufs[i]->dtype);
    inputs[i].shape = input_shapes[i];
  }
  runtime::SizeMap sizes = bind(inputs, nullptr);
  std::vector<std::vector<int64_t>> out;
  for (const ir::Buffer* b : program_.outputs())
    out.push_back(ir::eval_shape(b->shape, sizes, params_));
  return out;
}

void Kernel::check() const {
  std::vector<std::shared_ptr<const Variant>> variants;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [sizes, v] : variants_) variants.push_back(v);
  }
  for (const auto& v : variants)
    if (v->gpu) v->gpu->check();
}

std::string Kernel::signature() const {
  std::vector<std::string> ins, outs;
  for (const ir::Buffer* b : program_.inputs()) ins.push_back(declaration(*b));
  for (const ir::Buffer* b : program_.outputs()) outs.push_back(declaration(*b));
  return program_.name + "(" + join(ins) + ") -> " +
         (outs.size() == 1 ? outs[0] : "(" + join(outs) + ")");
}

std::vector<Kernel::NamedArg> Kernel::named_args(const std::vector<ArgView>& inputs,
                                                 const std::vector<ArgView>* outs) const {
  std::vector<const ir::Buffer*> in_bufs = program_.inputs(), out_bufs = program_.outputs();
  internal_assert(inputs.size() == in_bufs.size()) << "input count checked by the caller";
  internal_assert(!outs || outs->size() == out_bufs.size()) << "output count checked by caller";
  std::vector<NamedArg> args;
  for (size_t i = 0; i < in_bufs.size(); ++i)
    args.push_back({in_bufs[i], &inputs[i], "input '" + in_bufs[i]->name + "'"});
  if (outs)
    for (size_t i = 0; i < out_bufs.size(); ++i)
      args.push_back({out_bufs[i], &(*outs)[i], "out '" + out_bufs[i]->name + "'"});
  return args;
}

Memory Kernel::call_memory(const std::vector<NamedArg>& args) const {
  if (args.empty()) return Memory::Host;
  for (const NamedArg& a : args) {
    if (options_.target == "cpu" && a.view->memory != Memory::Host)
      arg_error << a.what << " is in " << memory_text(*a.view)
                << "; the cpu target reads host memory: copy it to the CPU first (e.g. t.cpu()), "
                   "or compile with target='cuda'";
    const ArgView& first = *args.front().view;
    if (a.view->memory != first.memory)
      arg_error << a.what << " is in " << memory_text(*a.view) << ", but " << args.front().what
                << " is in " << memory_text(first)
                << "; target='cuda' takes either every tensor in device memory (used in place) "
                   "or every tensor in host memory (copied to the GPU and back): move them to "
                   "one place, e.g. x.cuda() for each tensor in PyTorch";
  }
  return args.front().view->memory;
}

runtime::SizeMap Kernel::bind(const std::vector<ArgView>& inputs,
                              const std::vector<ArgView>* outs) const {
  std::vector<NamedArg> args = named_args(inputs, outs);

  // Dtypes and ranks first: they do not depend on the sizes.
  for (const NamedArg& a : args) {
    const ir::Buffer& b = *a.buffer;
    if (a.view->dtype != b.dtype)
      arg_error << a.what << " has dtype " << a.view->dtype_name << ", expected "
                << array_dtype_name(b.dtype) << " (" << program_.name << " declares "
                << declaration(b) << ")";
    if (a.view->shape.size() != b.shape.size())
      arg_error << a.what << " has " << a.view->shape.size() << " dimension"
                << (a.view->shape.size() == 1 ? "" : "s") << " (shape "
                << runtime::shape_string(a.view->shape) << "), expected " << b.shape.size() << " ("
                << declaration(b) << ")";
  }

  // Dims that appear whole in a tensor's shape are bound by it; they must agree.
  runtime::SizeMap sizes;
  std::map<std::string, std::string> bound_by;
  for (const NamedArg& a : args) {
    for (size_t k = 0; k < a.buffer->shape.size(); ++k) {
      const ir::Expr& e = a.buffer->shape[k];
      bool is_dim = e->op == ir::Op::Var && std::find(program_.dims.begin(), program_.dims.end(),
                                                      e->name) != program_.dims.end();
      if (!is_dim) continue;
      int64_t got = a.view->shape[k];
      std::string where = a.what + " (dimension " + std::to_string(k) + ")";
      auto it = sizes.find(e->name);
      if (it == sizes.end()) {
        if (got <= 0)
          arg_error << a.what << " has extent " << got << " in dimension " << k << " (" << e->name
                    << "): sizes must be positive";
        sizes[e->name] = got;
        bound_by[e->name] = where;
      } else if (it->second != got) {
        arg_error << "inconsistent sizes for " << e->name << ": " << bound_by[e->name] << " has "
                  << e->name << " = " << it->second << ", but " << where << " has " << e->name
                  << " = " << got;
      }
    }
  }
  // The others: the shape hints, then the source's `sizes` line.
  for (const std::string& d : program_.dims) {
    if (sizes.count(d)) continue;
    if (auto it = options_.shape.find(d); it != options_.shape.end())
      sizes[d] = it->second;
    else if (auto h = program_.size_hints.find(d); h != program_.size_hints.end())
      sizes[d] = h->second;
    else
      arg_error << "size " << d << " of " << program_.name
                << " is not the extent of any tensor dimension, so the call cannot bind it; "
                << "give it with kintsugi.compile(..., shape={'" << d << "': N})";
  }

  // Every tensor's whole shape, now that every dim has a value.
  for (const NamedArg& a : args) {
    std::vector<int64_t> want = ir::eval_shape(a.buffer->shape, sizes, params_);
    if (a.view->shape != want)
      arg_error << a.what << " has shape " << runtime::shape_string(a.view->shape) << ", expected "
                << ir::shape_to_string(a.buffer->shape) << " = " << runtime::shape_string(want)
                << " (with " << sizes_text(sizes) << ")";
  }
  return sizes;
}

std::vector<OwnedTensor> Kernel::run(const std::vector<ArgView>& inputs,
                                     const std::vector<ArgView>* outs, cuda::StreamHandle stream) {
  Memory memory = call_memory(named_args(inputs, outs));
  runtime::SizeMap sizes = bind(inputs, outs);
  std::vector<const ir::Buffer*> in_bufs = program_.inputs(), out_bufs = program_.outputs();

  // Outputs must not overlap the inputs or each other: kernels do not run in place.
  if (outs) {
    auto overlap = [](const ArgView& a, const ArgView& b) {
      auto pa = static_cast<const char*>(a.data), pb = static_cast<const char*>(b.data);
      int64_t na = bytes_of(a), nb = bytes_of(b);
      return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
    };
    for (size_t i = 0; i < outs->size(); ++i) {
      for (size_t j = 0; j < inputs.size(); ++j)
        if (overlap((*outs)[i], inputs[j]))
          arg_error << "out '" << out_bufs[i]->name << "' shares memory with input '"
                    << in_bufs[j]->name << "'; kernels do not run in place";
      for (size_t j = 0; j < i; ++j)
        if (overlap((*outs)[i], (*outs)[j]))
          arg_error << "out '" << out_bufs[i]->name << "' shares memory with out '"
                    << out_bufs[j]->name << "'";
    }
  }

  std::shared_ptr<const Variant> v = variant(sizes);
  if (memory == Memory::Cuda) return run_device(*v, sizes, inputs, outs, stream);

  // Kintsugi's own tensors are used in place; other memory goes through a host tensor (the CPU
  // back end takes runtime::Tensor, which owns its storage). A tensor given twice is copied the
  // second time: the back end refuses two arguments that share storage.
  std::map<std::string, const ArgView*> in_view, out_view;
  for (size_t i = 0; i < in_bufs.size(); ++i) in_view[in_bufs[i]->name] = &inputs[i];
  if (outs)
    for (size_t i = 0; i < out_bufs.size(); ++i) out_view[out_bufs[i]->name] = &(*outs)[i];

  if (!v->gpu) return run_host(*v, sizes, in_view, out_view, outs != nullptr);

  std::vector<runtime::Tensor> staged;  // copies of foreign inputs, and outputs to copy back
  staged.reserve(in_bufs.size() + out_bufs.size());
  std::vector<std::pair<runtime::Tensor*, const ArgView*>> copy_back;
  std::map<std::string, std::shared_ptr<runtime::Tensor>> allocated;
  std::vector<const void*> used;
  std::vector<runtime::Tensor*> args;
  auto in_place = [&](const ArgView& view) {
    return view.storage && std::find(used.begin(), used.end(), view.storage->ptr()) == used.end();
  };
  for (const ir::Buffer& b : v->scheduled.buffers) {
    if (b.role == ir::BufferRole::Input) {
      const ArgView& view = *in_view.at(b.name);
      if (in_place(view)) {
        args.push_back(view.storage.get());
      } else {
        runtime::Tensor& t = staged.emplace_back();
        t.dtype = view.dtype;
        t.shape = view.shape;
        auto src = static_cast<const uint8_t*>(view.data);
        t.data.assign(src, src + bytes_of(view));
        args.push_back(&t);
      }
    } else if (b.role == ir::BufferRole::Output) {
      if (auto it = out_view.find(b.name); it != out_view.end()) {
        const ArgView& view = *it->second;
        if (in_place(view)) {
          args.push_back(view.storage.get());
        } else {
          runtime::Tensor& t =
              staged.emplace_back(runtime::Tensor::for_output(view.dtype, view.shape, "output"));
          copy_back.push_back({&t, &view});
          args.push_back(&t);
        }
      } else {
        auto t = std::make_shared<runtime::Tensor>(runtime::Tensor::for_output(
            b.dtype, ir::eval_shape(b.shape, sizes, params_), "output '" + b.name + "'"));
        allocated[b.name] = t;
        args.push_back(t.get());
      }
    } else {
      continue;
    }
    used.push_back(args.back()->ptr());
  }

  v->gpu->run(args, sizes, params_);  // copies to the GPU and back

  for (const auto& [t, view] : copy_back) std::memcpy(view->data, t->ptr(), t->data.size());
  std::vector<OwnedTensor> out;
  if (!outs)
    for (const ir::Buffer* b : out_bufs) out.push_back({allocated.at(b->name), nullptr});
  return out;
}

std::vector<OwnedTensor> Kernel::run_host(const Variant& v, const runtime::SizeMap& sizes,
                                          const std::map<std::string, const ArgView*>& in_view,
                                          const std::map<std::string, const ArgView*>& out_view,
                                          bool given_outs) const {
  // The CPU back end reads and writes the callers' arrays in place. Memory already passed as
  // another argument is copied (the back end refuses two arguments sharing storage), an output
  // among those copied back after the call.
  std::vector<runtime::Tensor> staged;
  staged.reserve(in_view.size() + out_view.size());
  std::vector<std::pair<runtime::Tensor*, const ArgView*>> copy_back;
  std::map<std::string, std::shared_ptr<runtime::Tensor>> allocated;
  std::vector<const void*> used;
  std::vector<runtime::TensorRef> args;
  auto ref_of = [&](const ArgView& view, bool output) {
    if (std::find(used.begin(), used.end(), view.data) == used.end() || bytes_of(view) == 0)
      return runtime::TensorRef(view.dtype, view.shape, view.data, bytes_of(view));
    // Written whole: by the copy below (an input) or by the kernel (an output).
    runtime::Tensor& t = staged.emplace_back(
        runtime::Tensor::for_output(view.dtype, view.shape, output ? "output" : "input"));
    if (output)
      copy_back.push_back({&t, &view});
    else
      std::memcpy(t.ptr(), view.data, t.data.size());
    return runtime::TensorRef(t);
  };
  for (const ir::Buffer& b : v.scheduled.buffers) {
    if (b.role == ir::BufferRole::Input) {
      args.push_back(ref_of(*in_view.at(b.name), false));
    } else if (b.role == ir::BufferRole::Output) {
      if (auto it = out_view.find(b.name); it != out_view.end()) {
        args.push_back(ref_of(*it->second, true));
      } else {
        auto t = std::make_shared<runtime::Tensor>(runtime::Tensor::for_output(
            b.dtype, ir::eval_shape(b.shape, sizes, params_), "output '" + b.name + "'"));
        allocated[b.name] = t;
        args.push_back(runtime::TensorRef(*t));
      }
    } else {
      continue;
    }
    used.push_back(args.back().data);
  }
  v.kernel->run_in_place(args, sizes, params_);
  for (const auto& [t, view] : copy_back) std::memcpy(view->data, t->ptr(), t->data.size());
  std::vector<OwnedTensor> out;
  if (!given_outs)
    for (const ir::Buffer* b : program_.outputs()) out.push_back({allocated.at(b->name), nullptr});
  return out;
}

std::vector<OwnedTensor> Kernel::run_device(const Variant& v, const runtime::SizeMap& sizes,
                                            const std::vector<ArgView>& inputs,
                                            const std::vector<ArgView>* outs,
                                            cuda::StreamHandle stream) const {
  internal_assert(v.gpu) << "device memory reaches the cuda target only";
  std::vector<const ir::Buffer*> in_bufs = program_.inputs(), out_bufs = program_.outputs();
  std::map<std::string, const ArgView*> given;
  for (size_t i = 0; i < in_bufs.size(); ++i) given[in_bufs[i]->name] = &inputs[i];
  if (outs)
    for (size_t i = 0; i < out_bufs.size(); ++i) given[out_bufs[i]->name] = &(*outs)[i];

  // The caller's tensors by address; outputs not given are allocated on the device.
  std::map<std::string, std::shared_ptr<DeviceTensor>> allocated;
  std::vector<cuda::CudaKernel::DeviceTensorRef> args;
  for (const ir::Buffer& b : v.scheduled.buffers) {
    if (b.role != ir::BufferRole::Input && b.role != ir::BufferRole::Output) continue;
    cuda::CudaKernel::DeviceTensorRef& ref = args.emplace_back();
    if (auto it = given.find(b.name); it != given.end()) {
      const ArgView& view = *it->second;
      ref.dtype = view.dtype;
      ref.shape = view.shape;
      ref.address = reinterpret_cast<uint64_t>(view.data);
      ref.device = view.device;
    } else {
      auto t = std::make_shared<DeviceTensor>();
      t->dtype = b.dtype;
      t->shape = ir::eval_shape(b.shape, sizes, params_);
      t->device = cuda::device().ordinal;
      t->buffer = cuda::StreamBuffer(static_cast<size_t>(runtime::checked_bytes(
                                         t->shape, dtype_bytes(b.dtype), "output " + b.name)),
                                     stream);
      ref.dtype = t->dtype;
      ref.shape = t->shape;
      ref.address = t->buffer.address();
      ref.device = t->device;
      allocated[b.name] = t;
    }
  }
  v.gpu->enqueue(args, sizes, params_, stream);

  std::vector<OwnedTensor> out;
  if (!outs)
    for (const ir::Buffer* b : out_bufs) out.push_back({nullptr, allocated.at(b->name)});
  return out;
}

}  // namespace kintsugi::python
