"""Kintsugi: fused kernels for chained reductions, compiled from tensor expressions.

    import numpy as np, kintsugi
    softmax = kintsugi.compile("examples/norm/softmax.te")
    y = softmax(np.random.rand(37, 1000).astype(np.float32))   # a kintsugi.Tensor
    np.from_dlpack(y)                                          # or torch.from_dlpack(y)

Inputs and out= arrays are any CPU tensors with ``__dlpack__`` (NumPy, PyTorch, ...), C-contiguous,
with the dtypes the program declares (f16 = float16, bf16 = bfloat16, f32, i32, i8). Outputs are
``kintsugi.Tensor`` objects that own their memory and export it through DLPack.
"""

from ._core import CompileError, Kernel, Tensor, __commit__, __version__, compile

__all__ = ["CompileError", "Kernel", "Tensor", "compile", "__version__"]

for _cls in (Kernel, Tensor):
    _cls.__module__ = __name__


def _tensor_numpy(self):
    """The tensor as a NumPy array that shares its memory (numpy.from_dlpack)."""
    import numpy

    if self.dtype == "bf16":
        raise TypeError("NumPy has no bfloat16: use torch.from_dlpack(t) for a bf16 kintsugi.Tensor")
    return numpy.from_dlpack(self)


def _tensor_array(self, dtype=None, copy=None):
    array = _tensor_numpy(self)
    if dtype is not None and array.dtype != dtype:
        return array.astype(dtype)
    return array.copy() if copy else array


Tensor.numpy = _tensor_numpy
Tensor.__array__ = _tensor_array
del _cls
