"""The generality corpus against its nearest examples on the GPU: the 1.25x rule.

For every tests/generality/*.te with a `# BENCH: EXAMPLE SIZES [PARAMS]` line, runs the variant
and the example (examples/EXAMPLE.te) at SIZES (each program takes the sizes it has; PARAMS go to
the variant only, chosen so that both do the same work; an example is timed once a run for each
set of sizes), each verified before it is timed:
`kintsugi run --save-io` draws the inputs, the independent float64 NumPy reference
(tests/generality/references.py for the variant, tests/crosscheck/references.py for the example)
is computed from them, and `kintsugi run --inputs --reference --bench --json` checks the kernel
against it and times it. Prints variant ms, example ms and their ratio; --json writes the rows,
--perf FILE appends a markdown section (GPU, commit, date) to FILE.

  python3 bench/generality_bench.py --kintsugi build-gpu/bin/kintsugi [--only a,b] [--part I/N]
      [--sizes NAME=V,...] [--json F] [--perf FILE]

--program PATH --sizes NAME=V,... times one program the same way (an example, checked against
tests/crosscheck/references.py, or a corpus entry) and prints one JSON line: its ms, its largest
relative error and the warnings it printed. Verifying against NumPy takes seconds where the exact
interpreter of `--bench` alone takes minutes (a row reduction at 32768 x 8192), so that
tests/gpu/rows_check.sh can verify every size of its grid in one sitting. --target picks the
back end (cuda; cpu to try it without a GPU).
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "crosscheck"))
from harness import load_run  # noqa: E402


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


corpus_refs = load_module("corpus_refs", os.path.join(ROOT, "tests", "generality", "references.py"))
example_refs = load_module("example_refs",
                           os.path.join(ROOT, "tests", "crosscheck", "references.py"))


def dims_of(path):
    """The dims a program names: every capitalised name in its input shapes."""
    text = open(path).read()
    shapes = re.findall(r"^input \w+: \w+\[([^\]]*)\]", text, re.M)
    return {d for s in shapes for d in re.findall(r"\b[A-Z]\w*\b", s)}


def run(cmd, warnings=None):
    """The command's output; its lines that start with 'warning' appended to `warnings`."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    if warnings is not None:
        warnings += [w for w in proc.stderr.splitlines() if w.startswith("warning")]
    return proc.stdout


def verified_time(binary, path, sizes, params, reference, target="cuda", warnings=None):
    """(ms, max rel err) of one program: inputs drawn, reference computed, verified and timed."""
    shape = ",".join(f"{k}={v}" for k, v in sizes.items() if k in dims_of(path))
    extra = ["--param", ",".join(f"{k}={v}" for k, v in params.items())] if params else []
    with tempfile.TemporaryDirectory() as io, tempfile.TemporaryDirectory() as ref_dir:
        run([binary, "run", path, "--target", target, "--shape", shape, "--save-io", io, "--force",
             "--seed", "7"] + extra)
        manifest, inputs, _ = load_run(io)
        for name, value in reference(manifest, inputs).items():
            np.save(os.path.join(ref_dir, name + ".npy"), np.asarray(value, dtype=np.float64))
        out = json.loads(run([binary, "run", path, "--target", target, "--shape", shape,
                              "--inputs", io, "--reference", ref_dir, "--bench", "--json"] + extra,
                             warnings))
    if not out.get("verified"):
        raise RuntimeError(f"{path} at {shape}: not verified: {out}")
    return out["time_ms"], out["max_rel_err"]


def reference_of(path):
    """The float64 NumPy reference of a corpus entry or an example, as verified_time takes it."""
    name = os.path.basename(path)[:-3]
    if os.path.dirname(os.path.abspath(path)) == os.path.join(ROOT, "tests", "generality"):
        ref = getattr(corpus_refs, name)
        return lambda m, x: ref(x, {k: float(v) for k, v in m["params"].items()})
    return example_refs.reference


def time_program(binary, path, sizes, target):
    """One program at `sizes`, verified against its NumPy reference and timed: a JSON line."""
    warnings = []
    ms, err = verified_time(binary, path, sizes, {}, reference_of(path), target, warnings)
    print(json.dumps(dict(program=path, sizes=sizes, ms=ms, err=err, warnings=warnings)),
          flush=True)


