#!/usr/bin/env python3
"""PyTorch's times for the row reductions of examples/norm (and the corpus's cross-entropy) on the
GPU: torch eager, torch.compile, and the copy of the same bytes (read once, written once) as the
roof, each by triton's do_bench (median of warm runs), the same method as the peers of
bench/attention_bench.py. tests/gpu/rows_check.sh runs it after Kintsugi's own runs, in the same
process tree, and joins the two into one table.

    python3 bench/rows_torch.py CASE:M:N ...   (CASE: layernorm, l2norm, rmsnorm_quant, softmax,
                                                cross_entropy, block_quant_fp8)

Prints one JSON object a case: {"case", "M", "N", "eager_ms", "compile_ms", "copy_ms"}. The
operators are written here as a PyTorch user would write them, with the examples' dtypes: f16 in
and out with f32 statistics for the norms, f32 for softmax and cross-entropy, f16 -> i8 with an f32
scale for rmsnorm_quant, bf16 -> e4m3 with an f32 scale a group of 128 columns for the corpus's
block_quant_fp8.
"""
import json
import sys

import torch
import torch.nn.functional as F
import triton.testing as tt


def layernorm(x, g, b):
    return F.layer_norm(x, (x.shape[-1],), g, b, 1e-5)


def l2norm(x):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + 1e-12)).half()


def rmsnorm_quant(x, w):
    xf = x.float()
    y = xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * w.float()
    a = y.abs().amax(-1, keepdim=True)
    return a[:, 0] / 127, torch.round(y * 127 / a).to(torch.int8)


def softmax(x):
    return torch.softmax(x, -1)


def cross_entropy(x, t):
    return F.cross_entropy(x, t, reduction="none")


def block_quant_fp8(x):
    m, n = x.shape
    g = x.float().view(m, n // 128, 128)
    a = g.abs().amax(-1, keepdim=True)
    q = torch.where(a > 0, g * 448 / a, torch.zeros_like(g)).to(torch.float8_e4m3fn)
    return a[..., 0] / 448, q.view(m, n)


def inputs(case, m, n):
    h = dict(device="cuda", dtype=torch.float16)
    if case == "layernorm":
        return [torch.randn(m, n, **h), torch.randn(n, **h), torch.randn(n, **h)], 4 * m * n
    if case == "l2norm":
        return [torch.randn(m, n, **h)], 4 * m * n
    if case == "rmsnorm_quant":
        return [torch.randn(m, n, **h), torch.randn(n, **h)], 3 * m * n
    if case == "softmax":
        return [torch.randn(m, n, device="cuda")], 8 * m * n
    if case == "cross_entropy":
        return [torch.randn(m, n, device="cuda"),
                torch.randint(0, n, (m,), device="cuda")], 4 * m * n
    if case == "block_quant_fp8":
        return [torch.randn(m, n, device="cuda", dtype=torch.bfloat16)], 3 * m * n
    raise SystemExit(f"unknown case {case}")


def ms(fn):
    return tt.do_bench(fn, warmup=25, rep=100, return_mode="median")


def main():
    torch.manual_seed(0)
    for arg in sys.argv[1:]:
        case, m, n = arg.split(":")
        m, n = int(m), int(n)
        args, nbytes = inputs(case, m, n)
        fn = globals()[case]
        compiled = torch.compile(fn)
        src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
        row = {"case": case, "M": m, "N": n, "eager_ms": ms(lambda: fn(*args)),
               "compile_ms": ms(lambda: compiled(*args)), "copy_ms": ms(lambda: src.clone())}
        print(json.dumps(row), flush=True)
        del args, src
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
