"""Every program of the generality corpus (tests/generality/*.te, README.md there), as a user
runs it: it must verify on the CPU against the exact interpreter with no warning (but those of
the fallbacks its GAP lines record), match its
independent float64 NumPy reference (references.py), and reach what its `# REQUIRE:` line asks:
fused (no fusion abandoned, and no intermediate materialised over
a pair of dims that no input or output spans together, such as an S x T score matrix), tile (the CPU kernel in tile form), tensor-core (every dot of the sm_90a
CUDA source runs on mma, as `--require tensor-core` checks). A `# GAP:` line expects one requirement to fail, strictly.
"""

import json
import re
import subprocess

import pytest

import references
from corpus import variants
from harness import case_seed, compare, kintsugi_binary, load_run, run_kintsugi

VARIANTS = variants()


def _param_value(manifest, name):
    return float(manifest["params"][name])


@pytest.mark.parametrize("variant,case", [pytest.param(v, c, id=f"{v.name}[{c}]")
                                          for v in VARIANTS for c in v.cases])
def test_matches_reference(variant, case, tmp_path):
    sizes, params = variant.overrides(case)
    proc = run_kintsugi(variant.path, tmp_path, shape=sizes, params=params,
                        seed=case_seed(variant.name + case), extra=["--verify", "--json"])
    report = json.loads(proc.stdout)
    assert report["verified"], f"{proc.cmd}: {report}"
    unexpected = [w for w in report["warnings"] if not _known_gap(variant, w)] + [
        line for line in proc.stderr.splitlines()
        if "warning" in line and not _known_gap(variant, line.partition("warning: ")[2])]
    assert not unexpected, f"{proc.cmd} warns: {unexpected}"
    manifest, inputs, outputs = load_run(tmp_path)
    ref = getattr(references, variant.name)(
        inputs, {k: _param_value(manifest, k) for k in manifest["params"]})
    types = {e["name"]: e["dtype"] for e in manifest["outputs"]}
    failures = []
    for name, out in outputs.items():
        ok, msg = compare(name, types[name], out, ref[name])
        if not ok:
            failures.append(msg)
    assert not failures, f"{proc.cmd}\n" + "\n".join(failures)


def _known_gap(variant, warning):
    """Whether a warning is the fallback a GAP line of the variant records (fused: fusion
    abandoned or a chain left unfused; tile: scalar loop code)."""
    if "fused" in variant.gaps and ("fusion abandoned" in warning or "not fused" in warning):
        return True
    return "tile" in variant.gaps and warning.startswith("scalar loop code")


def _materialised(variant):
    """Intermediate buffers of the scheduled loop program, accessed in global memory, whose dims
    no single input or output spans (the S x T matrix of unfused attention). Split-K partials
    (NAME.rf, one value a chunk and row) and a group's members' partials (NAME.grp, one a member
    of the group a reduction sums over) are part of a fused schedule; a dim N / G (a value a
    group of G columns) counts as its N."""
    proc = subprocess.run([str(kintsugi_binary()), "lower", str(variant.path), "--print",
                           "scheduled", "--whole-row-bytes", "0"], capture_output=True, text=True,
                          timeout=600, check=True)
    head, _, body = proc.stdout.partition("body:")

    def dims(text):
        return {d.split(" / ")[0].strip() for d in text.split(",")}

    spans = [dims(d) for d in re.findall(r"^\s+(?:input|output) \S+: \w+\[([^\]]*)\]", head,
                                         re.M)]
    return [f"{name}[{shape}]"
            for name, shape in re.findall(r"^\s+buffer (\S+): \w+\[([^\]]*)\] global", head, re.M)
            if not name.endswith((".rf", ".grp")) and re.search(r"(?<![\w.])" + re.escape(name) + r"\[", body)
            and not any(dims(shape) <= s for s in spans)]


def _requirement_holds(variant, requirement):
    """(holds, why not) for one requirement at the file's own sizes."""
    binary = str(kintsugi_binary())
    if requirement == "tensor-core":
        # Every dot of every kernel, not one of them: --require fails on any dot that the
        # element-cyclic writer computes.
        proc = subprocess.run([binary, "lower", str(variant.path), "--target", "cuda",
                               "--require", "tensor-core", "--print", "source"],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            return False, f"lower --target cuda --require tensor-core fails: {proc.stderr.strip()}"
        return "mma_" in proc.stdout, "the CUDA source has no mma"
    # Rows are streamed (--whole-row-bytes 0): a row reduction computed whole has nothing to fuse
    # at the file's short rows, and `fused` asks for the fusion that long rows need.
    proc = subprocess.run([binary, "run", str(variant.path), "--json", "--whole-row-bytes", "0"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return False, f"run fails: {proc.stderr.strip()}"
    report = json.loads(proc.stdout)
    if requirement == "fused":
        abandoned = [n for n in report["schedule_notes"] + report["warnings"] if "abandoned" in n]
        return not abandoned and not _materialised(variant), "; ".join(
            abandoned + [f"{b} is materialised" for b in _materialised(variant)])
    if requirement == "tile":
        return report["form"] == "tile", f"the CPU kernel is in {report['form']} form"
    raise AssertionError(f"{variant.path}: unknown requirement {requirement!r}")


@pytest.mark.parametrize("variant,requirement", [
    pytest.param(v, r, id=f"{v.name}[{r}]",
                 marks=[pytest.mark.xfail(strict=True, reason=v.gaps[r])] if r in v.gaps else [])
    for v in VARIANTS for r in v.require])
def test_requirement(variant, requirement):
    holds, why = _requirement_holds(variant, requirement)
    assert holds, f"{variant.path.name}: {requirement} does not hold: {why}"


def test_every_gap_names_a_requirement():
    for v in VARIANTS:
        for gap in v.gaps:
            # `emulator` is checked by tests/emu/emu_test.cpp (Emulator.GeneralityCorpus)
            assert gap in v.require or gap == "emulator", (
                f"{v.path.name}: GAP {gap} is not in its REQUIRE line")


def test_every_program_has_a_reference():
    missing = [v.name for v in VARIANTS if not hasattr(references, v.name)]
    assert not missing, f"no reference in references.py for: {missing}"
