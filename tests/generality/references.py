"""Independent float64 NumPy references for the generality corpus (tests/generality/*.te).

One function per .te file, named like the file: it takes the input dict (name -> float64 array)
and the params dict (name -> value) and returns {output name: float64 array}. Each is written from
the model's published formula in plain NumPy, not from the .te text. Conventions as in
tests/crosscheck/references.py: scores scaled by 1/sqrt(D), bottom-right aligned causal masks
(query i sits at i + T - S), probabilities rounded to f16 before P.V (as the .te files define),
a query that sees no key outputs 0, outputs rounded to their f16 type.
"""

import numpy as np


def _f16(x):
    return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)


def _causal_attention(q, k, v, sink=None):
    """softmax(Q K^T / sqrt(D), causal) V with f16 probabilities; `sink` [H]: a logit per head
    that joins the max and the denominator with no value row."""
    s_len, t_len, d = q.shape[2], k.shape[2], q.shape[3]
    scores = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(d)
    i = np.arange(s_len)[:, None] + t_len - s_len
    j = np.arange(t_len)[None, :]
    scores = np.where(j <= i, scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    if sink is not None:
        m = np.maximum(m, sink[None, :, None, None])
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - m)
    e = np.where(np.isfinite(m), e, 0.0)
    denom = e.sum(axis=-1, keepdims=True)
    if sink is not None:
        denom = denom + np.exp(sink[None, :, None, None] - m)
    out = np.einsum("bhij,bhjd->bhid", _f16(e), v)
    with np.errstate(invalid="ignore", divide="ignore"):
        o = np.where(denom > 0, out / np.where(denom > 0, denom, 1.0), 0.0)
    return _f16(o)


def self_attention_one_length(inputs, params):
    return {"O": _causal_attention(inputs["Q"], inputs["K"], inputs["V"])}


def key_copy(inputs, params):
    return {"O": _causal_attention(inputs["Q"], inputs["K"].copy(), inputs["V"])}


def rotary_keys(inputs, params):
    k = inputs["K"]
    half = k.shape[-1] // 2
    rotated = np.concatenate([-k[..., half:], k[..., :half]], axis=-1)  # rotate_half (GPT-NeoX)
    kr = _f16(k * inputs["COS"][None, None] + rotated * inputs["SIN"][None, None])
    return {"O": _causal_attention(inputs["Q"], kr, inputs["V"])}


def softmax_inlined_exp(inputs, params):
    x = inputs["X"]
    z = np.exp(x - x.max(axis=1, keepdims=True))
    return {"Y": z / z.sum(axis=1, keepdims=True)}


def attention_sink(inputs, params):
    return {"O": _causal_attention(inputs["Q"], inputs["K"], inputs["V"], sink=inputs["SINK"])}
