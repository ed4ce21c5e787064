"""Independent float64 NumPy references for the generality corpus (tests/generality/*.te).

One function per program, named like its file: `def NAME(inputs, params) -> {output: array}`.
`inputs` maps input names to float64 arrays (integer tensors as int64), `params` maps param names
to floats. Each reference computes the operator from its published definition in plain NumPy,
not by translating the .te text, so a program the front end misreads, or one written wrong, is
caught.

Conventions shared with the examples (tests/crosscheck/references.py): scores scaled by
1/sqrt(D) unless the model says otherwise; causal masks bottom-right aligned (query i at position
i + T - S); probabilities rounded to the value type (f16 or bf16) before P.V, as FlashAttention
does; a query that sees no key outputs 0.
"""

import numpy as np


def f16(x):
    """Rounds to IEEE half precision (nearest even), back in float64."""
    return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)


def bf16(x):
    """Rounds to bfloat16 (nearest even), back in float64."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def expand_heads(x, heads):
    """[B, HK, T, D] -> [B, heads, T, D]: query head h reads key/value head h // (heads // HK)."""
    return np.repeat(x, heads // x.shape[1], axis=1)


def softmax_attention(q, k, v, scores=None, visible=None, round_p=f16, scale=None, sink=None):
    """softmax(scores + mask) V with the probabilities rounded by round_p before P.V.

    scores: [B, H, S, T] (default q.k / sqrt(D)); visible: boolean mask broadcastable to it;
    sink: [H], a logit per head that joins the maximum and the denominator with no value row.
    Returns (O, m, l): O is 0 on rows that see no key, m the row max, l the row sum.
    """
    k, v = expand_heads(k, q.shape[1]), expand_heads(v, q.shape[1])
    if scores is None:
        scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
        scores = (q @ k.swapaxes(-1, -2)) * scale
    if visible is not None:
        scores = np.where(visible, scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    if sink is not None:
        m = np.maximum(m, sink[None, :, None, None])
    safe_m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(scores - safe_m)
    l = e.sum(axis=-1, keepdims=True)
    if sink is not None:
        l = l + np.exp(sink[None, :, None, None] - safe_m)
    o = round_p(e) @ v
    out = np.where(l > 0, o / np.where(l > 0, l, 1.0), 0.0)
    return out, m[..., 0], l[..., 0]


def positions(s_len, t_len):
    """(query position [S, 1], key position [1, T]), causal bottom-right alignment."""
    return np.arange(s_len)[:, None] + t_len - s_len, np.arange(t_len)[None, :]


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# ----------------------------------------------------------------------------------------------
# Attention variants


def cross_attention(inputs, params):
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"])[0]}


def key_padding_mask(inputs, params):
    t_len = inputs["K"].shape[2]
    visible = np.arange(t_len)[None, :] < inputs["LEN"][:, None]  # [B, T]
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"],
                                   visible=visible[:, None, None, :])[0]}


def document_mask(inputs, params):
    s_len = inputs["Q"].shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(s_len)[None, :]
    doc = inputs["DOC"]
    visible = (j <= i) & (doc[:, None] == doc[None, :])
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=visible)[0]}


def prefix_lm(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(t_len)[None, :]
    visible = (j < params["P"]) | (j <= i)
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=visible)[0]}


def local_window_bidirectional(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(t_len)[None, :]
    visible = np.abs(i - j) < params["W"]
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=visible)[0]}


def chunked_local(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(t_len)[None, :]
    c = int(params["C"])
    visible = (j <= i) & (i // c == j // c)
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=visible)[0]}


def relative_bias_tensor(inputs, params):
    q, k = inputs["Q"], inputs["K"]
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]) + inputs["BIAS"][None]
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def alibi_symmetric(inputs, params):
    q, k = inputs["Q"], inputs["K"]
    i, j = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
    distance = np.abs(i - j)
    slopes = np.abs(inputs["SLOPE"])[None, :, None, None]
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]) - slopes * distance
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def mup_scale(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(t_len)[None, :]
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=j <= i,
                                   scale=1 / params["SCALE"])[0]}


def attention_scale_in_exp(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(t_len)[None, :]
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"],
                                   visible=j <= i + t_len - s_len)[0]}


def attention_mask_after_exp(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(t_len)[None, :]
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=j <= i)[0]}


def softmax_temperature(inputs, params):
    return {"Y": softmax_rows(inputs["X"] / params["TEMP"])}


def qk_norm(inputs, params):
    q, k = inputs["Q"], inputs["K"]
    eps = params["EPS"]

    def rmsnorm(x, w):
        return f16(x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w)

    qn, kn = rmsnorm(q, inputs["WQ"]), rmsnorm(k, inputs["WK"])
    s_len, t_len = q.shape[2], k.shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(t_len)[None, :]
    return {"O": softmax_attention(qn, kn, inputs["V"], visible=j <= i)[0]}


def cosine_attention(inputs, params):
    q, k = inputs["Q"], inputs["K"]
    qn = q / np.linalg.norm(q, axis=-1, keepdims=True)
    kn = k / np.linalg.norm(k, axis=-1, keepdims=True)
    scores = (qn @ kn.swapaxes(-1, -2)) / params["TAU"]
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def l2_distance_attention(inputs, params):
    # |q - k|^2 in float64 through the norms: the difference tensor [B, H, S, T, D] would not fit
    # at the benchmark's sizes, and float64 keeps the cancellation far below the tolerance.
    q, k = inputs["Q"], inputs["K"]
    qq = (q * q).sum(-1)[..., :, None]
    kk = (k * k).sum(-1)[..., None, :]
    scores = -(qq - 2 * (q @ k.swapaxes(-1, -2)) + kk) / np.sqrt(q.shape[-1])
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def gated_output_attention(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(t_len)[None, :]
    o = softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=j <= i)[0]
    return {"O": o * sigmoid(inputs["G"])}


def relu_attention(inputs, params):
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1])
    p = f16(np.maximum(scores, 0))
    return {"O": p @ v / k.shape[2]}


def attention_with_lse(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    qpos, kpos = positions(s_len, t_len)
    o, m, l = softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=kpos <= qpos)
    with np.errstate(divide="ignore"):
        lse = np.where(np.isfinite(m), m + np.log(np.where(l > 0, l, 1.0)), -np.inf)
    return {"O": o, "LSE": lse}


