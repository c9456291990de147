"""Shared fixtures: no test writes the steward's real ledger or private folders; the fast lane
starts no process.

Also the helpers several test modules share (``from conftest import ...``): random
truncation bounds, empirical pmfs and their chi-square test, the discrete Laplace's cdf.
"""

from __future__ import annotations

import math
import os
import subprocess
from fractions import Fraction
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from scipy import stats

# Figures are drawn off screen, as in the workflow's jobs (the Snakefile sets MPLBACKEND).
matplotlib.use("Agg")

#: `make test-fast` sets this: the unit and property tests not marked slow, in process only.
FAST_LANE = os.environ.get("DPCOUNTS_TEST_LANE") == "fast"


@pytest.fixture(autouse=True)
def private_ledger(tmp_path_factory, monkeypatch):
    """Every test (and every dpcounts process it starts) records spending in its own ledger."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.jsonl"
    monkeypatch.setenv("DPCOUNTS_LEDGER", str(path))
    return path


@pytest.fixture(autouse=True)
def private_area(tmp_path_factory, monkeypatch):
    """Every test (and every dpcounts process it starts) has its own steward's folder
    ($XDG_DATA_HOME/dpcounts): the private folders of its releases go there, never into the
    real home. Returns the folder that holds the default private folders."""
    data_home = tmp_path_factory.mktemp("data_home")
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    return data_home / "dpcounts" / "private"


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


# --- helpers shared by test modules ---------------------------------------------------------


def random_bounds(rng: np.random.Generator, n_cells: int, total: int):
    """Random truncation bounds (lower, upper) of ``n_cells`` cells under which counts
    summing to ``total`` exist (reset to 0 / ``total`` where the draw left none)."""
    lower = rng.integers(0, total // n_cells + 1, n_cells)
    upper = lower + rng.integers(0, total + 1, n_cells)
    if lower.sum() > total:
        lower[:] = 0
    if np.minimum(upper, total).sum() < total:
        upper[:] = total
    return lower, upper


def empirical(draws: np.ndarray, support: np.ndarray) -> np.ndarray:
    """How many of ``draws`` (rows) equal each row of ``support`` (lexicographically sorted,
    as :func:`dpcounts.sampling.enumeration.compositions` lists them); every draw must be
    in the support."""
    base = support.max() + 1
    place = base ** np.arange(support.shape[1] - 1, -1, -1)  # lexicographic order
    keys, counts = np.unique(draws @ place, return_counts=True)
    position = np.searchsorted(support @ place, keys)
    assert np.array_equal(support[position] @ place, keys), "a draw fell outside the support"
    out = np.zeros(support.shape[0])
    out[position] = counts
    return out


def chi_square_p_value(counts: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square goodness of fit of ``counts`` to ``probs``, the rarest outcomes pooled
    until every pooled cell expects at least 5; no draw may have probability 0."""
    expected = probs * counts.sum()
    assert np.all(counts[probs == 0] == 0), "a draw has probability 0"
    order = np.argsort(expected)
    small = np.cumsum(expected[order]) < 5
    pooled_obs = np.append(counts[order][~small], counts[order][small].sum())
    pooled_exp = np.append(expected[order][~small], expected[order][small].sum())
    if pooled_exp[-1] == 0:
        pooled_obs, pooled_exp = pooled_obs[:-1], pooled_exp[:-1]
    return float(stats.chisquare(pooled_obs, pooled_exp).pvalue)


def discrete_laplace_log_cdf(k, scale) -> np.ndarray:
    """log P(X <= k) of the discrete Laplace of ``scale``, written independently of the
    library: q^|k| / (1 + q) for k < 0, 1 - q^(k+1) / (1 + q) for k >= 0, q = e^(-1/scale)."""
    c = float(1 / Fraction(scale))
    k = np.atleast_1d(np.asarray(k, dtype=float))
    log_1pq = math.log1p(math.exp(-c))
    out = np.empty(k.shape)
    negative = k < 0
    out[negative] = -np.abs(k[negative]) * c - log_1pq
    out[~negative] = np.log1p(-np.exp(-(k[~negative] + 1) * c - log_1pq))
    return out


def run_cli(*args: str) -> tuple[int, str, str]:
    """``dpcounts ARGS`` in this process: (exit code, stdout, stderr); argparse's exits
    (--help, usage errors) are returned as codes."""
    import contextlib
    import io

    from dpcounts.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()
