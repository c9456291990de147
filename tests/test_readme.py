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


def test_readme_study_walkthrough_passes_every_check_before_any_job(tmp_path):
    """The README's study config is valid and its names exist in the shipped table: a
    dry run of the walk-through's command checks both (the real run is the same stage
    that tests/test_study_workflow.py runs)."""
    import subprocess
    import sys

    block = re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.S)[0]
    config = tmp_path / "my_study.yaml"
    config.write_text(block)
    snakemake = Path(sys.executable).parent / "snakemake"
    result = subprocess.run(
        [str(snakemake), "-n", "--cores", "2", "--configfile", str(config), "--", "studies"],
        cwd=README.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "study_simulate" in result.stdout and "study_maps" in result.stdout