def decode_bf16_window(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    qpos, kpos = positions(s_len, t_len)
    visible = (kpos <= qpos) & (qpos - kpos < params["W"])
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=visible,
                                   round_p=bf16)[0]}


def alibi_gqa_causal(inputs, params):
    q, k = inputs["Q"], inputs["K"]
    qpos, kpos = positions(q.shape[2], k.shape[2])
    kx = expand_heads(k, q.shape[1])
    scores = ((q @ kx.swapaxes(-1, -2)) / np.sqrt(q.shape[-1])
              + inputs["SLOPE"][None, :, None, None] * (kpos - qpos))
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores, visible=kpos <= qpos)[0]}


def softcap_local_gemma2(inputs, params):
    q, k = inputs["Q"], inputs["K"]
    i, j = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
    cap = params["CAP"]
    kx = expand_heads(k, q.shape[1])
    scores = cap * np.tanh((q @ kx.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]) / cap)
    visible = (j <= i) & (i - j < params["W"])
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores, visible=visible)[0]}


def key_bias_vector(inputs, params):
    q, k = inputs["Q"], inputs["K"]
    scores = ((q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1])
              + inputs["KB"][:, None, None, :])
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


# ----------------------------------------------------------------------------------------------
# Row reductions


def softmax_rows(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax_rows(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def log_softmax(inputs, params):
    return {"Y": log_softmax_rows(inputs["X"])}


def softmax_columns(inputs, params):
    return {"Y": softmax_rows(inputs["X"], axis=0)}


def softmax_entropy(inputs, params):
    p = softmax_rows(inputs["X"])
    return {"H": -(p * np.log(p)).sum(axis=-1)}


def entropy_from_log_softmax(inputs, params):
    p = softmax_rows(inputs["X"].astype(np.float64) / params["TAU"])
    return {"H": -(p * np.log(p)).sum(axis=-1)}


def rmsnorm_weight(inputs, params):
    x = inputs["X"]
    return {"Y": x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + params["EPS"]) * inputs["Wt"]}


def add_rmsnorm(inputs, params):
    r = f16(inputs["X"] + inputs["D"])
    y = r / np.sqrt((r * r).mean(axis=-1, keepdims=True) + params["EPS"]) * inputs["Wt"]
    return {"R": r, "Y": y}


def token_count_mean(inputs, params):
    keep = (inputs["MASK"] != 0).astype(np.float64)
    count = np.maximum(keep.sum(axis=1), 1.0)
    return {"E": (inputs["X"] * keep[:, :, None]).sum(axis=1) / count[:, None]}


def layernorm_with_stats(inputs, params):
    x = inputs["X"]
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + params["EPS"])
    return {"Y": (x - mean) * rstd * inputs["G"] + inputs["Beta"],
            "MEAN": mean[..., 0], "RSTD": rstd[..., 0]}


def layernorm_std_eps(inputs, params):
    x = inputs["X"]
    mean = x.mean(axis=-1, keepdims=True)
    std = x.std(axis=-1, ddof=1, keepdims=True)
    return {"Y": inputs["A"] * (x - mean) / (std + params["EPS"]) + inputs["Bb"]}


def layernorm_scaled_terms(inputs, params):
    x = inputs["X"]
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + params["EPS"]) * inputs["G"] + inputs["Beta"]
    return {"Y": y}


def quant_int8_asymmetric(inputs, params):
    x = inputs["X"]
    hi, lo = x.max(axis=-1, keepdims=True), x.min(axis=-1, keepdims=True)
    scale = (hi - lo) / 255
    zero = -128 - np.round(lo / scale)  # np.round: ties to even, as the language's round
    q = np.clip(np.round(x / scale) + zero, -128, 127)
    return {"S": scale[:, 0], "Z": zero[:, 0], "Yq": q}


def softmax_mask_input(inputs, params):
    x = np.where(inputs["KEEP"] > 0, inputs["X"], -np.inf)
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    l = e.sum(axis=-1, keepdims=True)
    return {"Y": np.where(l > 0, e / np.where(l > 0, l, 1.0), 0.0)}


def masked_mean_pool(inputs, params):
    x = inputs["X"]  # [B, S, E]
    keep = (np.arange(x.shape[1])[None, :] < inputs["LEN"][:, None]).astype(np.float64)
    count = np.maximum(keep.sum(axis=1), 1.0)[:, None]
    mean = (x * keep[:, :, None]).sum(axis=1) / count
    norm = np.maximum(np.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)
    return {"Y": mean / norm}


def softmax_f16(inputs, params):
    return {"Y": softmax_rows(inputs["X"])}


def group_norm(inputs, params):
    x = inputs["X"]  # [B, G, C, P]
    mu = x.mean(axis=(2, 3), keepdims=True)
    var = x.var(axis=(2, 3), keepdims=True)
    y = (x - mu) / np.sqrt(var + params["EPS"])
    return {"Y": y * inputs["GAMMA"][None, :, :, None] + inputs["BETA"][None, :, :, None]}


def swiglu(inputs, params):
    g = inputs["G"]
    return {"Y": g * sigmoid(g) * inputs["U"]}


def kl_divergence_rows(inputs, params):
    lpt, lps = log_softmax_rows(inputs["T"]), log_softmax_rows(inputs["Sl"])
    return {"KL": (np.exp(lpt) * (lpt - lps)).sum(axis=-1)}


def online_logsumexp(inputs, params):
    x = inputs["X"] / params["TEMP"]
    m = x.max(axis=-1)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        lse = safe + np.log(np.exp(x - safe[:, None]).sum(axis=-1))
    return {"LSE": np.where(np.isfinite(m), lse, -np.inf)}


# ----------------------------------------------------------------------------------------------
# Natural spellings the scheduler once failed to fuse


def causal(q, k, v, **kw):
    qpos, kpos = positions(q.shape[2], k.shape[2])
    return softmax_attention(q, k, v, visible=kpos <= qpos, **kw)[0]


def self_attention_one_length(inputs, params):
    return {"O": causal(inputs["Q"], inputs["K"], inputs["V"])}


def attention_exclude_self(inputs, params):
    qpos, kpos = positions(inputs["Q"].shape[2], inputs["K"].shape[2])
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=kpos != qpos)[0]}


def key_copy(inputs, params):
    return {"O": causal(inputs["Q"], inputs["K"].copy(), inputs["V"])}


