// \file Torch.cpp
// torch.Tensor attributes read through the C API (Torch.h): the Tensor type, dtypes and the
// current-stream query are looked up once, when torch is first seen imported; attribute names
// are interned once.
#include "Torch.h"

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

namespace kintsugi::python {

namespace py = pybind11;

namespace {

// References held for the life of the process: the torch module is never unloaded.
struct TorchApi {
  PyTypeObject* tensor = nullptr;
  std::vector<std::pair<PyObject*, DType>> dtypes;
  PyObject* current_raw_stream = nullptr;  // torch._C._cuda_getCurrentRawStream, if it exists
  PyObject* current_stream = nullptr;      // torch.cuda.current_stream
  PyObject *requires_grad, *dtype, *is_cuda, *is_cpu, *get_device, *shape, *stride, *data_ptr,
      *cuda_stream;
};

PyObject* intern(const char* name) {
  return PyUnicode_InternFromString(name);
}

// New reference to module.name, or nullptr (error cleared).
PyObject* attribute(PyObject* module, const char* name) {
  PyObject* a = PyObject_GetAttrString(module, name);
  if (!a) PyErr_Clear();
  return a;
}

const TorchApi* torch_api() {
  static TorchApi* api = nullptr;  // guarded by the GIL
  if (api) return api;
  static PyObject* const name = intern("torch");  // once: this runs on every call until torch is
  PyObject* torch = PyImport_GetModule(name);     // imported (no import: loaded already or not)
  if (!torch) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* tensor = attribute(torch, "Tensor");
  if (!tensor || !PyType_Check(tensor)) return nullptr;  // not PyTorch after all
  auto* a = new TorchApi();
  a->tensor = reinterpret_cast<PyTypeObject*>(tensor);
  const std::pair<const char*, DType> names[] = {
      {"float16", DType::F16},        {"bfloat16", DType::BF16}, {"float32", DType::F32},
      {"int32", DType::I32},          {"int8", DType::I8},       {"float8_e4m3fn", DType::F8E4M3},
      {"float8_e5m2", DType::F8E5M2},
  };
  for (const auto& [name, dtype] : names)
    if (PyObject* d = attribute(torch, name)) a->dtypes.push_back({d, dtype});
  if (PyObject* c = attribute(torch, "_C"))
    a->current_raw_stream = attribute(c, "_cuda_getCurrentRawStream");
  if (PyObject* cuda = attribute(torch, "cuda"))
    a->current_stream = attribute(cuda, "current_stream");
  a->requires_grad = intern("requires_grad");
  a->dtype = intern("dtype");
  a->is_cuda = intern("is_cuda");
  a->is_cpu = intern("is_cpu");
  a->get_device = intern("get_device");
  a->shape = intern("shape");
  a->stride = intern("stride");
  a->data_ptr = intern("data_ptr");
  a->cuda_stream = intern("cuda_stream");
  return api = a;
}

// A new reference, or a thrown error_already_set.
py::object get(PyObject* obj, PyObject* name) {
  PyObject* r = PyObject_GetAttr(obj, name);
  if (!r) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

py::object call(PyObject* obj, PyObject* name) {
  PyObject* r = PyObject_CallMethodNoArgs(obj, name);
  if (!r) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

const TorchApi* tensor_api(PyObject* obj) {
  const TorchApi* api = torch_api();
  return api && PyObject_TypeCheck(obj, api->tensor) ? api : nullptr;
}

bool truth(const py::object& o) {
  int t = PyObject_IsTrue(o.ptr());
  if (t < 0) throw py::error_already_set();
  return t == 1;
}

// Ints of a tuple (torch.Size is one).
std::optional<std::vector<int64_t>> ints(const py::object& tuple) {
  if (!PyTuple_Check(tuple.ptr())) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(PyTuple_GET_SIZE(tuple.ptr())));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple.ptr(), static_cast<Py_ssize_t>(i)));
    if (out[i] == -1 && PyErr_Occurred()) throw py::error_already_set();
  }
  return out;
}

}  // namespace

bool torch_requires_grad(PyObject* obj) {
  const TorchApi* api = tensor_api(obj);
  return api && truth(get(obj, api->requires_grad));
}

std::optional<int> torch_cuda_device(PyObject* obj) {
  const TorchApi* api = tensor_api(obj);
  if (!api || !truth(get(obj, api->is_cuda))) return std::nullopt;
  return call(obj, api->get_device).cast<int>();
}

std::optional<ArgView> read_torch_tensor(PyObject* obj) {
  const TorchApi* api = tensor_api(obj);
  if (!api) return std::nullopt;
  if (truth(get(obj, api->requires_grad))) return std::nullopt;  // refused by the caller
  ArgView v;
  py::object dtype = get(obj, api->dtype);
  for (const auto& [d, t] : api->dtypes)
    if (d == dtype.ptr()) v.dtype = t;
  if (v.dtype == DType::Unknown) return std::nullopt;
  if (truth(get(obj, api->is_cuda))) {
    v.memory = Memory::Cuda;
    v.device = call(obj, api->get_device).cast<int>();
  } else if (!truth(get(obj, api->is_cpu))) {
    return std::nullopt;  // another device: DLPack says which
  }
  std::optional<std::vector<int64_t>> shape = ints(get(obj, api->shape));
  std::optional<std::vector<int64_t>> strides = ints(call(obj, api->stride));
  if (!shape || !strides || !runtime::is_row_major(*shape, *strides)) return std::nullopt;
  v.shape = std::move(*shape);
  v.dtype_name = array_dtype_name(v.dtype);
  PyObject* address = call(obj, api->data_ptr).release().ptr();
  v.data = PyLong_AsVoidPtr(address);
  Py_DECREF(address);
  if (PyErr_Occurred()) throw py::error_already_set();
  return v;
}

cuda::StreamHandle torch_current_stream(int device) {
  const TorchApi* api = torch_api();
  internal_assert(api) << "torch is imported when a torch.Tensor was seen";
  py::object handle;
  if (api->current_raw_stream) {
    handle = py::reinterpret_borrow<py::object>(api->current_raw_stream)(device);
  } else {
    py::object s = py::reinterpret_borrow<py::object>(api->current_stream)(device);
    handle = get(s.ptr(), api->cuda_stream);
  }
  return reinterpret_cast<cuda::StreamHandle>(static_cast<uintptr_t>(handle.cast<uint64_t>()));
}

}  // namespace kintsugi::python
