"""Kintsugi vs the peers on the GPU, verified before timed, in one process.

For each operator and length: draws f16 inputs (bf16 for the _bf16 operators) on the GPU,
computes the fp64 reference from the operator's definition (the .te file's semantics, in torch
float64), runs our kernel through `kintsugi run --target cuda --inputs DIR --reference DIR --bench --json` (our CLI verifies against
that reference, then times with device events), and runs the peers (torch SDPA with the flash and
cuDNN backends for the plain variants, FlexAttention for all) on the same inputs, checking each
output against the same reference before timing it (median of triton.testing.do_bench). Prints a table (TFLOP/s for prefill, K+V GB/s for decode)
and writes the rows as JSON; with --perf FILE it also appends them to FILE (docs/perf.md) as a
markdown section naming the GPU, the commit (KINTSUGI_COMMIT, else git) and the date.

  python3 bench/attention_bench.py --kintsugi build/bin/kintsugi --ops prefill_causal \
      --prefill 1024,4096 --decode 4096 --heads 32 --json $OUT/bench.json

With --build it first builds this tree on the GPU machine (tests/gpu/build_here.sh, from the
packages scripts/gpu_debs.sh fetched into build/debs, carried there) and times that binary.

An A/B of two compilers in one run: --also LABEL=TREE (repeatable) times the Kintsugi of another
source tree as well, on the same inputs, against the same reference, right after ours (with
--build it is built there from TREE by this tree's build_here.sh; else TREE/build/bin/kintsugi).
--peers names the peers to time (default all; "none" for an A/B alone). --also-flags
LABEL=FLAGS (repeatable) times this Kintsugi with more `kintsugi run` options as well, as a column
LABEL: --also-flags sm_80="--arch sm_80" (the mma.sync path the H200 otherwise runs as wgmma),
--also-flags r64="--row-tile 64 --reduce-tile 128".

  git worktree add .ab/change BRANCH      # here; .ab/ is ignored, carried to the GPU machine
  python3 bench/attention_bench.py --build --also change=.ab/change --peers none \
      --ops prefill_global,prefill_causal --prefill 4096,16384 --decode ""
"""
import argparse, json, math, os, subprocess, sys, tempfile, time

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
import triton.testing as tt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D = 128
CAP, WINDOW = 50.0, 4096  # the examples' param defaults (softcap, window)
# name: (query heads, causal, decode, kv-head divisor (GQA group), kind); the example has the
# same name. The head counts are ../shared/bench/peers.py's (grouped-query: 64 query heads, 8
# key/value heads).
OPS = {
    "prefill_global": (32, False, False, 1, "plain"),
    "prefill_causal": (32, True, False, 1, "plain"),
    "prefill_causal_bf16": (32, True, False, 1, "plain"),
    "prefill_alibi": (32, True, False, 1, "alibi"),
    "prefill_gqa": (64, True, False, 8, "plain"),
    "prefill_softcap": (32, True, False, 2, "softcap"),
    "prefill_windowed": (32, True, False, 4, "window"),
    "decode_causal": (32, True, True, 1, "plain"),
    "decode_alibi": (32, True, True, 1, "alibi"),
    "decode_gqa": (64, True, True, 8, "plain"),
    "decode_softcap": (32, True, True, 2, "softcap"),
}


def modify(score, h, qi, kj, kind, slopes):
    """The example's score modification (qi: absolute query positions)."""
    if kind == "alibi":
        return score + slopes[h] * (kj - qi)
    if kind in ("softcap", "window"):
        return CAP * torch.tanh(score / CAP)
    return score


def visible(qi, kj, causal, kind):
    m = kj <= qi if causal else torch.ones_like(kj <= qi)
    return m & (qi - kj < WINDOW) if kind == "window" else m


