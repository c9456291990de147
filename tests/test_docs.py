"""The docs site (`make docs`): it builds strictly, so a broken link, anchor or included file
fails `make test`; its examples run as written; and the numbers it quotes come from the
files a benchmark writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


@pytest.mark.process
def test_docs_build_strictly(tmp_path):
    """`mkdocs build --strict` (what `make docs` runs) into a temporary folder: any warning,
    a link to a missing page or anchor, or a missing included file, fails it."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").exists()
    # the included pages hold their sources' text
    assert "studies" in (tmp_path / "site" / "configuration.html").read_text()
    assert "Added" in (tmp_path / "site" / "changelog.html").read_text()


def test_every_page_is_in_the_navigation():
    """A page that is not in mkdocs.yml's nav is built but unreachable."""
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert [p for p in pages if f": {p}" not in nav] == []


def test_mechanisms_page_python_example_runs():
    text = (DOCS / "mechanisms.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)[:1]
    namespace: dict = {}
    exec(compile(block, "docs/mechanisms.md", "exec"), namespace)
    z, y, cal = namespace["z"], namespace["y"], namespace["cal"]
    assert z.shape == (10, y.size) and np.all(z.sum(axis=1) == y.sum())
    lower, upper = cal.bounds()
    assert np.all(z >= lower) and np.all(z <= upper)
    assert namespace["eps_real"] <= 1.0 + 1e-9


def test_audit_table_is_the_benchmark_file():
    """The audit's ratios on the mechanisms page are those `benchmarks/audit_sweep.py
    --write` stored, to the digits shown."""
    stored = json.loads((REPO / "src/dpcounts/privacy/audited_ratios.json").read_text())
    text = (DOCS / "mechanisms.md").read_text()
    shown = dict(re.findall(r"^\| (\w+ / \w+) \| ([0-9.]+) \|$", text, flags=re.M))
    assert shown, "the mechanisms page has the audit table"
    expected = {key.replace("/", " / "): f"{ratio:.3f}" for key, ratio in stored["ratios"].items()}
    assert shown == expected


@pytest.mark.process
def test_study_walkthrough_passes_every_check_before_any_job(tmp_path):
    """The walk-through's study config (docs/your-study.md) is valid and its names exist in
    the shipped table: a dry run of its command, as written, checks both and plans the
    study's jobs and no other study's (the real run is the stage
    tests/test_study_workflow.py runs)."""
    text = (DOCS / "your-study.md").read_text()
    block = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)[0]
    (tmp_path / "my_study.yaml").write_text(block)
    command = re.findall(r"```bash\n(\.venv/bin/snakemake .*?my_study\.yaml.*?)\n```", text)[0]
    command = command.replace(".venv/bin/snakemake", "snakemake -n", 1).replace(
        "my_study.yaml", str(tmp_path / "my_study.yaml"))  # fmt: skip
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(["bash", "-c", command], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "study_simulate" in result.stdout and "study_maps" in result.stdout
    planned = set(re.findall(r"results/studies/(\w+)/", result.stdout))
    assert planned == {"homicides_by_decade"}, planned


@pytest.mark.process
def test_release_study_is_valid(tmp_path):
    """The study behind the release example (docs/release.md) passes every check: a dry
    run plans its guide."""
    text = (DOCS / "release.md").read_text()
    block = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)[0]
    (tmp_path / "pa_release.yaml").write_text(block)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        ["snakemake", "-n", "--forceall", "--cores", "2",
         "--configfile", str(tmp_path / "pa_release.yaml"),
         "--", "results/studies/pa_release/guide.csv"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "study_summary" in result.stdout


def test_release_example_is_the_readme_one():
    """The release page's worked example is the command the README's steward runs (and
    tests/test_readme.py runs as written)."""
    readme = (REPO / "README.md").read_text()
    page = (DOCS / "release.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
    (example,) = [block for block in blocks if "dpcounts synthesize" in block]
    assert example in re.findall(r"```sh\n(.*?)```", page, flags=re.S)
