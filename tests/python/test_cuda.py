"""Tests of target="cuda" in the Python binding: zero-copy calls on DLPack device tensors
(PyTorch CUDA tensors), out=, streams (asynchronous calls on PyTorch's current stream, outputs
used on other streams), failed checks reported by kernel.check(), CUDA graphs of decode steps,
host tensors copied through the GPU, and the argument errors, against float64 NumPy references
of causal attention and cross-entropy.

The GPU tests need PyTorch with a usable CUDA device (and a Kintsugi build with NVRTC); where
either is missing they are skipped with the reason. The tests of what happens without a GPU run
everywhere.
"""

import time
from pathlib import Path

import numpy as np
import pytest

import kintsugi

ROOT = Path(__file__).resolve().parents[2]
CAUSAL = ROOT / "examples" / "attention" / "prefill_causal.te"
DECODE = ROOT / "examples" / "attention" / "decode_causal.te"
CROSS_ENTROPY = ROOT / "tests" / "generality" / "cross_entropy.te"
SLEEP_CYCLES = 100_000_000  # torch.cuda._sleep: tens of milliseconds on any current GPU
SIZES = {"B": 1, "H": 2, "S": 100, "T": 100, "D": 32}
TOL = 2e-2  # relative to max|ref|: f16 inputs and output, f32 accumulation


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    scale = np.max(np.abs(ref))
    return np.max(np.abs(out - ref)) / (scale if scale > 0 else 1.0)


