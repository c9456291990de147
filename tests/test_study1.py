from __future__ import annotations

import numpy as np
import pytest
from workflow_helpers import schema_defaults

from dpcounts.data.scenarios import draw_datasets, make_scenario
from dpcounts.studies.study1 import ARM_NAMES, METRICS, Geography, score_datasets, truth_metrics

PRIOR_SHARE = schema_defaults()["study1"]["prior_budget_fraction"]

STATES = np.array(["NM", "NM", "NY", "NY", "TX", "TX"])
URBAN = np.array([False, False, True, True, True, False])
POP = np.array([3000.0, 1500.0, 90000.0, 40000.0, 60000.0, 5000.0])
RATE = np.array([4e-4, 6e-4, 3e-4, 5e-4, 2e-4, 8e-4])


@pytest.fixture(scope="module")
def setup():
    scenario = make_scenario(4, POP, RATE, total=600)
    geo = Geography(state=STATES, urban=URBAN)
    data = draw_datasets(scenario, 5, np.random.default_rng(3))
    return scenario, geo, data


@pytest.mark.parametrize("arm", ARM_NAMES)
def test_every_arm_scores_every_metric(setup, arm):
    scenario, geo, data = setup
    scores, sums = score_datasets(
        scenario,
        geo,
        data,
        np.arange(5),
        arm,
        [0.5, 5.0],
        np.random.default_rng(1),
        map_epsilons=[5.0],
        prior_budget_fraction=PRIOR_SHARE,
    )
    assert set(scores["metric"]) == set(METRICS)
    assert len(scores) == 5 * 2 * len(METRICS)
    assert np.isfinite(scores["value"]).all()
    assert set(sums["epsilon"]) == {5.0} and len(sums) == POP.size


def test_truth_metrics_by_hand(setup):
    scenario, geo, _ = setup
    truth = truth_metrics(scenario, geo)
    nm = (3000 * 4e-4 + 1500 * 6e-4) / 4500 * 1e5
    ny = (90000 * 3e-4 + 40000 * 5e-4) / 130000 * 1e5
    assert truth["rate_nm"] == pytest.approx(nm)
    assert truth["ratio_nm_ny"] == pytest.approx(nm / ny)
    assert truth["rmse"] == 0.0


def test_md_and_pg_national_agree_in_scenario_1():
    """Same n and same rate: MD and PG-national have the same posterior mean rates."""
    scenario = make_scenario(1, POP, RATE, total=60)
    geo = Geography(state=STATES, urban=URBAN)
    y = draw_datasets(scenario, 1, np.random.default_rng(5))
    out = {}
    for mech in ("md", "pg_national"):
        many = np.repeat(y, 4000, axis=0)
        scores, _ = score_datasets(
            scenario,
            geo,
            many,
            np.arange(len(many)),
            mech,
            [1.0],
            np.random.default_rng(9),
            prior_budget_fraction=PRIOR_SHARE,
        )
        out[mech] = scores[scores["metric"] == "rate_urban"]["value"].to_numpy()
    se = np.hypot(out["md"].std(), out["pg_national"].std()) / np.sqrt(4000)
    assert abs(out["md"].mean() - out["pg_national"].mean()) < 4 * se


def test_behaviour_checks_read_the_summary():
    import pandas as pd

    from dpcounts.studies.study1 import behaviour_checks

    def row(scenario, arm, metric, eps, med, lo, hi):
        return dict(
            scenario=scenario,
            arm=arm,
            metric=metric,
            epsilon=eps,
            median=med,
            lower=lo,
            upper=hi,
        )

    rows = [
        row(1, "md", "rmse", 1.0, 10, 9, 11),
        row(1, "pg_national", "rmse", 1.0, 8, 7, 9),
        row(4, "md", "rmse", 1.0, 100, 90, 110),
        row(4, "md", "rmse", 10.0, 50, 45, 55),
        row(4, "pg_national", "rmse", 1.0, 10, 9, 11),
        row(4, "pg_national", "rmse", 10.0, 50, 44, 56),
        row(4, "pg_state", "rmse", 1.0, 10, 9, 11),
        row(4, "pg_state", "rmse", 10.0, 40, 35, 44),
        row(4, "truth", "ratio_nm_ny", float("nan"), 0.8, 0.8, 0.8),
        row(4, "md", "ratio_nm_ny", 1.0, 7.5, 7, 8),
        row(4, "truth", "ratio_urban_rural", float("nan"), 1.0, 1.0, 1.0),
    ]
    checks = behaviour_checks(pd.DataFrame(rows))
    assert checks["scenario1_md_over_pg_national_rmse"] == {"min": 1.25, "max": 1.25}
    assert checks["scenario4_pg_national_band_below_md_up_to_epsilon"] == 1.0
    assert checks["scenario4_pg_national_first_tie_epsilon"] == 10.0
    assert checks["scenario4_pg_state_band_below_md_up_to_epsilon"] == 10.0
    assert checks["scenario4_pg_state_first_tie_epsilon"] is None
    assert checks["scenario4_ratio_nm_ny_md_smallest_epsilon"] == 7.5
    assert checks["scenario4_ratio_nm_ny_truth"] == 0.8


