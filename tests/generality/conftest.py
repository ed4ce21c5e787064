"""pytest configuration for the generality corpus: the harness of tests/crosscheck is shared."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "crosscheck"))