def rotary_keys(inputs, params):
    k = inputs["K"]
    half = k.shape[-1] // 2
    rotated = np.concatenate([-k[..., half:], k[..., :half]], axis=-1)  # rotate_half (GPT-NeoX)
    kr = f16(k * inputs["COS"][None, None] + rotated * inputs["SIN"][None, None])
    return {"O": causal(inputs["Q"], kr, inputs["V"])}


def softmax_inlined_exp(inputs, params):
    return {"Y": softmax_rows(inputs["X"])}


def attention_sink(inputs, params):
    return {"O": causal(inputs["Q"], inputs["K"], inputs["V"], sink=inputs["SINK"])}


def attention_value_dim(inputs, params):
    return {"O": causal(inputs["Q"], inputs["K"], inputs["V"])}


def row_logsumexp(x):
    """log sum exp over each row of x, shifted by the row's maximum."""
    peak = x.max(axis=1)
    return peak + np.log(np.exp(x - peak[:, None]).sum(axis=1))


def loss_at_targets(z, targets):
    """Per-row cross-entropy of logits z [R, V] at the target ids."""
    tgt = np.asarray(targets, dtype=np.int64)
    return row_logsumexp(z) - z[np.arange(z.shape[0]), tgt]


def cross_entropy(inputs, params):
    """Per-row softmax cross-entropy: logsumexp of the row minus the logit of the target id."""
    return {"LOSS": loss_at_targets(inputs["X"], inputs["TGT"])}


def linear_cross_entropy(inputs, params):
    """Cross-entropy of the logits h W^T, computed here whole in float64."""
    return {"LOSS": loss_at_targets(inputs["H"] @ inputs["W"].T, inputs["TGT"])}


def linear_cross_entropy_logit_read(inputs, params):
    """The same loss with W stored as [C, V]: logits h W."""
    return {"LOSS": loss_at_targets(inputs["H"] @ inputs["W"], inputs["TGT"])}


def token_probability(inputs, params):
    """log softmax(h W^T) over the vocabulary, at column YES."""
    z = inputs["H"] @ inputs["W"].T
    return {"LOGP": z[:, int(params["YES"])] - row_logsumexp(z)}


def attention_self_probability(inputs, params):
    """Softmax attention, and each query's probability on its own key (the diagonal)."""
    q, k = inputs["Q"], inputs["K"]
    out, m, l = softmax_attention(q, k, inputs["V"])
    diagonal = np.einsum("bhid,bhid->bhi", q, k, optimize=True) / np.sqrt(q.shape[-1])
    return {"O": out, "PSELF": np.exp(diagonal - m) / l}


def linear_cross_entropy_one_hot(inputs, params):
    """The same loss, the target's logit a sum against a one-hot row: 0 for a target outside
    the vocabulary (no token matches it)."""
    z = inputs["H"] @ inputs["W"].T
    tgt = np.asarray(inputs["TGT"], dtype=np.int64)
    one_hot = np.arange(z.shape[1])[None, :] == tgt[:, None]
    return {"LOSS": row_logsumexp(z) - (z * one_hot).sum(axis=1)}


def t5_bias_attention(inputs, params):
    """Unscaled, unmasked attention plus T5's relative-position bias BIAS[h, bucket(j - i)]."""
    q, k = inputs["Q"], inputs["K"]
    table = np.asarray(inputs["BUCKET"], dtype=np.int64)
    bias = inputs["BIAS"]
    qpos, kpos = positions(q.shape[2], k.shape[2])
    t_len = k.shape[2]
    bucket = np.clip(table[np.clip(kpos - (qpos - (t_len - q.shape[2])) + t_len, 0, 2 * t_len - 1)],
                     0, bias.shape[1] - 1)
    scores = q @ k.swapaxes(-1, -2) + bias[:, bucket][None]
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def causal_mask_definition(inputs, params):
    qpos, kpos = positions(inputs["Q"].shape[2], inputs["K"].shape[2])
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=kpos <= qpos)[0]}


