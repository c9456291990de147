"""The README's Python example runs as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has a Python example"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    z, y, cal = namespace["z"], namespace["y"], namespace["cal"]
    assert z.shape == (10, y.size) and np.all(z.sum(axis=1) == y.sum())
    lower, upper = cal.bounds()
    assert np.all(z >= lower) and np.all(z <= upper)
    assert namespace["eps_real"] <= 1.0 + 1e-9


@pytest.mark.process
def test_readme_study_walkthrough_passes_every_check_before_any_job(tmp_path):
    """The README's study config is valid and its names exist in the shipped table: a
    dry run of the walk-through's command, as written, checks both and plans the study's
    jobs and no other study's (the real run is the stage tests/test_study_workflow.py
    runs)."""
    import os
    import subprocess
    import sys

    text = README.read_text()
    block = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)[0]
    (tmp_path / "my_study.yaml").write_text(block)
    command = re.findall(r"```bash\n(\.venv/bin/snakemake .*?my_study\.yaml.*?)\n```", text)[0]
    command = command.replace(".venv/bin/snakemake", "snakemake -n", 1).replace(
        "my_study.yaml", str(tmp_path / "my_study.yaml"))  # fmt: skip
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(["bash", "-c", command], cwd=README.parent, env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "study_simulate" in result.stdout and "study_maps" in result.stdout
    planned = set(re.findall(r"results/studies/(\w+)/", result.stdout))
    assert planned == {"homicides_by_decade"}, planned


def _section(title: str) -> str:
    """The README's text under one '## ' heading, up to the next."""
    text = README.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


@pytest.mark.process
def test_readme_synthesize_walkthrough_runs_as_written(tmp_path, private_area):
    """The analyst section's shell block, run as written (bash, from a copy of the project's
    layout): it writes pa.csv, a release of 10 sets in release/ (its private folder in the
    test's steward area, where the command says) and spends the budget it states in the
    (test's private) ledger, which `dpsynth ledger` then prints; the reviewer's section's
    block (`dpsynth verify release/`) then passes on that release."""
    import os
    import subprocess
    import sys

    section = _section("Synthesizing your own data")
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the analyst section has one shell example"
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])  # this venv
    (tmp_path / "data").symlink_to(README.parent / "data")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0]], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "pa.csv").exists()
    manifest = json.loads((tmp_path / "release" / "manifest.json").read_text())
    assert (manifest["sets"], manifest["mechanism"]) == (10, "truncated")
    assert manifest["budget"]["epsilon_total"] == pytest.approx(1.2)
    private = private_area / f"release-{manifest['seed_commitment'][:16]}"
    assert (private / "provenance.json").exists() and f": {private}\n" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [".venv", "data", "pa.csv", "release"]
    ledger = Path(os.environ["DPSYNTH_LEDGER"]).read_text().splitlines()
    assert len(ledger) == 1 and json.loads(ledger[0])["epsilon"] == pytest.approx(1.2)
    assert "pa.csv" in result.stdout.split("Privacy budget spent")[1]  # `dpsynth ledger`
    # the reviewer's section, as written, on the release the walk-through made
    (check,) = re.findall(r"```sh\n(.*?)```", _section("Check a release as a reviewer"), re.S)
    verified = subprocess.run(["bash", "-euo", "pipefail", "-c", check], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
    assert verified.returncode == 0, verified.stdout[-3000:]
    assert verified.stdout.splitlines()[-1].startswith("PASSED:")