# ---- Appendix C: several age groups in one summary ----------------------------------------
def _summary(scale=1.0):
    import pandas as pd

    rows = []
    for scenario in (1, 4):
        for mech in ("md", "pg_state"):
            for eps in (0.1, 1.0):
                for metric in METRICS:
                    rows.append((scenario, mech, eps, metric, scale, scale / 2, scale * 2))
        for metric in METRICS:
            rows.append((scenario, "truth", np.nan, metric, scale, scale, scale))
    columns = ["scenario", "arm", "epsilon", "metric", "median", "lower", "upper"]
    return pd.DataFrame(rows, columns=columns)


def test_stack_age_groups_labels_rows_and_keeps_the_order():
    from dpcounts.studies.study1 import SUMMARY_COLUMNS, stack_age_groups

    stacked = stack_age_groups({"85+": _summary(3.0), "45-54": _summary(1.0)})
    assert list(stacked.columns) == ["age_group", *SUMMARY_COLUMNS]
    assert list(dict.fromkeys(stacked["age_group"])) == ["85+", "45-54"]
    assert len(stacked) == 2 * len(_summary())
    assert (stacked.loc[stacked["age_group"] == "85+", "median"] == 3.0).all()
    assert set(stacked.loc[stacked["arm"] == "truth", "age_group"]) == {"85+", "45-54"}


def test_stack_age_groups_rejects_bad_input():
    from dpcounts.studies.study1 import stack_age_groups

    with pytest.raises(ValueError, match="at least one"):
        stack_age_groups({})
    with pytest.raises(ValueError, match="missing column"):
        stack_age_groups({"45-54": _summary().drop(columns="upper")})
    with pytest.raises(ValueError, match="already has an age_group"):
        stack_age_groups({"45-54": _summary().assign(age_group="x")})


@pytest.mark.slow
def test_appendix_figures_say_the_truth_is_modelled():
    import matplotlib.pyplot as plt

    from dpcounts.plots.study1 import figure_appendix_disparities, figure_appendix_rmse
    from dpcounts.studies.study1 import stack_age_groups

    summary = stack_age_groups({"45-54": _summary(1.0), "85+": _summary(5.0)})
    rmse = figure_appendix_rmse(summary, correlation=0.7)
    visible = [ax for ax in rmse.axes if ax.get_visible()]
    assert len(visible) == 2 * 2  # age groups x scenarios
    assert "MODELLED" in rmse._suptitle.get_text() and "0.7" in rmse._suptitle.get_text()
    assert all(ax.get_xscale() == "log" for ax in visible)
    assert visible[0].get_title().startswith("Ages 45-54")
    assert visible[-1].get_title().startswith("Ages 85+")
    disparities = figure_appendix_disparities(summary)
    assert len(disparities.axes) == 2 * 4  # age groups x (2 comparisons x 2 arms)
    assert "MODELLED" in disparities._suptitle.get_text()
    # no scenario 4: a figure that says so instead of an empty grid
    missing = figure_appendix_disparities(summary[summary["scenario"] == 1])
    assert "not in this Appendix C run" in missing.axes[0].texts[0].get_text()
    with pytest.raises(ValueError, match="age_group"):
        figure_appendix_rmse(_summary())
    plt.close("all")
