"""Reading the corpus: the .te files of tests/generality/ and the lines of their headers.

  # SHAPES: - S=77,T=77 ...    the cases: "-" is the file's own sizes; NAME=V overrides a size
                               or a param (the file's `param` lines say which)
  # REQUIRE: fused,tile[,tensor-core]
                               what the compiler must achieve for it (the names of `--require`)
  # GAP: <requirement> <why>   a requirement that does not hold yet: its check is expected to
                               fail (strict: once it passes, the line must go)
"""

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Variant:
    def __init__(self, path):
        self.path = path
        self.name = path.stem
        text = path.read_text()
        self.params = set(re.findall(r"^param\s+(\w+)", text, re.M))
        shapes = re.search(r"^# SHAPES:(.*)$", text, re.M)
        assert shapes, f"{path}: no `# SHAPES:` line"
        self.cases = shapes.group(1).split()
        require = re.search(r"^# REQUIRE:\s*(\S+)", text, re.M)
        assert require, f"{path}: no `# REQUIRE:` line"
        self.require = require.group(1).split(",")
        self.gaps = dict(re.findall(r"^# GAP:\s*(\S+)\s+(.*)$", text, re.M))

    def overrides(self, case):
        """(sizes, params) of one `# SHAPES:` entry."""
        sizes, params = {}, {}
        if case != "-":
            for item in case.split(","):
                name, value = item.split("=")
                (params if name in self.params else sizes)[name] = value
        return sizes, params


def variants():
    return [Variant(p) for p in sorted(HERE.glob("*.te"))]
