"""Kintsugi: fused kernels for chained reductions, compiled from tensor expressions.

    import numpy as np, kintsugi
    softmax = kintsugi.compile("examples/norm/softmax.te")
    y = softmax(np.random.rand(37, 1000).astype(np.float32))   # a kintsugi.Tensor
    np.from_dlpack(y)                                          # or torch.from_dlpack(y)

On an NVIDIA GPU, target="cuda" runs on device tensors in place (no copies, no PyTorch
dependency: any producer of CUDA DLPack tensors works):

    attn = kintsugi.compile("examples/attention/prefill_causal.te", target="cuda")
    o = attn(q, k, v)                     # torch CUDA tensors in, a CUDA kintsugi.Tensor out
    torch.from_dlpack(o)                  # a torch CUDA tensor sharing o's memory
    attn(q, k, v, out=o_torch)            # or write into a tensor of your own

Inputs and out= arrays are any tensors with ``__dlpack__`` (NumPy, PyTorch, ...), C-contiguous,
with the dtypes the program declares (f16 = float16, bf16 = bfloat16, f32, i32, i8,
f8e4m3 = float8_e4m3fn, f8e5m2 = float8_e5m2): in host
memory for target="cpu"; for target="cuda" all in device memory (used in place) or all in host
memory (copied to the GPU and back). Outputs are ``kintsugi.Tensor`` objects that own their
memory and export it through DLPack.
"""

from ._core import (
    CompileError,
    CompileWarning,
    Kernel,
    Tensor,
    __commit__,
    __version__,
    compile,
    cuda_available,
)

__all__ = ["CompileError", "CompileWarning", "Kernel", "Tensor", "compile", "cuda_available", "__version__"]

for _cls in (Kernel, Tensor):
    _cls.__module__ = __name__


def _tensor_numpy(self):
    """The tensor as a NumPy array that shares its memory (numpy.from_dlpack); host memory only."""
    import numpy

    if self.device != "cpu":
        raise TypeError(
            f"this kintsugi.Tensor is in device memory ({self.device}): copy it to the host with "
            "t.cpu().numpy(), or view it on the GPU with torch.from_dlpack(t)"
        )
    if self.dtype in ("bf16", "f8e4m3", "f8e5m2"):
        raise TypeError(f"NumPy has no {self.dtype}: use torch.from_dlpack(t) for a {self.dtype} "
                        "kintsugi.Tensor")
    return numpy.from_dlpack(self)


def _tensor_array(self, dtype=None, copy=None):
    array = _tensor_numpy(self)
    if dtype is not None and array.dtype != dtype:
        return array.astype(dtype)
    return array.copy() if copy else array


Tensor.numpy = _tensor_numpy
Tensor.__array__ = _tensor_array
del _cls
