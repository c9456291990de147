"""Coverage of age-adjusted rates and disparities (issue #54, item 2): the posterior's
intervals of both cover within Monte Carlo error of nominal on simulated tables where its
model holds, the exact no-privacy intervals are the standard ones computed by hand, the
combining rules' intervals are those of ``dpcounts estimate``'s rule on each set, the
coverage rows reach ``guide.csv``, and the renamed setting is refused by its new name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import filled_definition

from dpcounts import calibrate, synthesize
from dpcounts.config_check import ConfigError, check_config
from dpcounts.studies.stage.coverage import (
    AGE_ADJUSTED,
    AREA_RATE,
    COVERAGE_MEASURE,
    DISPARITY,
    coverage_guide,
    guide_rows,
    release_quantities,
    study_areas,
    weighed_quantities,
    with_coverage,
)
from dpcounts.studies.stage.definition import StudyConfigError

REPO = Path(__file__).resolve().parents[1]
LEVEL, SETS = 0.9, 5
AGES = {"0-39": 0, "40-59": 1, "60-69": 2, "70+": 3}
AREAS = [f"a{k}" for k in range(6)]


def _strata(rng) -> pd.DataFrame:
    """area x race x age strata, prior rates rising with age (the counts filled later)."""
    rows = [(area, race, age, int(rng.integers(2_000, 10_000)),
             0.0005 * (1 + k) ** 2 * (1.5 if race == "B" else 1.0))
            for area in AREAS for race in ("A", "B") for age, k in AGES.items()]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["area", "race", "age", "n", "prior_rate"])
    frame["y"] = 0
    return frame


def _us2000() -> pd.Series:
    """The US 2000 standard's weights of the table's bands (read here, by hand)."""
    from dpcounts.data.standard_population import load_standard_population, standard_weights

    standard = load_standard_population(REPO / "data/us_standard_population_2000.csv")
    return standard_weights(standard, {"0-39": (0, 40), "40-59": (40, 60), "60-69": (60, 70),
                                       "70+": (70, None)})  # fmt: skip


def _side(rows: pd.DataFrame, w: pd.Series):
    """By hand: the rows' age-adjusted rate per person sum_b w_b y_b / n_b, its Poisson
    variance sum_b (w_b / n_b)^2 y_b and the largest weight of one event."""
    by = rows.groupby("age")[["y", "n"]].sum()
    weight = w[by.index].to_numpy() / by["n"].to_numpy()
    return (weight * by["y"]).sum(), (weight**2 * by["y"]).sum(), weight.max()


def _definition(tmp_path, strata, **coverage):
    strata.to_csv(tmp_path / "t.csv", index=False)
    spec = {"table": "t.csv", "keys": ["area", "race", "age"], "count": "y",
            "population": "n", "area": "area",
            "age": {"column": "age",
                    "standard_population": str(REPO / "data/us_standard_population_2000.csv")},
            "arms": {"pg": ["certified"]}, "epsilons": [0.5], "datasets": 10,
            "datasets_per_job": 10, "epsilons_per_job": 1,
            "disparities": [
                {"name": "race", "numerator": {"race": "B"}, "denominator": {"race": "A"}},
                {"name": "east", "numerator": {"area": AREAS[:3]},
                 "denominator": {"area": AREAS[3:]}}],
            "coverage": {"enabled": True, **coverage}}  # fmt: skip
    return filled_definition("s", spec, base=tmp_path)


@pytest.mark.slow
def test_the_posterior_covers_age_adjusted_rates_and_disparities_where_its_model_holds(
    tmp_path,
):
    """True counts drawn from the posterior's own prior (gamma-Poisson, shape 1, mean
    population x prior rate), a release of 5 pg sets at epsilon 0.5 a set, 80 times: the
    90% posterior intervals (2,000 joint draws each) of the 6 areas' age-adjusted rates and
    of the 2 disparities (age-adjusted ratios) cover within 3 Monte Carlo errors of 0.9
    (the error: the releases' shares' spread over sqrt(80), at least a binomial's over the
    intervals); the areas' crude rates too (exact laws). Seen: 0.910 (error 0.014) for the
    age-adjusted rates, 0.900 (0.023) for the disparities, 0.921 (0.014) for the crude
    rates."""
    rng = np.random.default_rng(23)
    strata = _strata(rng)
    d = _definition(tmp_path, strata)
    mean = strata["n"].to_numpy(float) * strata["prior_rate"].to_numpy()
    shares = {AREA_RATE: [], AGE_ADJUSTED: [], DISPARITY: []}
    for _ in range(80):
        y = rng.negative_binomial(1.0, 1.0 / (1.0 + mean))
        table = strata.assign(y=y)
        cal = calibrate("pg", 0.5, int(y.sum()), table["n"], table["prior_rate"],
                        method="certified")  # fmt: skip
        sets = synthesize(y, cal, SETS, rng)
        weighed = weighed_quantities(d, table, LEVEL)
        found = release_quantities(sets, study_areas(d, table, LEVEL), weighed, cal,
                                   "posterior", LEVEL, SETS, rng)  # fmt: skip
        for quantity, (share, _) in found.items():
            shares[quantity].append(share[0])
    units = {AREA_RATE: len(AREAS), AGE_ADJUSTED: len(AREAS), DISPARITY: 2}
    for quantity, got in shares.items():
        got = np.asarray(got)
        assert got.size == 80, quantity  # no disparity left out (sides with events)
        se = max(got.std(ddof=1), np.sqrt(LEVEL * (1 - LEVEL) / units[quantity]))
        se /= np.sqrt(got.size)
        assert abs(got.mean() - LEVEL) <= 3 * se, (quantity, got.mean(), se)


def test_the_exact_no_privacy_intervals_are_fay_feuers_and_the_log_ratio_normal(tmp_path):
    """By hand: an area's age-adjusted rate sum_b w_b y_b / n_b (w: the US 2000 standard's
    weights of the bands) with the Fay-Feuer gamma interval; a disparity's ratio of the
    sides' age-adjusted rates with exp(log R +- z sqrt(v_N / R_N^2 + v_D / R_D^2))."""
    from scipy import stats

    rng = np.random.default_rng(4)
    strata = _strata(rng)
    strata["y"] = rng.poisson(strata["n"] * strata["prior_rate"])
    d = _definition(tmp_path, strata)
    adjusted, disparity = weighed_quantities(d, strata, LEVEL)
    w = _us2000()
    side = lambda rows: _side(rows, w)  # noqa: E731

    for k, area in enumerate(AREAS):
        rate, var, wm = side(strata[strata["area"] == area])
        assert adjusted.truth[k] == pytest.approx(rate * 1e5, rel=1e-12)
        lower = stats.gamma.ppf(0.05, rate**2 / var, scale=var / rate)
        upper = stats.gamma.ppf(0.95, (rate + wm) ** 2 / (var + wm**2),
                                scale=(var + wm**2) / (rate + wm))  # fmt: skip
        assert adjusted.exact_width[k] == pytest.approx((upper - lower) * 1e5, rel=1e-9)
    assert disparity.names == ("race", "east")
    for k, (top, bottom) in enumerate([(strata["race"] == "B", strata["race"] == "A"),
                                       (strata["area"].isin(AREAS[:3]),
                                        strata["area"].isin(AREAS[3:]))]):  # fmt: skip
        (r_n, v_n, _), (r_d, v_d, _) = side(strata[top]), side(strata[bottom])
        z = stats.norm.ppf(0.95) * np.sqrt(v_n / r_n**2 + v_d / r_d**2)
        assert disparity.truth[k] == pytest.approx(r_n / r_d, rel=1e-12)
        width = r_n / r_d * (np.exp(z) - np.exp(-z))
        assert disparity.exact_width[k] == pytest.approx(width, rel=1e-9)