def distance_bias_definition(inputs, params):
    qpos, kpos = positions(inputs["Q"].shape[2], inputs["K"].shape[2])
    q, k = inputs["Q"], inputs["K"]
    bias = -np.abs(inputs["SLOPE"][0]) * np.abs(qpos - kpos)
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]) + bias
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def t5_log_buckets(inputs, params):
    """Unscaled attention plus BIAS[h, bucket(j - i)], T5's bidirectional log-spaced buckets."""
    q, k = inputs["Q"], inputs["K"]
    rel = np.arange(k.shape[2])[None, :] - np.arange(q.shape[2])[:, None]
    dist = np.abs(rel)
    far = 8 + np.trunc(np.log(np.maximum(dist, 1) / 8.0) / np.log(16.0) * 8.0).astype(np.int64)
    bucket = np.where(rel > 0, 16, 0) + np.where(dist < 8, dist, np.minimum(far, 15))
    scores = q @ k.swapaxes(-1, -2) + inputs["BIAS"][:, bucket][None]
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def rotate_half(x, cos, sin):
    """RoFormer's rotation in the rotate-half layout: x [B, H, L, D], cos and sin [L, D/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def rotary_attention(inputs, params):
    """Causal attention over rotated queries (positions T - S + i) and keys (positions j)."""
    q, k = inputs["Q"], inputs["K"]
    cos, sin = inputs["COS"], inputs["SIN"]
    qpos = np.arange(q.shape[2]) + k.shape[2] - q.shape[2]
    qr = f16(rotate_half(q, cos[qpos], sin[qpos]))
    kr = f16(rotate_half(k, cos[: k.shape[2]], sin[: k.shape[2]]))
    return {"O": causal(qr, kr, inputs["V"])}


def differential_attention(inputs, params):
    s_len, t_len = inputs["Q1"].shape[2], inputs["K1"].shape[2]
    qpos, kpos = positions(s_len, t_len)
    o1 = softmax_attention(inputs["Q1"], inputs["K1"], inputs["V"], visible=kpos <= qpos)[0]
    o2 = softmax_attention(inputs["Q2"], inputs["K2"], inputs["V"], visible=kpos <= qpos)[0]
    return {"O": o1 - params["LAMBDA"] * o2}


def sigmoid_attention(inputs, params):
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    s_len, t_len = q.shape[2], k.shape[2]
    qpos, kpos = positions(s_len, t_len)
    scores = np.einsum("bhid,bhjd->bhij", q, k, optimize=True) / np.sqrt(q.shape[-1]) - np.log(t_len)
    p = np.where(kpos <= qpos, sigmoid(scores), 0.0)
    return {"O": np.einsum("bhij,bhjd->bhid", f16(p), v, optimize=True)}


def mqa_no_head_axis(inputs, params):
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[1]
    qpos, kpos = positions(s_len, t_len)
    return {"O": softmax_attention(inputs["Q"], inputs["K"][:, None], inputs["V"][:, None],
                                   visible=kpos <= qpos)[0]}


def e4m3(x):
    """Rounds to OCP FP8 E4M3FN (nearest, ties to even; saturating at +-448), back in float64."""
    x = np.asarray(x, dtype=np.float64)
    mag = np.abs(x)
    # The spacing of e4m3 values around each magnitude: 2^(e - 3) in [2^e, 2^(e+1)), e >= -6;
    # 2^-9 below 2^-6 (subnormals).
    exponent = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    spacing = np.exp2(np.maximum(exponent, -6.0) - 3.0)
    rounded = np.round(mag / spacing) * spacing  # np.round: ties to even
    return np.where(np.isnan(x), np.nan, np.sign(x) * np.minimum(rounded, 448.0))


def rmsnorm_quant_fp8(inputs, params):
    x, w = inputs["X"], inputs["Wt"]
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + params["EPS"]) * w
    amax = np.max(np.abs(y), axis=-1, keepdims=True)
    q = np.where(amax > 0, e4m3(y * 448.0 / np.where(amax > 0, amax, 1.0)), 0.0)
    return {"scale": amax[:, 0] / 448.0, "Yq": q}


def rotary_half_ranges(inputs, params):
    return rotary_attention(inputs, params)


def attention_mask_tensor(inputs, params):
    """SDPA under a boolean [B, S, T] mask (nonzero: visible), shared by the heads."""
    visible = inputs["MASK"] != 0
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"],
                                   visible=visible[:, None, :, :])[0]}


def additive_mask_f16(inputs, params):
    """Scaled scores plus an additive [S, T] mask (f16 values, -inf where a key is hidden)."""
    q, k = inputs["Q"], inputs["K"]
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]) + inputs["AMASK"][None, None]
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def cross_entropy_smoothing(inputs, params):
    """Cross-entropy against (1 - eps) one-hot(target) + eps / N."""
    x = inputs["X"]
    eps = params["EPS"]
    tgt = np.asarray(inputs["TGT"], dtype=np.int64)
    peak = x.max(axis=1)
    lse = peak + np.log(np.exp(x - peak[:, None]).sum(axis=1))
    n = x.shape[1]
    target = np.full(x.shape, eps / n)
    target[np.arange(x.shape[0]), tgt] += 1.0 - eps
    return {"LOSS": (target * (lse[:, None] - x)).sum(axis=1)}


def decode_single_query(inputs, params):
    """One query a head against every key."""
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"])[0]}


def int8_kv_cache_decode(inputs, params):
    """One query a head against int8 keys and values, each row dequantised by its absmax / 127."""
    k = inputs["K"].astype(np.float64) * (inputs["KA"][..., None] / 127)
    v = inputs["V"].astype(np.float64) * (inputs["VA"][..., None] / 127)
    q = inputs["Q"][:, :, None, :]
    return {"O": softmax_attention(q, k, v, round_p=lambda x: x)[0][:, :, 0, :]}


def paged_decode(inputs, params):
    """Keys and values gathered from a paged pool by a block table, then masked by length."""
    bt = np.asarray(inputs["BT"], dtype=np.int64)
    kc, vc = inputs["KC"], inputs["VC"]
    page = kc.shape[2]
    t_len = bt.shape[1] * page
    j = np.arange(t_len)
    pages = bt[:, j // page]  # [B, T]: the pool page of key j of sequence b
    k = kc[pages, :, j % page, :].transpose(0, 2, 1, 3)  # [B, H, T, D]
    v = vc[pages, :, j % page, :].transpose(0, 2, 1, 3)
    visible = j[None, :] < inputs["LEN"][:, None]
    return {"O": softmax_attention(inputs["Q"], k, v, visible=visible[:, None, None, :])[0]}


def attention_scaled_queries(inputs, params):
    """softmax((q / sqrt(D)) k^T) v, the normalised probabilities rounded to bf16 before P.V."""
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    scores = (q / np.sqrt(q.shape[-1])) @ k.swapaxes(-1, -2)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return {"O": bf16(e / e.sum(axis=-1, keepdims=True)) @ v}


def decode_gqa_single_query(inputs, params):
    """One query a head; query head h reads key/value head h // (HQ / HK)."""
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"])[0]}


def mask_key_major(inputs, params):
    """SDPA under a boolean mask stored [B, T, S] (nonzero: key j visible to query i)."""
    visible = np.swapaxes(inputs["MASK"] != 0, 1, 2)
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"],
                                   visible=visible[:, None, :, :])[0]}


def scalable_softmax(inputs, params):
    """Causal attention whose scores are scaled by SS * log(n), n = keys the query sees."""
    q, k = inputs["Q"], inputs["K"]
    s_len, t_len = q.shape[2], k.shape[2]
    qpos, kpos = positions(s_len, t_len)
    n = (qpos + 1).astype(np.float64)  # [S, 1]: keys 0..qpos
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]) * (params["SS"] * np.log(n))
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores, visible=kpos <= qpos)[0]}


def speculative_verify_gqa(inputs, params):
    """S draft tokens, causal (bottom-right), query head h reads key/value head h // (HQ / HK)."""
    q = inputs["Q"]
    qpos, kpos = positions(q.shape[2], inputs["K"].shape[2])
    return {"O": softmax_attention(q, inputs["K"], inputs["V"], visible=kpos <= qpos)[0]}


def attention_scaled_keys(inputs, params):
    """softmax(q (k / sqrt(D))^T) v, probabilities rounded to bf16 before P.V."""
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    scores = q @ (k / np.sqrt(k.shape[-1])).swapaxes(-1, -2)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return {"O": bf16(e / e.sum(axis=-1, keepdims=True)) @ v}


