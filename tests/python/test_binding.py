"""Tests of the Python binding: compile, call with NumPy arrays through DLPack, compare with the
independent float64 references of tests/crosscheck/references.py, out=, errors, DLPack export."""

import gc
import re
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import kintsugi
import references

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
F16_TOL = 1e-2  # relative to max|ref|, as the cross-check suite
F32_TOL = 1e-4

SOFTMAX_SRC = """\
sizes M = 4, N = 10
input X: f32[M, N]
m[i]    = max[j](X[i, j])
e[i, j] = exp(X[i, j] - m[i])
l[i]    = sum[j](e[i, j])
output Y[i, j]: f32 = e[i, j] / l[i]
"""


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    scale = np.max(np.abs(ref))
    return np.max(np.abs(out - ref)) / (scale if scale > 0 else 1.0)


def softmax_ref(x):
    return references.softmax({}, {"X": x.astype(np.float64)})["Y"]


@pytest.fixture(scope="module")
def softmax():
    return kintsugi.compile(str(EXAMPLES / "norm" / "softmax.te"))


@pytest.fixture(scope="module")
def causal():
    return kintsugi.compile(EXAMPLES / "attention" / "prefill_causal.te")  # an os.PathLike


def qkv(rng, b, h, s, t, d):
    q = rng.standard_normal((b, h, s, d)).astype(np.float16)
    k = rng.standard_normal((b, h, t, d)).astype(np.float16)
    v = rng.standard_normal((b, h, t, d)).astype(np.float16)
    return q, k, v


# --------------------------------------------------------------------------------------------
# Numerics


def test_softmax_matches_reference(softmax):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 45)).astype(np.float32) * 4
    y = softmax(x)
    assert isinstance(y, kintsugi.Tensor)
    assert y.shape == (7, 45) and y.dtype == "f32"
    out = np.from_dlpack(y)
    assert out.dtype == np.float32 and out.shape == (7, 45)
    assert rel_err(out, softmax_ref(x)) <= F32_TOL
    assert softmax.sizes == {"M": 7, "N": 45}
    assert softmax.program == "softmax"
    assert softmax.form in ("tile", "loop")
    assert softmax.schedule == []  # a row this short is computed whole: nothing to fuse
    assert "kintsugi_entry" in softmax.source
    streamed = kintsugi.compile(str(EXAMPLES / "norm" / "softmax.te"), whole_row_bytes=0)
    assert rel_err(np.from_dlpack(streamed(x)), softmax_ref(x)) <= F32_TOL
    assert streamed.schedule and all(isinstance(p, str) for p in streamed.schedule)


def test_new_sizes_recompile_transparently(softmax):
    rng = np.random.default_rng(2)
    for m, n in [(3, 130), (37, 129), (7, 45)]:
        x = rng.standard_normal((m, n)).astype(np.float32)
        assert rel_err(np.from_dlpack(softmax(x)), softmax_ref(x)) <= F32_TOL
        assert softmax.sizes == {"M": m, "N": n}
    compiled = softmax.compiled_sizes
    for sizes in ({"M": 3, "N": 130}, {"M": 37, "N": 129}, {"M": 7, "N": 45}):
        assert sizes in compiled
    assert len(compiled) == len({tuple(sorted(s.items())) for s in compiled})  # no duplicates


