"""Independent float64 NumPy references for every Kintsugi example.

Each function computes an example from its *mathematical definition* (the usual textbook
formulas), not by translating the .te text: attention is softmax(Q K^T / sqrt(D) + bias + mask) V,
norms are the usual formulas, Performer is FAVOR+ with positive random features. If the front end
misreads a .te file, the compiled kernel and Kintsugi's own interpreter agree on the wrong answer;
these references do not share that front end, so they catch it.

Conventions (docs/language.md and the example headers):
  * scores are scaled by 1/sqrt(D);
  * causal masks are bottom-right aligned: query i sits at absolute position i + T - S and sees
    keys j <= i + T - S; a query that sees no key outputs 0;
  * GQA: query head h reads key/value head h // (HQ // HK);
  * ALiBi adds slopes[h] * (j - pos(i)) to the scaled score (causal);
  * soft-capping replaces a score s by CAP * tanh(s / CAP);
  * sliding window: query i sees keys j with 0 <= pos(i) - j < W (soft-capped);
  * the probabilities are rounded to f16 before P.V, as FlashAttention does:
        p16 = f16(exp(s - max)),  O = (p16 @ V) / sum(exp(s - max));
    that rounding is part of the definition, so the reference mirrors it; O is stored as f16.

Every function takes the manifest (dict) and a dict of float64 (or int) input arrays and returns a
dict {output name: float64 array}. `REFERENCES[program]` dispatches on manifest["program"].
"""

import math

import numpy as np


def _f16(x):
    """Round to IEEE half precision (nearest even) and come back to float64."""
    return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)


