"""The public cost forecast against a real release (issue #36 item 2): at 100k strata of
the national table, on the default path (the input's public prior-rate column, its
count-fit check, default limits), ``dpcounts synthesize`` in a process of its own for 1, 10
and 100 sets (``benchmarks/measure.py``: not forked from the test process, whose peak Linux
would carry into it). Its peak resident memory must lie within 25% of the forecast's bytes.
The time forecast is not tested here (a test that depends on timing is a bug): the
benchmark ``benchmarks/release.py --national`` prints it beside the measured time."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from measure import run_measured  # noqa: E402

#: How far the forecast may be from what the release measured.
TOLERANCE = 0.25


@pytest.fixture(scope="module")
def national(tmp_path_factory):
    from national_table import KEYS, national_table

    folder = tmp_path_factory.mktemp("national")
    frame = national_table(315)  # 100,800 strata
    frame.to_parquet(folder / "national.parquet")
    return folder, frame, KEYS


def release_process(folder: Path, keys, mechanism: str, sets: int) -> tuple[float, float]:
    """(wall seconds, peak resident bytes) of ``dpcounts synthesize`` as a process."""
    env = dict(
        os.environ,
        XDG_DATA_HOME=str(folder / f"home_{mechanism}_{sets}"),
        DPCOUNTS_LEDGER=str(folder / f"ledger_{mechanism}_{sets}.jsonl"),
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    )
    out = folder / f"{mechanism}_{sets}"
    command = [
        sys.executable, "-m", "dpcounts", "synthesize", "--input",
        str(folder / "national.parquet"), "--keys", *keys, "--strata", "input",
        "--mechanism", mechanism, "--epsilon", "1", "--sets", str(sets),
        "--prior-source", "national rates by age, published 1999 (test)",
        "--dataset", "national", "--out", str(out), "--private-dir", str(out) + ".private",
        "--quiet",
    ]  # fmt: skip
    result = run_measured(command, env)
    assert result["code"] == 0, command
    return result["wall"], result["peak_bytes"]


def measured(national, mechanism: str, sets: int):
    """(forecast, wall seconds, peak bytes, the machine's rate around the run)."""
    from dpcounts.privacy.calibrate import calibrate
    from dpcounts.release.cost import estimate_cost
    from dpcounts.sampling.tree_build import machine_rate

    folder, frame, keys = national
    key = (mechanism, sets)
    if key not in _RUNS:
        per_set = 1.0 / sets
        cal = calibrate(
            mechanism, per_set, int(frame["count"].sum()), frame["population"].to_numpy(float),
            frame["prior_rate"].to_numpy(float), method="certified",
        )  # fmt: skip
        forecast = estimate_cost(cal, 1e-12 / sets / (1.0 + math.exp(per_set)), sets)
        machine_rate()  # compiled before the floor is timed
        before = machine_rate()
        wall, peak = release_process(folder, keys, mechanism, sets)
        after = machine_rate()
        rate = [math.sqrt(b * a) for b, a in zip(before, after, strict=True)]  # around the run
        print(
            f"{mechanism} {sets} sets: peak {peak / 2**30:.2f} GiB, forecast "
            f"{forecast.bytes / 2**30:.2f}; wall {wall:.1f} s, forecast "
            f"{forecast.seconds(*rate):.1f} s at {rate[0]:.3g} (all cores) and {rate[1]:.3g} "
            "(one core) multiply-adds/s"
        )
        _RUNS[key] = (forecast, wall, peak, rate)
    return _RUNS[key]


_RUNS: dict = {}
CASES = [("truncated", 1), ("truncated", 10), ("truncated", 100), ("pg", 1)]


@pytest.mark.process
@pytest.mark.parametrize(("mechanism", "sets"), CASES)
def test_the_memory_forecast_is_within_a_quarter_of_the_release(national, mechanism, sets):
    forecast, _, peak, _ = measured(national, mechanism, sets)
    assert abs(forecast.bytes / peak - 1.0) <= TOLERANCE
