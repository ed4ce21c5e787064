// \file Torch.h
// PyTorch tensors read without DLPack and without a PyTorch dependency. A torch.Tensor's
// __dlpack__ is Python code that costs several microseconds a tensor (and records an event when
// the streams differ); a kernel call takes three or four tensors, so reading the attributes
// directly is most of the difference between a call's overhead and PyTorch's own. Nothing here
// imports torch: when the torch module is not loaded already, no object is a torch.Tensor.
//
// Invariant established: a view is returned only for a torch.Tensor that is C-contiguous, in
// host or CUDA memory, of a dtype Kintsugi stores, and does not require grad; every other object
// goes through DLPack, whose errors say what is wrong with it.
#pragma once

#include <Python.h>

#include <optional>

#include "Kernel.h"

namespace kintsugi::python {

// The view of `obj` when it is such a torch.Tensor; nullopt otherwise. Needs the GIL.
std::optional<ArgView> read_torch_tensor(PyObject* obj);

// Whether `obj` is a torch.Tensor that requires grad. Needs the GIL.
bool torch_requires_grad(PyObject* obj);

// The CUDA device of `obj` when it is a torch.Tensor in CUDA memory. Needs the GIL.
std::optional<int> torch_cuda_device(PyObject* obj);

// PyTorch's current stream on CUDA device `device` (torch.cuda.current_stream(device)), as a
// CUstream handle: nullptr for the default stream. Needs the GIL and torch imported.
cuda::StreamHandle torch_current_stream(int device);

}  // namespace kintsugi::python