def _bf16(x):
    """Round to bfloat16 (nearest even) and come back to float64."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def _param(manifest, name):
    params = manifest.get("params", {})
    if name not in params:
        raise KeyError(f"manifest of {manifest.get('program')} has no param {name!r} (params: {params})")
    return float(params[name])


# ----------------------------------------------------------------------------------------------
# Attention


def attention(q, k, v, *, causal=False, window=None, slopes=None, softcap=None, rounding=_f16):
    """Scaled dot-product attention in float64.

    q: [B, HQ, S, D], k and v: [B, HK, T, D] with HQ a multiple of HK.
    causal: bottom-right aligned causal mask. window: sliding window width W (implies causal).
    slopes: per-query-head ALiBi slopes [HQ]. softcap: CAP for CAP * tanh(score / CAP).
    rounding: the storage type's rounding of P before P.V and of O (f16, or _bf16).
    Returns O [B, HQ, S, D] rounded by `rounding` (as float64).
    """
    b, hq, s_len, d = q.shape
    bk, hk, t_len, dk = k.shape
    assert v.shape == k.shape, (v.shape, k.shape)
    assert bk == b and dk == d, (q.shape, k.shape)
    assert hq % hk == 0, f"HQ={hq} is not a multiple of HK={hk}"
    group = hq // hk
    # Query head h uses key/value head h // group: repeat every kv head `group` times.
    k_full = np.repeat(k, group, axis=1)
    v_full = np.repeat(v, group, axis=1)

    scores = (q @ k_full.swapaxes(-1, -2)) / math.sqrt(d)  # matmul: BLAS, fast at bench sizes

    qpos = np.arange(s_len) + (t_len - s_len)  # absolute position of each query row
    kpos = np.arange(t_len)
    back = qpos[:, None] - kpos[None, :]  # how far key j lies behind query i

    if slopes is not None:
        slopes = np.asarray(slopes, dtype=np.float64).reshape(1, hq, 1, 1)
        scores = scores + slopes * (-back)[None, None, :, :]
    if softcap is not None:
        scores = softcap * np.tanh(scores / softcap)

    visible = np.ones((s_len, t_len), dtype=bool)
    if causal or window is not None:
        visible &= back >= 0
    if window is not None:
        visible &= back < window
    visible = np.broadcast_to(visible, scores.shape)

    masked = np.where(visible, scores, -np.inf)
    any_visible = visible.any(axis=-1, keepdims=True)
    row_max = np.where(any_visible, masked.max(axis=-1, keepdims=True, initial=-np.inf), 0.0)
    p = np.where(visible, np.exp(masked - row_max), 0.0)  # unnormalised probabilities
    denom = p.sum(axis=-1, keepdims=True)
    p16 = rounding(p)  # FlashAttention-style rounding of P before P.V
    num = p16 @ v_full
    out = np.where(any_visible, num / np.where(denom > 0, denom, 1.0), 0.0)
    return rounding(out)


def _attn(manifest, x, **kw):
    return {"O": attention(x["Q"], x["K"], x["V"], **kw)}


def prefill_global(m, x):
    return _attn(m, x)


def prefill_causal(m, x):
    return _attn(m, x, causal=True)


def prefill_causal_bf16(m, x):
    return _attn(m, x, causal=True, rounding=_bf16)


def prefill_alibi(m, x):
    return _attn(m, x, causal=True, slopes=x["slopes"])


def prefill_gqa(m, x):
    return _attn(m, x, causal=True)


def prefill_softcap(m, x):
    return _attn(m, x, causal=True, softcap=_param(m, "CAP"))


def prefill_windowed(m, x):
    w = _param(m, "W")
    assert w == int(w), w
    return _attn(m, x, causal=True, window=int(w), softcap=_param(m, "CAP"))


decode_causal = prefill_causal
decode_alibi = prefill_alibi
decode_gqa = prefill_gqa
decode_softcap = prefill_softcap


# ----------------------------------------------------------------------------------------------
# Norms


def softmax(m, x):
    z = x["X"]
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return {"Y": e / e.sum(axis=-1, keepdims=True)}


def l2norm(m, x):
    eps = _param(m, "EPS")
    z = x["X"]
    norm = np.sqrt(np.sum(z * z, axis=-1, keepdims=True) + eps)
    return {"Y": _f16(z / norm)}


def rmsnorm_quant(m, x):
    """RMSNorm, then symmetric per-row int8 quantisation with a max-abs scale."""
    eps = _param(m, "EPS")
    z, w = x["X"], x["Wt"]
    rms = np.sqrt(np.mean(z * z, axis=-1, keepdims=True) + eps)
    y = z / rms * w[None, :]
    amax = np.abs(y).max(axis=-1, keepdims=True)
    scale = amax / 127.0
    safe = np.where(amax > 0, amax, 1.0)
    q = np.where(amax > 0, np.rint(y * 127.0 / safe), 0.0)  # np.rint: round half to even
    q = np.clip(q, -128, 127)
    return {"scale": scale[:, 0], "Yq": q}


def layernorm(m, x):
    eps = _param(m, "EPS")
    z, g, beta = x["X"], x["G"], x["Beta"]
    mu = z.mean(axis=-1, keepdims=True)
    var = z.var(axis=-1, keepdims=True)  # population variance (divides by N)
    return {"Y": _f16((z - mu) / np.sqrt(var + eps) * g[None, :] + beta[None, :])}


# ----------------------------------------------------------------------------------------------
# Performer (FAVOR+)


def performer(m, x):
    """FAVOR+ linear attention with positive random features (Choromanski et al., 2021).

    phi(u)_r = exp(w_r . u - |u|^2 / 2) / sqrt(R) with u = x / D^(1/4), so that
    E[phi(q) . phi(k)] = exp(q . k / sqrt(D)). O_i = phi(q_i) . sum_j phi(k_j) v_j^T /
    phi(q_i) . sum_j phi(k_j).

    Stabilisers, as in the reference FAVOR+ code: the query features may be shifted by a per-row
    constant (it cancels between numerator and denominator of O_i), the key features only by one
    constant shared by all keys and features (a per-key shift would re-weight the keys and change
    the result). Both shifts below cancel exactly.
    """
    q, k, v, wp = x["Q"], x["K"], x["V"], x["Wp"]
    d = q.shape[-1]
    r = wp.shape[0]
    qs = q / d**0.25
    ks = k / d**0.25
    # log phi, before the 1/sqrt(R) factor
    lq = np.einsum("bhid,rd->bhir", qs, wp, optimize=True) - 0.5 * np.sum(qs * qs, axis=-1, keepdims=True)
    lk = np.einsum("bhjd,rd->bhjr", ks, wp, optimize=True) - 0.5 * np.sum(ks * ks, axis=-1, keepdims=True)
    phi_q = np.exp(lq - lq.max(axis=-1, keepdims=True)) / math.sqrt(r)  # per-query shift
    phi_k = np.exp(lk - lk.max(axis=(-2, -1), keepdims=True)) / math.sqrt(r)  # one shift per (b, h)
    kv = np.einsum("bhjr,bhjd->bhrd", phi_k, v, optimize=True)
    ksum = phi_k.sum(axis=2)  # [b, h, r]
    num = np.einsum("bhir,bhrd->bhid", phi_q, kv, optimize=True)
    den = np.einsum("bhir,bhr->bhi", phi_q, ksum, optimize=True)[..., None]
    return {"O": _f16(num / den)}


REFERENCES = {
    "prefill_global": prefill_global,
    "prefill_causal": prefill_causal,
    "prefill_causal_bf16": prefill_causal_bf16,
    "prefill_alibi": prefill_alibi,
    "prefill_gqa": prefill_gqa,
    "prefill_softcap": prefill_softcap,
    "prefill_windowed": prefill_windowed,
    "decode_causal": decode_causal,
    "decode_alibi": decode_alibi,
    "decode_gqa": decode_gqa,
    "decode_softcap": decode_softcap,
    "softmax": softmax,
    "l2norm": l2norm,
    "rmsnorm_quant": rmsnorm_quant,
    "layernorm": layernorm,
    "performer": performer,
}


def reference(manifest, inputs):
    """Dispatch on manifest["program"]."""
    program = manifest["program"]
    if program not in REFERENCES:
        raise KeyError(f"no NumPy reference for program {program!r}")
    return REFERENCES[program](manifest, inputs)