def bench_rows(binary, only, part, overrides=None):
    corpus = os.path.join(ROOT, "tests", "generality")
    examples = {}  # (example, sizes) -> (ms, max rel err): each example is timed once a run
    index, parts = part
    benched = 0
    for f in sorted(os.listdir(corpus)):
        name = f[:-3]
        if not f.endswith(".te") or (only and name not in only):
            continue
        path = os.path.join(corpus, f)
        bench = re.search(r"^# BENCH: (\S+) (\S+)(?: (\S+))?$", open(path).read(), re.M)
        if not bench:
            continue
        benched += 1
        if (benched - 1) % parts != index:
            continue
        example, size_text, param_text = bench.groups()
        sizes = dict(kv.split("=") for kv in size_text.split(","))
        if overrides:
            sizes.update(overrides)
            size_text = ",".join(f"{k}={v}" for k, v in sizes.items())
        params = dict(kv.split("=") for kv in param_text.split(",")) if param_text else {}
        row = dict(variant=name, example=example, sizes=size_text, params=param_text or "")
        try:
            ours, err = verified_time(binary, path, sizes, params, reference_of(path))
            if (example, size_text) not in examples:
                example_path = os.path.join(ROOT, "examples", example + ".te")
                examples[example, size_text] = verified_time(binary, example_path, sizes, {},
                                                             reference_of(example_path))
            base, base_err = examples[example, size_text]
            row.update(ms=ours, example_ms=base, ratio=ours / base, err=err, example_err=base_err)
        except Exception as e:  # a failure is a row too: reported, never timed
            row["error"] = str(e)[-800:]
        print(json.dumps(row), flush=True)
        yield row


def append_perf(path, rows):
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    commit = os.environ.get("KINTSUGI_COMMIT") or subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
        text=True).stdout.strip()
    with open(path, "a") as out:
        out.write(f"\n### Generality corpus vs nearest example ({gpu[0] if gpu else 'GPU'}, "
                  f"commit {commit}, {time.strftime('%Y-%m-%d')})\n\n"
                  "Both verified against independent float64 NumPy references before timing "
                  "(bench/generality_bench.py).\n\n"
                  "| variant | example | sizes | variant params | variant ms | example ms | ratio |\n"
                  "|---|---|---|---|---|---|---|\n")
        for r in rows:
            if "error" in r:
                out.write(f"| {r['variant']} | {r['example']} | {r['sizes']} | {r['params']} | "
                          f"failed: {r['error'].strip().splitlines()[-1][:120]} | | |\n")
            else:
                out.write(f"| {r['variant']} | {r['example']} | {r['sizes']} | {r['params']} | "
                          f"{r['ms']:.3f} | {r['example_ms']:.3f} | {r['ratio']:.2f} |\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kintsugi", default=os.path.join(ROOT, "build", "bin", "kintsugi"))
    ap.add_argument("--only", default="", help="comma-separated variant names")
    ap.add_argument("--part", default="0/1",
                    help="I/N: every N-th BENCH line from the I-th (to split a run in parts)")
    ap.add_argument("--sizes", default="",
                    help="NAME=V,...: sizes that replace the BENCH lines' (each program takes the "
                         "ones it has), e.g. a batch of decoding steps")
    ap.add_argument("--json")
    ap.add_argument("--perf")
    ap.add_argument("--program", help="one program to time at --sizes (a JSON line)")
    ap.add_argument("--target", default="cuda", help="with --program: cuda or cpu")
    args = ap.parse_args()
    index, parts = (int(x) for x in args.part.split("/"))
    overrides = dict(kv.split("=") for kv in args.sizes.split(",")) if args.sizes else None
    if args.program:
        time_program(args.kintsugi, args.program, overrides or {}, args.target)
        return
    rows = list(bench_rows(args.kintsugi, set(filter(None, args.only.split(","))), (index, parts),
                           overrides))
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    if args.perf:
        append_perf(args.perf, rows)


if __name__ == "__main__":
    main()
