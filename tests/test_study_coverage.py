"""Coverage as a study measure (issue #54, item 2): the combining rules cover their level
where their model holds, under-cover at a small epsilon on a study's arm, and the guide's
coverage row says what an independent reading of the table says."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import filled_definition

from dpcounts.seeding import job_rng
from dpcounts.studies.stage.coverage import (
    REFERENCE,
    Areas,
    combining_intervals,
    coverage_guide,
    coverage_table,
    study_areas,
)
from dpcounts.studies.stage.definition import StudyConfigError
from dpcounts.studies.stage.prior import prior_rates
from dpcounts.studies.stage.simulate import calibrate_chunk
from dpcounts.studies.stage.table import load_study_table


def test_the_combining_rules_cover_their_level_where_their_model_holds():
    """Their model (Raghunathan, Reiter and Rubin 2003): the confidential counts Y_k ~
    Poisson(n_k lambda_k) of a population, each of the M sets drawn from the posterior
    predictive (lambda ~ Gamma(Y + 1/2, n), then Poisson(n lambda)), the estimand the
    population's rate lambda_k, whose estimate q_M has variance lambda_k / n_k (1 + 2 /
    M). With M = 40 sets (T_f rarely negative) the 90% intervals cover what intervals of
    their half-widths around an unbiased estimate of that variance cover, within 3 Monte
    Carlo errors: at or above 90% (here about 92%: the t quantile on nu_f, about 10
    degrees of freedom, is wider than the normal's; Reiter 2002 found them conservative)."""
    from scipy import stats

    rng = np.random.default_rng(11)
    areas_n, releases, sets, level = 60, 150, 40, 0.9
    people = rng.integers(2_000, 50_000, areas_n).astype(float)
    rate = rng.uniform(0.002, 0.01, areas_n)
    areas = Areas(tuple(map(str, range(areas_n))), np.arange(areas_n), people,
                  rate * 1e5, np.ones(areas_n), 1e5, None)  # fmt: skip
    sd = np.sqrt(rate / people * (1 + 2 / sets)) * 1e5
    shares, predicted = [], []
    for _ in range(releases):
        y = rng.poisson(people * rate)
        lam = rng.gamma(y + 0.5, 1.0 / people, size=(sets, areas_n))
        lower, upper = combining_intervals(rng.poisson(people * lam), areas, None, level)
        shares.append(np.mean((lower <= areas.truth) & (areas.truth <= upper)))
        predicted.append(np.mean(2 * stats.norm.cdf((upper - lower) / 2 / sd) - 1))
    shares = np.asarray(shares)
    se = shares.std(ddof=1) / math.sqrt(releases)
    assert abs(shares.mean() - np.mean(predicted)) <= 3 * se, (shares.mean(), se)
    assert level - 3 * se <= shares.mean() <= level + 0.04


def small_study(tmp_path, **coverage):
    """A table of 24 areas x 2 groups, the study stage's md arm calibrated on it."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame([(f"a{k:02d}", g, int(rng.integers(3_000, 30_000)))
                          for k in range(24) for g in ("a", "b")],
                         columns=["area", "group", "n"])  # fmt: skip
    frame["y"] = rng.poisson(frame["n"] * np.where(frame["group"] == "a", 0.002, 0.004))
    frame.to_csv(tmp_path / "t.csv", index=False)
    spec = {"table": "t.csv", "keys": ["area", "group"], "count": "y", "population": "n",
            "area": "area", "arms": {"md": ["paper"]}, "epsilons": [0.05, 50.0],
            "sets": 100, "sets_per_job": 100, "epsilons_per_job": 2,
            "stream": ["coverage-test"],
            "coverage": {"enabled": True, "methods": ["combining"], "releases": 20,
                         **coverage}}  # fmt: skip
    d = filled_definition("s", spec, base=tmp_path)
    strata = load_study_table(d)
    strata["prior_rate"] = prior_rates(d, strata, job_rng(1, "prior"))[0]
    calibrations = pd.concat([calibrate_chunk(d, arm, strata, echunk)[0] for arm in d.arms
                              for echunk in d.calibration_chunks])  # fmt: skip
    return d, strata, calibrations


def test_the_combining_rules_under_cover_at_a_small_epsilon(tmp_path):
    """md (paper) at epsilon 0.05 on 24 areas, 20 releases of 5 sets: the 90%
    combining-rule intervals cover about 0.65 of the areas' true rates (0.652, Monte Carlo
    error 0.021: the sets are pulled to the overall rate alike, so they barely differ and
    the interval is narrow and misplaced); at epsilon 50 about 1 (0.998: with little noise
    the sets' spread, about twice a Poisson's, makes the rules conservative for the
    confidential rate, as with no privacy at all, 0.996)."""
    d, strata, calibrations = small_study(tmp_path)
    table = coverage_table(d, strata, calibrations, seed=3).set_index(["arm", "epsilon"])
    small, large = table.loc[("md_paper", 0.05)], table.loc[("md_paper", 50.0)]
    assert small["releases"] == 20
    assert 0.55 < small["coverage"] < 0.75 and small["coverage"] + 3 * small["coverage_se"] < 0.9
    assert large["coverage"] - 3 * large["coverage_se"] >= 0.9
    reference = table.loc[(REFERENCE, math.inf)]
    assert reference["method"] == "combining" and reference["releases"] == 20
    assert reference["coverage"] > 0.95


def test_the_areas_truth_and_exact_widths_are_the_counts_own(tmp_path):
    from scipy import stats

    d, strata, _ = small_study(tmp_path)
    areas = study_areas(d, strata, 0.9)
    by_area = strata.groupby("area")[["y", "n"]].sum()
    assert areas.names == tuple(by_area.index)
    np.testing.assert_allclose(areas.truth, by_area["y"] / by_area["n"] * 1e5)
    y = by_area["y"].to_numpy()
    garwood = (stats.chi2.ppf(0.95, 2 * (y + 1)) - stats.chi2.ppf(0.05, 2 * y)) / 2
    np.testing.assert_allclose(areas.exact_width, garwood / by_area["n"] * 1e5)


def test_the_guide_row_reads_the_table_as_an_independent_reading_does(tmp_path):
    d, strata, _ = small_study(tmp_path, epsilons=None)
    eps = [0.05, 0.2, 1.0, 4.0, 16.0]
    cov = [0.40, 0.87, 0.80, 0.88, 0.91]
    se = [0.02, 0.02, 0.02, 0.02, 0.01]
    width = [0.6, 0.9, 1.1, 1.3, 1.4]
    table = pd.DataFrame({"arm": "md_paper", "epsilon": eps, "method": "combining",
                          "quantity": "area_rate", "level": 0.9, "sets": 5, "releases": 20,
                          "coverage": cov, "coverage_se": se, "width_ratio": width})  # fmt: skip
    row = coverage_guide(table, d, epsilon_prior=0.1).iloc[0]
    # independently: the last epsilon below the level beyond 2 errors is 1.0 (0.80 + 0.04)
    below = [e for e, c, s in zip(eps, cov, se, strict=True) if c + 2 * s < 0.9]
    first = min(e for e in eps if e > max(below))
    assert first == 4.0 and row["epsilon"] == first  # md pays no prior
    assert (row["coverage_low"], row["coverage_high"]) == (0.88, 0.91)
    assert (row["width_low"], row["width_high"]) == (1.3, 1.4)
    assert row["coverage_smallest"] == 0.40 and row["epsilon_smallest"] == 0.05
    assert row["text"] == ("from epsilon 4, 90% combining-rule intervals of the areas' rates "
                           "from 5 sets cover 88-91% (Monte Carlo error up to 2.0 points) and "
                           "are 1.3-1.4x as wide as with no privacy; at epsilon 0.05 they "
                           "cover 40%")  # fmt: skip
    never = coverage_guide(table.assign(coverage=0.5), d, epsilon_prior=0.1).iloc[0]
    assert np.isnan(never["epsilon"]) and never["text"].startswith("at no epsilon of the grid")


@pytest.mark.parametrize("coverage, key", [
    ({"epsilons": [0.3]}, "coverage.epsilons"),
    ({"releases": 1}, "coverage.releases"),
    ({"datasets": 100}, "coverage.datasets"),
])  # fmt: skip
def test_a_bad_coverage_setting_names_its_key(tmp_path, coverage, key):
    with pytest.raises(StudyConfigError, match=key.replace(".", r"\.")):
        small_study(tmp_path, **coverage)