def test_the_combining_intervals_are_the_rules_on_each_sets_values(tmp_path):
    """The combining rules by hand on each set's age-adjusted rate (its Poisson variance
    sum w^2 z; the interval cut at 0) and on each set's log disparity (the delta method's
    variance), against the exact no-privacy widths."""
    from scipy import stats

    rng = np.random.default_rng(8)
    strata = _strata(rng)
    strata["y"] = rng.poisson(strata["n"] * strata["prior_rate"])
    d = _definition(tmp_path, strata)
    weighed = weighed_quantities(d, strata, LEVEL)
    sets = rng.poisson(strata["n"] * strata["prior_rate"], size=(SETS, len(strata)))
    found = release_quantities(sets, study_areas(d, strata, LEVEL), weighed, None,
                               "combining", LEVEL, SETS)  # fmt: skip
    table = [strata.assign(y=row) for row in sets]

    def rules(q, u):
        q, u = np.asarray(q), np.asarray(u)
        m, b = len(q), q.var(ddof=1)
        t = (1 + 1 / m) * b - u.mean()
        if t <= 0:
            half = stats.norm.ppf(0.95) * np.sqrt(u.mean())
        else:
            nu = (m - 1) * (1 - m * u.mean() / ((m + 1) * b)) ** 2
            half = stats.t.ppf(0.95, nu) * np.sqrt(t)
        return q.mean() - half, q.mean() + half

    adjusted, disparity = weighed
    w = _us2000()
    for k, area in enumerate(AREAS):
        values = [_side(t[t["area"] == area], w)[:2] for t in table]
        lower, upper = rules(*zip(*values, strict=True))
        ratio = (upper - max(lower, 0.0)) / adjusted.exact_width[k]  # a rate is not negative
        assert found[AGE_ADJUSTED][1][0, k] == pytest.approx(ratio * 1e5, rel=1e-9)
    # a disparity: the rules on each set's log ratio, then exponentiated
    for k, (top, bottom) in enumerate([(strata["race"] == "B", strata["race"] == "A"),
                                       (strata["area"].isin(AREAS[:3]),
                                        strata["area"].isin(AREAS[3:]))]):  # fmt: skip
        logs, spread = [], []
        for t in table:
            (r_n, v_n, _), (r_d, v_d, _) = _side(t[top], w), _side(t[bottom], w)
            logs.append(np.log(r_n) - np.log(r_d))
            spread.append(v_n / r_n**2 + v_d / r_d**2)
        lower, upper = np.exp(rules(logs, spread))
        ratio = (upper - lower) / disparity.exact_width[k]
        assert found[DISPARITY][1][0, k] == pytest.approx(ratio, rel=1e-9)


