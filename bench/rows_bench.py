#!/usr/bin/env python3
"""Row reductions on the CPU: Kintsugi against NumPy and PyTorch's CPU kernels, in one run.

Each case compiles an example of examples/norm at its size, checks the result against a float64
NumPy reference (the timing of a kernel that does not verify is not printed), then times one call
through the Python module, NumPy and PyTorch (same input dtypes, same output dtype, both threads),
and the copy of the same bytes (read once, written once) as the roof: NumPy's copy on one thread,
and on every thread (a slice a thread; NumPy's copy releases the interpreter's lock). One core's
copy does not reach the bandwidth of the caches and memory behind it, so the second is the roof
of a kernel that runs on every core.

    PYTHONPATH=build/python python3 bench/rows_bench.py [--only softmax,layernorm] [--json F]

Prints a Markdown table: median milliseconds per call and Kintsugi's bandwidth as a fraction of
each copy's.
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# After PYTHONPATH: a module given there (another build) is the one measured.
sys.path.append(os.path.join(ROOT, "build", "python"))
import kintsugi  # noqa: E402

try:
    import torch
except ImportError:  # the table says so
    torch = None

SIZES = [(1, 8192), (64, 4096), (1000, 4096), (4096, 8192)]


def median_ms(fn, min_seconds=0.3, min_runs=5):
    fn()  # warm
    times = []
    start = time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 200:
            break
    return 1e3 * statistics.median(times)


def parallel_copy(dst, src, pool, threads):
    """np.copyto of `src` into `dst`, a contiguous slice a thread."""
    step = -(-len(src) // threads)
    list(pool.map(lambda k: np.copyto(dst[k:k + step], src[k:k + step]), range(0, len(src), step)))


# float64 references and the peers, by example. Inputs are the example's dtypes.
def softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"Y": e / e.sum(axis=1, keepdims=True)}


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def layernorm_ref(x, g, b, eps=1e-5):
    x = x.astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return {"Y": (x - mu) / np.sqrt(var + eps) * g.astype(np.float64) + b.astype(np.float64)}


def layernorm_numpy(x, g, b, eps=1e-5):
    x = x.astype(np.float32)
    mu = x.mean(axis=1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=1, keepdims=True)
    return (xc / np.sqrt(var + eps) * g.astype(np.float32) + b.astype(np.float32)).astype(np.float16)


def l2norm_ref(x, eps=1e-12):
    x = x.astype(np.float64)
    return {"Y": x / np.sqrt((x * x).sum(axis=1, keepdims=True) + eps)}


def l2norm_numpy(x, eps=1e-12):
    x = x.astype(np.float32)
    return (x / np.sqrt((x * x).sum(axis=1, keepdims=True) + eps)).astype(np.float16)


def rmsnorm_quant_ref(x, w, eps=1e-6):
    x = x.astype(np.float64)
    y = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w.astype(np.float64)
    a = np.abs(y).max(axis=1, keepdims=True)
    q = np.where(a > 0, np.round(y * 127 / np.where(a > 0, a, 1)), 0)
    return {"scale": a[:, 0] / 127, "Yq": q}


def rmsnorm_quant_numpy(x, w, eps=1e-6):
    x = x.astype(np.float32)
    y = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w.astype(np.float32)
    a = np.abs(y).max(axis=1, keepdims=True)
    q = np.rint(y * (127 / np.where(a > 0, a, 1))).astype(np.int8)
    return a[:, 0] / 127, q


def torch_peers():
    if torch is None:
        return {}
    F = torch.nn.functional

    def softmax(x):
        return torch.softmax(x, dim=1)

    def layernorm(x, g, b):
        return F.layer_norm(x.float(), (x.shape[1],), g.float(), b.float(), 1e-5).half()

    def l2norm(x):
        xf = x.float()
        return (xf * torch.rsqrt((xf * xf).sum(dim=1, keepdim=True) + 1e-12)).half()

    def rmsnorm_quant(x, w):
        xf = x.float()
        y = xf * torch.rsqrt((xf * xf).mean(dim=1, keepdim=True) + 1e-6) * w.float()
        a = y.abs().amax(dim=1, keepdim=True)
        return a[:, 0] / 127, torch.round(y * (127 / a.clamp_min(1e-30))).to(torch.int8)

    return {"softmax": softmax, "layernorm": layernorm, "l2norm": l2norm,
            "rmsnorm_quant": rmsnorm_quant}


CASES = {
    # name: (inputs(M, N, rng), reference, numpy peer, bytes(M, N))
    "softmax": (lambda m, n, r: [r.standard_normal((m, n)).astype(np.float32)],
                softmax_ref, softmax_numpy, lambda m, n: 8 * m * n),
    "layernorm": (lambda m, n, r: [r.standard_normal((m, n)).astype(np.float16),
                                   r.standard_normal(n).astype(np.float16),
                                   r.standard_normal(n).astype(np.float16)],
                  layernorm_ref, layernorm_numpy, lambda m, n: 4 * m * n),
    "l2norm": (lambda m, n, r: [r.standard_normal((m, n)).astype(np.float16)],
               l2norm_ref, l2norm_numpy, lambda m, n: 4 * m * n),
    "rmsnorm_quant": (lambda m, n, r: [r.standard_normal((m, n)).astype(np.float16),
                                       r.standard_normal(n).astype(np.float16)],
                      rmsnorm_quant_ref, rmsnorm_quant_numpy, lambda m, n: 3 * m * n),
}


def verify(name, outs, ref):
    """Largest error of each output (outputs in declaration order, as `ref`'s keys), relative to
    the output's largest magnitude; exits if one is off."""
    worst = 0.0
    outs = outs if isinstance(outs, tuple) else (outs,)
    for (key, want), out in zip(ref.items(), outs):
        got = np.from_dlpack(out).astype(np.float64)
        scale = max(np.abs(want).max(), 1e-30)
        err = float(np.abs(got - want).max() / scale)
        # i8 outputs may differ by one step where a value sits at a rounding tie.
        tol = 1.0 / 127 + 1e-6 if key == "Yq" else 1e-2
        if not err <= tol:
            raise SystemExit(f"{name}: output {key} off by {err:.3g} (tolerance {tol}); not timed")
        worst = max(worst, err)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--sizes", default="", help="MxN,... (default: %s)" %
                    ",".join(f"{m}x{n}" for m, n in SIZES))
    ap.add_argument("--json", default="", help="also write the rows to this file")
    args = ap.parse_args()
    sizes = SIZES if not args.sizes else [tuple(int(v) for v in s.split("x"))
                                          for s in args.sizes.split(",")]
    names = [n for n in CASES if not args.only or n in args.only.split(",")]
    threads = os.cpu_count()
    if torch is not None:
        torch.set_num_threads(threads)
    peers = torch_peers()
    rng = np.random.default_rng(7)
    print(f"CPU: {threads} threads; torch {torch.__version__ if torch else 'absent'}; "
          f"numpy {np.__version__}; kintsugi {kintsugi.__commit__}")
    cases = [(name, m, n, CASES[name][0](m, n, rng)) for name in names for m, n in sizes]
    # One runtime at a time: each one's OpenMP threads spin for a while after a parallel region
    # and would slow the next one down if they were interleaved.
    rows = []
    for name, m, n, inputs in cases:
        kernel = kintsugi.compile(os.path.join(ROOT, "examples", "norm", name + ".te"),
                                  shape={"M": m, "N": n}, require="tile")
        err = verify(name, kernel(*inputs), CASES[name][1](*inputs))
        rows.append({"case": name, "M": m, "N": n, "kintsugi_ms": median_ms(lambda: kernel(*inputs)),
                     "rel_err": err})
    pool = concurrent.futures.ThreadPoolExecutor(threads)
    for row, (name, m, n, inputs) in zip(rows, cases):
        row["numpy_ms"] = median_ms(lambda: CASES[name][2](*inputs))
        src = np.ones(CASES[name][3](m, n) // 2, dtype=np.uint8)
        dst = np.empty_like(src)
        row["copy_ms"] = median_ms(lambda: np.copyto(dst, src))
        row["copy_all_ms"] = median_ms(lambda: parallel_copy(dst, src, pool, threads))
    for row, (name, m, n, inputs) in zip(rows, cases):
        row["torch_ms"] = float("nan")
        if name in peers:
            tin = [torch.from_numpy(x) for x in inputs]
            row["torch_ms"] = median_ms(lambda: peers[name](*tin))
    print("| case | M x N | Kintsugi ms | NumPy ms | PyTorch ms | copy ms (1 thread) | copy ms "
          f"({threads} threads) | of copy (1 thread) | of copy ({threads} threads) | rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['M']} x {r['N']} | {r['kintsugi_ms']:.3f} | {r['numpy_ms']:.3f} | "
              f"{r['torch_ms']:.3f} | {r['copy_ms']:.3f} | {r['copy_all_ms']:.3f} | "
              f"{r['copy_ms'] / r['kintsugi_ms']:.2f} | {r['copy_all_ms'] / r['kintsugi_ms']:.2f} | "
              f"{r['rel_err']:.1e} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
