"""The README's Python example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has a Python example"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)  # noqa: S102
    z, y, cal = namespace["z"], namespace["y"], namespace["cal"]
    assert z.shape == (10, y.size) and np.all(z.sum(axis=1) == y.sum())
    lower, upper = cal.bounds()
    assert np.all(z >= lower) and np.all(z <= upper)
    assert namespace["eps_real"] <= 1.0 + 1e-9
