"""environment.yml (the jobs' conda environment) pins exactly what requirements.txt pins."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location(
        "write_environment", ROOT / "tools/write_environment.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_environment_is_written_from_the_lock():
    tool = _tool()
    expected = tool.environment((ROOT / "requirements.txt").read_text())
    assert (ROOT / "environment.yml").read_text() == expected, (
        "environment.yml is stale: run `python tools/write_environment.py`"
    )


def test_environment_pins_every_locked_package_and_python():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    locked = [
        line.split()[0].rstrip("\\")
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    ]
    assert sorted(pip) == sorted(locked) and len(pip) > 50
    assert "python=3.11" in env["dependencies"]
    assert not any(p.startswith("-r") or p.startswith("-e") for p in pip)
