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


def _section(title: str) -> str:
    """The README's text under one '### ' heading (a path), up to the next heading."""
    text = README.read_text()
    start = text.index(f"### {title}")
    end = text.find("\n#", start + 1)
    return text[start : end if end > 0 else None]


def test_readme_is_a_landing_page():
    """At most 1,500 words, and every link into the repository leads to a file."""
    text = README.read_text()
    assert len(text.split()) <= 1500
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links, "the README links into the docs"
    missing = [link for link in links if "://" not in link and not (README.parent / link).exists()]
    assert not missing, missing


@pytest.mark.process
def test_readme_synthesize_walkthrough_runs_as_written(tmp_path, private_area):
    """The steward's path's shell block, run as written (bash, from a copy of the project's
    layout): it writes pa.csv, a release of one set at the epsilon the study of
    docs/release.md endorses in release/ (its private folder in the test's steward area,
    where the command says), under the budget it states, and spends that epsilon in the
    (test's private) ledger, which `dpcounts ledger` then prints; the reviewer's path's
    block (`dpcounts verify release/`) then passes on that release."""
    import os
    import subprocess
    import sys

    section = _section("Steward: study, then release your table")
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the steward's path has one shell example"
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])  # this venv
    (tmp_path / "data").symlink_to(README.parent / "data")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0]], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "pa.csv").exists()
    manifest = json.loads((tmp_path / "release" / "manifest.json").read_text())
    assert (manifest["sets"], manifest["mechanism"]) == (1, "truncated")
    assert manifest["budget"]["epsilon_total"] == pytest.approx(4.2)
    assert manifest["budget"]["epsilon_prior"] == pytest.approx(0.2)
    private = private_area / f"release-{manifest['seed_commitment'][:16]}"
    assert (private / "provenance.json").exists() and f": {private}\n" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [".venv", "data", "pa.csv", "release"]
    ledger = Path(os.environ["DPCOUNTS_LEDGER"]).read_text().splitlines()
    entries = [json.loads(line) for line in ledger]
    budgets = [e for e in entries if e.get("kind") == "budget"]
    spent = [e for e in entries if e.get("kind") != "budget"]
    assert [e["budget"] for e in budgets] == [pytest.approx(5.0)]  # --budget, stored
    assert len(spent) == 1 and spent[0]["epsilon"] == pytest.approx(4.2)
    assert "pa.csv" in result.stdout.split("Privacy budget spent")[1]  # `dpcounts ledger`
    # the reviewer's section, as written, on the release the walk-through made
    (check,) = re.findall(r"```sh\n(.*?)```", _section("Reviewer: reproduce the papers"), re.S)
    verified = subprocess.run(["bash", "-euo", "pipefail", "-c", check], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
    assert verified.returncode == 0, verified.stdout[-3000:]
    assert verified.stdout.splitlines()[-1].startswith("PASSED:")
