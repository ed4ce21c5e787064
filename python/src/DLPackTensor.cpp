// \file DLPackTensor.cpp
// DLPack import and export for the Python module (see DLPackTensor.h).
#include "DLPackTensor.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "Torch.h"
#include "support/Error.h"

namespace kintsugi::python {

using namespace pybind11::literals;

namespace {

// float16, bfloat16, int64, uint8, bool, ... as NumPy and PyTorch users know them.
std::string dtype_text(const dlpack::DataType& t) {
  std::string bits = std::to_string(t.bits), name;
  switch (t.code) {
    case dlpack::kInt:
      name = "int" + bits;
      break;
    case dlpack::kUInt:
      name = "uint" + bits;
      break;
    case dlpack::kFloat:
      name = "float" + bits;
      break;
    case dlpack::kBfloat:
      name = "bfloat" + bits;
      break;
    case dlpack::kComplex:
      name = "complex" + bits;
      break;
    case dlpack::kBool:
      name = "bool";
      break;
    case dlpack::kFloat8_e4m3fn:
      name = "float8_e4m3fn";
      break;
    case dlpack::kFloat8_e5m2:
      name = "float8_e5m2";
      break;
    case dlpack::kOpaqueHandle:
      name = "opaque handle";
      break;
    default:
      name = "DLPack type code " + std::to_string(t.code) + " of " + bits + " bits";
      break;
  }
  return t.lanes == 1 ? name : name + " x" + std::to_string(t.lanes) + " lanes";
}

DType kintsugi_dtype(const dlpack::DataType& t) {
  if (t.lanes != 1) return DType::Unknown;
  if (t.code == dlpack::kFloat && t.bits == 16) return DType::F16;
  if (t.code == dlpack::kBfloat && t.bits == 16) return DType::BF16;
  if (t.code == dlpack::kFloat8_e4m3fn && t.bits == 8) return DType::F8E4M3;
  if (t.code == dlpack::kFloat8_e5m2 && t.bits == 8) return DType::F8E5M2;
  if (t.code == dlpack::kFloat && t.bits == 32) return DType::F32;
  if (t.code == dlpack::kInt && t.bits == 32) return DType::I32;
  if (t.code == dlpack::kInt && t.bits == 8) return DType::I8;
  return DType::Unknown;
}

dlpack::DataType dlpack_dtype(DType t) {
  switch (t) {
    case DType::F16:
      return {dlpack::kFloat, 16, 1};
    case DType::BF16:
      return {dlpack::kBfloat, 16, 1};
    case DType::F8E4M3:
      return {dlpack::kFloat8_e4m3fn, 8, 1};
    case DType::F8E5M2:
      return {dlpack::kFloat8_e5m2, 8, 1};
    case DType::F32:
      return {dlpack::kFloat, 32, 1};
    case DType::I32:
      return {dlpack::kInt, 32, 1};
    case DType::I8:
      return {dlpack::kInt, 8, 1};
    default:
      internal_error << "no DLPack type for " << dtype_name(t);
  }
  return {};
}

// Throws unless the target reads memory on this device.
void check_device(const std::string& what, int32_t type, int32_t id, const ImportOptions& options) {
  if (type == dlpack::kCPU || (options.cuda && type == dlpack::kCUDA)) return;
  if (options.cuda)
    arg_error << what << " is on device " << device_name(type, id)
              << "; target='cuda' reads CUDA device memory (DLPack kDLCUDA) or host memory: "
                 "move it there first (e.g. tensor.cuda() in PyTorch)";
  arg_error << what << " is on device " << device_name(type, id)
            << "; the cpu target reads host memory (DLPack kDLCPU): copy it to the CPU first "
               "(e.g. tensor.cpu())"
            << (type == dlpack::kCUDA ? ", or compile with target='cuda'" : "");
}

// The exported tensor: the storage it keeps alive, its shape and strides, and both managed
// structs (only the one in the capsule is handed out).
struct ExportContext {
  OwnedTensor storage;
  std::vector<int64_t> shape, strides;
  dlpack::ManagedTensor legacy{};
  dlpack::ManagedTensorVersioned versioned{};
};

void delete_legacy(dlpack::ManagedTensor* self) {
  delete static_cast<ExportContext*>(self->manager_ctx);
}
void delete_versioned(dlpack::ManagedTensorVersioned* self) {
  delete static_cast<ExportContext*>(self->manager_ctx);
}

// Capsule destructors: free the managed tensor unless a consumer renamed the capsule (took it).
// They may run while an exception is being raised, so they keep the error indicator intact.
template <typename Managed>
void destroy_capsule(PyObject* capsule, const char* unused_name) {
  if (!PyCapsule_IsValid(capsule, unused_name)) return;  // consumed ("used_...")
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* saved = PyErr_GetRaisedException();
#else
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
#endif
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, unused_name));
  if (m && m->deleter) m->deleter(m);
  if (!m) PyErr_WriteUnraisable(capsule);
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(saved);
#else
  PyErr_Restore(type, value, traceback);
#endif
}
void destroy_legacy_capsule(PyObject* capsule) {
  destroy_capsule<dlpack::ManagedTensor>(capsule, dlpack::kCapsuleName);
}
void destroy_versioned_capsule(PyObject* capsule) {
  destroy_capsule<dlpack::ManagedTensorVersioned>(capsule, dlpack::kVersionedCapsuleName);
}

}  // namespace

