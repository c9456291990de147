"""Study 1's coverage (dpcounts.studies.study1_coverage): the posterior's intervals of the
county rates and of the disparities cover at their nominal level where its model holds,
a disparity's truth is Study 1's own ratio, the setting is checked against Study 1's
design, every arm has its own stream, and the figure is drawn."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import schema_defaults

from dpcounts.data.scenarios import Scenario
from dpcounts.studies.study1 import Geography, datasets_long, study1_arm
from dpcounts.studies.study1_coverage import (
    COLUMNS,
    GUIDE_COLUMNS,
    Study1Coverage,
    arm_coverage,
    county_areas,
    county_disparities,
    coverage_guide,
    coverage_table,
)

#: A tiny scenario: 30 counties of 2,000 people each, 1,200 deaths (40 a county on average),
#: in New Mexico, New York and one more state (Study 1's disparities: urban / rural, NM / NY).
COUNTIES, PEOPLE, TOTAL = 30, 2000.0, 1200


def _scenario(number: int = 1) -> tuple[Scenario, Geography]:
    population = np.full(COUNTIES, PEOPLE)
    rate = np.full(COUNTIES, TOTAL / (COUNTIES * PEOPLE))
    geo = Geography(state=np.repeat(np.array(["NM", "NY", "CC"]), COUNTIES // 3),
                    urban=np.arange(COUNTIES) % 2 == 0)  # fmt: skip
    return Scenario(number=number, population=population, rate=rate, total=TOTAL), geo


def _prior_datasets(count: int, rng) -> np.ndarray:
    """Confidential tables drawn from the posterior's own prior given the public total:
    independent negative binomials of shape 1 and equal means (the counties' populations
    are equal), conditioned on their sum, are the Dirichlet-multinomial DirMult(y., 1)."""
    theta = rng.dirichlet(np.ones(COUNTIES), size=count)
    return np.stack([rng.multinomial(TOTAL, p) for p in theta]).astype(np.int64)


def _spec(arms, datasets: int, epsilons=(0.5,), methods=("combining", "posterior")):
    return Study1Coverage(scenarios=(1,), level=0.9, sets=5, datasets=datasets,
                          epsilons=tuple(epsilons), arms=tuple(map(study1_arm, arms)),
                          methods=tuple(methods))  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["md", "pg_national_certified"])
def test_posterior_covers_at_its_level_where_its_model_holds(arm):
    """80 tables drawn from the posterior's prior (md's likelihood is exact; pg's national
    prior gives every county the same p, where the normaliser is exact too), each released
    as 5 sets at epsilon 0.5: the posterior's 90% intervals of the county rates and of the
    two disparities cover within 3 Monte Carlo errors of 0.9, and the errors are small
    enough (under 0.02 and 0.05) for that to say something."""
    scenario, geo = _scenario()
    rng = np.random.default_rng(54)
    datasets = _prior_datasets(80, rng)
    rows = arm_coverage(scenario, geo, datasets, study1_arm(arm), _spec([arm], 80), rng,
                        np.random.default_rng(55))  # fmt: skip
    assert [(row["method"], row["quantity"]) for row in rows] == [
        (m, q) for m in ("combining", "posterior") for q in ("area_rate", "disparity")
    ]
    disparity = next(row for row in rows if row["method"] == "posterior"
                     and row["quantity"] == "disparity")  # fmt: skip
    assert disparity["releases"] == 80
    assert 0 < disparity["coverage_se"] < 0.05, disparity
    assert abs(disparity["coverage"] - 0.9) <= 3 * disparity["coverage_se"], disparity
    found = {row["method"]: row for row in rows if row["quantity"] == "area_rate"}
    posterior = found["posterior"]
    assert posterior["releases"] == 80
    assert 0 < posterior["coverage_se"] < 0.02, posterior
    assert abs(posterior["coverage"] - 0.9) <= 3 * posterior["coverage_se"], posterior
    # the intervals carry the privacy noise: wider than with no privacy
    assert posterior["width_ratio"] > 1.0
    # the combining rules read the sets, shrunk towards the prior, as the truth: they
    # cover far less (about 0.53 here)
    combining = found["combining"]
    assert combining["coverage"] < 0.9 - 3 * combining["coverage_se"] - 0.2, combining


@pytest.mark.slow
def test_posterior_over_covers_where_the_truth_varies_less_than_its_prior_says():
    """The same release of tables whose county rates are all equal (Study 1's scenario 1):
    the prior (a coefficient of variation of 1) is far wider than the truth varies, and
    the posterior's intervals hold every county's rate (0.9 is its level on average over
    its prior, not on every truth)."""
    scenario, geo = _scenario()
    rng = np.random.default_rng(54)
    datasets = rng.multinomial(TOTAL, np.full(COUNTIES, 1 / COUNTIES), 80)
    rows = arm_coverage(scenario, geo, datasets, study1_arm("md"), _spec(["md"], 80), rng,
                        np.random.default_rng(55))  # fmt: skip
    posterior = next(row for row in rows if row["method"] == "posterior"
                     and row["quantity"] == "area_rate")  # fmt: skip
    assert posterior["coverage"] > 0.9 + 3 * max(posterior["coverage_se"], 0.01), posterior


@pytest.mark.slow
def test_posterior_disparities_under_cover_where_many_small_counties_pull_together():
    """The case where the posterior is known to fail (the module's docstring): 400 small
    counties (2 to 6 deaths each on average), the 40 urban ones at 3 times the others' rate
    and the public rate one for all, released by md at epsilon 100. Each county's interval
    covers (the pull of its prior is small against its own spread), but over a group the
    pulls add up in one direction beyond the group's posterior spread: the disparities'
    intervals cover far below 0.9 (0.35 here), while the combining rules' hold them."""
    counties = 400
    urban = np.arange(counties) < 40
    rate = np.where(urban, 3.0, 1.0) * 1e-3
    total = int(round(rate.sum() * PEOPLE))
    people = np.full(counties, PEOPLE)
    scenario = Scenario(number=1, population=people, rate=np.full(counties, total / people.sum()),
                        total=total)  # fmt: skip
    geo = Geography(state=np.repeat(np.array(["NM", "NY", "CC", "DD"]), counties // 4),
                    urban=urban)  # fmt: skip
    rng = np.random.default_rng(1)
    datasets = rng.multinomial(total, rate / rate.sum(), 20)
    spec = Study1Coverage((1,), 0.9, 5, 20, (100.0,), (study1_arm("md"),),
                          ("combining", "posterior"))  # fmt: skip
    rows = arm_coverage(scenario, geo, datasets, study1_arm("md"), spec, rng,
                        np.random.default_rng(2))  # fmt: skip
    found = {(row["method"], row["quantity"]): row for row in rows}
    posterior = found["posterior", "disparity"]
    assert posterior["coverage"] < 0.9 - 3 * posterior["coverage_se"], posterior
    assert found["posterior", "area_rate"]["coverage"] > 0.9, found["posterior", "area_rate"]
    assert found["combining", "disparity"]["coverage"] >= 0.9, found["combining", "disparity"]


def test_a_county_s_truth_is_its_dataset_s_rate_and_its_exact_interval_garwood():
    from scipy.stats import chi2

    counts = np.array([0, 3, 40])
    areas = county_areas([1000.0, 2000.0, 4000.0], counts, 0.9)
    assert np.allclose(areas.truth, counts / np.array([1000, 2000, 4000]) * 1e5)
    upper = chi2.ppf(0.95, 2 * (counts + 1)) / 2
    lower = np.where(counts > 0, chi2.ppf(0.05, 2 * np.maximum(counts, 1)) / 2, 0.0)
    assert np.allclose(areas.exact_width, (upper - lower) / np.array([1000, 2000, 4000]) * 1e5)
    assert list(areas.codes) == [0, 1, 2]


def test_a_disparity_s_truth_is_study1_s_ratio_and_its_exact_interval_the_log_ratio_one():
    """The truth of each disparity is the ratio Study 1's metrics give the dataset's rates
    (dpcounts.studies.study1.group_metrics), its exact width the log-ratio normal
    interval's of the groups' pooled counts, computed here by hand."""
    from scipy.stats import norm

    from dpcounts.studies.study1 import group_metrics

    scenario, geo = _scenario()
    counts = np.random.default_rng(7).multinomial(TOTAL, np.full(COUNTIES, 1 / COUNTIES))
    found = county_disparities(geo, scenario.population, counts, 0.9)
    metrics = group_metrics(counts / scenario.population, scenario, geo)
    assert found.quantity == "disparity" and found.names == ("urban_rural", "nm_ny")
    assert np.allclose(found.truth, [metrics["ratio_urban_rural"], metrics["ratio_nm_ny"]])
    z = norm.ppf(0.95)
    for k, (top, bottom) in enumerate([("urban", "rural"), ("nm", "ny")]):
        events = counts[geo.groups[top]].sum(), counts[geo.groups[bottom]].sum()
        spread = z * np.sqrt(1 / events[0] + 1 / events[1])
        width = found.truth[k] * (np.exp(spread) - np.exp(-spread))
        assert np.isclose(found.exact_width[k], width)
    # a geography without New Mexico has the urban / rural disparity alone
    other = Geography(state=np.repeat(np.array(["AA", "NY", "CC"]), COUNTIES // 3),
                      urban=geo.urban)  # fmt: skip
    assert county_disparities(other, scenario.population, counts, 0.9).names == ("urban_rural",)


def _artifacts(tmp_path, number=4, datasets=3):
    """A scenario artifact and its datasets artifact, as Study 1 writes them."""
    scenario, geo = _scenario(number)
    frame = pd.DataFrame({"scenario": number, "fips": [f"{i:05d}" for i in range(COUNTIES)],
                          "state": geo.state, "urban": geo.urban,
                          "population": scenario.population, "rate": scenario.rate,
                          "total": TOTAL})  # fmt: skip
    scenario_path, datasets_path = tmp_path / "scenario.parquet", tmp_path / "datasets.parquet"
    frame.to_parquet(scenario_path)
    y = np.random.default_rng(1).multinomial(TOTAL, np.full(COUNTIES, 1 / COUNTIES), datasets)
    datasets_long(y).to_parquet(datasets_path)
    return [scenario_path], [datasets_path]


def test_each_arm_draws_from_its_own_stream_and_the_guide_says_it(tmp_path):
    scenarios, datasets = _artifacts(tmp_path)
    both = _spec(["md", "pg_state_certified"], 3, epsilons=(0.1, 10.0))
    both = Study1Coverage(**{**both.__dict__, "scenarios": (4,)})
    table = coverage_table(scenarios, datasets, both, seed=3)
    assert list(table.columns) == COLUMNS
    assert len(table) == 2 * 2 * 2 * 2  # arms x epsilons x methods x quantities
    assert list(table["quantity"].unique()) == ["area_rate", "disparity"]  # in that order
    assert table["releases"].eq(3).all() and table["scenario"].eq(4).all()
    # an arm's rows do not depend on the other arms scored beside it
    alone = Study1Coverage(**{**both.__dict__, "arms": (study1_arm("pg_state_certified"),)})
    mine = table[table["arm"] == "pg_state_certified"].reset_index(drop=True)
    pd.testing.assert_frame_equal(coverage_table(scenarios, datasets, alone, seed=3), mine)
    guide = coverage_guide(table, both)
    assert list(guide.columns) == GUIDE_COLUMNS and len(guide) == 8
    words = "90% (?:posterior|combining-rule) intervals of the {} from 5 sets"
    for quantity, unit in [("area_rate", "areas' rates"), ("disparity", "disparities")]:
        assert guide[guide["quantity"] == quantity]["text"].str.contains(words.format(unit)).all()
    other = Study1Coverage(**{**both.__dict__, "scenarios": (2,)})
    with pytest.raises(ValueError, match="holds scenario 4, expected 2"):
        coverage_table(scenarios, datasets, other, seed=3)


def _config(**coverage) -> dict:
    study1 = copy.deepcopy(schema_defaults()["study1"])
    study1["coverage"].update(coverage)
    return study1


def test_the_shipped_defaults_make_a_setting():
    spec = Study1Coverage.from_config(_config())
    assert spec.scenarios == (4,) and spec.sets == 5 and spec.level == 0.9
    assert [arm.name for arm in spec.arms] == ["md", "pg_national_certified",
                                               "pg_state_certified", "geometric"]  # fmt: skip


def test_the_geometric_baseline_is_scored_by_the_combining_rules_alone():
    scenario, geo = _scenario()
    rng = np.random.default_rng(5)
    datasets = _prior_datasets(4, rng)
    rows = arm_coverage(scenario, geo, datasets, study1_arm("geometric"),
                        _spec(["geometric"], 4, epsilons=(0.1, 100.0)), rng,
                        np.random.default_rng(6))  # fmt: skip
    assert [(row["epsilon"], row["method"]) for row in rows] == [
        (0.1, "combining"),
        (0.1, "combining"),
        (100.0, "combining"),
        (100.0, "combining"),
    ]
    assert [row["quantity"] for row in rows] == ["area_rate", "disparity"] * 2
    # at epsilon 100 the sets are the dataset: each county's interval is the combining
    # rules' on its own count, which holds it
    assert rows[2]["coverage"] == 1.0 and rows[0]["coverage"] < 1.0
    with pytest.raises(ValueError, match="study1.coverage.methods: .*no calibration"):
        Study1Coverage.from_config(_config(arms=["geometric"], methods=["posterior"]))


@pytest.mark.parametrize("key, value, words", [
    ("epsilons", [0.5], "are not in Study 1's grid"),
    ("arms", ["pg_state_sanitised"], "no data-independent calibration"),
    ("datasets", 201, "expected 2 to study1.datasets"),
    ("level", 1.5, "expected a number in"),
])  # fmt: skip
def test_a_bad_setting_is_refused_naming_its_key(key, value, words):
    with pytest.raises(ValueError, match=f"study1.coverage.{key}: .*{words}"):
        Study1Coverage.from_config(_config(**{key: value}))


def test_a_scenario_study1_does_not_run_is_refused():
    study1 = _config(scenarios=[4])
    study1["scenarios"] = [1, 2]
    with pytest.raises(ValueError, match=r"study1.coverage.scenarios: \[4\] are not run"):
        Study1Coverage.from_config(study1)


def test_the_figure_draws_the_nominal_level_and_every_arm_and_method_and_quantity(tmp_path):
    from dpcounts.io import save_figure
    from dpcounts.plots.study1 import figure_coverage

    scenarios, datasets = _artifacts(tmp_path)
    spec = Study1Coverage(**{**_spec(["md", "pg_state_certified"], 3, (0.1, 10.0)).__dict__,
                             "scenarios": (4,)})  # fmt: skip
    fig = figure_coverage(coverage_table(scenarios, datasets, spec, seed=3))
    top = fig.axes[0]
    assert any(np.allclose(line.get_ydata(), 0.9) for line in top.get_lines())
    labels = top.get_legend_handles_labels()[1]
    assert len([label for label in labels if label != "nominal level (90%)"]) == 4
    # a column per quantity: the counties' rates, then the disparities
    titles = [ax.get_title() for ax in fig.axes[:4] if ax.get_title()]
    assert [t.splitlines()[-1] for t in titles] == ["the areas' rates", "the disparities"]
    save_figure(fig, tmp_path / "coverage.png")
    assert (tmp_path / "coverage.png").stat().st_size > 10_000
