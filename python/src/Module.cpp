// \file Module.cpp
// The extension module `kintsugi._core` (re-exported by the package `kintsugi`): compile, Kernel,
// Tensor, CompileError, cuda_available and the mapping of Kintsugi's errors to Python exceptions:
//   CompileError (a located source error)    -> kintsugi.CompileError, a ValueError with
//                                               filename, lineno, offset, text and msg
//   UserError, RuntimeArgError, ScheduleError -> ValueError
//   InternalError                             -> RuntimeError
//   TargetUnavailable (no GPU for 'cuda')     -> RuntimeError
// A variant's warnings (a schedule rejected by validation, a slower code path: driver/Driver.h) are
// issued with warnings.warn(..., kintsugi.CompileWarning) once, after the call that compiled it.
// Calls release the GIL while they compile and run.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "DLPackTensor.h"
#include "Kernel.h"
#include "Torch.h"
#include "ir/Printer.h"
#include "support/Error.h"
#include "support/Version.h"

namespace py = pybind11;
using namespace pybind11::literals;
using kintsugi::python::ArgView;
using kintsugi::python::ImportedTensor;
using kintsugi::python::ImportOptions;
using kintsugi::python::Kernel;
using kintsugi::python::KernelOptions;
using kintsugi::python::Memory;
using kintsugi::python::OwnedTensor;
using kintsugi::python::torch_cuda_device;
using kintsugi::python::torch_current_stream;
using kintsugi::python::Variant;
namespace dlpack = kintsugi::python::dlpack;

namespace {

// kintsugi.CompileError; lives as long as the process (never released, so that no reference
// is dropped after the interpreter has finalised).
PyObject* compile_error_type = nullptr;
PyObject* compile_warning_type = nullptr;  // kintsugi.CompileWarning, likewise

// Issues the warnings of the variants `k` compiled since the last time; a filter that turns them
// into errors raises.
void issue_warnings(Kernel& k) {
  for (const std::string& w : k.take_warnings())
    if (PyErr_WarnEx(compile_warning_type, w.c_str(), 1) != 0) throw py::error_already_set();
}

std::string source_line(const kintsugi::SourceLoc& loc) {
  if (!loc.valid()) return "";
  const std::string& text = loc.file->text;
  size_t start = 0;
  for (int line = 1; line < loc.line && start != std::string::npos; ++line) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start == std::string::npos || start > text.size()) return "";
  size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? end : end - start);
}

