"""Compiled kernels as PyTorch operators: ``kintsugi.torch.op(kernel)`` registers a kernel as
``torch.ops.kintsugi.<name>``, with a fake (meta) implementation that gives the output shapes and
dtypes without running anything, so the operator runs under ``torch.compile(fullgraph=True)``
without graph breaks, inside CUDA graphs (``mode="reduce-overhead"``) and in plain eager code.

    import torch, kintsugi, kintsugi.torch
    attn = kintsugi.torch.op(kintsugi.compile("examples/attention/prefill_causal.te", target="cuda"))
    o = attn(q, k, v)                  # torch tensors in, torch tensors out (PyTorch's allocator)

This module imports torch; ``import kintsugi`` alone does not. The operator makes its inputs
contiguous and 16-byte aligned (a copy only where they are not), allocates the outputs with
PyTorch on the inputs' device and calls the kernel on PyTorch's current stream. It is not
differentiable: call it under ``torch.no_grad()`` or ``torch.inference_mode()``, or on tensors
that do not require grad.
"""
import re

import torch

from . import Kernel

__all__ = ["op"]

DTYPES = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "i32": torch.int32,
    "i8": torch.int8,
}
for _name, _attr in (("f8e4m3", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2")):
    if hasattr(torch, _attr):  # PyTorch 2.1 on
        DTYPES[_name] = getattr(torch, _attr)

_library = torch.library.Library("kintsugi", "DEF")  # the namespace, defined once a process
_registered = {}  # operator name -> kernel


def _prepared(t):
    """The tensor as the kernel reads it: contiguous, 16-byte aligned, outside autograd."""
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.data_ptr() % 16:
        t = t.clone()
    return t


def _shape_function(kernel):
    """(input shapes) -> output shapes. Each output dimension declared as a size that some input
    dimension binds takes that input's dimension, symbolic or not (torch.compile's dynamic shapes
    pass SymInts); any other dimension is computed by the kernel from concrete input shapes."""
    dims, inputs = kernel.dims, kernel.inputs
    where = {}
    for i, name in enumerate(inputs):
        for axis, d in enumerate(dims[name]):
            if d.isidentifier():
                where.setdefault(d, (i, axis))
    plans = []
    for name in kernel.outputs:
        plan = [where.get(d) if d.isidentifier() else (int(d) if d.isdigit() else None)
                for d in dims[name]]
        plans.append(plan)

    def shapes(input_shapes):
        if any(p is None for plan in plans for p in plan):
            concrete = kernel.output_shapes(*(tuple(int(n) for n in s) for s in input_shapes))
        out = []
        for k, plan in enumerate(plans):
            out.append([input_shapes[p[0]][p[1]] if isinstance(p, tuple) else
                        p if isinstance(p, int) else concrete[k][axis]
                        for axis, p in enumerate(plan)])
        return out

    return shapes


def op(kernel, name=None):
    """Registers `kernel` (a kintsugi.Kernel) as the operator torch.ops.kintsugi.<name> and returns
    it. name: an identifier, by default the program's name. A name is registered once per
    process: registering another kernel under a taken name is a ValueError."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kintsugi.torch.op takes a kintsugi.Kernel, got {type(kernel).__name__}")
    name = name or re.sub(r"\W", "_", kernel.program)
    if not name.isidentifier():
        raise ValueError(f"kintsugi.torch.op: name {name!r} is not an identifier")
    if name in _registered:
        if _registered[name] is kernel:
            return getattr(torch.ops.kintsugi, name)
        raise ValueError(f"kintsugi.torch.op: torch.ops.kintsugi.{name} is registered already "
                         "(for another kernel): pass name=")
    missing = [d for d in kernel.dtypes.values() if d not in DTYPES]
    if missing:
        raise ValueError(f"kintsugi.torch.op: this PyTorch has no dtype for {missing[0]}")
    outputs = kernel.outputs
    dtypes = [DTYPES[kernel.dtypes[o]] for o in outputs]
    returns = "Tensor" if len(outputs) == 1 else "(" + ", ".join(["Tensor"] * len(outputs)) + ")"
    _library.define(f"{name}({', '.join('Tensor ' + i for i in kernel.inputs)}) -> {returns}")
    shapes = _shape_function(kernel)

    def empty_outputs(args):
        device = args[0].device
        return [torch.empty(s, dtype=t, device=device)
                for s, t in zip(shapes([a.shape for a in args]), dtypes)]

    def run(*args):
        args = [_prepared(a) for a in args]
        outs = empty_outputs(args)
        kernel(*args, out=tuple(outs))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def fake(*args):
        outs = empty_outputs(args)
        return outs[0] if len(outs) == 1 else tuple(outs)

    _library.impl(name, run, "CUDA" if kernel.target == "cuda" else "CPU")
    _library.impl(name, fake, "Meta")
    _registered[name] = kernel
    return getattr(torch.ops.kintsugi, name)
