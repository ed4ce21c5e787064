"""Tests of kintsugi.torch: compiled kernels as PyTorch operators, against float64 references.

On the CPU (any PyTorch with torch.library, Debian's included): the operator's results, its fake
(meta) implementation's shapes and dtypes, inputs that are not contiguous, names. On a GPU with
PyTorch 2 (torch.compile): a small model block (projection, Kintsugi attention, projection)
compiled with fullgraph=True, so any graph break fails, matches eager execution and a float64
reference; the same with CUDA graphs (mode="reduce-overhead").
"""
from pathlib import Path

import numpy as np
import pytest

import kintsugi

torch = pytest.importorskip("torch")
if not hasattr(torch, "library") or not hasattr(torch.library, "Library"):
    pytest.skip("this PyTorch has no torch.library", allow_module_level=True)
import kintsugi.torch as kt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "norm" / "softmax.te"
CAUSAL = ROOT / "examples" / "attention" / "prefill_causal.te"


def test_softmax_operator_on_the_cpu():
    softmax = kt.op(kintsugi.compile(SOFTMAX), name="softmax_cpu")
    assert softmax is torch.ops.kintsugi.softmax_cpu
    x = torch.randn(37, 300)
    y = softmax(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.shape == (37, 300)
    ref = torch.softmax(x.double(), dim=1)
    assert torch.allclose(y.double(), ref, rtol=1e-5, atol=1e-7)
    xt = torch.randn(300, 37).T  # not contiguous: the operator copies it
    assert torch.allclose(softmax(xt).double(), torch.softmax(xt.double(), 1), rtol=1e-5,
                          atol=1e-7)
    if hasattr(torch, "compile"):  # PyTorch 1 has no autograd fallthrough for meta tensors
        meta = softmax(torch.empty(5, 7, device="meta"))  # the fake implementation: no kernel
        assert meta.device.type == "meta" and meta.shape == (5, 7) and meta.dtype == torch.float32


def test_operator_names():
    kernel = kintsugi.compile(SOFTMAX)
    kt.op(kernel, name="softmax_names")
    assert kt.op(kernel, name="softmax_names") is torch.ops.kintsugi.softmax_names  # again: same
    with pytest.raises(ValueError, match="registered already"):
        kt.op(kintsugi.compile(SOFTMAX), name="softmax_names")
    with pytest.raises(ValueError, match="not an identifier"):
        kt.op(kernel, name="soft max")
    with pytest.raises(TypeError, match="takes a kintsugi.Kernel"):
        kt.op("softmax")


def test_output_shapes_and_dims():
    causal = kintsugi.compile(CAUSAL)
    assert causal.dims["Q"] == ["B", "H", "S", "D"] and causal.dims["O"] == ["B", "H", "S", "D"]
    assert causal.dtypes["O"] == "f16"
    assert causal.output_shapes((1, 2, 5, 32), (1, 2, 9, 32), (1, 2, 9, 32)) == [(1, 2, 5, 32)]
    with pytest.raises(ValueError, match="inconsistent sizes for T"):
        causal.output_shapes((1, 2, 5, 32), (1, 2, 9, 32), (1, 2, 8, 32))


@pytest.fixture(scope="module")
def cuda():
    if not torch.cuda.is_available() or not kintsugi.cuda_available():
        pytest.skip("needs PyTorch with CUDA and a GPU kintsugi can use")
    if not hasattr(torch, "compile"):
        pytest.skip("needs PyTorch 2 (torch.compile)")
    return torch.device("cuda")


@pytest.fixture(scope="module")
def attention(cuda):
    return kt.op(kintsugi.compile(CAUSAL, target="cuda"), name="causal_cuda")


def causal_ref(q, k, v):
    """Causal attention in float64, rounded to the inputs' dtype."""
    q64, k64, v64 = (t.double() for t in (q, k, v))
    s = q64 @ k64.transpose(-1, -2) / q.shape[-1] ** 0.5
    s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ v64).to(q.dtype)


class Block(torch.nn.Module):
    """Projection to queries, keys and values, causal attention, output projection."""

    def __init__(self, attention, width=256, heads=4):
        super().__init__()
        self.attention, self.heads = attention, heads
        self.qkv = torch.nn.Linear(width, 3 * width, dtype=torch.float16)
        self.proj = torch.nn.Linear(width, width, dtype=torch.float16)

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        o = self.attention(q, k, v)  # [b, heads, s, head dim]; q, k, v are not contiguous
        return self.proj(o.transpose(1, 2).reshape(b, s, w))


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_model_block_under_torch_compile(cuda, attention, mode):
    torch.manual_seed(0)
    block = Block(attention).to(cuda)
    reference = Block(causal_ref).to(cuda)
    reference.load_state_dict(block.state_dict())
    compiled = torch.compile(block, fullgraph=True, mode=mode)
    with torch.inference_mode():
        for seq in (64, 64, 64, 100):  # repeats: CUDA graphs record, then replay
            x = torch.randn(2, seq, 256, device=cuda, dtype=torch.float16)
            eager = block(x)
            got = compiled(x)
            torch.cuda.synchronize()
            ref = reference(x)
            scale = ref.abs().max().item()
            assert (eager.double() - ref.double()).abs().max().item() <= 2e-2 * scale
            assert (got.double() - eager.double()).abs().max().item() <= 1e-2 * scale, seq
    if mode == "reduce-overhead":  # the CUDA graphs were not skipped (e.g. for an unsafe op)
        from torch._dynamo.utils import counters
        assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
