"""Shared fixtures: no test writes the steward's real ledger; the fast lane starts no process."""

from __future__ import annotations

import os
import subprocess

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
def no_process_in_the_fast_lane(monkeypatch):
    """In the fast lane a test that starts a process fails, naming the marker it lacks."""
    if FAST_LANE:

        def refuse(*args, **kwargs):
            raise AssertionError(
                "this test starts a process: mark it @pytest.mark.process "
                "(or slow) so that `make test-fast` leaves it to `make test`"
            )

        monkeypatch.setattr(subprocess, "Popen", refuse)
