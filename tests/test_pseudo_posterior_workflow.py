"""A real Snakemake run of the pseudo-posterior stage on the tiny test config."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib import image as mpimg
from workflow_helpers import REPO, TEST_CONFIG, copy_project, snakemake

pytestmark = pytest.mark.slow

FIGURES = (
    "lipschitz",
    "weights",
    "utility_quantiles",
    "utility_centre",
    "posterior_mu",
    "reweighting",
    "synthetic",
)
SYNTHESIZERS = {"unweighted", "LW", "CW", "SW", "LW_final", "CW_final"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = copy_project(tmp_path_factory.mktemp("pseudo_posterior"))
    datasets = sorted(
        yaml.safe_load((REPO / TEST_CONFIG).read_text())["pseudo_posterior"]["datasets"]
    )
    figures = [f"figures/pseudo_posterior/{d}_{kind}.png" for d in datasets for kind in FIGURES]
    result = snakemake(
        work,
        "results/pseudo_posterior/summary.parquet",
        *figures,
        "--cores",
        "2",
        "--configfile",
        TEST_CONFIG,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return work, datasets, figures


def test_records_table_has_every_synthesizer_and_record(run):
    work, datasets, _ = run
    records = pd.read_parquet(work / "results/pseudo_posterior/records.parquet")
    assert list(records.columns) == ["dataset", "synthesizer", "record", "weight", "lipschitz"]
    assert set(records["dataset"]) == set(datasets)
    assert set(records["synthesizer"]) == SYNTHESIZERS
    assert records["weight"].between(0, 1).all()
    sizes = records.groupby(["dataset", "synthesizer"])["record"].nunique()
    assert sizes.groupby("dataset").nunique().eq(1).all()  # same records in every fit


def test_epsilon_is_twice_delta_and_bounds_respect_delta(run):
    work, _, _ = run
    summary = pd.read_parquet(work / "results/pseudo_posterior/summary.parquet")
    records = pd.read_parquet(work / "results/pseudo_posterior/records.parquet")
    np.testing.assert_allclose(summary["epsilon"], 2 * summary["delta"])
    largest = records.groupby(["dataset", "synthesizer"])["lipschitz"].max()
    delta = summary.set_index(["dataset", "synthesizer"])["delta"]
    assert (largest <= delta.loc[largest.index] + 1e-9).all()


def test_reweighting_raises_every_weight(run):
    work, _, _ = run
    records = pd.read_parquet(work / "results/pseudo_posterior/records.parquet")
    wide = records.pivot_table(index=["dataset", "record"], columns="synthesizer", values="weight")
    for base in ("LW", "CW"):
        assert (wide[f"{base}_final"] >= wide[base]).all()
        assert (wide[f"{base}_final"] > wide[base]).mean() > 0.5


def test_seed_claims_hold_at_equal_delta(run):
    work, datasets, _ = run
    summary = pd.read_parquet(work / "results/pseudo_posterior/summary.parquet")
    tolerance = yaml.safe_load((REPO / TEST_CONFIG).read_text())["pseudo_posterior"]["equal_delta"][
        "tolerance"
    ]
    for dataset in datasets:
        by = summary[summary["dataset"] == dataset].set_index("synthesizer")
        for name in ("CW", "SW", "LW_final"):
            assert by.at[name, "delta"] == pytest.approx(by.at["LW", "delta"], rel=2 * tolerance)
        assert by.at["CW_final", "delta"] == pytest.approx(by.at["CW", "delta"], rel=tolerance)
        assert by.at["SW", "mu_interval_width"] > by.at["LW", "mu_interval_width"]
        below_half = by["share_weight_below_half"]
        assert below_half["CW"] > below_half["LW"]
        assert by.at["unweighted", "delta"] > 1.5 * by.at["LW", "delta"]
    checks = json.loads((work / "results/pseudo_posterior/checks.json").read_text())
    assert set(checks) == set(datasets)


def test_every_figure_is_a_picture(run):
    work, _, figures = run
    for name in figures:
        assert mpimg.imread(work / name).size > 0


def test_poisson_fits_are_exact_and_negbin_fits_are_mcmc(run):
    work, datasets, _ = run
    config = yaml.safe_load((REPO / TEST_CONFIG).read_text())["pseudo_posterior"]
    summary = pd.read_parquet(work / "results/pseudo_posterior/summary.parquet")
    for dataset in datasets:
        fits = json.loads((work / f"results/pseudo_posterior/{dataset}/fits.json").read_text())
        expected = "exact" if config["datasets"][dataset]["model"] == "poisson" else "nuts"
        assert {meta["sampler"] for meta in fits.values()} == {expected}
        assert set(summary.loc[summary["dataset"] == dataset, "sampler"]) == {expected}


def test_failed_mcmc_check_fails_the_job_with_a_clear_message(tmp_path):
    # the negative binomial is fitted by NUTS (a Poisson fit is exact and has nothing to mix)
    work = copy_project(tmp_path / "strict")
    (work / "strict.yaml").write_text(
        "pseudo_posterior:\n"
        "  datasets:\n"
        "    negbin_mixture: {model: negbin, size: 50, components: "
        "[{weight: 1.0, mean: 20, dispersion: 5}]}\n"
        "  mcmc: {chains: 2, warmup: 50, samples: 50}\n"
        "  mcmc_checks: {max_rhat: 1.05, min_ess: 100000}\n"
    )
    result = snakemake(
        work,
        "results/pseudo_posterior/negbin_mixture/draws.parquet",
        "--cores",
        "1",
        "--configfile",
        TEST_CONFIG,
        "strict.yaml",
    )
    assert result.returncode != 0
    log = (work / "logs/pseudo_posterior/fit_negbin_mixture.log").read_text()
    message = result.stderr + log
    assert "did not converge" in message and "min_ess" in message
