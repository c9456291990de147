"""A real Snakemake run of Study 2 with the tiny CI config, restricted to Study 2's targets."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from matplotlib import image as mpimg
from workflow_helpers import REPO, TEST_CONFIG, copy_project, snakemake

from dpsynth.study2 import SUMMARY_COLUMNS

pytestmark = pytest.mark.slow

FIGURES = [
    "figure2_prior",
    "figure3_county_rates",
    "figure4_maps",
    "figure5_disparities",
    "figure6_subgroups",
    "shapes",
]


@pytest.fixture(scope="module")
def study2_run(tmp_path_factory):
    work = copy_project(tmp_path_factory.mktemp("study2"))
    targets = ["results/study2/summary.parquet", "figures/study2/figure1_toy.png"]
    targets += [f"figures/study2/pennlc/{stem}.png" for stem in FIGURES]
    result = snakemake(work, *targets, "--cores", "2", "--configfile", TEST_CONFIG)
    assert result.returncode == 0, result.stderr[-4000:]
    return work


@pytest.fixture(scope="module")
def test_config():
    return yaml.safe_load((REPO / TEST_CONFIG).read_text())["study2"]


def test_summary_has_the_documented_columns_and_rows(study2_run, test_config):
    summary = pd.read_parquet(study2_run / "results/study2/summary.parquet")
    assert list(summary.columns) == SUMMARY_COLUMNS
    assert set(summary["scenario"]) == {"pennlc"}
    assert set(summary["mechanism"]) == {*test_config["mechanisms"], "truth", "prior"}
    for metric in (
        "ratio_urban_rural",
        "ratio_race_female",
        "ratio_race_male",
        "a_median",
        "a_max",
    ):
        assert metric in set(summary["metric"]), metric
    synthetic = summary[summary["mechanism"].isin(test_config["mechanisms"])]
    ratios = synthetic[synthetic["metric"] == "ratio_urban_rural"]
    assert len(ratios) == len(test_config["mechanisms"]) * 2  # epsilons 1 and 4
    assert (ratios["lower"] <= ratios["median"]).all() and (
        ratios["median"] <= ratios["upper"]
    ).all()


def test_no_synthetic_count_falls_outside_its_bounds(study2_run):
    summary = pd.read_parquet(study2_run / "results/study2/summary.parquet")
    outside = summary[summary["metric"] == "n_outside_bounds"]
    assert len(outside) and (outside["upper"] == 0).all()


def test_calibrations_are_published_per_stratum_and_epsilon(study2_run, test_config):
    root = study2_run / "results/study2/calibrations/pennlc"
    for mechanism in test_config["mechanisms"]:
        frame = pd.concat(pd.read_parquet(p) for p in sorted((root / mechanism).glob("*.parquet")))
        assert {"a", "b", "lower", "upper", "epsilon"} <= set(frame.columns)
        assert frame.groupby("epsilon")["cell"].nunique().eq(1071).all()
        assert (frame["a"] > 0).all() and (frame["lower"] <= frame["upper"]).all()


def test_every_figure_is_a_readable_image(study2_run):
    paths = [study2_run / "figures/study2/figure1_toy.png"]
    paths += [study2_run / f"figures/study2/pennlc/{stem}.png" for stem in FIGURES]
    for path in paths:
        assert mpimg.imread(path).shape[0] > 100, path
