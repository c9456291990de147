"""The suppression arm of a study (issue #53): the CDC WONDER rule applied to the truth, its
completed table scored by every measure, the differencing attack with the published
margins, and the guide's comparison of each DP arm with it; on the shipped pennLC table,
the issue's numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_study_guide import run_study, two_groups
from workflow_helpers import filled_definition

from dpcounts.studies.stage.definition import StudyConfigError
from dpcounts.studies.stage.guide import compare_with_suppression as compare
from dpcounts.studies.stage.measures import ATTACK, KINDS, Measure, study_measures
from dpcounts.studies.stage.suppression import ARM, headline, suppression_result

BASE = {"table": "t.csv", "keys": ["area", "group"], "count": "y", "population": "n",
        "area": "area", "arms": {"pg": ["certified"]}}  # fmt: skip


def test_the_default_rule_is_cdc_wonders_with_every_key_and_pair_published():
    d = filled_definition("s", BASE | {"suppression": {"enabled": True}})
    s = d.suppression
    assert (s.low, s.high, s.show_zeros, s.complementary) == (1, 9, True, None)
    assert s.completion == "midpoint"
    assert s.published == (("area",), ("group",), ("area", "group"))
    assert filled_definition("s", BASE).suppression is None
    assert filled_definition("s", BASE | {"suppression": {"low": 2}}).suppression is None


@pytest.mark.parametrize(
    ("spec", "key", "words"),
    [({"published": [["county"]]}, r"suppression\.published\[0\]", "not key or attribute"),
     ({"low": 5, "high": 3}, r"suppression\.high", "expected low <= high")],
)  # fmt: skip
def test_a_wrong_suppression_is_refused_naming_its_key(spec, key, words):
    with pytest.raises(StudyConfigError, match=key) as error:
        filled_definition("s", BASE | {"suppression": {"enabled": True, **spec}})
    assert words in str(error.value)


def table() -> pd.DataFrame:
    """6 areas x 2 groups: counts 0, 1..9 (hidden) and larger, with expected counts."""
    y = [0, 12, 3, 40, 7, 25, 1, 30, 50, 2, 9, 60]
    areas = [f"a{k}" for k in range(6) for _ in range(2)]
    return pd.DataFrame({"area": areas, "group": ["a", "b"] * 6, "y": y,
                         "n": [10_000] * 12, "prior_rate": [0.002] * 12})  # fmt: skip


def test_the_completed_table_is_scored_by_every_measure_and_attacked(tmp_path):
    frame = table()
    d = filled_definition("s", BASE | {"suppression": {"enabled": True}}, base=tmp_path)
    measures = study_measures(d, frame)
    result = suppression_result(d, frame, measures, np.random.default_rng(0))
    hidden = np.array([3, 7, 1, 2, 9])  # the counts 1 to 9; the zero is shown
    assert result["suppressed"] == hidden.size and result["strata"] == 12
    completed = frame["y"].to_numpy(float)
    completed[np.isin(frame["y"], hidden)] = 5.0  # the midpoint of 1..9
    expected = measures.values(completed, frame["y"].to_numpy()).iloc[0].drop(list(ATTACK))
    assert result["measures"] == pytest.approx(expected.to_dict())
    # by hand: 0.5 x |5 - 3| ... the relative error over the 12 strata
    error = np.abs(completed - frame["y"]) / np.maximum(frame["y"], 1)
    assert result["measures"]["relative_error"] == pytest.approx(error.mean())
    attack = result["attack"]
    assert attack["cells"] == hidden.size and attack["exact"] == hidden.size
    # area a1 holds 3 (hidden) and 40 (shown), its total published: 3 is pinned; so is
    # every hidden cell whose area holds no other hidden cell
    assert attack["pinned"]["count"] == hidden.size


def rows(arm, epsilons, low, high, truth=0.0, reference=1.0):
    return pd.DataFrame({"arm": arm, "metric": "m", "epsilon": epsilons, "median": low,
                         "median_lower": low, "median_upper": high, "truth": truth,
                         "reference": reference})  # fmt: skip


def guide_row(arm, reference=1.0):
    return {"study": "s", "arm": arm, "arm_label": arm, "measure": "m", "truth": 0.0,
            "prior": 5.0, "reference": reference, "epsilon_prior": 0.5, "reason": "r",
            "verdict": "met"}  # fmt: skip


ERROR = Measure("m", "an error", "unit", KINDS["relative"], function=None)


def test_each_dp_arm_is_set_against_suppression_from_the_epsilon_it_is_as_near():
    """Suppression's relative error 0.3: the first arm's whole interval is at most 0.3 from
    epsilon 1 on (so from 1.5 with its prior's 0.5); the second never, as synthesis alone
    is further (0.4); the third only beyond what a release allows."""
    eps = [0.1, 1.0, 10.0]
    summary = pd.concat([
        rows("near", eps, [0.5, 0.2, 0.1], [0.6, 0.3, 0.15]),
        rows("far", eps, [0.9, 0.5, 0.45], [1.0, 0.6, 0.5], reference=0.4),
        rows("late", eps, [0.9, 0.5, 0.25], [1.0, 0.6, 0.28], reference=0.1),
    ])  # fmt: skip
    guide = pd.DataFrame([guide_row("near", 0.1), guide_row("far", 0.4),
                          guide_row("late", 0.1)])  # fmt: skip
    result = {"study": "s", "measures": {"m": 0.3}, "rule": {"low": 1, "high": 9},
              "suppressed": 5, "strata": 12, "completion": "midpoint",
              "attack": {"cells": 5, "pinned": {"estimate": 0.4},
                         "within_one": {"estimate": 0.8}}}  # fmt: skip
    out = compare(guide, summary, result, [ERROR], tolerance=0.1, scale=1.0,
                  releasable=lambda arm, epsilon: 5.0)  # fmt: skip
    by_arm = out.set_index("arm")
    assert by_arm.loc["near", "epsilon_vs_suppression"] == pytest.approx(1.5)
    assert "as near the truth as suppression (0.3" in by_arm.loc["near", "reason"]
    assert math.isnan(by_arm.loc["far", "epsilon_vs_suppression"])
    assert "synthesis alone, with no privacy, is further (0.4" in by_arm.loc["far", "reason"]
    assert math.isnan(by_arm.loc["late", "epsilon_vs_suppression"])
    assert "beyond a release's largest (5 per set)" in by_arm.loc["late", "reason"]
    row = by_arm.loc[ARM]
    assert row["verdict"] == "suppression_loses" and row["suppression"] == 0.3  # 0.3 > 0.1
    lines = headline(out, result, [ERROR])
    assert lines == ["suppression keeps 0 of the 1 measures",
                     "differencing pins 40% of the 5 suppressed counts exactly (80% to "
                     "within one)"]  # fmt: skip


def test_the_guide_of_a_study_with_suppression_has_its_rows(tmp_path):
    """The study stage in process with a suppression arm: its rows, one per measure, and
    every DP row's comparison with it."""
    from dpcounts.seeding import job_rng
    from dpcounts.studies.stage.guide import GUIDE_COLUMNS, study_guide
    from dpcounts.studies.stage.prior import prior_rates
    from dpcounts.studies.stage.table import load_study_table

    d, summary, _ = run_study(tmp_path, two_groups(6, 300), epsilons=[1.0, 100.0],
                              suppression={"enabled": True})  # fmt: skip
    strata = load_study_table(d)
    strata["prior_rate"], spent = prior_rates(d, strata, job_rng(1, "prior"))
    result = suppression_result(d, strata, study_measures(d, strata), np.random.default_rng(1))
    assert result["suppressed"] == len(strata)  # counts of 2 to 7: every one hidden
    guide = study_guide(d, strata, summary, spent, pd.DataFrame(), result)
    assert list(guide.columns) == GUIDE_COLUMNS
    mine = guide[guide["arm"] == ARM]
    assert len(mine) == guide["measure"].nunique() == len(guide) - len(mine)
    assert set(mine["verdict"]) <= {"suppression_keeps", "suppression_loses"}
    dp = guide[guide["arm"] != ARM]
    assert dp["suppression"].tolist() == [result["measures"][m] for m in dp["measure"]]
    assert dp["reason"].str.contains("suppression").all()


def test_pennlc_as_the_issue_measured_it():
    """The shipped pennLC table (1,072 strata; 351 counts of 1 to 9), every key's and pair
    of keys' totals published: 185 pinned exactly, 76% within one, mean width 1.39."""
    from dpcounts.attack.differencing import default_margins, feasible_ranges
    from dpcounts.baselines.suppression import SuppressionRule

    strata = pd.read_parquet("data/pennlc_strata.parquet")
    keys = strata[["county", "race", "sex", "age"]]
    y = strata["cases"].to_numpy()
    rule = SuppressionRule()
    mask = rule.suppress(y)
    summary = feasible_ranges(y, mask, keys, default_margins(list(keys)), rule=rule).summary()
    assert summary["cells"] == 351 and summary["pinned"]["count"] == 185
    assert summary["within_one"]["estimate"] == pytest.approx(0.76, abs=0.005)
    assert summary["mean_width"]["estimate"] == pytest.approx(1.39, abs=0.005)


def test_the_attacker_reads_one_synthetic_table_as_the_truth():
    """Of the true counts 1 to 9 (3, 7, 1, 9), a table giving 3, 8, 0 and 9 has two exact
    (3 and 9) and four within one, and so has one giving 2.5, 6.49, 1.5 and 9; counts
    outside 1..9 are not scored; a fractional value (the prior's expected count) is
    rounded half up."""
    from dpcounts.studies.stage.measures import attack_shares

    truth = np.array([0, 3, 7, 1, 9, 40])
    tables = np.array([[5, 3, 8, 0, 9, 0], [0, 2.5, 6.49, 1.5, 9, 40]])
    shares = attack_shares(tables, truth, 1, 9)
    assert shares["attack:exact"].tolist() == [0.5, 0.5]  # 2.5 -> 3, 6.49 -> 6, 1.5 -> 2
    assert shares["attack:within_one"].tolist() == [1.0, 1.0]
    assert np.isnan(attack_shares(tables, np.array([0, 10, 20, 0, 0, 40]), 1, 9)[
        "attack:exact"]).all()  # fmt: skip


def test_a_study_with_suppression_scores_the_attack_but_judges_it_not(tmp_path):
    from dpcounts.plots.study import figure_attack
    from dpcounts.studies.stage.measures import ATTACK

    d, summary, guide = run_study(tmp_path, two_groups(6, 300), epsilons=[1.0, 100.0],
                                  suppression={"enabled": True})  # fmt: skip
    attack = summary[summary["metric"].isin(ATTACK)]
    assert len(attack) == 2 * len(ATTACK) and (attack["truth"] == 1.0).all()
    assert not guide["measure"].isin(ATTACK).any()
    result = {"rule": {"low": 1, "high": 9}, "attack": {"cells": 12, "pinned": {
        "estimate": 0.25}, "within_one": {"estimate": 0.5}}}  # fmt: skip
    figure = figure_attack(summary, result, d.arms, "s")
    gold = [line for ax in figure.axes for line in ax.get_lines()
            if line.get_label().startswith("differencing")]  # fmt: skip
    assert sorted({line.get_ydata()[0] for line in gold}) == [0.25, 0.5]


def test_the_attacker_with_a_releases_sets_takes_the_mode_over_them():
    """Sets of 2 tables: rows 0-1 and 2-3 are releases (their shares on rows 0 and 2), row
    4 an incomplete one (NaN); the mode of (3, 4) is 3 (ties to the smaller), of (5, 5) 5."""
    from dpcounts.studies.stage.measures import mode_shares

    truth = np.array([3, 5, 20])
    tables = np.array([[3, 5, 20], [4, 6, 19], [2, 5, 0], [2, 5, 0], [3, 5, 20]])
    shares = mode_shares(tables, truth, 1, 9, 2)
    exact, within = shares["attack:mode_exact"], shares["attack:mode_within_one"]
    assert exact[[0, 2]].tolist() == [1.0, 0.5] and within[[0, 2]].tolist() == [1.0, 1.0]
    assert np.isnan(exact[[1, 3, 4]]).all() and np.isnan(within[[1, 3, 4]]).all()


def test_a_study_with_suppression_scores_the_posterior_attacker(tmp_path):
    """The posterior attacker's columns reach the summary, one value per release, beside
    its guess told the range with no set (the summary's prior); the guide judges neither,
    and the attack figure draws both."""
    from dpcounts.plots.study import figure_attack
    from dpcounts.studies.stage.measures import POSTERIOR

    d, summary, guide = run_study(tmp_path, two_groups(6, 300), epsilons=[1.0, 100.0],
                                  suppression={"enabled": True, "sets": 2})  # fmt: skip
    rows = summary[summary["metric"].isin(POSTERIOR)]
    assert len(rows) == 2 * len(POSTERIOR) and rows["median"].notna().all()
    assert rows["prior"].notna().all() and not guide["measure"].isin(POSTERIOR).any()
    result = {"rule": {"low": 1, "high": 9}, "sets": 2, "attack": {"cells": 12, "pinned": {
        "estimate": 0.25}, "within_one": {"estimate": 0.5}}}  # fmt: skip
    figure = figure_attack(summary, result, d.arms, "s")
    labels = {line.get_label() for ax in figure.axes for line in ax.get_lines()}
    assert any(label.startswith("median over releases: the posterior") for label in labels)
    assert any(label.startswith("told the range 1-9, no set") for label in labels)
