"""pytest configuration for the Python binding tests: the import path of the NumPy references,
and a clear error when the kintsugi module cannot be imported.

Run through ctest (label python), or by hand from the repository root:
    PYTHONPATH=<build>/python /usr/bin/python3 -m pytest tests/python
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The independent float64 NumPy references of the cross-check suite.
sys.path.insert(0, str(ROOT / "tests" / "crosscheck"))

try:
    import kintsugi  # noqa: F401
except ImportError as e:  # pragma: no cover - a setup problem, not a test failure
    raise pytest.UsageError(
        f"cannot import the kintsugi module ({e}); build with -DKINTSUGI_BUILD_PYTHON=ON and put "
        "<build>/python on PYTHONPATH"
    )
