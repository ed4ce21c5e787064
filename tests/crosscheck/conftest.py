"""pytest configuration for the NumPy cross-check: a summary table of the measured errors."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, kintsugi_binary, kintsugi_target  # noqa: E402


def pytest_report_header(config):
    return f"kintsugi: {kintsugi_binary()}  target: {kintsugi_target()}"


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("NumPy cross-check: measured errors")
    for label, shape, params, report, ok in RESULTS:
        sizes = ",".join(f"{k}={v}" for k, v in shape.items())
        extra = (" " + ",".join(f"{k}={v:g}" for k, v in params.items())) if params else ""
        for line in report:
            # first clause of each output's report: name, dtype and the error against the tolerance
            tr.write_line(f"{'ok  ' if ok else 'FAIL'} {label:<42} {sizes}{extra}: {line.split(';')[0]}")
