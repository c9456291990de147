"""The studies' vocabulary: arms as data (dpcounts.arms), Study 1's table of arms and its
design built from the config (dpcounts.studies.study1)."""

from __future__ import annotations

import numpy as np
import pytest
from workflow_helpers import schema_defaults

from dpcounts.arms import Arm, arm_named
from dpcounts.data.scenarios import draw_datasets, make_scenario
from dpcounts.design import epsilon_label
from dpcounts.mechanisms import registry
from dpcounts.privacy.calibrate import calibrate
from dpcounts.studies.study1 import (
    ARM_NAMES,
    ARMS,
    Geography,
    Study1Design,
    score_datasets,
    study1_calibration,
)

PRIOR_SHARE = schema_defaults()["study1"]["prior_budget_fraction"]


def test_an_arm_is_named_by_its_mechanism_and_method_unless_named():
    assert Arm("truncated", "certified").name == "truncated_certified"
    assert Arm("pg", "paper", "untruncated").name == "untruncated"
    assert Arm("geometric").name == "geometric" and Arm("geometric").baseline
    assert Arm("pg", "exact").title == "pg_exact"  # the legend falls back to the name
    assert Arm("pg", "exact") == Arm("pg", "exact", "pg_exact")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (("gamma", "paper"), "mechanism must be one of"),
        (("pg", "closed_form"), "method must be one of"),
        (("pg", None), "method must be one of"),
        (("geometric", "paper"), "has no calibration method"),
        (("pg", "paper", "x", "county"), "prior must be one of"),
    ],
)
def test_an_arm_outside_the_vocabulary_is_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        Arm(*fields)


def test_study1_arms_are_a_table_of_the_one_vocabulary():
    names = tuple(arm.name for arm in ARMS)
    assert names == ARM_NAMES and len(set(names)) == len(names)
    calibrated = [arm for arm in ARMS if not arm.baseline]
    assert {arm.mechanism for arm in calibrated} <= set(registry.names())
    assert all(arm.method in registry.family(arm.mechanism).methods for arm in calibrated)
    certified = arm_named(ARMS, "pg_state_certified")
    assert (certified.mechanism, certified.method, certified.prior) == ("pg", "certified", "state")
    assert arm_named(ARMS, "pg_state_sanitised").prior == "sanitised"
    geometric = arm_named(ARMS, "geometric")
    assert geometric.baseline and geometric.method is None and geometric.prior is None
    with pytest.raises(ValueError, match="no arm 'pg_county'"):
        arm_named(ARMS, "pg_county")


POP = np.array([3000.0, 1500.0, 90000.0, 40000.0, 60000.0, 5000.0])
RATE = np.array([4e-4, 6e-4, 3e-4, 5e-4, 2e-4, 8e-4])
STATES = np.array(["NM", "NM", "NY", "NY", "TX", "TX"])


@pytest.mark.parametrize("name", ["md", "pg_national", "pg_state", "pg_national_certified",
                                  "pg_state_certified"])  # fmt: skip
def test_study1_calibrations_follow_the_arm_fields(name):
    """Each arm calibrates its mechanism with its method and its prior (national: the
    calibrate default y./sum n; state: the truth's state rates), not its name's spelling."""
    scenario = make_scenario(4, POP, RATE, total=600)
    geo = Geography(state=STATES, urban=POP > 5e4)
    state = geo.state_rates(POP, RATE)
    arm = arm_named(ARMS, name)
    got = study1_calibration(arm, 2.0, scenario, state)
    prior = state if arm.prior == "state" else None
    want = (calibrate("md", 2.0, 600, POP) if arm.mechanism == "md"
            else calibrate("pg", 2.0, 600, POP, prior, method=arm.method))  # fmt: skip
    assert got == want
    renamed = Arm(arm.mechanism, arm.method, "renamed", arm.prior)
    assert study1_calibration(renamed, 2.0, scenario, state) == want


def test_scoring_an_arm_or_its_name_is_the_same():
    scenario = make_scenario(4, POP, RATE, total=600)
    geo = Geography(state=STATES, urban=POP > 5e4)
    data = draw_datasets(scenario, 3, np.random.default_rng(3))
    arm = arm_named(ARMS, "pg_state_sanitised")
    runs = [score_datasets(scenario, geo, data, np.arange(3), a, [0.5, 1.0],
                           np.random.default_rng(5), map_epsilons=[1.0],
                           prior_budget_fraction=PRIOR_SHARE)
            for a in (arm, arm.name)]  # fmt: skip
    for first, second in zip(runs[0], runs[1], strict=True):
        assert first.equals(second)
    assert set(runs[0][1]["epsilon"]) == {1.0}
    with pytest.raises(ValueError, match="arm must be one of"):
        score_datasets(scenario, geo, data, np.arange(3), "pg_county", [1.0],
                       np.random.default_rng(5), prior_budget_fraction=PRIOR_SHARE)  # fmt: skip


STUDY1 = {
    "arms": ["md", "pg_state", "geometric"],
    "epsilons": {"start": 0.1, "stop": 10, "num": 3},
    "map_epsilons": [1.0, 3.3333333],
    "epsilons_per_job": 2,
    "datasets": 5,
    "datasets_per_job": 2,
    "prior_budget_fraction": 0.1,
    "urban_threshold": 50000,  # not the design's: left out of its entry
}


def test_study1_design_is_built_by_the_library_from_the_config():
    design = Study1Design.from_config(STUDY1)
    assert [arm.name for arm in design.arms] == ["md", "pg_state", "geometric"]
    assert design.epsilons == (0.1, 1.0, 3.33333, 10.0)  # map epsilons join the grid
    assert design.map_epsilons == (1.0, 3.33333)  # as the grid holds them: 6 digits
    assert [epsilon_label(e) for e in design.epsilons] == ["0.1", "1", "3.33333", "10"]
    assert design.chunks == ["e0_d0", "e0_d1", "e0_d2", "e1_d0", "e1_d1", "e1_d2"]
    assert design.units[:2] == [("md", "e0_d0"), ("md", "e0_d1")]
    assert len(design.units) == 3 * 6
    entry = Study1Design.entry(STUDY1)
    assert "urban_threshold" not in entry and Study1Design.from_config(entry) == design
    with pytest.raises(ValueError, match="no arm 'pg_county'"):
        Study1Design.from_config({**STUDY1, "arms": ["pg_county"]})
