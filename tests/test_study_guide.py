"""The epsilon guide's verdicts (issue #25): each verdict on summary rows built by hand
(the rule, its order, its Monte Carlo robustness), and each on a small table of its own,
run through the study stage's library as the workflow runs it (strata, prior,
calibrations, draws, the no-privacy reference, summary, guide)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import filled_definition

from dpcounts.seeding import job_rng
from dpcounts.studies.stage.guide import VERDICTS, Truncation, judge, study_guide
from dpcounts.studies.stage.measures import KINDS, MEASURES, Measure, study_measures
from dpcounts.studies.stage.prior import prior_rates
from dpcounts.studies.stage.simulate import calibrate_chunk, reference_metrics, simulate_chunk
from dpcounts.studies.stage.summary import summarise_study
from dpcounts.studies.stage.table import load_study_table

RATIO = Measure("disparity:d", "d", "rate ratio", KINDS["ratio"], function=None)
RMSE = MEASURES[0]


def rows(truth, prior, reference, medians, *, halfwidth=0.01, epsilons=(0.1, 1.0, 10.0),
         in_bounds=None):  # fmt: skip
    """Summary rows of one arm: each median with a confidence interval of +- halfwidth;
    ``in_bounds``: the measure of the true counts clamped to its bounds (default: truth)."""
    medians = np.asarray(medians, dtype=float)
    return pd.DataFrame({"epsilon": epsilons, "median": medians,
                         "median_lower": medians - halfwidth,
                         "median_upper": medians + halfwidth, "truth": truth, "prior": prior,
                         "reference": reference,
                         "truth_in_bounds": truth if in_bounds is None else in_bounds})  # fmt: skip


def verdict(measure, frame, *, outside=None, **options):
    """``judge`` with 20 sets; ``outside``: a truncated arm with that share of its true
    counts outside its bounds (its shapes above their floor)."""
    options = {"scale": 10.0, "tolerance": 0.1, "epsilon_prior": 0.0, "sets": 20} | options
    if outside is not None:
        options["truncation"] = Truncation(outside=outside, tail=0.001, inflation=1.0)
    return judge(measure, frame, **options)


# ---- the rule, on rows built by hand --------------------------------------------------------
def test_met_from_the_epsilon_where_privacy_stops_moving_it_and_the_prior_is_paid():
    found = verdict(RATIO, rows(2.0, 1.0, 2.02, [3.5, 2.1, 2.0]), epsilon_prior=0.25)
    assert found["verdict"] == "met"
    assert found["epsilon"] == pytest.approx(1.25)  # 1.0 of the sets and the prior's 0.25
    assert "the prior's 0.25 included" in found["reason"]
    # 2.02 x exp(+-0.1 x log 2): a tenth of the true departure from parity either side
    assert (found["within_low"], found["within_high"]) == pytest.approx((1.8847, 2.1650), 1e-4)


def test_synthesis_alone_loses_what_no_epsilon_can_bring_back():
    """The reference itself is 30% off the truth: even the arm that matches it at every
    epsilon does not keep the measure, and the reason says privacy adds nothing more."""
    found = verdict(RATIO, rows(2.0, 1.0, 1.4, [1.4, 1.4, 1.4]))
    assert found["verdict"] == "synthesis_loses" and math.isnan(found["epsilon"])
    assert "no epsilon helps" in found["reason"]
    assert "privacy adds no more than 0.1 from epsilon 0.1" in found["reason"]


def test_the_prior_alone_keeps_an_uninformative_measure():
    found = verdict(RATIO, rows(0.979, 0.984, 0.98, [0.98, 0.98, 0.98]))
    assert found["verdict"] == "prior_keeps"
    assert "keeping it says nothing" in found["reason"]


def test_the_prior_at_parity_does_not_keep_a_true_disparity_of_1117():
    """Tokyo's wards against the rest (a steward's trial, issue #52): truth 1.117, prior
    1.0, no privacy 1.11. The old rule, |value / reference - 1| <= 0.1, took a median of
    1.02 (the prior's own value, near enough) for a kept disparity. Judged by what it keeps
    of the departure from parity: the values kept are 1.11 x exp(+-0.1 x log 1.117), and
    1.02 is nearer the prior than the truth, so a larger epsilon is needed."""
    found = verdict(RATIO, rows(1.117, 1.0, 1.11, [1.02, 1.02, 1.02]))
    assert found["verdict"] == "beyond_grid"
    assert (found["within_low"], found["within_high"]) == pytest.approx((1.0978, 1.1224), 1e-4)
    # the prior's own value, at every epsilon: never kept
    assert verdict(RATIO, rows(1.117, 1.0, 1.11, [1.0, 1.0, 1.0]))["verdict"] == "beyond_grid"
    # a median of 1.01 to 1.03, as the truncated arm gave: not met either
    assert verdict(RATIO, rows(1.117, 1.0, 1.11, [1.03, 1.01, 1.01]))["verdict"] != "met"
    # the median keeping the departure within a tenth of it: met
    assert verdict(RATIO, rows(1.117, 1.0, 1.11, [1.03, 1.112, 1.11]))["verdict"] == "met"
    assert KINDS["ratio"].kept(1.0, 1.117, 0.1, truth=1.117, prior=1.0) == np.False_
    assert KINDS["ratio"].kept(1.01, 1.117, 0.1, truth=1.117, prior=1.0) == np.False_
    assert KINDS["ratio"].kept(1.11, 1.117, 0.1, truth=1.117, prior=1.0) == np.True_


def test_a_fall_of_128_percent_kept_at_40_percent_is_not_kept():
    """The second table of issue #52: a true 0.872 given as 0.947 keeps 40% of the fall
    (log 0.947 / log 0.872 = 0.40): not met, whatever the interval; the old rule (0.947 /
    0.872 - 1 = 8.6% <= 10%) called it met."""
    found = verdict(RATIO, rows(0.872, 1.0, 0.872, [0.947, 0.947, 0.947]))
    assert found["verdict"] == "beyond_grid"
    kind = KINDS["ratio"]
    assert not kind.kept(0.947, 0.872, 0.1, truth=0.872, prior=1.0)
    assert not kind.kept(0.947, 0.872, 0.1, truth=0.872)  # even without the prior's value
    assert kind.kept(0.862, 0.872, 0.1, truth=0.872, prior=1.0)


def test_a_value_nearer_the_prior_than_the_truth_is_never_kept():
    """Whatever the tolerance that tells the prior from the truth, a value nearer the
    prior's value than the truth (on the log scale) is not kept; the window is cut at
    sqrt(truth x prior). A tolerance that keeps the prior itself cannot tell them apart:
    the guide says the prior alone keeps it."""
    kind = KINDS["ratio"]
    assert verdict(RATIO, rows(1.117, 1.0, 1.11, [1.0, 1.0, 1.0]), tolerance=1.01)[
        "verdict"] == "prior_keeps"  # fmt: skip
    for tolerance in (0.1, 0.3, 0.6, 0.9):
        assert not kind.kept(1.05, 1.117, tolerance, truth=1.117, prior=1.0)
        assert not kind.kept(1.4, 1.2, tolerance, truth=1.2, prior=1.5)
        low, high = kind.within(1.117, tolerance, truth=1.117, prior=1.0)
        assert low >= math.sqrt(1.117) - 1e-12 and high > 1.117
    # a truth 1.03 whose no-privacy reference is nearer the prior: synthesis loses it
    found = verdict(RATIO, rows(1.03, 1.0, 1.012, [1.012, 1.012, 1.012]), tolerance=0.2)
    assert found["verdict"] == "synthesis_loses"
    assert "missed, infinite when nearer the prior than the truth: |log(value" in found["reason"]


def test_truths_near_parity_are_judged_on_an_absolute_band():
    """A truth within 10% of 1 is held to a tenth of log 1.1 (about 1%), not to a tenth
    of its own departure: a true 1.01 given as 1.018 is kept (prior unknown); the prior
    at 1.0 is within that band of 1.005, so the measure is uninformative there."""
    kind = KINDS["ratio"]
    assert kind.kept(1.018, 1.01, 0.1, truth=1.01)
    assert not kind.kept(1.025, 1.01, 0.1, truth=1.01)
    assert verdict(RATIO, rows(1.005, 1.0, 1.005, [1.0, 1.0, 1.0]))["verdict"] == "prior_keeps"


def test_bias_from_truncation_comes_first():
    """True counts outside the bounds, the arm away from the reference at the largest
    epsilon, and the true counts clamped to the bounds away too: that is said even where
    the prior alone keeps the measure."""
    frame = rows(1.10, 1.105, 1.10, [1.6, 1.45, 1.37], in_bounds=1.36)
    found = verdict(RATIO, frame, outside=0.094)
    assert found["verdict"] == "truncation_bias" and "9.4%" in found["reason"]
    assert "no epsilon brings it back" in found["reason"]
    assert verdict(RATIO, frame)["verdict"] == "prior_keeps"  # without counts outside


def test_the_truncation_bias_names_the_settings_that_change_it():
    """Issue #33 (c): the bounds, not epsilon, hold the measure away; the reason names the
    settings that make the bounds, with their values, and which way widens them."""
    frame = rows(1.10, 1.105, 1.10, [1.6, 1.45, 1.37], in_bounds=1.36)
    found = verdict(RATIO, frame, outside=0.094)
    assert "truncation.tail (here 0.001)" in found["reason"]
    assert "truncation.inflation (here 1)" in found["reason"]
    assert "a smaller tail or a larger inflation widens them" in found["reason"]
    assert "tail or inflation" in found["verdict_text"]


def test_a_truncated_arm_at_its_shape_floor_needs_no_larger_epsilon():
    """Issue #33 (a), a steward's trial: the truncated calibration's shapes sit at their
    floor (1/3) from epsilon 10 to 100 and the median does not move (2.02 -> 2.05 against
    2.45 with no privacy): more epsilon changes nothing, so the guide says so, and names
    the settings that do change it, never "a larger epsilon is needed"."""
    frame = rows(2.45, 1.0, 2.45, [1.5, 2.02, 2.05], epsilons=(1.0, 10.0, 100.0))
    floor = Truncation(outside=0.0, tail=0.00093, inflation=1.0, zero_lower=0.61,
                       at_floor=1.0, floor_from=10.0)  # fmt: skip
    found = verdict(RATIO, frame, truncation=floor, epsilon_prior=0.1)
    assert found["verdict"] == "shape_floor"
    assert "a larger epsilon is needed" not in found["reason"]
    assert "no epsilon helps" in found["reason"] and "no epsilon helps" in found["verdict_text"]
    assert "at their floor from epsilon 10.1 on" in found["reason"]  # total, prior included
    assert "it moved from 2.02 at epsilon 10.1" in found["reason"]
    assert "truncation.tail (here 0.00093)" in found["reason"]
    assert "truncation.inflation (here 1)" in found["reason"]
    assert found["shape_floor_from"] == pytest.approx(10.1)


def test_a_larger_epsilon_is_needed_only_where_it_moves_the_measure():
    """The same medians where a larger epsilon still moves the arm: an untruncated arm
    (its limit is the no-privacy reference) or a truncated one with shapes above their
    floor (the reason says that its floor may stop it short)."""
    frame = rows(2.45, 1.0, 2.45, [1.5, 2.02, 2.05], epsilons=(1.0, 10.0, 100.0))
    found = verdict(RATIO, frame)
    assert found["verdict"] == "beyond_grid" and "a larger epsilon is needed" in found["reason"]
    assert "tends to the no-privacy reference" in found["reason"]
    assert found["verdict_text"] == "a larger epsilon is needed (beyond the grid)"
    moving = Truncation(tail=0.001, inflation=1.0, zero_lower=0.6, at_floor=0.7)
    found = verdict(RATIO, frame, truncation=moving)
    assert found["verdict"] == "beyond_grid"
    assert "30% of its gamma shapes are still above their floor" in found["reason"]


def test_a_truncated_arm_that_comes_no_nearer_is_not_told_to_buy_epsilon():
    """pennLC's rural men in the tiny run: the truncated arm, 99% of its shapes at their
    floor, moves from 1.22 to 1.18 against 1.68 with no privacy over the top of the grid:
    away from the reference. A larger epsilon may not help, and the guide names the
    settings that change where the arm goes; an arm that came clearly nearer is told a
    larger epsilon is needed."""
    frame = rows(1.7, 1.0, 1.68, [1.3, 1.22, 1.18], epsilons=(0.5, 1.0, 4.0))
    nearly = Truncation(tail=0.00093, inflation=1.0, zero_lower=0.6, at_floor=0.99)
    found = verdict(RATIO, frame, truncation=nearly)
    assert found["verdict"] == "truncation_stalls"
    assert "a larger epsilon may not help" in found["reason"]
    assert "a larger epsilon is needed" not in found["reason"]
    assert "99% of its gamma shapes are at their floor" in found["reason"]
    assert "truncation.tail (here 0.00093)" in found["reason"]
    assert "tail or inflation" in found["verdict_text"]
    nearer = rows(1.7, 1.0, 1.68, [1.0, 1.18, 1.3], epsilons=(0.5, 1.0, 4.0))
    assert verdict(RATIO, nearer, truncation=nearly)["verdict"] == "beyond_grid"


def test_counts_outside_bounds_that_do_not_move_the_measure_are_no_bias():
    """Some true counts outside the bounds, but clamping them leaves the measure within
    tolerance of the truth: the arm just needs more epsilon, and the guide says so."""
    frame = rows(2.0, 1.0, 2.0, [3.0, 2.8, 2.5], in_bounds=2.02)
    assert verdict(RATIO, frame, outside=0.005)["verdict"] == "beyond_grid"


def test_clamping_that_adds_little_to_synthesis_error_is_no_bias_of_the_rmse():
    """rMSE: clamping alone errs by 1.8 where synthesis errs by 5.7 on a rate of 10: in
    quadrature it adds 0.28 (3% of the rate), so synthesis, not truncation, loses it; an
    error of 8 from clamping adds 4.1 (41%): truncation's."""
    frame = rows(0.0, 7.0, 5.7, [8.5, 8.0, 6.7], in_bounds=1.8)
    assert verdict(RMSE, frame, outside=0.09)["verdict"] == "synthesis_loses"
    frame = rows(0.0, 7.0, 5.7, [12.0, 11.0, 10.0], in_bounds=8.0)
    assert verdict(RMSE, frame, outside=0.09)["verdict"] == "truncation_bias"


def test_needs_more_than_the_grid():
    found = verdict(RATIO, rows(2.0, 1.0, 2.0, [3.0, 2.8, 2.5]))
    assert found["verdict"] == "beyond_grid" and "a larger epsilon is needed" in found["reason"]


def test_one_wobble_of_the_median_cannot_make_a_verdict():
    """A median within tolerance whose confidence interval is not (too few sets) is
    not met: more sets would decide, and how many: the interval [1.8, 2.4] around a
    median of 2.1 crosses the tolerance's edge 2 x 2^0.1 = 2.1435 (a tenth of the true
    departure, log 2, above 2.0) by a half-width of 0.3 against a distance of 0.0435, so
    20 x (0.3 / 0.0435)^2 = 950 sets (issue #33 (b))."""
    frame = rows(2.0, 1.0, 2.0, [2.1, 2.1, 2.1], halfwidth=0.3)
    found = verdict(RATIO, frame)
    assert found["verdict"] == "more_sets"
    assert found["sets_needed"] == math.ceil(20 * (0.3 / (2 * 2**0.1 - 2.1)) ** 2) == 950
    assert "straddles the tolerance" in found["reason"] and "more sets" in found["reason"]
    assert "about 950 sets would" in found["reason"]
    assert "a larger epsilon" not in found["reason"]
    assert found["verdict_text"] == "more sets would decide: about 950 needed (20 run)"
    assert verdict(RATIO, rows(2.0, 1.0, 2.0, [2.1, 2.1, 2.1]))["verdict"] == "met"


def test_sets_needed_from_either_side_of_the_tolerance():
    """A median outside the tolerance whose interval reaches into it: the interval's half
    towards the edge against the median's distance to it; the rule rounds up, and asks
    for at least one set more."""
    from dpcounts.studies.stage.guide import sets_needed

    assert sets_needed(20, 2.3, 2.15, 2.4, (1.8, 2.2)) == 45  # 20 x (0.15 / 0.1)^2
    assert sets_needed(20, 1.7, 1.6, 1.9, (1.8, 2.2)) == 80  # 20 x (0.2 / 0.1)^2
    assert sets_needed(10, 2.0, 1.7, 2.3, (1.8, 2.2)) == 23  # both edges: (0.3/0.2)^2
    assert sets_needed(10, 2.2, 2.1, 2.3, (1.8, 2.2)) == float("inf")  # on the edge


def test_an_error_is_judged_by_what_privacy_adds_to_synthesis():
    """rMSE: synthesis alone errs by 4 on a rate of 10 (> 10%: synthesis loses it), while a
    privacy that adds 0.5 (5% of the rate) is within tolerance; less error than the
    reference is no loss."""
    found = verdict(RMSE, rows(0.0, 20.0, 4.0, [30.0, 4.5, 3.0]))
    assert found["verdict"] == "synthesis_loses"
    assert found["epsilon_privacy"] == 1.0
    found = verdict(RMSE, rows(0.0, 20.0, 0.5, [30.0, 1.0, 0.2]))
    assert found["verdict"] == "met" and found["epsilon"] == 1.0


def test_every_verdict_has_its_words():
    assert set(VERDICTS) == {"met", "beyond_release", "beyond_grid", "synthesis_loses",
                             "prior_keeps", "truncation_bias", "more_sets", "shape_floor",
                             "truncation_stalls", "suppression_keeps",
                             "suppression_loses"}  # fmt: skip


def test_a_measure_met_only_beyond_what_a_release_allows_names_no_epsilon():
    """Met from epsilon 1 of the grid, where a release of the table allows at most 0.5 per
    set: the guide says so, in words and in its reason, and names no epsilon to release
    at; met where the release allows it, as before (issue #33: the guide never misleads)."""
    frame = rows(2.0, 1.0, 2.0, [3.0, 2.05, 2.0])
    found = verdict(RATIO, frame, releasable=lambda epsilon: 0.5)
    assert found["verdict"] == "beyond_release" and math.isnan(found["epsilon"])
    assert found["verdict_text"] == "not met within a release's largest epsilon (0.5)"
    assert "allows at most 0.5 per set at delta 1e-12" in found["reason"]
    assert found["epsilon_privacy"] == 1.0  # where privacy stops mattering, as for any verdict
    found = verdict(RATIO, frame, releasable=lambda epsilon: 1.0)
    assert found["verdict"] == "met" and found["epsilon"] == 1.0


def test_more_sets_are_not_asked_for_at_an_epsilon_no_release_allows():
    """At the grid's largest epsilon, 10, the median's interval straddles the tolerance's
    edge: more sets would decide, where a release may spend 10; where it allows at
    most 2.5 per set, more sets could at best meet it at 10, and the guide says no
    release keeps it (homicide_1980's md at epsilon 100 against a largest 20.6)."""
    frame = rows(2.0, 1.0, 2.0, [3.0, 2.6, 2.16], halfwidth=0.02)
    found = verdict(RATIO, frame, releasable=lambda epsilon: 20.0)
    assert found["verdict"] == "more_sets"
    found = verdict(RATIO, frame, releasable=lambda epsilon: 2.5)
    assert found["verdict"] == "beyond_release" and math.isnan(found["sets_needed"])
    assert found["verdict_text"] == "not met within a release's largest epsilon (2.5)"
    assert "allows at most 2.5 per set" in found["reason"]


@pytest.mark.parametrize("strata", [40, 400])
def test_the_guide_and_the_release_agree_on_the_largest_epsilon(tmp_path, private_ledger,
                                                                strata):  # fmt: skip
    """The largest epsilon the guide lets a pg release spend is where a release starts to
    refuse: 3% below it a release is made, 3% above it the release refuses, naming it."""
    from dpcounts.release import ReleaseError, ReleaseRequest, build_release
    from dpcounts.studies.stage.guide import releasable_epsilon

    rng = np.random.default_rng(strata)
    frame = pd.DataFrame({"code": np.arange(strata), "count": rng.poisson(20, strata),
                          "population": rng.integers(5_000, 20_000, strata),
                          "prior_rate": 0.002})  # fmt: skip
    frame.to_csv(tmp_path / "t.csv", index=False)
    largest = releasable_epsilon(int(frame["count"].sum()), strata)
    assert 5 < largest < 60

    def release(epsilon: float, name: str):
        return build_release(ReleaseRequest(
            input=tmp_path / "t.csv", out=tmp_path / name, epsilon=epsilon, mechanism="pg",
            dataset="guide-limit", keys=("code",), test_seed=1, progress=False,
            strata="input", prior_source="test: one public rate"))  # fmt: skip

    release(largest * 0.97, "below")
    assert (tmp_path / "below" / "manifest.json").is_file()
    with pytest.raises(ReleaseError, match=f"at most {largest:.3g}"):
        release(largest * 1.03, "above")


# ---- each verdict on a small table of its own ----------------------------------------------
def run_guide(tmp_path, frame: pd.DataFrame, **spec) -> pd.DataFrame:
    """The study stage in process, as the workflow runs it; the guide table."""
    return run_study(tmp_path, frame, **spec)[2].set_index(["arm", "measure"])


def run_study(tmp_path, frame: pd.DataFrame, **spec):
    """The study stage in process: (definition, summary, guide)."""
    frame.to_csv(tmp_path / "t.csv", index=False)
    base = {"table": "t.csv", "keys": ["area", "group"], "count": "y", "population": "n",
            "area": "area", "arms": {"pg": ["certified"]}, "sets": 60,
            "sets_per_job": 60, "epsilons_per_job": 20, "stream": ["guide-test"],
            "disparities": [{"name": "d", "numerator": {"group": "b"},
                             "denominator": {"group": "a"}}]}  # fmt: skip
    d = filled_definition("s", base | spec, base=tmp_path)
    strata = load_study_table(d)
    rates, spent = prior_rates(d, strata, job_rng(1, "prior"))
    strata["prior_rate"] = rates
    metrics, calibrations, status = [], [], []
    for arm in d.arms:
        for echunk in d.calibration_chunks:
            cal, st = calibrate_chunk(d, arm, strata, echunk)
            calibrations.append(cal)
            status.append(st)
        cals = pd.concat(calibrations, ignore_index=True)
        cals = cals[cals["arm"] == arm.name]
        for chunk in d.chunks:
            found, _ = simulate_chunk(d, arm, strata, cals, chunk, job_rng(2, arm.name, chunk))
            metrics.append(found)
    summary = summarise_study(
        d, strata, study_measures(d, strata), metrics=pd.concat(metrics),
        calibrations=pd.concat(calibrations), status=pd.concat(status),
        reference=reference_metrics(d, strata, job_rng(3, "ref")).drop(columns="set"),
    )  # fmt: skip
    return d, summary, study_guide(d, strata, summary, spent, pd.concat(calibrations))


def two_groups(areas: int, population: int, rates=(0.01, 0.02), seed=0) -> pd.DataFrame:
    """``areas`` areas x groups a and b, group b at twice a's rate (expected counts)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(areas):
        for group, rate in zip("ab", rates, strict=True):
            n = int(population * rng.uniform(0.8, 1.2))
            out.append((f"{k:03d}", group, int(round(n * rate)), n))
    return pd.DataFrame(out, columns=["area", "group", "y", "n"])


@pytest.mark.slow
def test_a_table_with_large_counts_keeps_its_disparity_only_where_a_release_can(tmp_path):
    """Thousands of events per group, an overall prior (disparity 1, against a true 2):
    privacy moves the disparity less than 10% from epsilon 31.6 of the grid on (the overall
    rate is public, so the epsilon is the sets' alone), but a pg release of these 40 strata
    allows at most about 27 per set at the default delta: the guide names no epsilon,
    says it is not met within a release's largest, and a tolerance of 25% is met within it."""
    from dpcounts.studies.stage.guide import releasable_epsilon

    frame = two_groups(20, 20_000)
    grid = {"start": 0.01, "stop": 1000, "num": 11}
    guide = run_guide(tmp_path, frame, epsilons=grid)
    row = guide.loc[("pg_certified", "disparity:d")]
    largest = releasable_epsilon(int(frame["y"].sum()), len(frame))
    assert row["epsilon_privacy"] > largest and 0.01 < row["epsilon_privacy"] < 1000
    assert row["verdict"] == "beyond_release" and math.isnan(row["epsilon"])
    assert f"({largest:.3g})" in row["verdict_text"]
    assert row["epsilon_prior"] == 0 and row["reference"] == pytest.approx(2.0, rel=0.05)
    looser = run_guide(tmp_path, frame, epsilons=grid, guide={"tolerance": 0.25})
    row = looser.loc[("pg_certified", "disparity:d")]
    assert row["verdict"] == "met" and 0.01 < row["epsilon"] <= largest


def test_a_grid_that_stops_too_soon_needs_more(tmp_path):
    guide = run_guide(tmp_path, two_groups(20, 20_000), epsilons=[1e-4, 3e-4])
    assert guide.loc[("pg_certified", "disparity:d"), "verdict"] == "beyond_grid"


def test_a_grid_beyond_what_a_release_allows_asks_for_no_larger_epsilon():
    """Not within tolerance at the grid's largest epsilon, 10, where a release allows at
    most 5 per set: a larger epsilon would not be released, so the guide does not ask for
    one."""
    frame = rows(2.0, 1.0, 2.0, [3.0, 2.8, 2.6])
    assert verdict(RATIO, frame)["verdict"] == "beyond_grid"
    found = verdict(RATIO, frame, releasable=lambda epsilon: 5.0)
    assert found["verdict"] == "beyond_release" and "a larger epsilon" not in found["reason"]
    assert found["verdict_text"] == "not met within a release's largest epsilon (5)"


def test_small_counts_lose_the_ranking_to_synthesis_alone(tmp_path):
    """One or two events per area: tables drawn with no privacy at all rank the areas far
    from the truth."""
    frame = two_groups(30, 150, rates=(0.005, 0.01), seed=4)
    guide = run_guide(tmp_path, frame, epsilons=[1.0, 100.0])
    row = guide.loc[("pg_certified", "rank_correlation")]
    assert row["verdict"] == "synthesis_loses" and row["reference"] < 0.9


def test_a_prior_that_holds_the_disparity_keeps_it_alone(tmp_path):
    """A public prior whose rates are the groups' true rates: its disparity is the truth's,
    so keeping it says nothing about the table."""
    frame = two_groups(10, 20_000)
    groups = frame.groupby("group")[["y", "n"]].sum()
    frame["prior"] = frame["group"].map(groups["y"] / groups["n"])
    guide = run_guide(tmp_path, frame, epsilons=[0.1, 10.0],
                      prior={"source": "column", "column": "prior"})  # fmt: skip
    assert guide.loc[("pg_certified", "disparity:d"), "verdict"] == "prior_keeps"


def test_counts_outside_the_truncation_bounds_bias_the_measure(tmp_path):
    """Group b's areas at 40 times the overall rate the prior predicts: its true counts lie
    above the truncated arm's bounds, which hold the disparity down at every epsilon, while
    the untruncated arm meets it."""
    frame = two_groups(20, 5_000, rates=(0.002, 0.08))
    guide = run_guide(tmp_path, frame, epsilons={"start": 0.1, "stop": 20, "num": 5},
                      arms={"pg": ["certified"], "truncated": ["certified"]})  # fmt: skip
    row = guide.loc[("truncated_certified", "disparity:d")]
    assert row["verdict"] == "truncation_bias" and row["outside_bounds_share"] > 0
    assert guide.loc[("pg_certified", "disparity:d"), "verdict"] == "met"


@pytest.fixture(scope="module")
def floored(tmp_path_factory):
    """A table of few events per stratum (60 areas x 2 groups of about 200 people, group b
    at three times a's rate), run through PG and truncated PG from epsilon 1 to 100: the
    truncated arm's shapes reach their floor (1/3: every lower bound is 0) by epsilon 10,
    where its disparity stays far below the no-privacy reference; (definition, summary,
    guide)."""
    return run_study(tmp_path_factory.mktemp("floored"), two_groups(60, 200, rates=(0.01, 0.03)),
                     epsilons=[1.0, 10.0, 100.0],
                     arms={"pg": ["certified"], "truncated": ["certified"]})  # fmt: skip


def test_a_truncated_arm_stuck_at_its_floor_is_told_no_epsilon_helps(floored):
    """Issue #33 (a) on a table of its own: the truncated arm's calibration is the same at
    epsilon 10 and 100, so the guide says its shapes are at their floor and no epsilon
    helps, naming the truncation's settings; PG, whose limit is the reference, meets it."""
    guide = floored[2].set_index(["arm", "measure"])
    row = guide.loc[("truncated_certified", "disparity:d")]
    assert row["verdict"] == "shape_floor" and row["shape_floor_from"] == 10.0
    assert "no epsilon helps" in row["reason"]
    assert "a larger epsilon is needed" not in row["reason"]
    assert "truncation.tail" in row["reason"] and "truncation.inflation" in row["reason"]
    assert row["median_at_largest"] < 0.9 * row["reference"]
    pg = guide.loc[("pg_certified", "disparity:d")]  # within tolerance in the grid (at 100,
    # beyond what a release of these strata can spend, if not at 10)
    assert pg["verdict"] in ("met", "beyond_release") and np.isfinite(pg["epsilon_privacy"])
    assert np.isnan(pg["shape_floor_from"])


def test_the_guide_labels_each_arm_as_the_figures_do(floored):
    """Issue #33: one vocabulary of arm labels; guide.csv keeps the arm's id beside it."""
    from dpcounts.arms import Arm
    from dpcounts.plots.style import EPSILON, arm_title

    d, _, guide = floored
    arms = {arm.name: arm for arm in d.arms}
    for row in guide.itertuples():
        assert row.arm_label == arm_title(arms[row.arm])
    assert set(guide["arm_label"]) == {"PG (certified)", "Truncated PG (certified)"}
    # a paper arm's epsilon: the figures' mathtext, the table's same glyph
    paper = Arm("pg", "paper", "untruncated")
    assert (
        arm_title(paper).replace(EPSILON, "ε") == "untruncated: PG (paper calibration, nominal ε)"
    )
    from dpcounts.arms import arm_title as table_title

    assert table_title(paper) == arm_title(paper).replace(EPSILON, "ε")


def test_the_figures_say_the_guides_verdicts_word_for_word(floored, tmp_path):
    """Issue #33 (b): guide.png and measures.png print guide.csv's ``verdict_text``, one
    source: "more sets would decide" with the number, never words of their own."""
    import matplotlib

    matplotlib.use("Agg")
    from dpcounts.plots.study import figure_guide, figure_measures
    from dpcounts.studies.stage.measures import study_measure_list

    d, summary, guide = floored
    # one row made a wobble: the verdict's words travel from the table to the figures
    guide = guide.copy()
    k = guide.index[(guide["arm"] == "pg_certified") & (guide["measure"] == "disparity:d")][0]
    guide.loc[k, ["verdict", "verdict_text"]] = ("more_sets",
                                                 "more sets would decide: about 180 "
                                                 "needed (60 run)")  # fmt: skip
    measures = study_measure_list(d)
    shown = figure_guide(guide, measures, d.arms, d.epsilons, "s")
    texts = [t.get_text() for ax in shown.axes for t in ax.texts]
    panels = figure_measures(summary, guide, measures, d.arms, "s", adjusted=False)
    titles = [ax.get_title().replace("\n", " ") for ax in panels.axes]
    for row in guide.itertuples():
        assert row.verdict_text in texts
        assert any(row.verdict_text in title for title in titles), row.verdict_text
    everything = " ".join(texts + titles)
    assert "needs more than the grid" not in everything
    assert "about 180 needed (60 run)" in everything


def test_a_new_measure_is_one_entry_and_one_function(tmp_path, monkeypatch):
    """The newcomer's example of issue #25: the mean absolute error of the area rates,
    declared once (an error, so judged against the overall rate, drawn on a log scale with
    no truth line), reaches the summary, the guide and the figure with no other change."""
    import matplotlib

    matplotlib.use("Agg")
    from dpcounts.plots.study import figure_measures
    from dpcounts.studies.stage import measures as registry

    def mae(m, counts, truth, rates):
        true_rates = m.area_rates(truth)[0]
        return np.abs(rates[:, : len(m.areas)] - true_rates).mean(axis=1)

    extra = Measure("mae_area", "Mean absolute error of the area rates", "per 100,000",
                    KINDS["error"], mae, needs_areas=True)  # fmt: skip
    monkeypatch.setattr(registry, "MEASURES", (*registry.MEASURES, extra))
    d, summary, guide = run_study(tmp_path, two_groups(20, 20_000), epsilons=[1.0, 100.0])
    row = guide.set_index(["arm", "measure"]).loc[("pg_certified", "mae_area")]
    assert row["verdict"] in VERDICTS and row["truth"] == 0 and row["reference"] > 0
    measures = registry.study_measure_list(d)
    margins = [registry.margin_name((key,)) for key in d.keys]
    assert [m.name for m in measures] == [m.name for m in registry.MEASURES] + margins + [
        "disparity:d"
    ]
    assert measures[len(registry.MEASURES) - 1].name == "mae_area"  # the registry's order
    figure = figure_measures(summary, guide, measures, d.arms, "s", adjusted=False)
    (ax,) = [a for a in figure.axes if a.get_ylabel().startswith("Mean absolute error")]
    assert ax.get_yscale() == "log" and "(per 100,000)" in ax.get_ylabel()
    assert not [line for line in ax.get_lines() if line.get_label() == "truth"]


@pytest.mark.slow
def test_a_study_in_one_process_writes_each_unit_as_its_own_job_would(tmp_path):
    """simulate_study (the bundled job) writes, file for file, what each calibration
    chunk, draw chunk and the reference give when run alone with their own streams."""
    from dpcounts.design import calibration_chunk
    from dpcounts.studies.stage.simulate import simulate_study

    two_groups(6, 2_000).to_csv(tmp_path / "t.csv", index=False)
    spec = {"table": "t.csv", "keys": ["area", "group"], "count": "y", "population": "n",
            "area": "area", "arms": {"pg": ["certified"], "md": ["paper"]}, "sets": 6,
            "sets_per_job": 3, "epsilons_per_job": 2, "stream": ["bundle-test"],
            "epsilons": [0.5, 1.0, 4.0], "map_epsilons": [1.0]}  # fmt: skip
    d = filled_definition("s", spec, base=tmp_path)
    strata = load_study_table(d)
    strata["prior_rate"] = prior_rates(d, strata, job_rng(1, "prior"))[0]
    paths = {kind: [str(tmp_path / f"{kind}_{arm.name}_{chunk}.parquet")
                    for arm in d.arms for chunk in chunks]
             for kind, chunks in (("calibrations", d.calibration_chunks),
                                  ("status", d.calibration_chunks),
                                  ("metrics", d.chunks), ("area_sums", d.chunks))}  # fmt: skip
    simulate_study(d, strata, 5, **paths, reference=str(tmp_path / "reference.parquet"))
    assert len(d.chunks) > 1 and len(d.calibration_chunks) > 1
    for arm in d.arms:
        for echunk in d.calibration_chunks:
            cal, status = calibrate_chunk(d, arm, strata, echunk)
            got = pd.read_parquet(tmp_path / f"calibrations_{arm.name}_{echunk}.parquet")
            pd.testing.assert_frame_equal(got, cal)
            got = pd.read_parquet(tmp_path / f"status_{arm.name}_{echunk}.parquet")
            pd.testing.assert_frame_equal(got, status)
        for chunk in d.chunks:
            cals = pd.read_parquet(
                tmp_path / f"calibrations_{arm.name}_{calibration_chunk(chunk)}.parquet"
            )
            rng = job_rng(5, *d.stream, arm.name, chunk)
            metrics, sums = simulate_chunk(d, arm, strata, cals, chunk, rng)
            got = pd.read_parquet(tmp_path / f"metrics_{arm.name}_{chunk}.parquet")
            pd.testing.assert_frame_equal(got, metrics, check_exact=True)
            got = pd.read_parquet(tmp_path / f"area_sums_{arm.name}_{chunk}.parquet")
            pd.testing.assert_frame_equal(got, sums, check_exact=True, check_dtype=False)
    reference = reference_metrics(d, strata, job_rng(5, *d.stream, "reference"))
    got = pd.read_parquet(tmp_path / "reference.parquet")
    pd.testing.assert_frame_equal(got, reference, check_exact=True)