def causal_attention_ref(q, k, v):
    """Causal attention in float64 throughout. The mask is bottom-right aligned: query i sits at
    absolute position i + T - S and sees keys j <= i + T - S; a row that sees no key is 0."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    s, t, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(d)
    visible = np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s)
    scores = np.where(visible, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True)
    e = np.where(visible, np.exp(scores - np.where(np.isfinite(row_max), row_max, 0.0)), 0.0)
    l = np.sum(e, axis=-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", e, v) / np.where(l > 0, l, 1.0)


# --------------------------------------------------------------------------------------------
# Without a GPU


def test_compile_without_gpu_is_a_runtime_error():
    if kintsugi.cuda_available():
        pytest.skip("a GPU is usable here, so compile(target='cuda') succeeds")
    why = kintsugi.cuda_available(explain=True)
    assert isinstance(why, str) and why
    with pytest.raises(RuntimeError, match=r"target='cuda'.*use target='cpu'") as info:
        kintsugi.compile(CAUSAL, target="cuda")
    assert why in str(info.value)
    assert not isinstance(info.value, ValueError)


def test_cuda_options_on_the_cpu_target():
    cpu = kintsugi.compile(CAUSAL)
    assert cpu.target == "cpu" and cpu.arch is None
    q = np.zeros((1, 2, 4, 32), np.float16)
    with pytest.raises(ValueError, match="stream= applies to target='cuda' only"):
        cpu(q, q, q, stream=0)
    with pytest.raises(ValueError, match="arch='sm_80' applies to target='cuda' only"):
        kintsugi.compile(CAUSAL, arch="sm_80")


# --------------------------------------------------------------------------------------------
# On a GPU, with PyTorch CUDA tensors


@pytest.fixture(scope="module")
def torch():
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not installed: the CUDA tensor tests need torch with CUDA")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no usable CUDA device")
    if not kintsugi.cuda_available():
        pytest.skip("kintsugi cannot use the GPU: " + kintsugi.cuda_available(explain=True))
    torch.cuda.set_device(0)  # Kintsugi runs on device 0
    return torch


@pytest.fixture(scope="module")
def causal(torch):
    return kintsugi.compile(CAUSAL, target="cuda", shape=SIZES)


def qkv(torch, seed, s=SIZES["S"], t=SIZES["T"]):
    g = torch.Generator(device="cuda").manual_seed(seed)
    b, h, d = SIZES["B"], SIZES["H"], SIZES["D"]
    q = torch.randn(b, h, s, d, generator=g, device="cuda", dtype=torch.float16)
    k = torch.randn(b, h, t, d, generator=g, device="cuda", dtype=torch.float16)
    v = torch.randn(b, h, t, d, generator=g, device="cuda", dtype=torch.float16)
    return q, k, v


def reference(q, k, v):
    return causal_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)))


def test_compiled_for_this_gpu(causal, torch):
    assert causal.target == "cuda"
    major, minor = torch.cuda.get_device_capability(0)
    assert causal.arch == f"sm_{major}{minor}" + ("a" if major >= 9 else "")
    assert SIZES in causal.compiled_sizes  # compiled by compile(): shape= binds every size
    assert causal.form == "tile"
    assert "__global__" in causal.source


def test_causal_attention_on_cuda_tensors(causal, torch):
    q, k, v = qkv(torch, 1)
    o = causal(q, k, v)
    assert isinstance(o, kintsugi.Tensor)
    assert o.device == "cuda:0" and o.__dlpack_device__() == (2, 0)
    assert o.shape == (1, 2, 100, 32) and o.dtype == "f16" and "cuda:0" in repr(o)
    out = torch.from_dlpack(o)
    assert out.is_cuda and out.dtype == torch.float16 and tuple(out.shape) == (1, 2, 100, 32)
    assert torch.from_dlpack(o).data_ptr() == out.data_ptr()  # views of o's memory, no copies
    assert torch.isfinite(out).all()
    assert rel_err(out.double().cpu().numpy(), reference(q, k, v)) <= TOL
    # Host copies of a device tensor.
    np.testing.assert_array_equal(o.cpu().numpy(), out.cpu().numpy())
    with pytest.raises(TypeError, match=r"device memory.*t\.cpu\(\)"):
        o.numpy()


def test_kintsugi_cuda_tensor_as_input(causal, torch):
    q, k, v = qkv(torch, 2)
    o = causal(q, k, v)  # [B, H, S, D]: the shape of Q
    o2 = causal(o, k, v)
    ref = reference(torch.from_dlpack(o), k, v)
    assert rel_err(torch.from_dlpack(o2).double().cpu().numpy(), ref) <= TOL


def test_out_is_written_in_place(causal, torch):
    q, k, v = qkv(torch, 3)
    out = torch.full_like(q, float("nan"))
    address = out.data_ptr()
    assert causal(q, k, v, out=out) is out
    assert out.data_ptr() == address
    assert torch.isfinite(out).all()
    assert rel_err(out.double().cpu().numpy(), reference(q, k, v)) <= TOL
    outs = (torch.empty_like(q),)
    assert causal(q, k, v, out=outs) is outs
    assert torch.equal(outs[0], out)


def test_stream(causal, torch):
    q, k, v = qkv(torch, 4)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = torch.empty_like(q)
        causal(q, k, v, out=out, stream=side)  # an object with .cuda_stream
        o = causal(q, k, v, stream=side.cuda_stream)  # a CUstream handle
    torch.cuda.current_stream().wait_stream(side)
    ref = reference(q, k, v)
    assert rel_err(out.double().cpu().numpy(), ref) <= TOL
    assert torch.equal(torch.from_dlpack(o), out)
    with pytest.raises(TypeError, match="stream= takes a CUstream handle"):
        causal(q, k, v, stream="default")


def test_new_sizes_compile_a_new_variant(causal, torch):
    q, k, v = qkv(torch, 5, s=37, t=61)  # T > S, sizes that match no tile
    out = torch.from_dlpack(causal(q, k, v))
    assert rel_err(out.double().cpu().numpy(), reference(q, k, v)) <= TOL
    assert {"B": 1, "H": 2, "S": 37, "T": 61, "D": 32} in causal.compiled_sizes


def test_host_tensors_are_copied_through_the_gpu(causal, torch):
    q, k, v = (x.cpu() for x in qkv(torch, 6))
    o = causal(q, k, v)
    assert o.device == "cpu"
    assert rel_err(o.numpy(), reference(q, k, v)) <= TOL
    out = np.empty((1, 2, 100, 32), np.float16)
    assert causal(q.numpy(), k.numpy(), v.numpy(), out=out) is out
    np.testing.assert_array_equal(out, o.numpy())


def test_wrong_shape(causal, torch):
    q, k, v = qkv(torch, 7)
    with pytest.raises(ValueError, match=r"inconsistent sizes for T: input 'K' .* T = 100, "
                                         r"but input 'V' \(dimension 2\) has T = 99"):
        causal(q, k, v[:, :, :99].contiguous())
    with pytest.raises(ValueError, match=r"input 'Q' has 3 dimensions \(shape \[2, 100, 32\]\), "
                                         r"expected 4"):
        causal(q[0], k, v)
    with pytest.raises(ValueError, match=r"inconsistent sizes for S: .* but out 'O'"):
        causal(q, k, v, out=torch.empty(1, 2, 99, 32, device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match="input 'Q' has dtype float32, expected float16"):
        causal(q.float(), k, v)


def test_non_contiguous_input(causal, torch):
    q, k, v = qkv(torch, 8)
    qt = q.transpose(2, 3).contiguous().transpose(2, 3)  # the shape of Q, column-major
    assert not qt.is_contiguous()
    with pytest.raises(ValueError, match=r"input 'Q' is not C-contiguous.*\.contiguous\(\)"):
        causal(qt, k, v)
    assert rel_err(torch.from_dlpack(causal(qt.contiguous(), k, v)).double().cpu().numpy(),
                   reference(q, k, v)) <= TOL


def test_misaligned_input(causal, torch):
    q, k, v = qkv(torch, 9)
    flat = torch.empty(q.numel() + 1, device="cuda", dtype=torch.float16)
    shifted = flat[1:].view(q.shape)  # contiguous, 2 bytes past a 16-byte boundary
    shifted.copy_(q)
    with pytest.raises(ValueError, match=r"input Q starts at device address 0x[0-9a-f]+, which is "
                                         r"not a multiple of 16 bytes.*clone\(\)"):
        causal(shifted, k, v)


def test_mixed_host_and_device(causal, torch):
    q, k, v = qkv(torch, 10)
    with pytest.raises(ValueError, match=r"input 'K' is in CUDA device memory \(cuda:0\), but "
                                         r"input 'Q' is in host memory; target='cuda' takes either"):
        causal(q.cpu(), k, v)
    with pytest.raises(ValueError, match=r"out 'O' is in host memory, but input 'Q' is in CUDA"):
        causal(q, k, v, out=torch.empty(1, 2, 100, 32, dtype=torch.float16))


def test_device_tensors_on_the_cpu_target(torch):
    cpu = kintsugi.compile(CAUSAL)
    q, k, v = qkv(torch, 11)
    with pytest.raises(ValueError, match=r"input 'Q' is on device cuda:0; the cpu target reads "
                                         r"host memory"):
        cpu(q, k, v)


def test_bad_arch(torch):
    with pytest.raises(ValueError, match="arch='sm_10' does not run on"):
        kintsugi.compile(CAUSAL, target="cuda", arch="sm_10")
    with pytest.raises(ValueError, match="arch='volta' is not an NVRTC target"):
        kintsugi.compile(CAUSAL, target="cuda", arch="volta")


def test_calls_are_asynchronous_on_the_current_stream(causal, torch):
    q, k, v = qkv(torch, 12)
    out = torch.empty_like(q)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        out.fill_(float("nan"))  # after the sleep, on side: a call on another stream runs first
        start = time.perf_counter()
        causal(q, k, v, out=out)  # no stream=: PyTorch's current stream, side
        seconds = time.perf_counter() - start
        assert not side.query(), "the call waited for the stream"
    assert seconds < 0.01, f"the call took {seconds * 1e3:.1f} ms: it waited for the GPU"
    side.synchronize()
    assert rel_err(out.double().cpu().numpy(), reference(q, k, v)) <= TOL


def test_output_is_ordered_for_its_consumers(causal, torch):
    q, k, v = qkv(torch, 13)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        o = causal(q, k, v)  # memory of side's stream, written after the sleep
    # Exported to the default stream: the copy there waits for the kernel on side.
    copy = torch.from_dlpack(o).clone()
    assert rel_err(copy.double().cpu().numpy(), reference(q, k, v)) <= TOL
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        o = causal(q, k, v)
    o2 = causal(o, k, v)  # a call on the default stream reads o after side wrote it
    ref2 = reference(torch.from_dlpack(o), k, v)
    assert rel_err(torch.from_dlpack(o2).double().cpu().numpy(), ref2) <= TOL
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        o = causal(q, k, v)
    np.testing.assert_array_equal(o.cpu().numpy(), copy.cpu().numpy())  # cpu() waits


def test_failed_checks_are_reported_by_check(torch):
    loss = kintsugi.compile(CROSS_ENTROPY, target="cuda")
    x = torch.zeros(5, 100, device="cuda")
    target = torch.tensor([0, 1, 2, 100, 4], device="cuda", dtype=torch.int32)
    loss(x, target)  # returns: the failure is on the device
    with pytest.raises(ValueError, match="failed at X"):
        loss.check()
    loss.check()  # reported once
    checked = kintsugi.compile(CROSS_ENTROPY, target="cuda", check_launches=True)
    with pytest.raises(ValueError, match="failed at X"):
        checked(x, target)
    target[3] = 3
    out = torch.from_dlpack(checked(x, target))
    assert torch.allclose(out, torch.full_like(out, float(np.log(100.0))))


def decode_ref(q, k, v):
    """decode_causal.te in float64: one query row that sees every key."""
    q, k, v = (x.double().cpu().numpy() for x in (q, k, v))
    scores = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(q.shape[-1])
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", p / p.sum(axis=-1, keepdims=True), v)


def test_cuda_graph_of_decode_steps(torch):
    decode = kintsugi.compile(DECODE, target="cuda", dynamic=["T"])
    g = torch.Generator(device="cuda").manual_seed(14)
    steps = []
    for step in range(32):
        t = 100 + 131 * step  # growing T: from one chunk to several
        q = torch.randn(1, 4, 1, 64, generator=g, device="cuda", dtype=torch.float16)
        k, v = (torch.randn(1, 4, t, 64, generator=g, device="cuda", dtype=torch.float16)
                for _ in range(2))
        steps.append((q, k, v, torch.empty_like(q)))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for q, k, v, o in steps:  # compiles once, sizes the workspace, outside the capture
            decode(q, k, v, out=o)
    assert len(decode.compiled_sizes) == 1
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    for _, _, _, o in steps:
        o.fill_(float("nan"))
    with torch.cuda.graph(graph):
        for q, k, v, o in steps:
            decode(q, k, v, out=o)
    for _, _, _, o in steps:
        assert torch.isnan(o).all(), "a captured call ran during the capture"
    graph.replay()
    torch.cuda.synchronize()
    for q, k, v, o in steps:
        assert rel_err(o.double().cpu().numpy(), decode_ref(q, k, v)) <= TOL
    for _, _, v, _ in steps:
        v.mul_(-2)  # new values in the captured memory: a replay computes with them
    graph.replay()
    torch.cuda.synchronize()
    for q, k, v, o in steps:
        assert rel_err(o.double().cpu().numpy(), decode_ref(q, k, v)) <= TOL
    decode.check()
    with torch.cuda.graph(torch.cuda.CUDAGraph()):
        with pytest.raises(ValueError, match="capturing a CUDA graph; pass the outputs"):
            decode(*steps[0][:3])


def test_one_decode_kernel_for_every_length(torch):
    """T=1 to 131072 in steps of 4099 (H=32, D=128, as benchmarked): one variant, every step
    verified."""
    decode = kintsugi.compile(DECODE, target="cuda", dynamic=["T"],
                              shape={"B": 1, "H": 32, "S": 1, "D": 128})
    g = torch.Generator(device="cuda").manual_seed(15)
    for t in range(1, 131073, 4099):
        q = torch.randn(1, 32, 1, 128, generator=g, device="cuda", dtype=torch.float16)
        k, v = (torch.randn(1, 32, t, 128, generator=g, device="cuda", dtype=torch.float16)
                for _ in range(2))
        o = torch.from_dlpack(decode(q, k, v))
        assert rel_err(o.double().cpu().numpy(), decode_ref(q, k, v)) <= TOL, t
    assert decode.compiled_sizes == [{"B": 1, "H": 32, "S": 1, "D": 128, "T": 32768}]