def test_the_coverage_rows_are_guide_rows_in_words(tmp_path):
    strata = _strata(np.random.default_rng(1))
    d = _definition(tmp_path, strata)
    table = pd.DataFrame({
        "arm": ["pg_certified"] * 2 + ["reference"], "epsilon": [0.5, 4.0, np.inf],
        "method": ["posterior", "posterior", "combining"], "quantity": AGE_ADJUSTED,
        "level": 0.9, "sets": 5, "releases": 10, "coverage": [0.7, 0.9, 0.95],
        "coverage_se": [0.02, 0.01, 0.01], "width_ratio": [1.1, 1.4, 1.2]})  # fmt: skip
    rows = coverage_guide(table, d, epsilon_prior=0.1)
    guide = pd.DataFrame(
        {
            "study": ["s"],
            "arm": ["pg_certified"],
            "measure": ["rmse"],
            "verdict": ["met"],
            "epsilon": [1.0],
            "tolerance": [0.1],
        }
    )
    out = with_coverage(guide, rows, 0.1)
    assert list(out["measure"]) == ["rmse", COVERAGE_MEASURE + AGE_ADJUSTED,
                                    COVERAGE_MEASURE + AGE_ADJUSTED]  # fmt: skip
    mine = out.iloc[1]
    # pg pays the prior's budget: from epsilon 4 + 0.1
    assert mine["verdict"] == "covers" and mine["epsilon"] == pytest.approx(4.1)
    assert mine["verdict_text"].startswith(
        "from epsilon 4.1, 90% posterior intervals of the areas' age-adjusted rates from 5 "
        "sets cover 90%")  # fmt: skip
    assert mine["method"] == "posterior" and mine["coverage_low"] == 0.9
    assert out.iloc[2]["verdict"] == "covers"  # the reference, 0.95 >= 0.9
    never = guide_rows(coverage_guide(table.assign(coverage=0.5), d, 0.1), 0.1)
    assert (never["verdict"] == "under_covers").all()


def test_the_old_key_is_refused_naming_the_new_one(tmp_path):
    import yaml

    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["studies"]["pennlc"]["coverage"]["datasets"] = 50
    with pytest.raises(ConfigError, match=r"coverage\.datasets.*\n.*renamed releases"):
        check_config(config, REPO / "workflow/schemas/config.schema.yaml")
    strata = _strata(np.random.default_rng(1))
    with pytest.raises(StudyConfigError, match=r"coverage\.releases"):
        _definition(tmp_path, strata, releases=1)


@pytest.mark.parametrize("rounds, accepted", [(0, 0.2), (30, 0.2), (200, 0.0)])
def test_joint_draws_are_exact_by_rejection_by_inversion_and_both(monkeypatch, rounds, accepted):
    """Four pieces of three strata and a rest of three: each piece's drawn totals follow
    group_posteriors' exact law (Kolmogorov-Smirnov bound 1.95 / sqrt(draws), at 0.999)
    whether the draws are by inversion alone (0 rounds of rejection), by the default mix,
    or by rejection as far as it goes (200 rounds, however few a round accepts)."""
    import dpcounts.inference.posterior as posterior

    monkeypatch.setattr(posterior, "REJECTION_ROUNDS", rounds)
    monkeypatch.setattr(posterior, "REJECTION_ACCEPTED", accepted)
    rng = np.random.default_rng(3)
    population = rng.integers(1000, 5000, 15).astype(float)
    rate = np.full(15, 0.005)
    y = rng.poisson(population * rate)
    cal = calibrate("pg", 0.5, int(y.sum()), population, rate, method="certified")
    sets = synthesize(y, cal, 3, rng)
    pieces = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, -1, -1, -1])
    draws = 20_000
    drawn = posterior.joint_draws(cal, sets, pieces, draws, rng, cap=population)
    laws = posterior.group_posteriors(cal, sets, np.where(pieces < 0, 4, pieces), cap=population)
    for g in range(4):
        offset, pmf = laws[g]
        values = offset + np.arange(pmf.size)
        empirical = np.searchsorted(np.sort(drawn[:, g]), values, side="right") / draws
        assert np.abs(empirical - np.cumsum(pmf)).max() < 1.95 / np.sqrt(draws), g