def decode_ref(q, k, v):
    """decode_causal.te in float64: one query row that sees every key."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", p / p.sum(axis=-1, keepdims=True), v)


def test_dynamic_sizes_compile_once():
    """A decode loop from T=1 to T=131072 in steps of 4099 compiles one variant (scheduled at
    T=32768) and verifies at every step."""
    decode = kintsugi.compile(EXAMPLES / "attention" / "decode_causal.te", dynamic=["T"],
                              shape={"B": 1, "H": 1, "S": 1, "D": 32})
    assert decode.compiled_sizes == [{"B": 1, "H": 1, "S": 1, "D": 32, "T": 32768}]
    rng = np.random.default_rng(4099)
    for t in range(1, 131073, 4099):
        q = rng.standard_normal((1, 1, 1, 32)).astype(np.float16)
        k, v = (rng.standard_normal((1, 1, t, 32)).astype(np.float16) for _ in range(2))
        assert rel_err(np.from_dlpack(decode(q, k, v)), decode_ref(q, k, v)) <= 2e-2, t
    assert len(decode.compiled_sizes) == 1
    softmax = kintsugi.compile(EXAMPLES / "norm" / "softmax.te", dynamic="M")
    for m in (1, 3, 70):
        x = rng.standard_normal((m, 100)).astype(np.float32)
        assert rel_err(np.from_dlpack(softmax(x)), softmax_ref(x)) <= F32_TOL
    assert softmax.compiled_sizes == [{"M": 32768, "N": 100}]
    with pytest.raises(ValueError, match="dynamic names 'Z', which is not a size of softmax"):
        kintsugi.compile(EXAMPLES / "norm" / "softmax.te", dynamic=["Z"])
    with pytest.raises(TypeError, match="dynamic takes size names"):
        kintsugi.compile(EXAMPLES / "norm" / "softmax.te", dynamic=[1])


@pytest.mark.parametrize("s,t", [(13, 29), (21, 9)])  # T < S: leading rows see no key
def test_causal_attention_f16(causal, s, t):
    rng = np.random.default_rng(s * 100 + t)
    q, k, v = qkv(rng, 1, 2, s, t, 32)
    o = causal(q, k, v)
    out = np.from_dlpack(o)
    assert out.dtype == np.float16 and out.shape == (1, 2, s, 32)
    ref = references.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                               causal=True)
    assert np.all(np.isfinite(out))
    assert rel_err(out, ref) <= F16_TOL
    if t < s:  # bottom-right aligned: the first S - T query rows are fully masked -> 0
        assert np.all(out[:, :, : s - t, :] == 0)


def test_two_outputs_and_params():
    kernel = kintsugi.compile(str(EXAMPLES / "norm" / "rmsnorm_quant.te"), params={"EPS": 1e-3})
    assert kernel.params == {"EPS": pytest.approx(1e-3)}
    assert kernel.outputs == ["scale", "Yq"] and kernel.inputs == ["X", "Wt"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 77)).astype(np.float16)
    w = rng.standard_normal(77).astype(np.float16)
    scale, yq = kernel(x, w)
    ref = references.rmsnorm_quant({"params": {"EPS": 1e-3}},
                                   {"X": x.astype(np.float64), "Wt": w.astype(np.float64)})
    assert rel_err(np.from_dlpack(scale), ref["scale"]) <= F32_TOL
    q = np.from_dlpack(yq)
    assert q.dtype == np.int8
    assert np.max(np.abs(q.astype(np.int64) - ref["Yq"])) <= 1


# --------------------------------------------------------------------------------------------
# out=


def test_out_single(softmax):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((7, 45)).astype(np.float32)
    out = np.full((7, 45), np.nan, dtype=np.float32)
    ret = softmax(x, out=out)
    assert ret is out
    assert rel_err(out, softmax_ref(x)) <= F32_TOL
    np.testing.assert_array_equal(out, np.from_dlpack(softmax(x)))


def test_out_tuple():
    kernel = kintsugi.compile(str(EXAMPLES / "norm" / "rmsnorm_quant.te"))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 77)).astype(np.float16)
    w = rng.standard_normal(77).astype(np.float16)
    scale = np.zeros(5, np.float32)
    yq = np.zeros((5, 77), np.int8)
    ret = kernel(x, w, out=(scale, yq))
    assert ret[0] is scale and ret[1] is yq
    s2, q2 = kernel(x, w)
    np.testing.assert_array_equal(scale, np.from_dlpack(s2))
    np.testing.assert_array_equal(yq, np.from_dlpack(q2))


def test_out_kintsugi_tensor_in_place(softmax):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((7, 45)).astype(np.float32)
    y = softmax(x)
    x2 = rng.standard_normal((7, 45)).astype(np.float32)
    assert softmax(x2, out=y) is y
    assert rel_err(np.from_dlpack(y), softmax_ref(x2)) <= F32_TOL


NP_DTYPES = {"f16": np.float16, "f32": np.float32, "i8": np.int8, "i32": np.int32}


@pytest.mark.parametrize("path,shape", [(p, None) for p in sorted(EXAMPLES.rglob("*.te"))
                                        if "bf16" not in p.name] +
                         [(EXAMPLES / "attention" / "prefill_causal.te",
                           {"B": 1, "H": 2, "S": 80, "T": 64, "D": 32})])
def test_outputs_written_whole(path, shape):
    """Every example writes each element of its outputs (the binding allocates outputs without
    clearing them): out= arrays full of NaN (or 0x5a bytes) come back equal to the kernel's own
    outputs, rows without a visible key (S > T, causal) included."""
    kernel = kintsugi.compile(path, shape=shape)
    sizes = dict(kernel.sizes)
    rng = np.random.default_rng(9)
    sig = dict(re.findall(r"(\w+): \w+\[([^\]]*)\]", kernel.signature))
    inputs = [rng.standard_normal([eval(e, {}, sizes) for e in sig[n].split(",")])
              .astype(NP_DTYPES[kernel.dtypes[n]]) for n in kernel.inputs]
    own = kernel(*inputs)
    own = [np.from_dlpack(t) for t in (own if isinstance(own, tuple) else (own,))]
    poisoned = [np.full(o.shape, np.nan, o.dtype) if o.dtype.kind == "f"
                else np.full(o.shape, 0x5a, o.dtype) for o in own]
    kernel(*inputs, out=tuple(poisoned) if len(poisoned) > 1 else poisoned[0])
    for name, a, b in zip(kernel.outputs, own, poisoned):
        np.testing.assert_array_equal(a, b, err_msg=f"{path.name}: output {name}")


def test_out_errors(softmax):
    x = np.ones((7, 45), np.float32)
    with pytest.raises(ValueError, match=r"inconsistent sizes for N: input 'X' \(dimension 1\) "
                                         r"has N = 45, but out 'Y' \(dimension 1\) has N = 44"):
        softmax(x, out=np.zeros((7, 44), np.float32))
    with pytest.raises(ValueError, match=r"out 'Y' has 1 dimension \(shape \[315\]\), expected 2"):
        softmax(x, out=np.zeros(315, np.float32))
    with pytest.raises(ValueError, match="out 'Y' has dtype float16, expected float32"):
        softmax(x, out=np.zeros((7, 45), np.float16))
    with pytest.raises(ValueError, match="out 'Y' shares memory with input 'X'"):
        softmax(x, out=x)
    with pytest.raises(TypeError, match="1 output"):
        softmax(x, out=(np.zeros((7, 45), np.float32), np.zeros((7, 45), np.float32)))


# --------------------------------------------------------------------------------------------
# Argument errors


def test_wrong_dtype(softmax):
    with pytest.raises(ValueError, match=r"input 'X' has dtype float64, expected float32"):
        softmax(np.ones((7, 45)))


def test_wrong_dtype_f16(causal):
    rng = np.random.default_rng(7)
    q, k, v = qkv(rng, 1, 2, 5, 5, 32)
    with pytest.raises(ValueError, match=r"input 'K' has dtype float32, expected float16"):
        causal(q, k.astype(np.float32), v)


MASKED_ROWS_SRC = """\
sizes M = 4, N = 10
input KEEP: i8[M, N]
input X: f32[M, N]
output Y[i]: f32 = sum[j](select(KEEP[i, j] != 0, X[i, j], 0.0))
"""


def test_boolean_mask_is_read_as_int8():
    """A boolean array passed for an i8 input is the 0-or-1 mask it is in memory; as an output
    (written with any i8 value) it is refused."""
    k = kintsugi.compile(MASKED_ROWS_SRC)
    rng = np.random.default_rng(3)
    keep = rng.random((6, 33)) < 0.5
    x = rng.standard_normal((6, 33)).astype(np.float32)
    want = np.where(keep, x.astype(np.float64), 0.0).sum(axis=1)
    assert rel_err(k(keep, x), want) < F32_TOL
    assert np.array_equal(np.asarray(k(keep, x)), np.asarray(k(keep.astype(np.int8), x)))
    with pytest.raises(ValueError, match=r"input 'KEEP' has dtype float32, expected int8"):
        k(keep.astype(np.float32), x)
    copy = kintsugi.compile("""\