def attention_bshd_layout(inputs, params):
    """Causal grouped-query attention on [B, S, H, D] tensors, output [B, S, HQ, D]."""
    q, k, v = (np.swapaxes(inputs[n], 1, 2) for n in ("Q", "K", "V"))
    qpos, kpos = positions(q.shape[2], k.shape[2])
    return {"O": np.swapaxes(softmax_attention(q, k, v, visible=kpos <= qpos)[0], 1, 2)}


def values_transposed(inputs, params):
    """softmax(q k^T / sqrt(D)) V with V given as V^T [B, H, D, T]; P rounded to bf16."""
    v = np.swapaxes(inputs["VT"], 2, 3)
    return {"O": softmax_attention(inputs["Q"], inputs["K"], v, round_p=bf16)[0]}


def layernorm_activations_3d(inputs, params):
    """LayerNorm over the last axis of [B, T, C] (biased variance, EPS inside the root)."""
    x = inputs["X"]
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return {"Y": (x - mean) / np.sqrt(var + params["EPS"]) * inputs["G"] + inputs["Beta"]}


def log_softmax_vocab_3d(inputs, params):
    """log_softmax over the last axis of [B, T, V]."""
    x = inputs["X"]
    peak = x.max(axis=-1, keepdims=True)
    return {"Y": x - peak - np.log(np.exp(x - peak).sum(axis=-1, keepdims=True))}


def linear_attention_elu(inputs, params):
    """phi(Q) (phi(K)^T V) / (phi(Q) . sum_j phi(K)_j), phi = elu + 1."""
    def phi(x):
        return np.where(x > 0, x + 1, np.exp(x))
    q, k, v = phi(inputs["Q"]), phi(inputs["K"]), inputs["V"]
    kv = k.swapaxes(-1, -2) @ v
    den = (q * k.sum(axis=2, keepdims=True)).sum(axis=-1, keepdims=True)
    return {"O": (q @ kv) / den}


def layernorm_one_pass_variance(inputs, params):
    """(x - mean) / sqrt(E[x^2] - mean^2 + eps) * g."""
    x = inputs["X"]
    mean = x.mean(axis=-1, keepdims=True)
    var = (x * x).mean(axis=-1, keepdims=True) - mean * mean
    return {"Y": (x - mean) / np.sqrt(var + params["EPS"]) * inputs["G"]}


def attention_f16_scores(inputs, params):
    """Causal attention with the scaled scores rounded to f16 before the softmax."""
    q, k = inputs["Q"], inputs["K"]
    qpos, kpos = positions(q.shape[2], k.shape[2])
    scores = f16((q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]))
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores, visible=kpos <= qpos)[0]}


def bias_batch_broadcast(inputs, params):
    """Scaled scores plus a [1, H, S, T] bias broadcast over the batch."""
    q, k = inputs["Q"], inputs["K"]
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]) + inputs["BIAS"]
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def alibi_computed_slopes(inputs, params):
    """Causal ALiBi with slopes 2^(-8 (h + 1) / H)."""
    q, k = inputs["Q"], inputs["K"]
    heads = q.shape[1]
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    qpos, kpos = positions(q.shape[2], k.shape[2])
    bias = slopes[:, None, None] * (kpos - qpos)[None]
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]) + bias[None]
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores, visible=kpos <= qpos)[0]}


def attention_pooling_over_time(inputs, params):
    """Per batch and channel: softmax of the logits over T weights the values."""
    w = softmax_rows(inputs["X"], axis=1)
    return {"Y": (w * inputs["V"]).sum(axis=1)}


def gelu_layernorm(inputs, params):
    """LayerNorm (biased variance, EPS inside the root) of tanh-approximated GELU(x)."""
    x = inputs["X"]
    g = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    mean = g.mean(axis=-1, keepdims=True)
    var = ((g - mean) ** 2).mean(axis=-1, keepdims=True)
    return {"Y": (g - mean) / np.sqrt(var + params["EPS"]) * inputs["G"] + inputs["BT"]}


def attention_lse_bf16_mask_first(inputs, params):
    """Causal attention (P rounded to bf16 before P.V) and each row's log-sum-exp."""
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    qpos, kpos = positions(s_len, t_len)
    o, m, l = softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=kpos <= qpos,
                                round_p=bf16)
    return {"O": o, "LSE": m + np.log(l)}


def masked_softmax_over_time(inputs, params):
    """Softmax over axis 1 of X where MSK > 0 (else excluded), and its log-sum-exp; a channel
    with no unmasked step gets LSE -inf and probabilities 0."""
    keep = inputs["MSK"] > 0
    x = np.where(keep, inputs["X"], -np.inf)
    peak = x.max(axis=1, keepdims=True)
    seen = np.isfinite(peak)
    e = np.where(keep & seen, np.exp(x - np.where(seen, peak, 0.0)), 0.0)
    total = e.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = np.where(total > 0, np.where(seen, peak, 0.0) + np.log(np.where(total > 0, total, 1.0)),
                       -np.inf)
    return {"LSE": lse[:, 0, :], "P": np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)}


def gat_head_mean(inputs, params):
    """GAT's output layer: per-head attention over the neighbours (self-loops added), heads averaged."""
    al, ar, wh = inputs["AL"], inputs["AR"], inputs["WH"]
    n = al.shape[1]
    raw = al[:, :, None] + ar[:, None, :]
    scores = np.where(raw > 0, raw, 0.2 * raw)
    edges = (inputs["ADJ"] != 0) | np.eye(n, dtype=bool)
    scores = np.where(edges[None], scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    heads = (f16(e) @ wh) / e.sum(axis=-1, keepdims=True)
    return {"Y": heads.mean(axis=0)}


def efficient_attention(inputs, params):
    """Shen et al.: softmax(Q, over features) @ (softmax(K, over positions)^T @ V)."""
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    rho_q = softmax_rows(q, axis=-1)
    rho_k = softmax_rows(k, axis=-2)
    return {"O": rho_q @ (rho_k.swapaxes(-1, -2) @ v)}


def attention_with_weights(inputs, params):
    """SDPA and its probabilities softmax(q . k / sqrt(D))."""
    q, k = inputs["Q"], inputs["K"]
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1])
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0],
            "P": softmax_rows(scores)}


def differential_attention_headnorm(inputs, params):
    """Differential attention followed by its per-head RMSNorm (weight G) and the 1 - lambda_init scale."""
    a = differential_attention(inputs, params)["O"]
    rms = np.sqrt((a * a).mean(axis=-1, keepdims=True) + 1e-5)
    return {"O": a / rms * inputs["G"] * (1 - params["LINIT"])}


