"""Real Snakemake runs of the study stage on a table of the test's own (tract x period, no
age, no race), configured as an analyst would: one config file, the targets of
docs/your-study.md."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib import image as mpimg
from workflow_helpers import copy_project, snakemake

from dpcounts.studies.stage.guide import VERDICTS

pytestmark = pytest.mark.slow

STUDY = {
    "table": "mine/tracts.csv",
    "keys": ["tract", "period"],
    "count": "deaths",
    "population": "population",
    "attributes": ["region"],
    "area": "tract",
    "arms": {"pg": ["certified"], "truncated": ["certified", "paper"]},
    "epsilons": [0.5, 5.0],
    "sets": 4,
    "sets_per_job": 4,
    "epsilons_per_job": 2,
    "on_calibration_failure": "skip",
    "rounding": "nearest",
    "disparities": [
        {
            "name": "south_vs_north",
            "numerator": {"region": "south"},
            "denominator": {"region": "north"},
        },  # fmt: skip
    ],
}


def write_project(work, **changes):
    rng = np.random.default_rng(11)
    rows = [(f"{k:03d}", period, "south" if k % 2 else "north", int(rng.integers(800, 9000)))
            for k in range(30) for period in ("2001-05", "2006-10")]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["tract", "period", "region", "population"])
    frame["deaths"] = rng.poisson(frame["population"] * np.where(frame["region"] == "south",
                                                                  0.006, 0.003))  # fmt: skip
    (work / "mine").mkdir(exist_ok=True)
    # one fractional count, x.5 for an even x: rounded half to even back to x, so the
    # study's truth is `frame`'s, and the first job reports the change
    written = frame.astype({"deaths": float})
    written.loc[int(np.flatnonzero(frame["deaths"] % 2 == 0)[0]), "deaths"] += 0.5
    written.to_csv(work / "mine/tracts.csv", index=False)
    config = {"studies": {"mine": {**STUDY, **changes}}}
    (work / "mine/config.yaml").write_text(yaml.safe_dump(config))
    return frame


@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    work = copy_project(tmp_path_factory.mktemp("study"))
    frame = write_project(work)
    targets = ["results/studies/mine/guide.csv", "figures/studies/mine/measures.png",
               "figures/studies/mine/guide.png"]  # fmt: skip
    result = snakemake(work, *targets, "--cores", "2", "--configfile", "mine/config.yaml")
    assert result.returncode == 0, result.stderr[-4000:]
    return work, frame


def test_the_first_job_reports_what_it_did_to_the_table(study_run):
    work, frame = study_run
    table = json.loads((work / "results/studies/mine/table.json").read_text())
    total = int(frame["deaths"].sum())
    assert table["rounding"] == {"mode": "nearest", "strata_changed": 1,
                                 "total_before": total + 0.5, "total_after": total}  # fmt: skip
    assert table["rows_read"] == table["rows_selected"] == table["strata"] == len(frame)
    assert table["empty_strata_dropped"] == 0 and table["total"] == total
    log = (work / "logs/studies/mine/strata.log").read_text()
    assert (
        f"WARNING:root:mine/tracts.csv (studies.mine): rounding nearest changed 1 of "
        f"{len(frame)} strata (half to even): total {total + 0.5} before, {total} after" in log
    )


def test_the_guide_covers_every_arm_and_measure(study_run):
    work, _ = study_run
    guide = pd.read_csv(work / "results/studies/mine/guide.csv")
    arms = {"pg_certified", "truncated_certified", "truncated_paper"}
    measures = {"rmse", "relative_error", "rank_correlation", "margin:tract", "margin:period",
                "disparity:south_vs_north"}  # fmt: skip
    assert set(guide["arm"]) <= arms and {"pg_certified", "truncated_certified"} <= set(
        guide["arm"]
    )
    assert set(guide["measure"]) == measures
    assert len(guide) == len(set(zip(guide["arm"], guide["measure"], strict=True)))
    assert set(guide["verdict"]) <= set(VERDICTS) and guide["reason"].notna().all()
    found = guide["epsilon"].dropna()
    assert found.isin([0.5, 5.0]).all()  # the overall prior is public: the sets' epsilon


def test_the_summary_holds_the_truth_of_the_analysts_table(study_run):
    work, frame = study_run
    summary = pd.read_parquet(work / "results/studies/mine/summary.parquet")
    south = frame["region"] == "south"

    def rate(m):
        return frame.loc[m, "deaths"].sum() / frame.loc[m, "population"].sum()

    disparity = summary[summary["metric"] == "disparity:south_vs_north"]
    assert disparity["truth"].to_numpy() == pytest.approx(rate(south) / rate(~south), rel=1e-12)
    draws = summary[summary["metric"] == "rank_correlation"]
    assert (draws["lower"] <= draws["median"]).all() and (draws["median"] <= draws["upper"]).all()
    by_eps = draws.pivot(index="arm", columns="epsilon", values="median")
    assert (by_eps[5.0] > by_eps[0.5]).all()  # more budget, better-kept ranking
    share = summary[summary["metric"] == "outside_bounds_share"]
    assert ((share["median"] >= 0) & (share["median"] <= 1)).all()


def test_the_figures_are_images(study_run):
    work, _ = study_run
    for stem in ("measures", "guide"):
        image = mpimg.imread(work / f"figures/studies/mine/{stem}.png")
        assert image.shape[0] > 300 and image.shape[1] > 500


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {
                "disparities": [
                    {
                        "name": "d",
                        "numerator": {"region": "east"},
                        "denominator": {"region": "north"},
                    }
                ]
            },
            "studies.mine.disparities[0].numerator.region: value(s) ['east'] not in the "
            "study's strata",
        ),
        (
            {"count": "homicides"},
            "config key studies.mine.count: mine/tracts.csv has no column 'homicides'",
        ),  # fmt: skip
        ({"epsilons": [0.5, float("inf")]}, "studies.mine.epsilons[1]"),
    ],
)
def test_a_bad_study_stops_the_run_before_any_job(tmp_path, changes, expected):
    work = copy_project(tmp_path)
    write_project(work, **changes)
    result = snakemake(work, "results/studies/mine/guide.csv", "--cores", "1",
                       "--configfile", "mine/config.yaml")  # fmt: skip
    assert result.returncode != 0
    assert expected in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 15, result.stderr
    assert not (work / "results").exists()