void translate_error(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const kintsugi::CompileError& e) {
    try {
      const kintsugi::SourceLoc& loc = e.loc();
      py::object exc = py::reinterpret_borrow<py::object>(compile_error_type)(e.what());
      exc.attr("msg") = e.message();
      exc.attr("filename") = loc.file ? py::object(py::str(loc.file->name)) : py::none();
      exc.attr("lineno") = loc.valid() ? py::object(py::int_(loc.line)) : py::none();
      exc.attr("offset") = loc.valid() ? py::object(py::int_(loc.col)) : py::none();
      exc.attr("text") = loc.valid() ? py::object(py::str(source_line(loc))) : py::none();
      PyErr_SetObject(compile_error_type, exc.ptr());
    } catch (py::error_already_set&) {
      PyErr_SetString(compile_error_type, e.what());
    }
  } catch (const kintsugi::UserError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const kintsugi::InternalError& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

py::dict to_dict(const kintsugi::runtime::SizeMap& sizes) {
  py::dict d;
  for (const auto& [name, value] : sizes) d[py::str(name)] = value;
  return d;
}

std::shared_ptr<const Variant> current_variant(Kernel& k) {
  std::shared_ptr<const Variant> v;
  {
    py::gil_scoped_release release;  // may compile
    v = k.current();
  }
  issue_warnings(k);
  return v;
}

py::list fusion_list(const Variant& v) {
  py::list out;
  for (const kintsugi::driver::FusedReduction& f : v.fusion)
    out.append(py::dict("reduction"_a = f.name, "axis"_a = f.axis, "reads"_a = f.producers,
                        "update"_a = f.update));
  return out;
}

py::list kernels_list(const Variant& v) {
  py::list out;
  for (const kintsugi::driver::KernelPath& k : v.kernels)
    out.append(py::dict("name"_a = k.name, "path"_a = k.path, "reason"_a = k.reason));
  return out;
}

std::string plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string names(const std::vector<const kintsugi::ir::Buffer*>& buffers) {
  std::string out;
  for (const auto* b : buffers) out += (out.empty() ? "" : ", ") + b->name;
  return out;
}

// A call's stream: the handle the kernels are launched on and the DLPack stream number that CUDA
// producers are asked to order their pending work before.
struct CallStream {
  kintsugi::cuda::StreamHandle handle = nullptr;  // the default stream
  int64_t dlpack = 1;                             // DLPack's name for the legacy default stream
  bool given = false;                             // stream= was passed
};

CallStream stream_of_handle(uint64_t raw) {
  CallStream s;
  s.handle = reinterpret_cast<kintsugi::cuda::StreamHandle>(static_cast<uintptr_t>(raw));
  s.dlpack = raw == 0 ? 1 : static_cast<int64_t>(raw);  // DLPack reserves 0 for CUDA
  return s;
}

// stream= when given; else PyTorch's current stream on the device of the first torch CUDA input,
// as PyTorch's own operators use; else the default stream.
CallStream call_stream(const Kernel& k, const py::object& stream, const py::args& inputs) {
  if (stream.is_none()) {
    if (k.options().target == "cuda")
      for (py::handle input : inputs)
        if (std::optional<int> device = torch_cuda_device(input.ptr()))
          return stream_of_handle(reinterpret_cast<uintptr_t>(torch_current_stream(*device)));
    return {};
  }
  if (k.options().target != "cuda")
    throw py::value_error("stream= applies to target='cuda' only; leave it out for target='" +
                          k.options().target + "'");
  py::object value = py::hasattr(stream, "cuda_stream") ? stream.attr("cuda_stream") : stream;
  if (!py::isinstance<py::int_>(value) || value.cast<py::int_>() < py::int_(0))
    throw py::type_error(
        "stream= takes a CUstream handle (a non-negative int, such as "
        "torch.cuda.current_stream().cuda_stream) or an object with .cuda_stream (such as a "
        "torch.cuda.Stream), got " +
        std::string(py::str(py::repr(stream))));
  CallStream s = stream_of_handle(value.cast<unsigned long long>());
  s.given = true;
  return s;
}

// The stream a DLPack consumer names (__dlpack__(stream=...)): None and 1 the legacy default
// stream, 2 the per-thread default stream, -1 none (the consumer orders the work itself).
std::optional<kintsugi::cuda::StreamHandle> consumer_stream(const py::object& stream) {
  if (stream.is_none()) return nullptr;
  auto raw = stream.cast<int64_t>();
  if (raw == -1) return std::nullopt;
  if (raw == 0 || raw < -1)
    throw py::value_error("__dlpack__: stream=" + std::to_string(raw) +
                          " is not a CUDA stream (DLPack: None, -1, 1, 2 or a CUstream handle)");
  if (raw == 1) return nullptr;
  return reinterpret_cast<kintsugi::cuda::StreamHandle>(static_cast<uintptr_t>(raw));
}

// {name: f(buffer)} over the program's inputs and outputs.
template <typename F>
py::dict per_operand(const Kernel& k, F f) {
  py::dict d;
  for (const auto& buffers : {k.program().inputs(), k.program().outputs()})
    for (const kintsugi::ir::Buffer* b : buffers) d[py::str(b->name)] = f(*b);
  return d;
}

py::object wrap(const OwnedTensor& t) {
  return py::cast(t);
}

py::object call_kernel(Kernel& k, const py::args& args, const py::object& out,
                       const py::object& stream) {
  const auto& program = k.program();
  CallStream s = call_stream(k, stream, args);
  ImportOptions import_options;
  import_options.cuda = k.options().target == "cuda";
  import_options.cuda_stream = s.dlpack;
  import_options.cuda_stream_handle = s.handle;
  std::vector<const kintsugi::ir::Buffer*> in_bufs = program.inputs(), out_bufs = program.outputs();
  if (args.size() != in_bufs.size())
    throw py::type_error(program.name + " takes " + plural(in_bufs.size(), "input") + " (" +
                         names(in_bufs) + "), got " + std::to_string(args.size()));
  std::vector<py::object> out_objects;
  if (!out.is_none()) {
    if (py::isinstance<py::tuple>(out) || py::isinstance<py::list>(out)) {
      for (py::handle h : out) out_objects.push_back(py::reinterpret_borrow<py::object>(h));
    } else {
      out_objects.push_back(out);
    }
    if (out_objects.size() != out_bufs.size())
      throw py::type_error(program.name + " has " + plural(out_bufs.size(), "output") + " (" +
                           names(out_bufs) + "): out= takes " +
                           (out_bufs.size() == 1 ? "one array" : "a tuple of that many arrays") +
                           ", got " + std::to_string(out_objects.size()));
  }

  // Declared before the GIL is released, destroyed after it is taken back: the producers'
  // deleters run with the GIL held.
  std::vector<ImportedTensor> imported;
  imported.reserve(in_bufs.size() + out_objects.size());
  for (size_t i = 0; i < in_bufs.size(); ++i)
    imported.emplace_back(args[i], "input '" + in_bufs[i]->name + "'", false, import_options);
  for (size_t i = 0; i < out_objects.size(); ++i)
    imported.emplace_back(out_objects[i], "out '" + out_bufs[i]->name + "'", true, import_options);
  std::vector<ArgView> in_views, out_views;
  for (size_t i = 0; i < imported.size(); ++i)
    (i < in_bufs.size() ? in_views : out_views).push_back(imported[i].view());
  // PyTorch's tensors were read without DLPack: on a stream= of the caller's, order the launches
  // after PyTorch's current stream, as DLPack would have.
  if (s.given)
    for (const ImportedTensor& t : imported)
      if (t.from_torch() && t.view().memory == Memory::Cuda) {
        kintsugi::cuda::order_after(s.handle, torch_current_stream(t.view().device));
        break;
      }

  std::vector<OwnedTensor> results;
  {
    py::gil_scoped_release release;
    results = k.run(in_views, out.is_none() ? nullptr : &out_views, s.handle);
  }
  issue_warnings(k);
  if (!out.is_none()) return out;
  if (results.size() == 1) return wrap(results[0]);
  py::tuple t(results.size());
  for (size_t i = 0; i < results.size(); ++i) t[i] = wrap(results[i]);
  return t;
}

std::shared_ptr<Kernel> compile(const py::object& path_or_source, const std::string& target,
                                const std::optional<std::map<std::string, int64_t>>& shape,
                                const std::optional<std::map<std::string, double>>& params,
                                const std::string& schedule, const std::optional<std::string>& name,
                                const std::optional<std::string>& arch,
                                std::optional<int64_t> chunk_tiles, const py::object& require,
                                std::optional<int64_t> whole_row_bytes,
                                std::optional<bool> check_launches, const py::object& dynamic) {
  std::string text;
  bool is_source = false;
  if (py::isinstance<py::str>(path_or_source)) {
    text = path_or_source.cast<std::string>();
    is_source = Kernel::is_source_text(text);
  } else if (py::hasattr(path_or_source, "__fspath__")) {
    text = py::module_::import("os").attr("fspath")(path_or_source).cast<std::string>();
  } else {
    throw py::type_error(
        "kintsugi.compile takes .te source text or the path of a .te file (str or os.PathLike), "
        "got " +
        std::string(py::str(py::type::of(path_or_source).attr("__name__"))));
  }
  KernelOptions options;
  options.target = target;
  options.schedule = schedule;
  if (shape) options.shape = *shape;
  if (params) options.params = *params;
  if (name) options.name = *name;
  if (arch) options.arch = *arch;
  if (chunk_tiles && *chunk_tiles < 1)
    throw py::value_error(
        "kintsugi.compile: chunk_tiles takes None (chosen at the run's sizes) or a positive "
        "count, not " +
        std::to_string(*chunk_tiles));
  options.chunk_tiles = chunk_tiles.value_or(0);
  if (whole_row_bytes && *whole_row_bytes < 0)
    throw py::value_error(
        "kintsugi.compile: whole_row_bytes takes None (the target's) or a byte count (0 streams "
        "every row), not " +
        std::to_string(*whole_row_bytes));
  options.whole_row_bytes = whole_row_bytes.value_or(-1);
  options.check_launches = check_launches;
  if (py::isinstance<py::str>(dynamic)) {
    options.dynamic.push_back(dynamic.cast<std::string>());
  } else if (!dynamic.is_none()) {
    for (py::handle h : dynamic) {
      if (!py::isinstance<py::str>(h))
        throw py::type_error("kintsugi.compile: dynamic takes size names (str), got " +
                             std::string(py::str(py::repr(h))));
      options.dynamic.push_back(h.cast<std::string>());
    }
  }
  if (py::isinstance<py::str>(require)) {
    std::string names = require.cast<std::string>();
    for (size_t start = 0; start <= names.size();) {
      size_t comma = std::min(names.find(',', start), names.size());
      options.require.push_back(names.substr(start, comma - start));
      start = comma + 1;
    }
  } else if (!require.is_none()) {
    for (py::handle h : require) {
      if (!py::isinstance<py::str>(h))
        throw py::type_error(
            "kintsugi.compile: require takes names ('fused', 'tile', 'tensor-core') in a list or "
            "a comma-separated str, got an element " +
            std::string(py::str(py::repr(h))));
      options.require.push_back(h.cast<std::string>());
    }
  }
  std::shared_ptr<Kernel> k;
  {
    py::gil_scoped_release release;  // compiles when `shape` binds every size
    k = std::make_shared<Kernel>(text, is_source, std::move(options));
  }
  issue_warnings(*k);
  return k;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() =
      "Kintsugi: compiles tensor-expression programs (.te) into fused kernels and runs them on "
      "DLPack tensors.";
  m.attr("__version__") = kintsugi::kVersion;
  m.attr("__commit__") = kintsugi::kCommit;

  compile_error_type = PyErr_NewExceptionWithDoc(
      "kintsugi.CompileError",
      "An error in a .te program. str() is the located message (file:line:col: error: ..., the "
      "source line and a caret); filename, lineno, offset (column, 1-based), text (the source "
      "line) and msg (the message alone) as on SyntaxError.",
      PyExc_ValueError, nullptr);
  if (!compile_error_type) throw py::error_already_set();
  m.attr("CompileError") = py::handle(compile_error_type);
  compile_warning_type = PyErr_NewExceptionWithDoc(
      "kintsugi.CompileWarning",
      "The compiler did less than the program allows: fusion abandoned, scalar code instead of "
      "tiles, a dot off the tensor cores, a schedule rejected by validation. "
      "kintsugi.compile(..., require=[...]) makes the first three errors.",
      PyExc_UserWarning, nullptr);
  if (!compile_warning_type) throw py::error_already_set();
  m.attr("CompileWarning") = py::handle(compile_warning_type);
  py::register_exception_translator(translate_error);

  py::class_<OwnedTensor>(m, "Tensor", R"doc(
A tensor that Kintsugi allocated: a kernel's output, in host memory (target 'cpu', or 'cuda'
called with host tensors) or in CUDA device memory (target 'cuda' called with device tensors).
It owns its memory and exports it through DLPack, so numpy.from_dlpack(t) (host) and
torch.from_dlpack(t) (host or device) view it without a copy; it can also be passed back to a
kernel (as an input or in out=) without a copy. t.cpu() copies device memory to the host.)doc")
      .def(
          "__dlpack__",
          [](const OwnedTensor& self, const py::object& stream, const py::object& max_version,
             const py::object& dl_device, const py::object& copy) {
            bool to_host = false;
            if (!dl_device.is_none()) {
              py::tuple dev = dl_device.cast<py::tuple>();
              bool cpu = dev.size() == 2 && dev[0].cast<int32_t>() == dlpack::kCPU;
              bool same = self.host ? cpu
                                    : dev.size() == 2 && dev[0].cast<int32_t>() == dlpack::kCUDA &&
                                          dev[1].cast<int32_t>() == self.device->device;
              to_host = cpu && !self.host;
              if (!same && !to_host)
                throw py::buffer_error("kintsugi.Tensor lives in " +
                                       std::string(self.host ? "host memory" : "device memory") +
                                       " and cannot be exported to " +
                                       std::string(py::str(dl_device)));
              if (to_host && !copy.is_none() && !copy.cast<bool>())
                throw py::buffer_error(
                    "kintsugi.Tensor lives in device memory: exporting it to the CPU copies it, "
                    "and copy=False forbids that (use t.cpu())");
            }
            bool versioned = false;
            if (!max_version.is_none()) {
              py::tuple v = max_version.cast<py::tuple>();
              versioned = v.size() >= 1 && v[0].cast<int64_t>() >= 1;
            }
            // Written by kernels queued on the stream of the call that made it: the consumer's
            // stream is ordered after them (the host copy waits for them).
            if (self.device && !to_host)
              if (std::optional<kintsugi::cuda::StreamHandle> s = consumer_stream(stream))
                self.device->buffer.share_with(*s);
            bool do_copy = !copy.is_none() && copy.cast<bool>();
            return kintsugi::python::export_capsule(self, versioned, do_copy, to_host);
          },
          py::kw_only(), "stream"_a = py::none(), "max_version"_a = py::none(),
          "dl_device"_a = py::none(), "copy"_a = py::none(),
          "A DLPack capsule of this tensor (versioned when max_version >= (1, 0)).")
      .def("__dlpack_device__",
           [](const OwnedTensor& self) -> py::tuple {
             if (self.host) return py::make_tuple(static_cast<int>(dlpack::kCPU), 0);
             return py::make_tuple(static_cast<int>(dlpack::kCUDA),
                                   static_cast<int>(self.device->device));
           })
      .def(
          "cpu",
          [](const py::object& self) -> py::object {
            const OwnedTensor& t = self.cast<const OwnedTensor&>();
            if (t.host) return self;
            OwnedTensor copy;
            {
              py::gil_scoped_release release;
              copy.host = t.to_host();
            }
            return py::cast(copy);
          },
          "This tensor in host memory: itself when it is there, else a copy.")
      .def_property_readonly(
          "device",
          [](const OwnedTensor& self) {
            return self.host ? std::string("cpu") : "cuda:" + std::to_string(self.device->device);
          },
          "Where the elements are: 'cpu' or 'cuda:<ordinal>'.")
      .def_property_readonly(
          "shape", [](const OwnedTensor& self) { return py::tuple(py::cast(self.shape())); })
      .def_property_readonly(
          "dtype", [](const OwnedTensor& self) { return kintsugi::dtype_name(self.dtype()); },
          "The element type as in .te sources: f16, bf16, f32, i32 or i8.")
      .def_property_readonly("ndim", [](const OwnedTensor& self) { return self.shape().size(); })
      .def_property_readonly("nbytes", &OwnedTensor::nbytes)
      .def("__repr__", [](const OwnedTensor& self) {
        std::string s = "kintsugi.Tensor(" + std::string(kintsugi::dtype_name(self.dtype())) + "[";
        for (size_t i = 0; i < self.shape().size(); ++i)
          s += (i ? ", " : "") + std::to_string(self.shape()[i]);
        s += "]";
        if (self.device) s += ", device='cuda:" + std::to_string(self.device->device) + "'";
        return s + ")";
      });

  py::class_<Kernel, std::shared_ptr<Kernel>>(m, "Kernel", R"doc(
A compiled program (made by kintsugi.compile). Call it with the program's inputs, in declaration
order, as C-contiguous DLPack tensors (numpy arrays, torch tensors, kintsugi.Tensor): in host
memory for target 'cpu'; for target 'cuda' either all in CUDA device memory (torch CUDA tensors:
used in place, no copies) or all in host memory (copied to the GPU and back). The sizes are
bound from the inputs' shapes; a call with sizes not seen before compiles the program for them
first (once: variants are cached in the Kernel, and generated code on disk).)doc")
      .def("__call__", &call_kernel, "out"_a = py::none(), "stream"_a = py::none(), R"doc(
kernel(*inputs, out=None, stream=None)

Runs the kernel. Returns the outputs as kintsugi.Tensor (one object for one output, else a tuple
in declaration order), in the memory of the inputs, or with out= (an array, or a tuple with one
array per output) writes the results into those arrays and returns out.

stream (target 'cuda', device tensors): the CUDA stream to launch on, a CUstream handle (int) or
an object with .cuda_stream such as torch.cuda.current_stream(); None is PyTorch's current
stream when an input is a torch CUDA tensor, else the default stream. Producers are asked
(DLPack) to order their pending work on the inputs before it. The call queues the kernels and
returns without waiting for them, as PyTorch's operators do: results are ready for work queued
later on the same stream; a kintsugi.Tensor output orders other streams itself when it is
exported (torch.from_dlpack) or passed to another call, and t.cpu() waits for it. A failed index
check inside a kernel is reported by kernel.check(), or by the call itself with
check_launches=True (or KINTSUGI_CHECK_LAUNCHES=1), which then waits. Calls with out= can be
captured in a CUDA graph (torch.cuda.graph) once a call outside the capture has run at the
largest sizes the graph uses.)doc")
      .def(
          "check",
          [](Kernel& k) {
            py::gil_scoped_release release;
            k.check();
          },
          R"doc(
Waits for the kernels this object queued (and every other work on the GPU) and raises ValueError
for the first failed index or division check a kernel reported since the last check; nothing
for target 'cpu', whose calls check as they run.)doc")
      .def_property_readonly(
          "program", [](const Kernel& k) { return k.program().name; }, "The program's name.")
      .def_property_readonly(
          "target", [](const Kernel& k) { return k.options().target; },
          "The target: 'cpu' or 'cuda'.")
      .def_property_readonly(
          "arch",
          [](const Kernel& k) -> py::object {
            if (k.options().arch.empty()) return py::none();
            return py::str(k.options().arch);
          },
          "The GPU architecture the kernels are compiled for ('sm_90a', ...); None for 'cpu'.")
      .def_property_readonly(
          "source", [](Kernel& k) { return current_variant(k)->source(); },
          "The generated code of the current variant, C++ (cpu) or CUDA C++ (cuda): the last "
          "call's sizes; before any call, the size hints (shape=, then the source's sizes line).")
      .def_property_readonly(
          "schedule", [](Kernel& k) { return current_variant(k)->schedule; },
          "The schedule primitives applied to the current variant, in order.")
      .def_property_readonly(
          "form", [](Kernel& k) { return current_variant(k)->form; },
          "What the current variant's code was generated from: 'tile' or 'loop'.")
      .def_property_readonly(
          "notes", [](Kernel& k) { return current_variant(k)->notes; },
          "The auto-scheduler's notes on the current variant.")
      .def_property_readonly(
          "warnings", [](Kernel& k) { return current_variant(k)->warnings; },
          "Warnings on the current variant: a schedule that validation rejected and what was "
          "used instead, fusion abandoned, scalar code instead of tiles, a dot off the tensor "
          "cores (each also issued once as a kintsugi.CompileWarning).")
      .def_property_readonly(
          "fusion", [](Kernel& k) { return fusion_list(*current_variant(k)); },
          "Every reduction of the current variant: {'reduction', 'axis', 'reads' (the reductions "
          "whose running values it reads), 'update' ('rolling', 'split-k' or 'none')}.")
      .def_property_readonly(
          "kernels", [](Kernel& k) { return kernels_list(*current_variant(k)); },
          "The code path of every kernel of the current variant: {'name', 'path' ('tile' or "
          "'scalar' on the CPU, 'tensor-core' or 'element-cyclic' on CUDA), 'reason' (why a "
          "kernel is not on the faster path, or '')}.")
      .def_property_readonly(
          "sizes", [](Kernel& k) { return to_dict(current_variant(k)->sizes); },
          "The sizes of the current variant.")
      .def_property_readonly(
          "compiled_sizes",
          [](const Kernel& k) {
            py::list out;
            for (const auto& s : k.compiled_sizes()) out.append(to_dict(s));
            return out;
          },
          "The size bindings compiled so far.")
      .def_property_readonly(
          "params",
          [](const Kernel& k) {
            py::dict d;
            for (const auto& [name, value] : k.params()) d[py::str(name)] = value;
            return d;
          },
          "Every param's value (the source's default or the params= override).")
      .def_property_readonly(
          "inputs",
          [](const Kernel& k) {
            std::vector<std::string> out;
            for (const auto* b : k.program().inputs()) out.push_back(b->name);
            return out;
          },
          "The input names, in call order.")
      .def_property_readonly(
          "outputs",
          [](const Kernel& k) {
            std::vector<std::string> out;
            for (const auto* b : k.program().outputs()) out.push_back(b->name);
            return out;
          },
          "The output names, in the order the call returns them.")
      .def(
          "output_shapes",
          [](const Kernel& k, const py::args& shapes) {
            std::vector<std::vector<int64_t>> in;
            for (py::handle s : shapes) in.push_back(s.cast<std::vector<int64_t>>());
            py::list out;
            for (const auto& shape : k.output_shapes(in)) out.append(py::tuple(py::cast(shape)));
            return out;
          },
          R"doc(
kernel.output_shapes(*input_shapes): the shape of every output (a list of tuples, declaration
order) of a call with inputs of these shapes; ValueError for shapes a call would refuse.)doc")
      .def_property_readonly(
          "dims",
          [](const Kernel& k) {
            return per_operand(k, [](const kintsugi::ir::Buffer& b) {
              py::list dims;
              for (const auto& e : b.shape) dims.append(kintsugi::ir::to_string(e));
              return py::object(dims);
            });
          },
          "Every input's and output's dimensions as declared: {'Q': ['B', 'H', 'S', 'D'], ...}.")
      .def_property_readonly(
          "dtypes",
          [](const Kernel& k) {
            return per_operand(k, [](const kintsugi::ir::Buffer& b) {
              return py::object(py::str(kintsugi::dtype_name(b.dtype)));
            });
          },
          "Every input's and output's dtype: {'Q': 'f16', ...}.")
      .def_property_readonly("signature", &Kernel::signature,
                             "The declarations: 'softmax(X: f32[M, N]) -> Y: f32[M, N]'.")
      .def("__repr__", [](const Kernel& k) {
        return "<kintsugi.Kernel " + k.signature() + " on " + k.options().target + ">";
      });

  m.def("compile", &compile, "path_or_source"_a, "target"_a = "cpu", "shape"_a = py::none(),
        "params"_a = py::none(), "schedule"_a = "auto", "name"_a = py::none(),
        "arch"_a = py::none(), "chunk_tiles"_a = py::none(), "require"_a = py::none(),
        "whole_row_bytes"_a = py::none(), "check_launches"_a = py::none(), "dynamic"_a = py::none(),
        R"doc(
Compiles a tensor-expression program. path_or_source is .te source text when it contains a
newline or does not end in ".te", else the path of a .te file (an os.PathLike is always a path).
target: "cpu" (the default) or "cuda" (an NVIDIA GPU, device 0; tile programs with
schedule="auto" only). shape: size hints {dim: size}; when they bind every dim the program is
compiled now, otherwise on the first call (whose inputs bind the sizes). params: {param: value}
overrides of the source's defaults. schedule: "auto" (fused, the default) or "none". name: the
program's name (source text is called "program" otherwise). arch (target "cuda"): the GPU
architecture to compile for, e.g. "sm_80" or "sm_90a"; None (the default) asks the device
(sm_90a for compute capability 9.0). chunk_tiles: split-K (few rows, as in decode) in chunks of
that many key tiles, each walked with the rolling update (the CLI's --chunk-tiles); None (the
default) chooses it at the sizes of the run. require: code paths that must be taken, a list of
'fused' (fusion not abandoned), 'tile' (tile code, not scalar loops), 'tensor-core' (dots on the
tensor cores) or a comma-separated str; a fallback of one of those kinds raises ValueError
instead of issuing a kintsugi.CompileWarning. whole_row_bytes: a row reduction (softmax, a norm)
whose row has at most that many bytes of its widest input is computed whole, one row a tile,
rather than streamed with its fused update (the CLI's --whole-row-bytes); 0 streams every row;
None (the default) takes the target's (1 MiB on the CPU, 32 KiB on CUDA). check_launches
(target "cuda"): True makes every call wait for its kernels and raise their failed index checks
(a debug mode); None (the default) takes KINTSUGI_CHECK_LAUNCHES from the environment (1: on).
dynamic: sizes that change from call to call, such as a decode's sequence length ["T"]: one
variant (one compilation) serves every value of them, scheduled as if each were 32768 and
launched at the call's values; a size the generated code is specialised to (a tile extent such
as the head dimension) cannot be dynamic (ValueError). Without it each new binding of the sizes
compiles a variant of its own, scheduled at exactly those sizes.

Raises kintsugi.CompileError (a ValueError) for errors in the source, ValueError for bad
arguments, RuntimeError for target="cuda" where no GPU can be used (see cuda_available()).)doc");

  m.def(
      "cuda_available",
      [](bool explain) -> py::object {
        std::string why = Kernel::cuda_unavailable_reason();
        if (explain) return py::str(why);
        return py::bool_(why.empty());
      },
      "explain"_a = false, R"doc(
Whether target="cuda" can compile and run here: this build has NVRTC, the NVIDIA driver loads
and reports a device. With explain=True, the reason it cannot ("" when it can).)doc");
}
