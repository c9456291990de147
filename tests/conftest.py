"""Shared fixtures: no test writes the steward's real ledger."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def private_ledger(tmp_path_factory, monkeypatch):
    """Every test (and every dpsynth process it starts) records spending in its own ledger."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.jsonl"
    monkeypatch.setenv("DPSYNTH_LEDGER", str(path))
    return path
