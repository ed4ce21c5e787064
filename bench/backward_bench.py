"""Attention's backward pass on the GPU: Kintsugi's dQ and dK/dV kernels against PyTorch's.

Kintsugi runs tests/generality/attention_backward_causal.te (dQ, dK and dV written from
FlashAttention-2's recomputation from the log-sum-exp: two kernels, dQ and dK/dV), verified against
its float64 NumPy reference before it is timed (bench/generality_bench.py's verified_time). The peers are PyTorch's scaled_dot_product_attention
backends (FlashAttention-2 and cuDNN), causal, timed with triton's do_bench as the forward and
backward minus the forward; their gradients are checked against float64 autograd first. The
peers' times include the row sums of dO * O (DL), an input of Kintsugi's kernels.

With --kv-heads HK below H (grouped-query heads), Kintsugi runs
tests/generality/attention_backward_gqa.te (dK and dV one sum over the group and the queries,
compiled as each query head's partial, then their sum over the group) and the peers get K and V
of HK heads with enable_gqa.

  python3 bench/backward_bench.py --kintsugi build-gpu/bin/kintsugi [--sizes B=1,H=16,S=4096,D=128]
      [--kv-heads HK]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generality_bench as gb  # noqa: E402

ROOT = gb.ROOT


def ours(binary, sizes, kv_heads):
    name, sizes = "attention_backward_causal", dict(sizes)
    if kv_heads < int(sizes["H"]):
        name = "attention_backward_gqa"
        sizes.update(HQ=sizes.pop("H"), HK=str(kv_heads))
    path = os.path.join(ROOT, "tests", "generality", name + ".te")
    return {name: gb.verified_time(binary, path, sizes, {}, gb.reference_of(path))}


def peers(sizes, kv_heads):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    b, h, s, d = (int(sizes[k]) for k in ("B", "H", "S", "D"))
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, heads, s, d, device="cuda", dtype=torch.float16, requires_grad=True)
               for heads in (h, kv_heads, kv_heads))
    do = torch.randn(b, h, s, d, device="cuda", dtype=torch.float16)
    gqa = {"enable_gqa": True} if kv_heads < h else {}
    exact = torch.autograd.grad(
        F.scaled_dot_product_attention(*(x.double() for x in (q, k, v)), is_causal=True, **gqa),
        (q, k, v), do.double())
    rows = {}
    for name, backend in (("sdpa-flash", SDPBackend.FLASH_ATTENTION),
                          ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                def fwd():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)

                grads = torch.autograd.grad(fwd(), (q, k, v), do)
                err = max(float(((g.double() - e).abs().max() / e.abs().max()).item())
                          for g, e in zip(grads, exact))
                t_fwd = do_bench(fwd)
                t_both = do_bench(lambda: torch.autograd.grad(fwd(), (q, k, v), do))
            rows[name] = (t_both - t_fwd, err)
        except Exception as e:  # a backend this machine lacks
            print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kintsugi", default=os.path.join(ROOT, "build", "bin", "kintsugi"))
    ap.add_argument("--sizes", default="B=1,H=16,S=4096,D=128")
    ap.add_argument("--kv-heads", type=int, default=0, help="key/value heads (default H)")
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = dict(kv.split("=") for kv in args.sizes.split(","))
    sizes.setdefault("T", sizes["S"])
    kv_heads = args.kv_heads or int(sizes["H"])
    mine = ours(args.kintsugi, sizes, kv_heads)
    theirs = peers(sizes, kv_heads)
    total = sum(ms for ms, _ in mine.values())
    print(f"causal attention backward, {args.sizes}, {kv_heads} key/value heads, f16 "
          "(ms, max rel err)")
    for name, (ms, err) in mine.items():
        print(f"  kintsugi {name}: {ms:.4f}  {err:.2e}")
    for name, (ms, err) in theirs.items():
        print(f"  {name} backward: {ms:.4f}  {err:.2e}  (kintsugi / {name}: {total / ms:.2f})")
    if args.json:
        json.dump(dict(sizes=sizes, kintsugi=mine, peers=theirs), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