def greedy_token(inputs, params):
    """The first index of each row's maximum logit, and log-softmax there (-log sum exp(x - max))."""
    x = inputs["X"]
    shifted = x - x.max(axis=1, keepdims=True)
    return {"TOKEN": np.argmax(x, axis=1), "LOGP": -np.log(np.exp(shifted).sum(axis=1))}


def argmax_int8_ties(inputs, params):
    """The first position of each row's maximum, and how many positions reach it."""
    x = inputs["X"].astype(np.int64)
    return {"FIRST": np.argmax(x, axis=1), "TIES": (x == x.max(axis=1, keepdims=True)).sum(axis=1)}


def greedy_token_padded_vocab(inputs, params):
    """The first index of each row's maximum over the logits j < V."""
    x = inputs["X"]
    keep = np.arange(x.shape[1]) < params["V"]
    return {"TOKEN": np.argmax(np.where(keep, x, -np.inf), axis=1)}


def batchnorm_training(inputs, params):
    """Per channel: (x - mean) / sqrt(biased variance + 1e-5) * G + BETA, statistics over axis 0."""
    x = inputs["X"]
    mu = x.mean(axis=0, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=0, keepdims=True)
    return {"Y": (x - mu) / np.sqrt(var + 1e-5) * inputs["G"] + inputs["BETA"]}


def spatial_soft_argmax(inputs, params):
    """Softmax over each map's H x W positions; the expected column and row under it."""
    f = inputs["F"]
    b, c, h, w = f.shape
    flat = f.reshape(b, c, h * w)
    p = np.exp(flat - flat.max(axis=2, keepdims=True))
    p = (p / p.sum(axis=2, keepdims=True)).reshape(b, c, h, w)
    return {"PX": (p * np.arange(w)[None, None, None, :]).sum(axis=(2, 3)),
            "PY": (p * np.arange(h)[None, None, :, None]).sum(axis=(2, 3))}


def spatial_soft_argmax_2d(inputs, params):
    """The same soft-argmax, its softmax taken over the (y, x) axes of each map."""
    f = inputs["F"]
    b, c, h, w = f.shape
    p = np.exp(f - f.max(axis=(2, 3), keepdims=True))
    p = p / p.sum(axis=(2, 3), keepdims=True)
    return {"PX": (p * np.arange(w)[None, None, None, :]).sum(axis=(2, 3)),
            "PY": (p * np.arange(h)[None, None, :, None]).sum(axis=(2, 3))}


def block_quant_fp8(inputs, params):
    """Per group of G columns of a row: amax, codes e4m3(x * 448 / amax) (0 where amax is 0)."""
    x, g = inputs["X"], int(params["G"])
    m, n = x.shape
    amax = np.abs(x.reshape(m, n // g, g)).max(axis=2)
    per_col = np.repeat(amax, g, axis=1)
    q = np.where(per_col > 0, e4m3(x * 448.0 / np.where(per_col > 0, per_col, 1.0)), 0.0)
    return {"SCALE": amax / 448.0, "Q": q}


def int8_scores_attention(inputs, params):
    """Scores: the integer dot of int8 Q and K, times the per-token scales SQ and SK."""
    q, k = inputs["Q"].astype(np.int64), inputs["K"].astype(np.int64)
    s = np.einsum("bhid,bhjd->bhij", q, k, optimize=True).astype(np.float64)
    s = s * inputs["SQ"][..., :, None] * inputs["SK"][..., None, :]
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    o = np.einsum("bhij,bhjd->bhid", f16(p), inputs["V"], optimize=True)
    return {"O": o / p.sum(axis=-1, keepdims=True)}


def int8_scores_gqa_causal(inputs, params):
    """int8_scores_attention with query heads grouped over key/value heads, causal."""
    q = inputs["Q"].astype(np.int64)
    heads = q.shape[1]
    k = expand_heads(inputs["K"].astype(np.int64), heads)
    s = np.einsum("bhid,bhjd->bhij", q, k, optimize=True).astype(np.float64)
    s = s * inputs["SQ"][..., :, None] * expand_heads(inputs["SK"], heads)[..., None, :]
    qi, kj = positions(q.shape[2], k.shape[2])
    o, _, _ = softmax_attention(inputs["Q"], inputs["K"], inputs["V"], scores=s, visible=kj <= qi)
    return {"O": o}


# ----------------------------------------------------------------------------------------------
# Serving and training variants: two caches, latent heads, base 2, ignored targets, two axes


def cascade_decode(inputs, params):
    q = inputs["Q"]
    b = q.shape[0]
    kp = np.broadcast_to(inputs["KP"][None], (b,) + inputs["KP"].shape)
    vp = np.broadcast_to(inputs["VP"][None], (b,) + inputs["VP"].shape)
    k = np.concatenate([kp, inputs["K"]], axis=2)
    v = np.concatenate([vp, inputs["V"]], axis=2)
    return {"O": softmax_attention(q, k, v)[0]}


def cascade_prefill_masked(inputs, params):
    q = inputs["Q"]
    b, _, s_len, _ = q.shape
    p_len, t_len = inputs["KP"].shape[1], inputs["K"].shape[2]
    kp = np.broadcast_to(inputs["KP"][None], (b,) + inputs["KP"].shape)
    vp = np.broadcast_to(inputs["VP"][None], (b,) + inputs["VP"].shape)
    k = np.concatenate([kp, inputs["K"]], axis=2)
    v = np.concatenate([vp, inputs["V"]], axis=2)
    prefix = np.arange(p_len)[None, None, :] < inputs["PL"][:, None, None]  # [B, 1, P]
    prefix = np.broadcast_to(prefix, (b, s_len, p_len))
    qpos, kpos = positions(s_len, t_len)
    suffix = np.broadcast_to((kpos <= qpos)[None], (b, s_len, t_len))
    visible = np.concatenate([prefix, suffix], axis=2)[:, None]  # [B, 1, S, P + T]
    return {"O": softmax_attention(q, k, v, visible=visible)[0]}


def exp2_attention(inputs, params):
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"])[0]}


def head80_causal(inputs, params):
    s, t = inputs["Q"].shape[2], inputs["K"].shape[2]
    vis = np.arange(t)[None, :] <= np.arange(s)[:, None]
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=vis, round_p=bf16)[0]}


