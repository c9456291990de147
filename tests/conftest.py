"""Shared fixtures: no test writes the steward's real ledger or private folders; the fast lane
starts no process."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import matplotlib
import pytest

# Figures are drawn off screen, as in the workflow's jobs (the Snakefile sets MPLBACKEND).
matplotlib.use("Agg")

#: `make test-fast` sets this: every unit and property test, in process only.
FAST_LANE = os.environ.get("DPSYNTH_TEST_LANE") == "fast"


@pytest.fixture(autouse=True)
def private_ledger(tmp_path_factory, monkeypatch):
    """Every test (and every dpsynth process it starts) records spending in its own ledger."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.jsonl"
    monkeypatch.setenv("DPSYNTH_LEDGER", str(path))
    return path


@pytest.fixture(autouse=True)
def private_area(tmp_path_factory, monkeypatch):
    """Every test (and every dpsynth process it starts) has its own steward's folder
    ($XDG_DATA_HOME/dpsynth): the private folders of its releases go there, never into the
    real home. Returns the folder that holds the default private folders."""
    data_home = tmp_path_factory.mktemp("data_home")
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    return data_home / "dpsynth" / "private"


@pytest.fixture(autouse=True)
def no_process_in_the_fast_lane(monkeypatch):
    """In the fast lane a test that starts a process fails, naming the marker it lacks."""
    if FAST_LANE:

        def refuse(*args, **kwargs):
            raise AssertionError(
                "this test starts a process: mark it @pytest.mark.process "
                "(or slow) so that `make test-fast` leaves it to `make test`"
            )

        monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.fixture
def private_folder(private_area):
    """``of(out)``: the one private folder of the release in ``out`` at the default place
    (a folder of :func:`private_area` whose name starts with ``out``'s and a dash)."""

    def of(out: Path) -> Path:
        found = [p for p in private_area.iterdir() if p.name.startswith(f"{out.name}-")]
        assert len(found) == 1, f"expected one private folder of {out}, found {found}"
        return found[0]

    return of
