"""A real Snakemake run of Study 2 (the configured study `pennlc`) with the tiny CI config,
restricted to Study 2's targets; and its numbers against Study 2's own pipeline before the
study stage ran it (commit dd9e247, run from its own source tree)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib import image as mpimg
from workflow_helpers import REPO, TEST_CONFIG, copy_project, export_commit, merged, snakemake

from dpcounts.studies.stage.summary import SUMMARY_COLUMNS

pytestmark = pytest.mark.slow

FIGURES = [
    "figure2_prior",
    "figure3_county_rates",
    "figure4_maps",
    "figure5_disparities",
    "figure6_subgroups",
    "shapes",
]
#: The last commit whose Study 2 had its own calibration, simulation and summary jobs.
BEFORE = "dd9e247"
#: Its metric names -> the study stage's.
RENAMED = {
    "ratio_urban_rural": "disparity:urban_rural",
    "ratio_race_female": "disparity:race_female",
    "ratio_race_male": "disparity:race_male",
    "ratio_race_female_urban": "disparity:race_female_urban",
    "ratio_race_male_rural": "disparity:race_male_rural",
    "a_median": "gamma_shape",
    "a_max": "gamma_shape_max",
}


@pytest.fixture(scope="module")
def study2_run(tmp_path_factory):
    work = copy_project(tmp_path_factory.mktemp("study2"))
    targets = ["results/studies/pennlc/summary.parquet", "figures/study2/figure1_toy.png"]
    targets += [f"figures/study2/pennlc/{stem}.png" for stem in FIGURES]
    targets += [f"figures/studies/pennlc/{stem}.png" for stem in ("measures", "guide", "maps")]
    result = snakemake(work, *targets, "--cores", "2", "--configfile", TEST_CONFIG)
    assert result.returncode == 0, result.stderr[-4000:]
    return work


@pytest.fixture(scope="module")
def pennlc():
    """The study `pennlc` as the test run configures it."""
    defaults = yaml.safe_load((REPO / "config/config.yaml").read_text())
    overlay = yaml.safe_load((REPO / TEST_CONFIG).read_text())
    return merged(defaults, overlay)["studies"]["pennlc"]


def test_summary_has_every_arm_and_disparity_of_study2(study2_run, pennlc):
    summary = pd.read_parquet(study2_run / "results/studies/pennlc/summary.parquet")
    assert list(summary.columns) == SUMMARY_COLUMNS
    arms = [arm["name"] for arm in pennlc["arms"]]
    assert set(summary["arm"]) == set(arms)
    for spec in pennlc["disparities"]:
        rows = summary[summary["metric"] == f"disparity:{spec['name']}"]
        assert len(rows) == len(arms) * 2  # epsilons 1 and 4
        assert (rows["lower"] <= rows["median"]).all() and (rows["median"] <= rows["upper"]).all()
        assert rows["truth"].nunique() == 1 and rows["prior"].nunique() == 1


def test_calibrations_are_published_per_stratum_and_epsilon(study2_run, pennlc):
    root = study2_run / "results/studies/pennlc/calibrations"
    for arm in pennlc["arms"]:
        frame = pd.concat(map(pd.read_parquet, sorted((root / arm["name"]).glob("*.parquet"))))
        assert {"a", "b", "lower", "upper", "epsilon"} <= set(frame.columns)
        assert frame.groupby("epsilon")["cell"].nunique().eq(1071).all()
        assert (frame["a"] > 0).all() and (frame["lower"] <= frame["upper"]).all()


def test_every_figure_is_a_readable_image(study2_run):
    paths = [study2_run / "figures/study2/figure1_toy.png"]
    paths += [study2_run / f"figures/study2/pennlc/{stem}.png" for stem in FIGURES]
    paths += [study2_run / f"figures/studies/pennlc/{stem}.png" for stem in ("measures", "guide")]
    for path in paths:
        assert mpimg.imread(path).shape[0] > 100, path


@pytest.fixture(scope="module")
def before_run(tmp_path_factory):
    """Study 2 run by the project as it was at BEFORE: its Snakefile, its library (skipped
    in a source archive without .git; fails in a shallow clone)."""
    work = export_commit(BEFORE, tmp_path_factory.mktemp("before"))
    env = {"PYTHONPATH": str(work / "src")}  # its library before the installed one
    result = snakemake(work, "results/study2/pennlc/summary.parquet", "--cores", "2",
                       "--configfile", TEST_CONFIG, env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return work


def test_study2_numbers_are_those_of_its_own_pipeline_before(before_run, study2_run):
    """Same draws (streams, chunks, batches, strata order), same measures: every median
    and band of every arm, disparity and calibration shape, the truth and the prior, and
    every county's mean rate agree to rounding."""
    old = pd.read_parquet(before_run / "results/study2/pennlc/summary.parquet")
    new = pd.read_parquet(study2_run / "results/studies/pennlc/summary.parquet")
    drawn = old[old["metric"].isin(RENAMED) & ~old["mechanism"].isin(["truth", "prior"])]
    drawn = drawn.assign(metric=drawn["metric"].map(RENAMED)).rename(columns={"mechanism": "arm"})
    both = drawn.merge(new, on=["arm", "epsilon", "metric"], suffixes=("_before", ""))
    assert len(both) == len(drawn) == 3 * 2 * len(RENAMED)  # arms x epsilons x metrics
    for column in ("median", "lower", "upper"):
        np.testing.assert_allclose(both[column], both[f"{column}_before"], rtol=1e-12)
    for reference in ("truth", "prior"):
        values = old[old["mechanism"] == reference].set_index("metric")["median"]
        for before, metric in RENAMED.items():
            if before.startswith("ratio_"):
                row = new[new["metric"] == metric].iloc[0]
                assert row[reference] == pytest.approx(values[before], rel=1e-12)
    counties = pd.read_parquet(before_run / "results/study2/pennlc/county_rates.parquet")
    areas = pd.read_parquet(study2_run / "results/studies/pennlc/area_rates.parquet")
    counties = counties.rename(columns={"mechanism": "arm", "county": "area"})
    synthetic = counties[~counties["arm"].isin(["truth", "prior"])]
    joined = synthetic.merge(areas, on=["arm", "epsilon", "area"])
    assert len(joined) == len(synthetic) == 3 * 2 * 67
    np.testing.assert_allclose(joined["rate"], joined["mean"], rtol=1e-12)
    for reference in ("truth", "prior"):
        ref = counties[counties["arm"] == reference].merge(
            areas[areas["arm"] == reference], on=["arm", "area"])  # fmt: skip
        assert len(ref) == 67
        np.testing.assert_allclose(ref["rate"], ref["mean"], rtol=1e-12)
