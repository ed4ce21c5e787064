"""Sanity checks of the NumPy references themselves (no Kintsugi involved).

They pin the conventions with hand-checkable identities, so that a wrong reference cannot
silently "agree" with a wrong kernel.
"""

import math

import numpy as np

import references as R

rng = np.random.default_rng(1234)


def _qkv(b=1, hq=2, hk=2, s=8, t=8, d=16):
    f16 = lambda a: a.astype(np.float16).astype(np.float64)  # noqa: E731
    return (f16(rng.standard_normal((b, hq, s, d))), f16(rng.standard_normal((b, hk, t, d))),
            f16(rng.standard_normal((b, hk, t, d))))


def _softmax_attention(q, k, v, bias):
    s = np.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1]) + bias
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), v)


def _close(a, b, tol=2e-3):
    return np.abs(a - b).max() <= tol * max(np.abs(b).max(), 1e-30)


def test_global_is_softmax_attention():
    q, k, v = _qkv(s=5, t=9)
    assert _close(R.attention(q, k, v), _softmax_attention(q, k, v, 0.0))


def test_causal_bottom_right_aligned():
    q, k, v = _qkv(s=3, t=7)
    out = R.attention(q, k, v, causal=True)
    # the last query sits at position T-1 and sees every key; the first sees keys 0..T-S
    assert _close(out[:, :, -1], R.attention(q[:, :, -1:], k, v)[:, :, 0])
    assert _close(out[:, :, 0], R.attention(q[:, :, :1], k[:, :, :5], v[:, :, :5])[:, :, 0])


def test_causal_square_first_row_is_first_value():
    q, k, v = _qkv(s=6, t=6)
    out = R.attention(q, k, v, causal=True)
    assert _close(out[:, :, 0], v[:, :, 0])


def test_fully_masked_rows_are_zero():
    q, k, v = _qkv(s=7, t=4)
    out = R.attention(q, k, v, causal=True)
    assert np.all(out[:, :, :3] == 0) and np.all(np.isfinite(out))
    assert np.all(R.attention(q, k, v, window=0) == 0)


def test_window_wide_is_causal_and_one_is_self():
    q, k, v = _qkv(s=6, t=9)
    assert np.array_equal(R.attention(q, k, v, window=9), R.attention(q, k, v, causal=True))
    out = R.attention(q, k, v, window=1)
    assert _close(out, v[:, :, 3:])  # query i sees only key i + T - S


def test_gqa_head_mapping():
    q, k, v = _qkv(hq=6, hk=2)
    out = R.attention(q, k, v, causal=True)
    for h in range(6):
        kv = h // 3
        single = R.attention(q[:, h:h + 1], k[:, kv:kv + 1], v[:, kv:kv + 1], causal=True)
        assert np.array_equal(out[:, h:h + 1], single)


def test_alibi_bias_and_softcap():
    q, k, v = _qkv(s=4, t=6)
    slopes = np.array([0.5, -0.25])
    i = np.arange(4)[:, None] + 2
    j = np.arange(6)[None, :]
    bias = np.where(j <= i, slopes[None, :, None, None] * (j - i), -np.inf)
    assert _close(R.attention(q, k, v, causal=True, slopes=slopes), _softmax_attention(q, k, v, bias))
    # a huge cap is the identity, a tiny one flattens the scores to uniform weights
    assert _close(R.attention(q, k, v, softcap=1e6), R.attention(q, k, v))
    assert _close(R.attention(q, k, v, softcap=1e-6), np.broadcast_to(v.mean(2, keepdims=True), q.shape))


def test_norms():
    m = {"program": "x", "params": {"EPS": 0.0}}
    x = rng.standard_normal((5, 33))
    assert np.allclose(R.softmax(m, {"X": x})["Y"].sum(-1), 1.0)
    assert np.allclose(np.linalg.norm(R.l2norm(m, {"X": x})["Y"], axis=-1), 1.0, atol=2e-3)
    g, beta = rng.standard_normal(33), rng.standard_normal(33)
    y = (R.layernorm(m, {"X": x, "G": np.ones(33), "Beta": np.zeros(33)})["Y"])
    assert np.allclose(y.mean(-1), 0, atol=2e-3) and np.allclose(y.std(-1), 1, atol=2e-3)
    y = R.layernorm(m, {"X": x, "G": g, "Beta": beta})["Y"]
    z = (x - x.mean(-1, keepdims=True)) / x.std(-1, keepdims=True)
    assert _close(y, z * g + beta)


def test_rmsnorm_quant():
    m = {"program": "x", "params": {"EPS": 1e-6}}
    x, w = rng.standard_normal((4, 50)), rng.standard_normal(50)
    x[2] = 0.0
    out = R.rmsnorm_quant(m, {"X": x, "Wt": w})
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
    assert np.all(np.abs(out["Yq"] * out["scale"][:, None] - y) <= out["scale"][:, None] / 2 + 1e-12)
    assert np.all(np.abs(out["Yq"]).max(-1)[[0, 1, 3]] == 127) and np.all(out["Yq"][2] == 0)
    # round half to even
    t = {"X": np.array([[2.5, 127.0]]), "Wt": np.array([1.0, 1.0])}
    assert R.rmsnorm_quant({"params": {"EPS": 0.0}}, t)["Yq"][0, 0] == 2


def test_performer_converges_to_softmax_attention():
    # FAVOR+ is an unbiased estimator of exp(q.k/sqrt(D)); with many features (and inputs of
    # moderate norm, where its variance is small) it approaches softmax attention.
    q, k, v = _qkv(s=8, t=8, d=16)
    q, k = 0.3 * q, 0.3 * k
    wp = rng.standard_normal((1 << 15, 16))
    out = R.performer({"program": "performer"}, {"Q": q, "K": k, "V": v, "Wp": wp})["O"]
    assert _close(out, _softmax_attention(q, k, v, 0.0), tol=3e-2)