std::string device_name(int32_t type, int32_t id) {
  std::string name;
  switch (type) {
    case dlpack::kCPU:
      return "cpu";
    case dlpack::kCUDA:
      name = "cuda";
      break;
    case dlpack::kCUDAHost:
      name = "cuda_host";
      break;
    case dlpack::kOpenCL:
      name = "opencl";
      break;
    case dlpack::kVulkan:
      name = "vulkan";
      break;
    case dlpack::kMetal:
      name = "metal";
      break;
    case dlpack::kVPI:
      name = "vpi";
      break;
    case dlpack::kROCM:
      name = "rocm";
      break;
    case dlpack::kROCMHost:
      name = "rocm_host";
      break;
    case dlpack::kExtDev:
      name = "ext_dev";
      break;
    case dlpack::kCUDAManaged:
      name = "cuda_managed";
      break;
    case dlpack::kOneAPI:
      name = "oneapi";
      break;
    case dlpack::kWebGPU:
      name = "webgpu";
      break;
    case dlpack::kHexagon:
      name = "hexagon";
      break;
    case dlpack::kMAIA:
      name = "maia";
      break;
    default:
      name = "DLPack device type " + std::to_string(type);
      break;
  }
  return name + ":" + std::to_string(id);
}

ImportedTensor::Owner::~Owner() {
  if (legacy && legacy->deleter) legacy->deleter(legacy);
  if (versioned && versioned->deleter) versioned->deleter(versioned);
}

