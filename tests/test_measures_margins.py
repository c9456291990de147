"""Error measures a steward reads (issue #52, item 2): the strata's relative error, every
stratum weighing alike, and the margins, the largest relative error of a value's total by
each key and each declared combination of keys, judged by what privacy adds to the
no-privacy reference's; in the study's guide and in a release's utility report."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_study_guide import rows, run_guide, two_groups, verdict
from workflow_helpers import filled_definition

from dpcounts.studies.stage.definition import StudyConfigError
from dpcounts.studies.stage.fingerprint import differences, study_fingerprint
from dpcounts.studies.stage.measures import KINDS, margin_name, study_measure_list, study_measures


def table(seed=0) -> pd.DataFrame:
    """4 areas x 3 age groups x 2 sexes, counts from 0 to thousands."""
    rng = np.random.default_rng(seed)
    index = pd.MultiIndex.from_product(
        [[f"a{k}" for k in range(4)], ["0-39", "40-69", "70+"], ["f", "m"]],
        names=["area", "age", "sex"],
    )
    frame = index.to_frame(index=False)
    frame["n"] = rng.integers(1_000, 50_000, len(frame))
    rate = frame["age"].map({"0-39": 1e-4, "40-69": 1e-3, "70+": 2e-2})
    frame["y"] = rng.poisson(frame["n"] * rate)
    return frame


def definition(tmp_path, frame, **spec):
    frame.to_csv(tmp_path / "t.csv", index=False)
    base = {"table": "t.csv", "keys": ["area", "age", "sex"], "count": "y", "population": "n",
            "area": "area", "arms": {"pg": ["certified"]}} | spec  # fmt: skip
    return filled_definition("s", base, base=tmp_path)


def by_hand(frame, keys, synthetic):
    """max over the values of ``keys`` of |synthetic total - true total| / max(true, 1)."""
    totals = frame.assign(x=synthetic).groupby(list(keys))[["y", "x"]].sum()
    return float((np.abs(totals["x"] - totals["y"]) / np.maximum(totals["y"], 1)).max())


def test_each_keys_margin_and_a_declared_pairs_are_the_largest_relative_error_of_a_total(
    tmp_path,
):
    frame = table()
    d = definition(tmp_path, frame, margins=[["sex", "age"]])
    names = [m.name for m in study_measure_list(d)]
    # every key's own, then the declared pair, named in the keys' order
    assert names[-4:] == ["margin:area", "margin:age", "margin:sex", "margin:age,sex"]
    measures = study_measures(d, frame)
    rng = np.random.default_rng(1)
    tables = rng.poisson(frame["y"].to_numpy() * rng.uniform(0.7, 1.3, (5, len(frame))))
    values = measures.values(tables, frame["y"].to_numpy())
    for keys in (("area",), ("age",), ("sex",), ("age", "sex")):
        expected = [by_hand(frame, keys, t) for t in tables]
        assert values[margin_name(keys)].to_numpy() == pytest.approx(expected, rel=1e-12)
    truth = measures.values(frame["y"].to_numpy(), frame["y"].to_numpy()).iloc[0]
    assert truth["margin:age,sex"] == 0 and truth["relative_error"] == 0


def test_the_relative_error_weighs_small_and_large_strata_alike(tmp_path):
    """The rMSE of rates is the oldest ages': doubling the 70+ strata moves it more than
    halving every other stratum; the relative error sees the latter as the larger loss."""
    frame = table()
    measures = study_measures(definition(tmp_path, frame), frame)
    y = frame["y"].to_numpy(float)
    old = (frame["age"] == "70+").to_numpy()
    old_doubled = np.where(old, 2 * y, y)
    young_halved = np.where(old, y, np.round(y / 2))
    values = measures.values(np.vstack([old_doubled, young_halved]), y)
    assert values["rmse"][0] > values["rmse"][1]
    assert values["relative_error"][0] < values["relative_error"][1]
    expected = np.mean(np.abs(young_halved - y) / np.maximum(y, 1))
    assert values["relative_error"][1] == pytest.approx(expected, rel=1e-12)


def test_the_measures_at_the_strata_with_events_are_those_of_the_whole_table(tmp_path):
    """A national table is scored at its drawn strata only (its no-privacy reference is 0
    elsewhere): the relative error and the margins come out the same."""
    frame = table()
    frame.loc[frame.index % 3 == 0, "y"] = 0
    measures = study_measures(definition(tmp_path, frame, margins=[["area", "sex"]]), frame)
    y = frame["y"].to_numpy(float)
    drawn = np.flatnonzero(y)
    rng = np.random.default_rng(2)
    tables = np.zeros((3, y.size))
    tables[:, drawn] = rng.poisson(y[drawn], (3, drawn.size))
    whole = measures.values(tables, y)
    on, truth = measures.on(drawn, y)
    part = on.values(tables[:, drawn], truth)
    for name in ("relative_error", "margin:area", "margin:age", "margin:area,sex"):
        assert part[name].to_numpy() == pytest.approx(whole[name].to_numpy(), rel=1e-12)


def test_a_margin_17_percent_off_is_a_lost_margin_row():
    """The no-privacy reference misses a total by 1%: privacy that leaves it 17.6% off adds
    16.6 points, more than a tolerance of 0.1; one that leaves it 5% off keeps it."""
    (margin,) = [m for m in study_measure_list(filled_definition("s", {
        "table": "t.csv", "keys": ["period"], "count": "y", "population": "n",
        "arms": {"pg": ["certified"]}})) if m.name == "margin:period"]  # fmt: skip
    assert margin.kind is KINDS["relative"]
    lost = verdict(margin, rows(0.0, 0.6, 0.01, [0.5, 0.2, 0.176], halfwidth=0.005))
    assert lost["verdict"] != "met" and np.isnan(lost["epsilon"])
    kept = verdict(margin, rows(0.0, 0.6, 0.01, [0.5, 0.06, 0.05], halfwidth=0.005))
    assert kept["verdict"] == "met" and kept["epsilon"] == pytest.approx(1.0)
    assert (kept["within_low"], kept["within_high"]) == pytest.approx((0.0, 0.11))
    assert not KINDS["relative"].kept(0.176, 0.01, 0.1) and KINDS["relative"].kept(0.05, 0.01, 0.1)


def test_the_guide_has_a_row_for_each_margin(tmp_path):
    guide = run_guide(tmp_path, two_groups(12, 20_000), epsilons=[1.0, 100.0])
    for name in ("relative_error", "margin:area", "margin:group"):
        row = guide.loc[("pg_certified", name)]
        assert row["truth"] == 0 and row["reference"] > 0 and row["within_low"] == 0
        assert row["within_high"] == pytest.approx(row["reference"] + 0.1)


@pytest.mark.parametrize(
    ("margins", "words"),
    [([["area", "county"]], "expected two or more distinct keys"),
     ([["area"]], "expected two or more distinct keys"),
     ([["area", "age"], ["age", "area"]], "is given twice")],
)  # fmt: skip
def test_a_wrong_margin_is_refused_naming_its_key(tmp_path, margins, words):
    with pytest.raises(StudyConfigError, match=r"studies\.s\.margins\[\d\]") as error:
        definition(tmp_path, table(), margins=margins)
    assert words in str(error.value)


def test_declaring_a_margin_makes_the_guide_stale(tmp_path):
    frame = table()
    before = study_fingerprint(definition(tmp_path, frame))
    after = study_fingerprint(definition(tmp_path, frame, margins=[["age", "sex"]]))
    assert "margins" in differences(before, after)