def softmin_rows(inputs, params):
    x = -inputs["X"]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"Y": e / e.sum(axis=1, keepdims=True)}


def attention_f32(inputs, params):
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], round_p=lambda x: x)[0]}


def mla_decode(inputs, params):
    qc, qr, c, r = inputs["QC"], inputs["QR"], inputs["C"], inputs["R"]
    scores = (np.einsum("bhil,bjl->bhij", qc, c, optimize=True) + np.einsum("bhie,bje->bhij", qr, r, optimize=True)) / np.sqrt(qc.shape[-1] + qr.shape[-1])
    p = np.exp(scores - scores.max(-1, keepdims=True))
    o = np.einsum("bhij,bjc->bhic", bf16(p), c, optimize=True)
    return {"O": o / p.sum(-1, keepdims=True)}


def ce_ignore_index(inputs, params):
    x, t = inputs["X"], inputs["TGT"].astype(np.int64)
    lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    picked = x[np.arange(x.shape[0]), np.clip(t, 0, None)]
    return {"LOSS": np.where(t == -100, 0.0, lse - picked)}


def varlen_decode(inputs, params):
    t = inputs["K"].shape[2]
    vis = np.arange(t)[None, :] < inputs["LEN"][:, None]
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=vis[:, None, None, :])[0]}


def moe_router_top1(inputs, params):
    x = inputs["X"]
    p = np.exp(x - x.max(1, keepdims=True))
    p = p / p.sum(1, keepdims=True)
    return {"W": p.max(1), "TOP": np.argmax(x, axis=1)}


def softmax_middle_axis(inputs, params):
    x = inputs["X"]
    e = np.exp(x - x.max(1, keepdims=True))
    return {"Y": e / e.sum(1, keepdims=True)}


def rmsnorm_gemma(inputs, params):
    x, w = inputs["X"], inputs["W"]
    return {"Y": x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * (1 + w)}


def ce_z_loss(inputs, params):
    x, t = inputs["X"], inputs["TGT"].astype(np.int64)
    z = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    return {"LOSS": z - x[np.arange(x.shape[0]), t] + 1e-4 * z * z}


def layernorm_two_axes(inputs, params):
    x = inputs["X"]
    mu = x.mean(axis=(1, 2), keepdims=True)
    var = ((x - mu) ** 2).mean(axis=(1, 2), keepdims=True)
    return {"Y": (x - mu) / np.sqrt(var + 1e-5)}


def streaming_sinks(inputs, params):
    q, t_len = inputs["Q"], inputs["K"].shape[2]
    k = np.concatenate([inputs["KS"], inputs["K"]], axis=2)
    v = np.concatenate([inputs["VS"], inputs["V"]], axis=2)
    n_sinks = inputs["KS"].shape[2]
    window = np.arange(t_len) >= t_len - params["W"]
    visible = np.concatenate([np.ones(n_sinks, dtype=bool), window])
    return {"O": softmax_attention(q, k, v, visible=visible)[0]}


def two_source_lse(inputs, params):
    a, c, sink = inputs["A"], inputs["C"], inputs["SINK"]
    scores = np.concatenate([a, c, np.broadcast_to(sink[None, :, None], a.shape[:2] + (1,))], axis=2)
    m = scores.max(axis=2)
    return {"LSE": m + np.log(np.exp(scores - m[..., None]).sum(axis=2))}


def decode_gqa_window(inputs, params):
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    qpos, kpos = positions(q.shape[2], k.shape[2])
    visible = (kpos <= qpos) & (qpos - kpos < params["W"])
    return {"O": softmax_attention(q, expand_heads(k, q.shape[1]), expand_heads(v, q.shape[1]),
                                   visible=visible)[0]}


def cascade_varlen_decode(inputs, params):
    q = inputs["Q"]
    b = q.shape[0]
    p_len, t_len = inputs["KP"].shape[1], inputs["K"].shape[2]
    kp = np.broadcast_to(inputs["KP"][None], (b,) + inputs["KP"].shape)
    vp = np.broadcast_to(inputs["VP"][None], (b,) + inputs["VP"].shape)
    k = np.concatenate([kp, inputs["K"]], axis=2)
    v = np.concatenate([vp, inputs["V"]], axis=2)
    suffix = np.arange(t_len)[None, :] < inputs["LEN"][:, None]  # [B, T]
    visible = np.concatenate([np.ones((b, p_len), bool), suffix], axis=1)[:, None, None, :]
    return {"O": softmax_attention(q, k, v, visible=visible)[0]}


def _sinks_window_gqa(inputs, params):
    q = inputs["Q"]
    k, v = expand_heads(inputs["K"], q.shape[1]), expand_heads(inputs["V"], q.shape[1])
    qpos, kpos = positions(q.shape[2], k.shape[2])
    visible = (kpos <= qpos) & (kpos > qpos - params["W"])
    return {"O": softmax_attention(q, k, v, visible=visible, sink=inputs["SINK"])[0]}


def sinks_window_gqa_decode(inputs, params):
    return _sinks_window_gqa(inputs, params)


def sinks_window_gqa_prefill(inputs, params):
    return _sinks_window_gqa(inputs, params)


def attention_stats_outputs(inputs, params):
    q = inputs["Q"]
    qpos, kpos = positions(q.shape[2], inputs["K"].shape[2])
    o, m, l = softmax_attention(q, inputs["K"], inputs["V"], visible=kpos <= qpos)
    return {"O": o, "M": m, "L": l}


def varlen_prefill(inputs, params):
    q = inputs["Q"]
    s_len = q.shape[2]
    n = inputs["LEN"][:, None, None]  # [B, 1, 1]
    i, j = np.arange(s_len)[None, :, None], np.arange(s_len)[None, None, :]
    visible = ((j <= i) & (j < n))[:, None]  # [B, 1, S, S]
    o = softmax_attention(q, inputs["K"], inputs["V"], visible=visible)[0]
    rows = (np.arange(s_len)[None, :] < inputs["LEN"][:, None])[:, None, :, None]
    return {"O": np.where(rows, o, 0.0)}


def decode_gqa_no_query_axis(inputs, params):
    q = inputs["Q"][:, :, None, :]
    return {"O": softmax_attention(q, inputs["K"], inputs["V"])[0][:, :, 0, :]}


