// \file DLPackTensor.h
// Tensors across the Python boundary, through DLPack.
//
// In: ImportedTensor takes any object with `__dlpack__` (NumPy arrays, PyTorch tensors, ...) and
// holds the producer's managed tensor for the duration of a call, following the capsule
// protocol: it renames the capsule to "used_dltensor" (or "used_dltensor_versioned") when it
// takes ownership and calls the producer's deleter when destroyed. It accepts host memory
// (kDLCPU) and, for target cuda, CUDA device memory (kDLCUDA; the producer is handed the stream
// the call runs on, so that its pending work on the tensor is ordered before the kernels), always
// C-contiguous with one lane per element; anything else is a RuntimeArgError that names the
// argument and says what to do. Kintsugi's own tensors, PyTorch's (Torch.h) and NumPy's
// (through the buffer protocol: no capsule, and no TypeError from NumPy < 2.1's __dlpack__,
// which does not take max_version) are taken without DLPack.
//
// Out: OwnedTensor (Python `kintsugi.Tensor`, Kernel.h) owns host or device memory and exports it
// with `__dlpack__`: a capsule "dltensor" (or "dltensor_versioned" when the consumer asks for
// DLPack >= 1.0) whose destructor frees the managed tensor if no consumer took it. The managed
// tensor keeps the storage alive through a shared_ptr, so its deleter needs no GIL. Device
// memory is written by kernels queued on the stream of the call that made it: a consumer's
// stream (DLPack's stream=) and the stream of a later call that reads it are ordered after
// that work, and the memory is freed only after theirs (cuda::StreamBuffer::share_with).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "DLPack.h"
#include "Kernel.h"

namespace kintsugi::python {

namespace py = pybind11;

// "cpu", "cuda:0", ...
std::string device_name(int32_t device_type, int32_t device_id);

// What a call imports.
struct ImportOptions {
  bool cuda = false;        // accept CUDA device memory (target cuda)
  int64_t cuda_stream = 1;  // the DLPack stream passed to a CUDA producer (1: legacy default)
  cuda::StreamHandle cuda_stream_handle = nullptr;  // the same stream, as the launches take it
};

class ImportedTensor {
 public:
  // `what` names the argument in messages ("input 'Q'"); `writable`: the call writes into it.
  ImportedTensor(const py::handle& obj, const std::string& what, bool writable,
                 const ImportOptions& options);
  ImportedTensor(ImportedTensor&&) noexcept = default;
  ImportedTensor(const ImportedTensor&) = delete;
  ImportedTensor& operator=(const ImportedTensor&) = delete;
  ImportedTensor& operator=(ImportedTensor&&) = delete;

  const ArgView& view() const { return view_; }
  // Read from a torch.Tensor directly (Torch.h): its producer was not asked to order its work.
  bool from_torch() const { return from_torch_; }

 private:
  // Calls the producer's deleter when destroyed (also when the constructor throws after taking
  // ownership). Destroy with the GIL held: producers' deleters may need it.
  struct Owner {
    dlpack::ManagedTensor* legacy = nullptr;
    dlpack::ManagedTensorVersioned* versioned = nullptr;
    Owner() = default;
    Owner(Owner&& o) noexcept : legacy(o.legacy), versioned(o.versioned) {
      o.legacy = nullptr;
      o.versioned = nullptr;
    }
    Owner(const Owner&) = delete;
    Owner& operator=(const Owner&) = delete;
    Owner& operator=(Owner&&) = delete;
    ~Owner();
  };

  // A NumPy array's buffer (PEP 3118), held for the duration of the call; released when destroyed.
  struct Buffer {
    Py_buffer view{};
    bool held = false;
    Buffer() = default;
    Buffer(Buffer&& o) noexcept : view(o.view), held(o.held) { o.held = false; }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer& operator=(Buffer&&) = delete;
    ~Buffer() {
      if (held) PyBuffer_Release(&view);
    }
  };
  // Reads a numpy.ndarray through its buffer; false (nothing held) when the array is not
  // C-contiguous or its element type is not one Kintsugi stores: DLPack then says what is wrong.
  // A read-only array where the call writes (`writable`) is refused here, naming `what`.
  bool read_numpy(const py::handle& obj, const std::string& what, bool writable);

  Owner owner_;
  Buffer buffer_;
  ArgView view_;
  bool from_torch_ = false;
};

// The capsule `tensor.__dlpack__(max_version=..., copy=...)` returns: versioned when
// `versioned`; a copy of the data when `copy` (in the tensor's memory, or in host memory when
// `to_host`).
py::object export_capsule(const OwnedTensor& tensor, bool versioned, bool copy, bool to_host);

}  // namespace kintsugi::python
