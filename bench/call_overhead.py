"""What a call costs from Python on the GPU, against PyTorch's own SDPA call, in one process,
every output verified against the fp64 reference before it is timed.

For each case (decode causal and grouped-query at T=32768, prefill global at S=T=1024; f16,
D=128, the head counts of attention_bench.py):
- kernel: the kernel alone, from `kintsugi run --bench` (device events around the launches; the
  CLI verifies first), as attention_bench.py measures it;
- python: `kernel(q, k, v, out=o)` on torch CUDA tensors, timed with triton's do_bench as the
  peers are: calls back to back, so a call's host cost shows wherever it exceeds the kernel's;
- sdpa-flash, cudnn: torch's scaled_dot_product_attention with that backend, the same way.
Then decode causal (H=32) at T=1024 to 131072 through one kernel compiled with dynamic=["T"]
against the variant compiled for each length.
Then the host cost of a call alone (launch-only): wall time per call over a loop of calls on tiny
tensors that never waits for the GPU, for Kintsugi's decode and softmax and for SDPA and
torch.softmax on the same tensors.

  python3 bench/call_overhead.py --kintsugi build-gpu/bin/kintsugi --json $OUT/calls.json
(PYTHONPATH must name the directory of the kintsugi module: build-gpu/python.)
"""
import argparse, json, os, sys, time

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
import triton.testing as tt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_bench import D, OPS, ROOT, reference, rel_err, run_ours  # noqa: E402

import kintsugi  # noqa: E402

CASES = [("decode_causal", 32768), ("decode_gqa", 32768), ("prefill_global", 1024)]
TOL = 1e-2


def host_us(fn, calls=200, batches=25):
    """Host wall time of one call: the median over batches of `calls` calls that never wait for
    the GPU (few enough that the launch queue never fills and blocks the host)."""
    fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return float(np.median(per_call))