def reference(q, k, v, causal, group, kind="plain", slopes=None):
    """fp64 attention as the examples define it (rows with no visible key give 0)."""
    q, k, v = (x.double() for x in (q, k, v))
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    S, T = q.shape[2], k.shape[2]
    out = torch.empty_like(q)
    qi = torch.arange(S, device=q.device)[:, None] + (T - S)
    kj = torch.arange(T, device=q.device)[None, :]
    keep = visible(qi, kj, causal, kind)
    slopes64 = slopes.double() if slopes is not None else None
    for h in range(q.shape[1]):  # one head at a time: S x T fp64 scores per head
        s = modify((q[0, h] @ k[0, h].T) / math.sqrt(D), h, qi, kj, kind, slopes64)
        s = s.masked_fill(~keep, float("-inf"))
        m = s.max(dim=1, keepdim=True).values
        e = torch.exp(s - m).nan_to_num(0.0)
        l = e.sum(dim=1, keepdim=True)
        out[0, h] = torch.where(l > 0, (e @ v[0, h]) / l, torch.zeros_like(l))
    return out


def rel_err(out, ref):
    return ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def flops(causal, decode, S, T, heads, kind):
    if kind == "window" and not decode:
        return 2.0 * heads * S * min(S, WINDOW) * D
    f = 4.0 * heads * S * T * D
    return f / 2 if causal and not decode else f


PEERS = ["sdpa-flash", "cudnn", "flex"]


def run_ours(binary, name, shape, inputs, ref, extra=()):
    with tempfile.TemporaryDirectory() as d:
        for key, t in inputs.items():
            # NumPy has no bf16: such inputs go as their bit patterns (uint16), as --inputs reads.
            a = (t.view(torch.int16).cpu().numpy().view(np.uint16) if t.dtype == torch.bfloat16
                 else t.cpu().numpy())
            np.save(os.path.join(d, key + ".npy"), a)
        np.save(os.path.join(d, "O.npy"), ref.cpu().numpy())
        cmd = [binary, "run", os.path.join(ROOT, "examples", "attention", name + ".te"),
               "--target", "cuda", "--inputs", d, "--reference", d, "--bench", "--json",
               "--shape", ",".join(f"{k}={v}" for k, v in shape.items()), *extra]
        p = subprocess.run(cmd, capture_output=True, text=True)
        try:
            r = json.loads(p.stdout[p.stdout.index("{"):])
        except ValueError:
            return None, None, p.stderr.strip()[-300:]
        return (r["time_ms"] if r["verified"] else None), r["max_rel_err"], ""


def run_peer(backend, q, k, v, causal, group, ref):
    def fn():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal and q.shape[2] > 1,
                                                  enable_gqa=group > 1)
    try:
        out = fn()
    except Exception as e:  # the backend does not support this case
        return None, None, type(e).__name__
    err = rel_err(out, ref)
    if err > 1e-2:
        return None, err, "wrong"
    return tt.do_bench(fn, warmup=25, rep=100, return_mode="median"), err, ""


FLEX = None
# One compiled FlexAttention per score modification and shape: the default recompile limit (8)
# is reached within one run of the table, after which torch falls back to an unfused kernel.
torch._dynamo.config.recompile_limit = 256


def run_flex(q, k, v, causal, group, kind, slopes, ref):
    global FLEX
    if FLEX is None:
        FLEX = torch.compile(flex_attention, dynamic=False)
    S, T = q.shape[2], k.shape[2]
    off = T - S

    def score_mod(score, b, h, qi, kj):
        return modify(score, h, qi + off, kj, kind, slopes)

    def mask_mod(b, h, qi, kj):
        return visible(qi + off, kj, causal, kind)

    try:
        bm = create_block_mask(mask_mod, 1, 1, S, T, device="cuda") if causal or kind == "window" else None
        fn = lambda: FLEX(q, k, v, score_mod=score_mod, block_mask=bm, enable_gqa=group > 1,
                          scale=1.0 / math.sqrt(D))
        out = fn()
    except Exception as e:
        return None, None, type(e).__name__
    err = rel_err(out, ref)
    if err > 1e-2:
        return None, err, "wrong"
    return tt.do_bench(fn, warmup=25, rep=100, return_mode="median"), err, ""