def causal_additive_mask(inputs, params):
    q, k = inputs["Q"], inputs["K"]
    s_len, t_len = q.shape[2], k.shape[2]
    # torch.triu of -inf above the bottom-right-aligned diagonal, added to the scores
    additive = np.triu(np.full((s_len, t_len), -np.inf), k=t_len - s_len + 1)
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1]) + additive
    return {"O": softmax_attention(q, k, inputs["V"], scores=scores)[0]}


def sigmoid_attention_mask_product(inputs, params):
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    s_len, t_len = q.shape[2], k.shape[2]
    weights = np.tril(np.ones((s_len, t_len)), k=t_len - s_len)
    scores = np.einsum("bhid,bhjd->bhij", q, k, optimize=True) / np.sqrt(q.shape[-1]) - np.log(t_len)
    return {"O": np.einsum("bhij,bhjd->bhid", f16(sigmoid(scores) * weights), v, optimize=True)}


def softmax_groups(inputs, params):
    x, g = inputs["X"], int(params["G"])
    m, n = x.shape
    return {"P": softmax_rows(x.reshape(m, n // g, g)).reshape(m, n)}


def static_cache_attention(inputs, params):
    q, filled = inputs["Q"], int(params["L"])
    k, v = inputs["K"][:, :, :filled], inputs["V"][:, :, :filled]
    qpos, kpos = positions(q.shape[2], filled)
    o = softmax_attention(q, k, v, visible=kpos <= qpos)[0]
    return {"O": o}


def head40_sd_attention(inputs, params):
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"])[0]}


def head72_dit_attention(inputs, params):
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], round_p=bf16)[0]}


def value_head24_decode(inputs, params):
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"])[0]}


def qk_layernorm_head40(inputs, params):
    eps = params["EPS"]

    def layernorm(x, w, b):
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return f16((x - mean) / np.sqrt(var + eps) * w + b)

    q = layernorm(inputs["Q"], inputs["WQ"], inputs["BQ"])
    k = layernorm(inputs["K"], inputs["WK"], inputs["BK"])
    s_len, t_len = q.shape[2], k.shape[2]
    i, j = np.arange(s_len)[:, None], np.arange(t_len)[None, :]
    return {"O": softmax_attention(q, k, inputs["V"], visible=j <= i)[0]}


def strided_sparse_attention(inputs, params):
    stride = int(params["STRIDE"])
    s_len, t_len = inputs["Q"].shape[2], inputs["K"].shape[2]
    qpos = np.arange(s_len)[:, None] + t_len - s_len
    kpos = np.arange(t_len)[None, :]
    visible = (kpos <= qpos) & ((qpos - kpos) % stride == 0)
    return {"O": softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=visible)[0]}


def keys_transposed_first(inputs, params):
    k = np.swapaxes(inputs["KT"], 2, 3)
    return {"O": softmax_attention(inputs["Q"], k, inputs["V"])[0]}


def attention_output_projection(inputs, params):
    s_len = inputs["Q"].shape[2]
    visible = np.arange(s_len)[None, :] <= np.arange(s_len)[:, None]
    o = f16(softmax_attention(inputs["Q"], inputs["K"], inputs["V"], visible=visible)[0])
    return {"Y": np.einsum("bhid,hdc->bic", o, inputs["WO"], optimize=True)}


def layernorm_projection(inputs, params):
    x = inputs["X"]
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    xn = bf16((x - mu) / np.sqrt(var + 1e-5))
    return {"Y": xn @ inputs["W"]}


def rmsnorm_projection(inputs, params):
    x = inputs["X"]
    r = 1 / np.sqrt((x * x).mean(axis=1) + 1e-6)
    xn = f16(x * r[:, None] * inputs["G"][None, :])
    return {"Y": xn @ inputs["W"]}


def projected_query_attention(inputs, params):
    q = f16(np.einsum("bic,chd->bhid", inputs["X"], inputs["WQ"], optimize=True))
    s_len = q.shape[2]
    visible = np.arange(s_len)[None, :] <= np.arange(s_len)[:, None]
    return {"O": softmax_attention(q, inputs["K"], inputs["V"], visible=visible)[0]}


# ----------------------------------------------------------------------------------------------
# Attention's backward pass (FlashAttention-2's recomputation from the log-sum-exp)


def _backward_probabilities(inputs, causal=False):
    q, k = inputs["Q"], inputs["K"]
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1])
    p = np.exp(scores - inputs["LSE"][..., None])
    if causal:
        qpos, kpos = positions(q.shape[2], k.shape[2])
        p = np.where(kpos <= qpos, p, 0.0)
    return p


def _backward_ds(inputs, causal=False):
    p = _backward_probabilities(inputs, causal)
    dp = inputs["DO"] @ inputs["V"].swapaxes(-1, -2)
    return p * (dp - inputs["DL"][..., None])


def attention_backward_dv(inputs, params):
    return {"DV": f16(_backward_probabilities(inputs)).swapaxes(-1, -2) @ inputs["DO"]}


def attention_backward_gqa(inputs, params):
    d = inputs["Q"].shape[-1]
    group = inputs["Q"].shape[1] // inputs["K"].shape[1]
    per_head = dict(inputs, K=np.repeat(inputs["K"], group, axis=1),
                    V=np.repeat(inputs["V"], group, axis=1))
    p = f16(_backward_probabilities(per_head, causal=True))
    ds = f16(_backward_ds(per_head, causal=True))
    b, hq, s, _ = inputs["Q"].shape

    def group_sum(x):
        return x.reshape(b, hq // group, group, *x.shape[2:]).sum(axis=2)

    return {"DQ": ds @ per_head["K"] / np.sqrt(d),
            "DV": group_sum(p.swapaxes(-1, -2) @ inputs["DO"]),
            "DK": group_sum(ds.swapaxes(-1, -2) @ inputs["Q"]) / np.sqrt(d)}


def attention_backward_gqa_per_head(inputs, params):
    return attention_backward_gqa(inputs, params)


def attention_backward_causal(inputs, params):
    d = inputs["Q"].shape[-1]
    p = f16(_backward_probabilities(inputs, causal=True))
    ds = f16(_backward_ds(inputs, causal=True))
    return {"DQ": ds @ inputs["K"] / np.sqrt(d),
            "DV": p.swapaxes(-1, -2) @ inputs["DO"],
            "DK": ds.swapaxes(-1, -2) @ inputs["Q"] / np.sqrt(d)}