bool ImportedTensor::read_numpy(const py::handle& obj, const std::string& what, bool writable) {
  if (std::strcmp(Py_TYPE(obj.ptr())->tp_name, "numpy.ndarray") != 0) return false;
  Py_buffer& b = buffer_.view;
  if (PyObject_GetBuffer(obj.ptr(), &b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    PyErr_Clear();  // not contiguous: DLPack's checks say so
    return false;
  }
  buffer_.held = true;
  if (writable && b.readonly) arg_error << what << " is read-only; pass a writable array";
  // The element type from the struct format: one code, in native byte order.
  const char* f = b.format ? b.format : "B";
  if (*f == '=' || *f == '@' || (*f == '<' && std::endian::native == std::endian::little)) ++f;
  DType dtype = DType::Unknown;
  if (f[0] != 0 && f[1] == 0) {
    switch (f[0]) {
      case 'e':
        dtype = DType::F16;
        break;
      case 'f':
        dtype = DType::F32;
        break;
      case 'b':
        dtype = DType::I8;
        break;
      case '?':  // a boolean array read as input: the i8 mask it is in memory (0 or 1)
        dtype = writable ? DType::Unknown : DType::I8;
        break;
      case 'i':
        dtype = DType::I32;
        break;
      case 'l':
        dtype = sizeof(long) == 4 ? DType::I32 : DType::Unknown;
        break;
      default:
        break;
    }
  }
  // A boolean array to be written keeps no Kintsugi type: the binding's dtype check names it.
  const bool boolean = f[0] == '?' && f[1] == 0 && b.itemsize == 1;
  if (!boolean && (dtype == DType::Unknown || b.itemsize != dtype_bytes(dtype))) {
    PyBuffer_Release(&b);
    buffer_.held = false;
    return false;
  }
  view_.dtype = dtype;
  view_.dtype_name = f[0] == '?' ? "bool" : array_dtype_name(dtype);
  view_.shape.assign(b.shape, b.shape + b.ndim);
  view_.data = b.buf;
  return true;
}

ImportedTensor::ImportedTensor(const py::handle& obj, const std::string& what, bool writable,
                               const ImportOptions& options) {
  if (read_numpy(obj, what, writable)) return;
  if (py::isinstance<OwnedTensor>(obj)) {
    const OwnedTensor& h = obj.cast<const OwnedTensor&>();
    view_.dtype = h.dtype();
    view_.dtype_name = array_dtype_name(h.dtype());
    view_.shape = h.shape();
    if (h.host) {
      view_.data = h.host->ptr();
      view_.storage = h.host;
    } else {
      check_device(what, dlpack::kCUDA, h.device->device, options);
      h.device->buffer.share_with(options.cuda_stream_handle);  // written on another stream?
      view_.data = reinterpret_cast<void*>(h.device->buffer.address());
      view_.memory = Memory::Cuda;
      view_.device = h.device->device;
    }
    return;
  }
  if (std::optional<ArgView> t = read_torch_tensor(obj.ptr())) {
    check_device(what, t->memory == Memory::Cuda ? dlpack::kCUDA : dlpack::kCPU, t->device,
                 options);
    view_ = std::move(*t);
    from_torch_ = true;
    return;
  }
  if (torch_requires_grad(obj.ptr()))  // read_torch_tensor leaves these to this message
    arg_error << what
              << " requires grad: Kintsugi's kernels are not differentiable; pass x.detach(), or "
                 "call under torch.no_grad() or torch.inference_mode()";
  if (!py::hasattr(obj, "__dlpack__"))
    throw py::type_error(what +
                         ": expected an array that supports DLPack (an object with __dlpack__, "
                         "such as numpy.ndarray or torch.Tensor), got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  // Where it lives, before asking for a capsule (which may synchronise a device stream).
  bool on_cuda = false;
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple dev = obj.attr("__dlpack_device__")();
    if (dev.size() == 2) {
      auto type = dev[0].cast<int32_t>(), id = dev[1].cast<int32_t>();
      check_device(what, type, id, options);
      on_cuda = type == dlpack::kCUDA;
    }
  }

  // Ask for a versioned capsule (it says whether the memory is read-only); producers that do not
  // know the keyword (NumPy < 2.1, older PyTorch) raise TypeError and get the plain call. A CUDA
  // producer also gets the stream the kernels run on (host producers take no stream).
  // The types that refused the keyword are remembered (with a reference each, so that a type
  // object is never freed and its address reused), and the refusal is caught as a Python error,
  // not thrown through C++: NumPy 1.x refuses it on every call, and a C++ exception costs
  // microseconds each time and, the first time in a process, hundreds of page faults reading
  // every library's unwind tables. The GIL guards the list.
  static auto* unversioned = new std::vector<PyObject*>();
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()));
  bool versioned = std::find(unversioned->begin(), unversioned->end(), type) == unversioned->end();
  py::dict kwargs;
  if (on_cuda) kwargs["stream"] = options.cuda_stream;
  py::object method = obj.attr("__dlpack__");
  py::tuple no_args;
  PyObject* raw = nullptr;
  if (versioned) {
    auto with_version = py::reinterpret_steal<py::dict>(PyDict_Copy(kwargs.ptr()));
    with_version["max_version"] = py::make_tuple(dlpack::kMajorVersion, dlpack::kMinorVersion);
    raw = PyObject_Call(method.ptr(), no_args.ptr(), with_version.ptr());
    if (!raw && PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      Py_INCREF(type);
      unversioned->push_back(type);
      versioned = false;
    }
  }
  if (!versioned) raw = PyObject_Call(method.ptr(), no_args.ptr(), kwargs.ptr());
  if (!raw) {
    // A ValueError that names the argument, with the producer's error as its __cause__.
    py::error_already_set e;
    std::string message =
        what + ": its __dlpack__() failed: " + std::string(py::str(e.type().attr("__name__"))) +
        ": " + std::string(py::str(e.value()));
    if (e.matches(PyExc_BufferError))
      message +=
          " (NumPy < 2 cannot export a read-only array, such as one from numpy.from_dlpack: "
          "pass a kernel's output as the kintsugi.Tensor itself, or a writable copy)";
    py::raise_from(e, PyExc_ValueError, message.c_str());
    throw py::error_already_set();
  }
  py::object capsule = py::reinterpret_steal<py::object>(raw);

  PyObject* c = capsule.ptr();
  const dlpack::Tensor* t = nullptr;
  uint64_t flags = 0;
  if (PyCapsule_IsValid(c, dlpack::kVersionedCapsuleName)) {
    auto* m = static_cast<dlpack::ManagedTensorVersioned*>(
        PyCapsule_GetPointer(c, dlpack::kVersionedCapsuleName));
    if (!m) throw py::error_already_set();
    if (m->version.major != dlpack::kMajorVersion)  // the capsule's destructor frees it
      arg_error << what << " comes as DLPack " << m->version.major << "." << m->version.minor
                << ", this module reads DLPack " << dlpack::kMajorVersion << ".x";
    if (PyCapsule_SetName(c, dlpack::kUsedVersionedCapsuleName) != 0) throw py::error_already_set();
    owner_.versioned = m;
    t = &m->dl_tensor;
    flags = m->flags;
  } else if (PyCapsule_IsValid(c, dlpack::kCapsuleName)) {
    auto* m = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(c, dlpack::kCapsuleName));
    if (!m) throw py::error_already_set();
    if (PyCapsule_SetName(c, dlpack::kUsedCapsuleName) != 0) throw py::error_already_set();
    owner_.legacy = m;
    t = &m->dl_tensor;
  } else {
    throw py::type_error(what + ": __dlpack__() returned " +
                         std::string(py::str(py::repr(capsule))) +
                         ", not an unconsumed DLPack capsule");
  }

  check_device(what, t->device.device_type, t->device.device_id, options);
  if (t->ndim < 0 || (t->ndim > 0 && !t->shape))
    arg_error << what << ": malformed DLPack tensor (ndim " << t->ndim << ")";
  view_.shape.assign(t->shape, t->shape + t->ndim);
  for (int64_t d : view_.shape)
    if (d < 0)
      arg_error << what << ": malformed DLPack tensor (shape " << runtime::shape_string(view_.shape)
                << ")";
  view_.dtype = kintsugi_dtype(t->dtype);
  view_.dtype_name = dtype_text(t->dtype);
  // A boolean tensor read as input is the i8 mask it is in memory (one byte, 0 or 1).
  if (!writable && t->dtype.code == dlpack::kBool && t->dtype.bits == 8 && t->dtype.lanes == 1)
    view_.dtype = DType::I8;
  std::vector<int64_t> strides;  // empty: compact row-major
  if (t->strides) strides.assign(t->strides, t->strides + t->ndim);
  if (!runtime::is_row_major(view_.shape, strides)) {
    arg_error << what << " is not C-contiguous (shape " << runtime::shape_string(view_.shape)
              << ", strides " << runtime::shape_string(strides)
              << " elements); pass a contiguous copy: x.contiguous() (PyTorch) or "
                 "numpy.ascontiguousarray(x) (NumPy)";
  }
  if (writable && (flags & dlpack::kFlagReadOnly))
    arg_error << what << " is read-only; pass a writable array";
  view_.data = static_cast<char*>(t->data) + t->byte_offset;
  if (t->device.device_type == dlpack::kCUDA) {
    view_.memory = Memory::Cuda;
    view_.device = t->device.device_id;
  }
}