def main():
    global D
    a = argparse.ArgumentParser()
    a.add_argument("--kintsugi", default=os.path.join(ROOT, "build", "bin", "kintsugi"))
    a.add_argument("--build", action="store_true",
                   help="build this tree here first (tests/gpu/build_here.sh, from the Debian "
                        "packages scripts/gpu_debs.sh put in build/debs) and time that binary")
    a.add_argument("--ops", default=",".join(OPS))
    a.add_argument("--prefill", default="1024,4096,16384")
    a.add_argument("--decode", default="4096,32768,131072")
    a.add_argument("--heads", type=int, default=None,
                   help="query heads of every operator (default: each operator's, as peers.py)")
    a.add_argument("--head-dim", type=int, default=128,
                   help="the head size D of queries, keys and values (default 128)")
    a.add_argument("--chunk-tiles", default="auto",
                   help="decode: split-K chunks of this many key tiles, or auto (kintsugi --chunk-tiles)")
    a.add_argument("--also", action="append", default=[], metavar="LABEL=TREE",
                   help="also time the kintsugi of source tree TREE as LABEL (built there with "
                        "--build, else TREE/build/bin/kintsugi): an A/B in one run")
    a.add_argument("--also-flags", action="append", default=[], metavar="LABEL=FLAGS",
                   help="also time this kintsugi with FLAGS (kintsugi run options) as LABEL")
    a.add_argument("--peers", default=",".join(PEERS),
                   help="the peers to time, of " + ",".join(PEERS) + " (none: no peer)")
    a.add_argument("--json", default="bench.json")
    a.add_argument("--perf", metavar="FILE",
                   help="also append the table as a markdown section (GPU, commit, date) to FILE, "
                        "e.g. docs/perf.md")
    args = a.parse_args()
    D = args.head_dim
    variants = []  # (label, binary, extra arguments)
    for spec in args.also:
        label, sep, tree = spec.partition("=")
        if not sep or not label or not os.path.isdir(tree):
            a.error(f"--also {spec}: expected LABEL=TREE, TREE a Kintsugi source tree")
        if label in PEERS or label == "kintsugi":
            a.error(f"--also {spec}: the label {label} names a column already: choose another")
        variants.append((label, os.path.join(os.path.abspath(tree), "build", "bin", "kintsugi"),
                         []))
    peers = [] if args.peers == "none" else args.peers.split(",")
    if any(p not in PEERS for p in peers):
        a.error(f"--peers {args.peers}: expected a list of " + ",".join(PEERS) + ", or none")
    if args.build:
        build_here = os.path.join(ROOT, "tests", "gpu", "build_here.sh")
        subprocess.run(["bash", build_here], check=True)
        args.kintsugi = os.path.join(ROOT, "build-gpu", "bin", "kintsugi")
        for i, (label, binary, _) in enumerate(variants):
            tree = os.path.dirname(os.path.dirname(os.path.dirname(binary)))
            env = {k: v for k, v in os.environ.items() if k != "KINTSUGI_COMMIT"}
            subprocess.run(["bash", build_here, os.path.join(tree, "build-gpu"), tree], check=True,
                           env=env)
            variants[i] = (label, os.path.join(tree, "build-gpu", "bin", "kintsugi"), [])
    for spec in args.also_flags:
        label, sep, flags = spec.partition("=")
        if not sep or not label or label in PEERS or label == "kintsugi":
            a.error(f"--also-flags {spec}: expected LABEL=FLAGS, LABEL not a column already")
        variants.append((label, args.kintsugi, flags.split()))
    torch.manual_seed(0)
    rows = []
    print(f"{'operator':16} {'len':>7} {'who':10} {'ms':>10} {'TFLOP/s':>9} {'GB/s':>8} {'rel err':>9}")
    for name in args.ops.split(","):
        heads, causal, decode, group, kind = OPS[name]
        dtype = torch.bfloat16 if name.endswith("_bf16") else torch.float16
        for n in (int(x) for x in (args.decode if decode else args.prefill).split(",")):
            hq = args.heads or heads
            hk = hq // group
            S, T = (1 if decode else n), n
            q = torch.randn(1, hq, S, D, device="cuda", dtype=dtype)
            k = torch.randn(1, hk, T, D, device="cuda", dtype=dtype)
            v = torch.randn(1, hk, T, D, device="cuda", dtype=dtype)
            slopes = torch.tensor([2 ** (-8 * (h + 1) / hq) for h in range(hq)], device="cuda",
                                  dtype=torch.float32)
            ref = reference(q, k, v, causal, group, kind, slopes)
            shape = {"B": 1, "S": S, "T": T, "D": D}
            shape.update({"HQ": hq, "HK": hk} if group > 1 else {"H": hq})
            inputs = {"Q": q, "K": k, "V": v}
            if kind == "alibi":
                inputs["slopes"] = slopes
            extra = ["--chunk-tiles", args.chunk_tiles] if decode else []
            results = [("kintsugi",) + run_ours(args.kintsugi, name, shape, inputs, ref, extra)]
            for label, binary, own in variants:
                results.append((label,) + run_ours(binary, name, shape, inputs, ref, extra + own))
            if kind == "plain":  # SDPA has no score modifications
                for label, backend in (("sdpa-flash", SDPBackend.FLASH_ATTENTION),
                                       ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                    if label in peers:
                        results.append((label,) + run_peer(backend, q, k, v, causal, group, ref))
            if "flex" in peers:
                results.append(("flex",) + run_flex(q, k, v, causal, group, kind, slopes, ref))
            fl = flops(causal, decode, S, T, hq, kind)
            kv_bytes = 2 * hk * T * D * 2
            for who, ms, err, note in results:
                row = {"op": name, "len": n, "who": who, "ms": ms, "rel_err": err, "note": note,
                       "tflops": fl / ms / 1e9 if ms else None,
                       "kv_gbps": kv_bytes / ms / 1e6 if ms else None}
                rows.append(row)
                cells = [f"{ms:.3f}" if ms else (note or "-"),
                         f"{row['tflops']:.1f}" if ms else "-",
                         f"{row['kv_gbps']:.0f}" if ms else "-",
                         f"{err:.1e}" if err is not None else "-"]
                print(f"{name:16} {n:>7} {who:10} {cells[0]:>10} {cells[1]:>9} {cells[2]:>8} "
                      f"{cells[3]:>9}", flush=True)
    with open(args.json, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    if args.perf:
        with open(args.perf, "a") as f:
            f.write(markdown(rows, args, [label for label, _, _ in variants], peers))


def markdown(rows, args, variants, peers):
    """The rows as a markdown section: ours and each --also variant against each peer, the ratio
    of ours to the best peer, and of each variant to ours."""
    commit = os.environ.get("KINTSUGI_COMMIT", "")  # a copy of the tree may have no .git
    if not commit:
        try:
            commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = "unknown"
    heads_text = (str(args.heads) if args.heads else
                  "32 (grouped-query: 64 over 8 key/value heads; softcap: 32 over 16; windowed: 32 over 8)")
    out = [f"\n## bench/attention_bench.py, {torch.cuda.get_device_name()}, commit {commit}, "
           f"{time.strftime('%Y-%m-%d')}\n",
           f"\nf16 (bf16: the _bf16 operators), B=1, D={D}, query heads {heads_text}; "
           "TFLOP/s for prefill, GB/s of K+V for "
           "decode; every output checked against a float64 reference before it was timed.\n\n",
           "| operator | length | Kintsugi | " + "".join(f"{v} | " for v in variants) +
           "".join(f"{p} | " for p in peers) + "Kintsugi / best peer |" +
           "".join(f" {v} / Kintsugi |" for v in variants) + "\n",
           "|---" * (2 * len(variants) + len(peers) + 4) + "|\n"]
    for (op, n) in dict.fromkeys((r["op"], r["len"]) for r in rows):
        unit = "kv_gbps" if OPS[op][2] else "tflops"
        got = {r["who"]: r[unit] for r in rows if r["op"] == op and r["len"] == n}
        fmt = lambda v: "-" if v is None else (f"{v:.0f}" if unit == "kv_gbps" else f"{v:.1f}")
        best = max((got[p] for p in peers if got.get(p)), default=None)
        ours = got.get("kintsugi")
        ratio = lambda x, y, digits: f"{x / y:.{digits}f}" if x and y else "-"
        out.append(f"| {op} | {n} | {fmt(ours)} | " +
                   "".join(f"{fmt(got.get(v))} | " for v in variants) +
                   "".join(f"{fmt(got.get(p))} | " for p in peers) + f"{ratio(ours, best, 2)} |" +
                   "".join(f" {ratio(got.get(v), ours, 3)} |" for v in variants) + "\n")
    return "".join(out)


if __name__ == "__main__":
    main()