def timed(fn, out, ref):
    fn()
    torch.cuda.synchronize()
    err = rel_err(out, ref)
    if err > TOL:
        return None, err
    return tt.do_bench(fn, warmup=25, rep=200, return_mode="median"), err


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--kintsugi", default=os.path.join(ROOT, "build", "bin", "kintsugi"))
    a.add_argument("--json", default="calls.json")
    args = a.parse_args()
    torch.manual_seed(0)
    rows = []
    print(f"{'case':16} {'len':>6} {'who':10} {'ms':>8} {'x kernel':>9} {'rel err':>9}")
    for name, n in CASES:
        heads, causal, decode, group, _ = OPS[name]
        hk = heads // group
        S, T = (1 if decode else n), n
        q = torch.randn(1, heads, S, D, device="cuda", dtype=torch.float16)
        k = torch.randn(1, hk, T, D, device="cuda", dtype=torch.float16)
        v = torch.randn(1, hk, T, D, device="cuda", dtype=torch.float16)
        ref = reference(q, k, v, causal, group)
        shape = {"B": 1, "S": S, "T": T, "D": D}
        shape.update({"HQ": heads, "HK": hk} if group > 1 else {"H": heads})
        kernel_ms, kernel_err, note = run_ours(args.kintsugi, name, shape,
                                               {"Q": q, "K": k, "V": v}, ref)
        results = [("kernel", kernel_ms, kernel_err, note)]
        attn = kintsugi.compile(os.path.join(ROOT, "examples", "attention", name + ".te"),
                                target="cuda", shape=shape)
        out = torch.empty_like(q)
        results.append(("python",) + timed(lambda: attn(q, k, v, out=out), out, ref) + ("",))
        for label, backend in (("sdpa-flash", SDPBackend.FLASH_ATTENTION),
                               ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            def sdpa(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(
                        q, k, v, is_causal=causal and S > 1, enable_gqa=group > 1)
            holder = {}
            def call(sdpa=sdpa):
                holder["o"] = sdpa()
            try:
                call()
            except Exception as e:  # the backend does not take this case
                results.append((label, None, None, type(e).__name__))
                continue
            ms, err = timed(call, holder["o"], ref)  # every call computes the same values
            results.append((label, ms, err, ""))
        for who, ms, err, note in results:
            ratio = ms / kernel_ms if ms and kernel_ms else None
            rows.append({"case": name, "len": n, "who": who, "ms": ms, "rel_err": err,
                         "note": note, "x_kernel": ratio})
            print(f"{name:16} {n:>6} {who:10} {ms and f'{ms:.4f}' or note or '-':>8} "
                  f"{ratio and f'{ratio:.2f}' or '-':>9} {err is not None and f'{err:.1e}' or '-':>9}",
                  flush=True)

    # One decode kernel for every length (dynamic=["T"], scheduled at T=32768) against the
    # variant compiled for each length, both called from Python.
    path = os.path.join(ROOT, "examples", "attention", "decode_causal.te")
    dynamic = kintsugi.compile(path, target="cuda", dynamic=["T"],
                               shape={"B": 1, "H": 32, "S": 1, "D": D})
    for n in (1024, 4096, 32768, 131072):
        q = torch.randn(1, 32, 1, D, device="cuda", dtype=torch.float16)
        k = torch.randn(1, 32, n, D, device="cuda", dtype=torch.float16)
        v = torch.randn(1, 32, n, D, device="cuda", dtype=torch.float16)
        ref = reference(q, k, v, True, 1)
        exact = kintsugi.compile(path, target="cuda",
                                 shape={"B": 1, "H": 32, "S": 1, "D": D, "T": n})
        for who, kernel in (("exact T", exact), ("dynamic T", dynamic)):
            out = torch.empty_like(q)
            ms, err = timed(lambda: kernel(q, k, v, out=out), out, ref)
            rows.append({"case": "decode_causal", "len": n, "who": who, "ms": ms, "rel_err": err,
                         "kv_gbps": 2 * 32 * n * D * 2 / ms / 1e6 if ms else None})
            print(f"decode_causal    {n:>6} {who:10} {ms and f'{ms:.4f}' or '-':>8} "
                  f"{ms and f'{2 * 32 * n * D * 2 / ms / 1e6:.0f} GB/s' or '-':>9} "
                  f"{err:.1e}", flush=True)
    assert len(dynamic.compiled_sizes) == 1

    # Launch-only: tiny tensors, host time per call.
    dec = kintsugi.compile(os.path.join(ROOT, "examples", "attention", "decode_causal.te"),
                           target="cuda", shape={"B": 1, "H": 2, "S": 1, "T": 64, "D": D})
    q = torch.randn(1, 2, 1, D, device="cuda", dtype=torch.float16)
    k = torch.randn(1, 2, 64, D, device="cuda", dtype=torch.float16)
    v = torch.randn(1, 2, 64, D, device="cuda", dtype=torch.float16)
    o = torch.empty_like(q)
    dec(q, k, v, out=o)
    torch.cuda.synchronize()
    assert rel_err(o, reference(q, k, v, True, 1)) <= TOL
    soft = kintsugi.compile(os.path.join(ROOT, "examples", "norm", "softmax.te"), target="cuda",
                            shape={"M": 4, "N": 32})
    x = torch.randn(4, 32, device="cuda")
    y = torch.empty_like(x)
    soft(x, out=y)
    torch.cuda.synchronize()
    assert torch.allclose(y.double(), torch.softmax(x.double(), 1), rtol=1e-5, atol=1e-6)
    launch = [
        ("decode tiny", "kintsugi out=", host_us(lambda: dec(q, k, v, out=o))),
        ("decode tiny", "kintsugi", host_us(lambda: dec(q, k, v))),
        ("decode tiny", "sdpa", host_us(lambda: F.scaled_dot_product_attention(q, k, v))),
        ("softmax 4x32", "kintsugi out=", host_us(lambda: soft(x, out=y))),
        ("softmax 4x32", "kintsugi", host_us(lambda: soft(x))),
        ("softmax 4x32", "torch", host_us(lambda: torch.softmax(x, 1))),
    ]
    for case, who, us in launch:
        rows.append({"case": case, "who": who, "host_us": us})
        print(f"launch-only {case:14} {who:14} {us:7.2f} us per call", flush=True)
    with open(args.json, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "kintsugi": kintsugi.__commit__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