py::object export_capsule(const OwnedTensor& tensor, bool versioned, bool copy, bool to_host) {
  auto ctx = std::make_unique<ExportContext>();
  ctx->storage = tensor;
  bool copied = copy || (to_host && !tensor.host);
  if (to_host || tensor.host) {
    std::shared_ptr<runtime::Tensor> host = tensor.to_host();  // a copy when on the device
    if (copy && tensor.host) host = std::make_shared<runtime::Tensor>(*host);
    ctx->storage = {host, nullptr};
  } else if (copy) {  // device to device, through host memory
    auto d = std::make_shared<DeviceTensor>();
    d->dtype = tensor.device->dtype;
    d->shape = tensor.device->shape;
    d->device = tensor.device->device;
    d->buffer = cuda::StreamBuffer(tensor.device->buffer.size(), tensor.device->buffer.stream());
    std::shared_ptr<runtime::Tensor> staged = tensor.to_host();
    d->buffer.upload(staged->ptr(), staged->data.size());
    ctx->storage.device = d;
  }
  const OwnedTensor& s = ctx->storage;
  ctx->shape = s.shape();
  ctx->strides.assign(ctx->shape.size(), 1);
  for (size_t k = ctx->shape.size(); k-- > 1;)
    ctx->strides[k - 1] = ctx->strides[k] * ctx->shape[k];
  dlpack::Tensor t{};
  if (s.host) {
    t.data = s.host->ptr();
    t.device = {dlpack::kCPU, 0};
  } else {
    t.data = reinterpret_cast<void*>(s.device->buffer.address());
    t.device = {dlpack::kCUDA, s.device->device};
  }
  t.ndim = static_cast<int32_t>(ctx->shape.size());
  t.dtype = dlpack_dtype(s.dtype());
  t.shape = ctx->shape.data();
  t.strides = ctx->strides.data();
  t.byte_offset = 0;

  PyObject* capsule = nullptr;
  ExportContext* raw = ctx.get();
  if (versioned) {
    raw->versioned.version = {dlpack::kMajorVersion, dlpack::kMinorVersion};
    raw->versioned.manager_ctx = raw;
    raw->versioned.deleter = delete_versioned;
    raw->versioned.flags = copied ? dlpack::kFlagIsCopied : 0;
    raw->versioned.dl_tensor = t;
    capsule =
        PyCapsule_New(&raw->versioned, dlpack::kVersionedCapsuleName, destroy_versioned_capsule);
  } else {
    raw->legacy.dl_tensor = t;
    raw->legacy.manager_ctx = raw;
    raw->legacy.deleter = delete_legacy;
    capsule = PyCapsule_New(&raw->legacy, dlpack::kCapsuleName, destroy_legacy_capsule);
  }
  if (!capsule) throw py::error_already_set();
  ctx.release();  // owned by the capsule, then by whoever consumes it
  return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace kintsugi::python