sizes N = 8
input X: i8[N]
output Y[i]: i8 = X[i]
""")
    with pytest.raises(ValueError, match=r"out 'Y' has dtype bool, expected int8"):
        copy(np.ones(8, np.int8), out=[np.zeros(8, np.bool_)])


def test_non_contiguous(softmax):
    x = np.ones((45, 7), np.float32).T
    with pytest.raises(ValueError, match=r"input 'X' is not C-contiguous.*ascontiguousarray"):
        softmax(x)
    strided = np.ones((7, 90), np.float32)[:, ::2]
    with pytest.raises(ValueError, match="not C-contiguous"):
        softmax(strided)
    # size-1 dimensions may have any stride
    y = softmax(np.ones((45, 1), np.float32).T)
    assert y.shape == (1, 45)


def test_inconsistent_dims(causal):
    rng = np.random.default_rng(8)
    q, k, v = qkv(rng, 1, 2, 5, 7, 32)
    with pytest.raises(ValueError,
                       match=r"inconsistent sizes for D: input 'Q' \(dimension 3\) has D = 32, "
                             r"but input 'K' \(dimension 3\) has D = 16"):
        causal(q, k[..., :16].copy(), v)
    with pytest.raises(ValueError, match=r"inconsistent sizes for T: .* has T = 7, .* has T = 6"):
        causal(q, k, v[:, :, :6].copy())


def test_wrong_rank_and_count(softmax):
    with pytest.raises(ValueError, match=r"input 'X' has 1 dimension .*expected 2"):
        softmax(np.ones(5, np.float32))
    with pytest.raises(TypeError, match=r"softmax takes 1 input \(X\), got 2"):
        softmax(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="input 'X': expected an array that supports DLPack"):
        softmax([[1.0, 2.0]])


def test_read_only_arrays(softmax):
    x = np.ones((7, 45), np.float32)
    x.flags.writeable = False  # read through the buffer protocol, whatever NumPy's DLPack does
    assert softmax(x).shape == (7, 45)
    with pytest.raises(ValueError, match="out 'Y' is read-only; pass a writable array"):
        softmax(np.ones((7, 45), np.float32), out=x)


def test_producer_error_is_named(softmax):
    class Refuses:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            raise BufferError("cannot export this")

    with pytest.raises(ValueError, match=r"input 'X': its __dlpack__\(\) failed: BufferError: "
                                         r"cannot export this") as info:
        softmax(Refuses())
    assert isinstance(info.value.__cause__, BufferError)


def test_device_is_checked(softmax):
    class OnGpu:
        def __dlpack_device__(self):
            return (2, 1)

        def __dlpack__(self, stream=None):  # pragma: no cover - must not be reached
            raise AssertionError("the device is checked first")

    with pytest.raises(ValueError, match=r"input 'X' is on device cuda:1.*host memory"):
        softmax(OnGpu())


def test_bad_source_located():
    bad = "input X: f32[N]\noutput Y[i]: f32 = X[i] +* 2\n"
    with pytest.raises(kintsugi.CompileError) as info:
        kintsugi.compile(bad)
    e = info.value
    assert isinstance(e, ValueError)
    assert str(e).startswith("<string>:2:")
    assert "error:" in str(e) and "^" in str(e)
    assert e.filename == "<string>" and e.lineno == 2 and e.offset >= 1
    assert e.text == "output Y[i]: f32 = X[i] +* 2"
    assert e.msg and e.msg in str(e)


def test_type_error_in_source_located():
    with pytest.raises(kintsugi.CompileError, match=r"<string>:2:\d+: error: "):
        kintsugi.compile("input X: f32[N]\noutput Y[i]: f32 = X[i] + Z[i]\n")


def test_param_out_of_its_range():
    src = "sizes N = 8\nparam W: i32 = 4\ninput X: f32[N]\noutput y[i]: f32 = select(i < W, X[i], 0.0)\n"
    with pytest.raises(ValueError, match=r"params W=4294967296: the value is outside the range of "
                                         r"i32, \[-2147483648, 2147483647\] \(param 'W' is i32\)"):
        kintsugi.compile(src, params={"W": 4294967296})
    with pytest.raises(ValueError, match=r"params W=inf: an integer param \(i32\) needs an integer"):
        kintsugi.compile(src, params={"W": float("inf")})
    with pytest.raises(kintsugi.CompileError, match=r"<string>:2:16: error: param 'W' = 1e30: the "
                                                    r"value is outside the range of i32"):
        kintsugi.compile(src.replace("= 4", "= 1e30"))


@pytest.mark.parametrize("terms", [30000, 100000])
def test_long_chain_is_a_located_error(terms):
    """A chain deeper than the limit is refused while it is parsed, not by a stack overflow."""
    src = "input X: f32[N]\noutput y[i]: f32 = " + " + ".join(["X[i]"] * terms) + "\n"
    with pytest.raises(kintsugi.CompileError, match=r"<string>:2:\d+: error: expression more "
                                                    r"than 1000 operations deep"):
        kintsugi.compile(src)
    shape = "input X: f32[" + " + ".join(["N"] * terms) + "]\noutput y[i]: f32 = X[i]\n"
    with pytest.raises(kintsugi.CompileError, match="operations deep"):
        kintsugi.compile(shape)


@pytest.mark.parametrize("t", [1000, 64])
def test_decode_in_chunks_of_tiles(t):
    """chunk_tiles: split-K chunks of several key tiles walked with the rolling update."""
    kernel = kintsugi.compile(EXAMPLES / "attention" / "decode_causal.te", chunk_tiles=4)
    rng = np.random.default_rng(t)
    q, k, v = qkv(rng, 1, 2, 1, t, 32)
    out = np.from_dlpack(kernel(q, k, v))
    ref = references.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                               causal=True)
    assert rel_err(out, ref) <= F16_TOL
    assert any("chunks of 4 tiles" in n for n in kernel.notes)


def test_compile_errors():
    with pytest.raises(ValueError, match="unknown target 'gpu'; use target='cpu' or 'cuda'"):
        kintsugi.compile(SOFTMAX_SRC, target="gpu")
    with pytest.raises(ValueError, match="arch='sm_90a' applies to target='cuda' only"):
        kintsugi.compile(SOFTMAX_SRC, arch="sm_90a")
    with pytest.raises(ValueError, match="cannot open 'no/such/file.te'"):
        kintsugi.compile("no/such/file.te")
    with pytest.raises(ValueError, match=r"shape names 'Q', which is not a size of program"):
        kintsugi.compile(SOFTMAX_SRC, shape={"Q": 3})
    with pytest.raises(ValueError, match="sizes must be positive"):
        kintsugi.compile(SOFTMAX_SRC, shape={"M": 0})
    with pytest.raises(ValueError, match="params names 'EPS', which is not a param"):
        kintsugi.compile(SOFTMAX_SRC, params={"EPS": 1.0})
    with pytest.raises(ValueError, match="unknown schedule"):
        kintsugi.compile(SOFTMAX_SRC, schedule="fast")
    with pytest.raises(ValueError, match="chunk_tiles takes None .* or a positive count, not 0"):
        kintsugi.compile(SOFTMAX_SRC, chunk_tiles=0)


# --------------------------------------------------------------------------------------------
# Source text, schedules, introspection


def test_source_string_compiles_eagerly_with_shape():
    kernel = kintsugi.compile(SOFTMAX_SRC, shape={"M": 3, "N": 11}, name="my_softmax")
    assert kernel.program == "my_softmax"
    assert kernel.compiled_sizes == [{"M": 3, "N": 11}]  # compiled by compile()
    assert kernel.signature == "my_softmax(X: f32[M, N]) -> Y: f32[M, N]"
    x = np.random.default_rng(9).standard_normal((3, 11)).astype(np.float32)
    assert rel_err(np.from_dlpack(kernel(x)), softmax_ref(x)) <= F32_TOL
    assert kernel.compiled_sizes == [{"M": 3, "N": 11}]


def test_source_string_lazy_and_unscheduled():
    kernel = kintsugi.compile(SOFTMAX_SRC, schedule="none")
    assert kernel.program == "program"
    assert kernel.compiled_sizes == []
    assert kernel.sizes == {"M": 4, "N": 10}  # the source's sizes line, compiled on demand
    assert kernel.schedule == [] and kernel.form == "loop"
    x = np.random.default_rng(10).standard_normal((6, 19)).astype(np.float32)
    assert rel_err(np.from_dlpack(kernel(x)), softmax_ref(x)) <= F32_TOL


def test_lazy_kernel_without_sizes_says_what_to_do():
    kernel = kintsugi.compile("input X: f32[N]\noutput Y[i]: f32 = X[i] * 2\n")
    with pytest.raises(ValueError, match=r"size N has no value.*shape=\{'N': \.\.\.\}"):
        kernel.source
    y = kernel(np.arange(5, dtype=np.float32))
    np.testing.assert_array_equal(np.from_dlpack(y), np.arange(5) * 2)


def test_version():
    assert isinstance(kintsugi.__version__, str) and kintsugi.__version__.count(".") == 2


# --------------------------------------------------------------------------------------------
# DLPack export


def test_from_dlpack_shares_memory_and_outlives_the_tensor(softmax):
    x = np.random.default_rng(11).standard_normal((7, 45)).astype(np.float32)
    y = softmax(x)
    a, b = np.from_dlpack(y), np.from_dlpack(y)
    assert np.shares_memory(a, b)
    expected = a.copy()
    del y
    gc.collect()
    softmax(x * 2)  # allocates, may reuse freed memory
    np.testing.assert_array_equal(a, expected)
    np.testing.assert_array_equal(np.asarray(b), expected)


def test_capsules(softmax):
    y = softmax(np.ones((7, 45), np.float32))
    assert y.__dlpack_device__() == (1, 0)
    assert y.device == "cpu" and y.cpu() is y
    assert "dltensor" in repr(y.__dlpack__())  # unconsumed: freed by the capsule's destructor
    assert "dltensor_versioned" in repr(y.__dlpack__(max_version=(1, 0)))
    assert "dltensor_versioned" not in repr(y.__dlpack__(max_version=(0, 8)))
    with pytest.raises(BufferError):
        y.__dlpack__(dl_device=(2, 0))
    gc.collect()


def test_kintsugi_tensor_as_input_and_versioned_import(softmax):
    """A kintsugi.Tensor feeds another call directly; an object that exports versioned capsules
    goes through the versioned import path."""
    x = np.random.default_rng(12).standard_normal((7, 45)).astype(np.float32)
    y = softmax(x)
    twice = np.from_dlpack(softmax(y))
    np.testing.assert_allclose(twice, softmax_ref(np.from_dlpack(y)), rtol=0, atol=1e-6)

    class Versioned:  # only __dlpack__ / __dlpack_device__, delegating to a kintsugi.Tensor
        def __init__(self, t):
            self.t, self.calls = t, []

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

        def __dlpack__(self, **kw):
            self.calls.append(kw)
            return self.t.__dlpack__(**kw)

    wrapped = Versioned(y)
    np.testing.assert_array_equal(np.from_dlpack(softmax(wrapped)), twice)
    assert wrapped.calls and wrapped.calls[0].get("max_version") == (1, 0)


def test_same_tensor_twice_as_input(causal):
    """Self-attention with one array for Q, K and V (also as one kintsugi.Tensor)."""
    rng = np.random.default_rng(13)
    q = rng.standard_normal((1, 2, 9, 32)).astype(np.float16)
    ref = references.attention(*(q.astype(np.float64),) * 3, causal=True)
    assert rel_err(np.from_dlpack(causal(q, q, q)), ref) <= F16_TOL

    copy = kintsugi.compile("input A: f16[B, H, S, D]\n"
                            "output C[b, h, i, d]: f16 = A[b, h, i, d]\n")
    t = copy(q)
    assert isinstance(t, kintsugi.Tensor)
    assert rel_err(np.from_dlpack(causal(t, t, t)), ref) <= F16_TOL


def test_concurrent_calls(softmax):
    rng = np.random.default_rng(14)
    xs = [rng.standard_normal((7, 45)).astype(np.float32) for _ in range(8)]
    results = [None] * len(xs)

    def work(i):
        results[i] = np.from_dlpack(softmax(xs[i])).copy()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for x, r in zip(xs, results):
        assert rel_err(r, softmax_ref(x)) <= F32_TOL


def test_torch_round_trip(softmax):
    torch = pytest.importorskip("torch")
    x = torch.randn(7, 45, dtype=torch.float32)
    y = softmax(x)
    t = torch.from_dlpack(y)
    assert t.dtype == torch.float32 and tuple(t.shape) == (7, 45)
    assert rel_err(t.numpy(), softmax_ref(x.numpy())) <= F32_TOL
    with pytest.raises(ValueError, match=r"\.contiguous\(\)"):
        softmax(torch.randn(45, 7).T)
    out = torch.empty(7, 45)
    assert softmax(x, out=out) is out
    assert torch.equal(out, t)

    double = kintsugi.compile("input X: bf16[N]\noutput Y[i]: bf16 = bf16(f32(X[i]) * 2)\n")
    xb = torch.randn(9, dtype=torch.bfloat16)
    yb = torch.from_dlpack(double(xb))
    assert yb.dtype == torch.bfloat16 and torch.equal(yb, xb * 2)
    with pytest.raises(ValueError, match="input 'X' has dtype float32, expected bfloat16"):
        double(torch.randn(9))
    with pytest.raises(ValueError, match=r"input 'X' requires grad: .* x\.detach\(\)"):
        double(torch.zeros(9, dtype=torch.bfloat16, requires_grad=True))


# --------------------------------------------------------------------------------------------
# No silent fallbacks: require=, kintsugi.CompileWarning, fusion and kernels

ABANDONED_SRC = """\
sizes M = 8, N = 100
input X: f32[M, N]
m[i] = max[j](X[i, j])
l[i] = sum[j](abs(X[i, j] - m[i]))
output Y[i]: f32 = l[i]
"""


def test_examples_meet_every_requirement_without_warnings(recwarn):
    for name in ("norm/softmax.te", "norm/layernorm.te", "attention/prefill_causal.te",
                 "attention/decode_gqa.te", "performer.te"):
        kernel = kintsugi.compile(EXAMPLES / name, require=["fused", "tile", "tensor-core"])
        assert kernel.warnings == [] and kernel.form == "tile", name
        assert all(k["path"] == "tile" for k in kernel.kernels), name
    assert not [w for w in recwarn if issubclass(w.category, kintsugi.CompileWarning)]


def test_fusion_and_kernels_report(softmax):
    softmax(np.zeros((4, 50), np.float32))
    assert softmax.fusion == [  # computed whole
        {"reduction": "m", "axis": "j", "reads": [], "update": "none"},
        {"reduction": "l", "axis": "j", "reads": ["m"], "update": "none"},
    ]
    streamed = kintsugi.compile(str(EXAMPLES / "norm" / "softmax.te"), whole_row_bytes=0)
    streamed(np.zeros((4, 50), np.float32))
    assert streamed.fusion == [
        {"reduction": "m", "axis": "j", "reads": [], "update": "split-k"},
        {"reduction": "l", "axis": "j", "reads": ["m"], "update": "split-k"},
    ]
    for k in (softmax, streamed):
        assert k.kernels and all(k["path"] == "tile" and k["reason"] == "" for k in k.kernels)
    with pytest.raises(ValueError, match="whole_row_bytes takes None"):
        kintsugi.compile(SOFTMAX_SRC, whole_row_bytes=-1)


def test_fallback_is_a_compile_warning_once_per_binding():
    with pytest.warns(kintsugi.CompileWarning, match=r"fusion abandoned: .*reduction 'l' runs unfused"):
        kernel = kintsugi.compile(ABANDONED_SRC, shape={"M": 8, "N": 100}, whole_row_bytes=0)
    assert kernel.warnings and kernel.warnings[0].startswith("fusion abandoned: ")
    assert [f["update"] for f in kernel.fusion] == ["none", "none"]
    x = np.random.default_rng(9).standard_normal((8, 100)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kintsugi.CompileWarning)
        kernel(x)  # the same binding: no warning again
    ref = np.abs(x.astype(np.float64) - x.max(axis=1, keepdims=True)).sum(axis=1)
    assert rel_err(np.from_dlpack(kernel(x)), ref) <= F32_TOL
    with pytest.warns(kintsugi.CompileWarning, match="fusion abandoned"):
        kernel(x[:5])  # a new binding compiles, and warns


def test_require_turns_the_warning_into_an_error():
    with pytest.raises(ValueError, match=r"require fused does not hold: fusion abandoned: "):
        kintsugi.compile(ABANDONED_SRC, shape={"M": 8, "N": 100}, whole_row_bytes=0,
                         require=["fused"])
    # compiled at the first call; streamed, as a row this short is otherwise computed whole
    kernel = kintsugi.compile(ABANDONED_SRC, require="fused,tile", whole_row_bytes=0)
    with pytest.raises(ValueError, match=r"require fused does not hold"):
        kernel(np.zeros((8, 100), np.float32))
    with pytest.warns(kintsugi.CompileWarning):  # another kind required: still a warning
        kintsugi.compile(ABANDONED_SRC, shape={"M": 8, "N": 100}, whole_row_bytes=0,
                         require=["tile", "tensor-core"])


def test_require_errors():
    with pytest.raises(ValueError, match=r"require: unknown requirement 'tensorcore'; use fused, "
                                         r"tile or tensor-core"):
        kintsugi.compile(SOFTMAX_SRC, require=["tensorcore"])
    with pytest.raises(TypeError, match="require takes names"):
        kintsugi.compile(SOFTMAX_SRC, require=[1])
    with pytest.raises(ValueError, match="require tile does not hold with schedule 'none'"):
        kintsugi.compile(SOFTMAX_SRC, schedule="none", require=["tile"], shape={"M": 4, "N": 10})
