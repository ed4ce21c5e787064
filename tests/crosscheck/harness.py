"""Running `kintsugi run --save-io`, loading what it wrote, and comparing with a reference."""

import json
import os
import subprocess
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
EXAMPLES = REPO_ROOT / "examples"

# Tolerances of the comparison: max |out - ref| / max |ref| over the finite reference values.
# fp8: one unit in the last place of the largest value (a rounding boundary the kernel's f32
# computation crossed).
FLOAT_TOL = {"f16": 1e-2, "bf16": 8e-2, "f32": 1e-4, "f8e4m3": 0.125, "f8e5m2": 0.25}
INT_TOL = 1  # integer outputs: a rounding tie may fall either way

# (label, shape, params, [per-output report], ok) of every example case run by this pytest run,
# printed as a table at the end (conftest.py).
RESULTS = []


def kintsugi_binary():
    """$KINTSUGI, else build/bin/kintsugi under the repository root."""
    path = Path(os.environ.get("KINTSUGI") or REPO_ROOT / "build" / "bin" / "kintsugi")
    return path.resolve()


def kintsugi_target():
    return os.environ.get("KINTSUGI_TARGET") or "cpu"


def case_seed(name):
    """A stable per-case seed, so that different cases draw different inputs."""
    return zlib.crc32(name.encode()) % 100000 + 1


def run_kintsugi(te_file, out_dir, *, shape=None, params=None, seed=1, extra=(), check=True):
    """Runs `kintsugi run` with --save-io out_dir; returns the CompletedProcess."""
    cmd = [str(kintsugi_binary()), "run", str(te_file), "--target", kintsugi_target(),
           "--save-io", str(out_dir), "--seed", str(seed)]
    if shape:
        cmd += ["--shape", ",".join(f"{k}={v}" for k, v in shape.items())]
    if params:
        cmd += ["--param", ",".join(f"{k}={v}" for k, v in params.items())]
    cmd += list(extra)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"kintsugi exited with {proc.returncode}\n  command: {' '.join(cmd)}\n"
            f"  stdout: {proc.stdout.strip()}\n  stderr: {proc.stderr.strip()}")
    proc.cmd = " ".join(cmd)
    return proc


def fp8_values(bits, exponent_bits):
    """Decodes raw fp8 bit patterns (OCP E4M3FN with 4 exponent bits, E5M2 with 5) to float64."""
    bits = bits.astype(np.int64)
    mant_bits = 7 - exponent_bits
    bias = (1 << (exponent_bits - 1)) - 1
    e = (bits >> mant_bits) & ((1 << exponent_bits) - 1)
    m = bits & ((1 << mant_bits) - 1)
    value = np.where(e == 0, m * 2.0 ** (1 - bias - mant_bits),
                     (m + 2 ** mant_bits) * 2.0 ** (e - bias - mant_bits))
    top = e == (1 << exponent_bits) - 1
    if exponent_bits == 4:  # E4M3FN: no infinities, NaN only at S.1111.111
        value = np.where(top & (m == 7), np.nan, value)
    else:
        value = np.where(top, np.where(m == 0, np.inf, np.nan), value)
    return np.where(bits & 0x80, -value, value)


def load_array(directory, entry):
    """Loads one manifest entry as float64 (floats) or int64 (integers), checking dtype and shape."""
    arr = np.load(Path(directory) / entry["file"], allow_pickle=False)
    assert arr.dtype.str == entry["npy_descr"], (
        f"{entry['file']}: npy dtype {arr.dtype.str}, manifest says {entry['npy_descr']}")
    assert list(arr.shape) == list(entry["shape"]), (
        f"{entry['file']}: shape {arr.shape}, manifest says {entry['shape']}")
    dtype = entry["dtype"]
    if dtype == "bf16":  # raw 16-bit patterns: value = bits << 16 as f32
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype in ("f16", "f32"):
        return arr.astype(np.float64)
    if dtype in ("f8e4m3", "f8e5m2"):  # raw 8-bit patterns
        return fp8_values(arr, 4 if dtype == "f8e4m3" else 5)
    if dtype in ("i8", "i32"):
        return arr.astype(np.int64)
    raise AssertionError(f"{entry['file']}: unknown dtype {dtype}")


def load_run(directory):
    """Returns (manifest, inputs, outputs) for a --save-io directory."""
    directory = Path(directory)
    with open(directory / "manifest.json") as f:
        manifest = json.load(f)
    inputs = {e["name"]: load_array(directory, e) for e in manifest["inputs"]}
    outputs = {e["name"]: load_array(directory, e) for e in manifest["outputs"]}
    return manifest, inputs, outputs


def compare(name, dtype, out, ref):
    """Compares one output with its reference; returns (ok, message)."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        return False, f"{name}: output shape {out.shape} but the reference has shape {ref.shape}"
    special_out = ~np.isfinite(out)
    special_ref = ~np.isfinite(ref)
    same_special = np.array_equal(special_out, special_ref) and np.array_equal(
        np.where(special_ref, np.nan_to_num(np.sign(ref), nan=2.0), 0),
        np.where(special_out, np.nan_to_num(np.sign(out), nan=2.0), 0))
    finite = ~special_out & ~special_ref
    with np.errstate(invalid="ignore"):  # -inf - -inf where both are special: not compared
        err = np.where(finite, np.abs(out - ref), 0.0)
    scale = np.abs(ref[np.isfinite(ref)]).max(initial=0.0)
    max_abs = err.max(initial=0.0)
    worst = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else ()
    if dtype in FLOAT_TOL:
        tol = FLOAT_TOL[dtype]
        rel = max_abs / scale if scale > 0 else max_abs
        ok = same_special and rel <= tol
        bad = int(np.count_nonzero(err > tol * scale)) if scale > 0 else int(np.count_nonzero(err > tol))
        msg = (f"{name} ({dtype}): max|out-ref|/max|ref| = {rel:.3e} (tolerance {tol:g}); "
               f"max abs error {max_abs:.4g} at index {tuple(int(i) for i in worst)} "
               f"(out {out[worst] if err.size else 'n/a'}, ref {ref[worst] if err.size else 'n/a'}); "
               f"max|ref| = {scale:.4g}; {bad} of {err.size} elements beyond tolerance")
    else:
        ok = same_special and max_abs <= INT_TOL
        bad = int(np.count_nonzero(err > INT_TOL))
        msg = (f"{name} ({dtype}): max |out-ref| = {max_abs:g} (allowed {INT_TOL}); at index "
               f"{tuple(int(i) for i in worst)} (out {out[worst] if err.size else 'n/a'}, "
               f"ref {ref[worst] if err.size else 'n/a'}); {bad} of {err.size} elements differ by more")
    if not same_special:
        msg += (f"; NaN/Inf positions differ: {int(special_out.sum())} in the output, "
                f"{int(special_ref.sum())} in the reference")
    return ok, msg
