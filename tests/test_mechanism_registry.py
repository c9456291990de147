"""The one registry of mechanisms (issue #51, item 2): a mechanism registered inside this
test, with no other module edited, is in the CLI's choices, the config schema's enums, a
study's arms, the calibration dispatcher, the manifest's schema and certified status, and
verify's columns and privacy map; the papers' families are the registry's, and the
schema's enums are written from it."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcounts.arms import Arm, arm_title
from dpcounts.calibration import Calibration
from dpcounts.mechanisms import registry
from dpcounts.privacy.calibrate import calibrate

REPO = Path(__file__).resolve().parents[1]
_TOOL = REPO / "tools" / "write_schema_enums.py"
_spec = importlib.util.spec_from_file_location("write_schema_enums", _TOOL)
enums = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(enums)


def _toy_calibrate(epsilon, total, population, prior_rate, method, settings):
    """Every cell's alpha total / (e^eps - 1) / 2: twice md's smallest, so half md's bound."""
    a = np.full(population.size, 2 * total / math.expm1(epsilon))
    return Calibration("toy", method, epsilon, total, a, population=population)


def _toy_map(total, columns):
    return math.log1p(total / float(np.min(columns["a"]))), "the toy's own map"


def _toy_draw(counts, cal, size, rng):
    return np.tile(counts, (size, 1))


@pytest.fixture
def toy():
    family = registry.register(registry.Family(
        name="toy", title="Toy", methods=("paper", "proven"),
        certified={"proven": "a test's proof"}, hyperparameters=("a", "population"),
        calibrate=_toy_calibrate, privacy_map=_toy_map, draw=_toy_draw, uses_prior=False,
        colours={"paper": "tab:brown", "proven": "tab:olive"}, colour_by="method",
    ))  # fmt: skip
    try:
        yield family
    finally:
        registry.unregister("toy")


def test_a_mechanism_registered_here_is_everywhere_a_mechanism_is_named(toy):
    from dpcounts.cli import build_parser
    from dpcounts.release.manifest import certified_pairs, schema, status
    from dpcounts.studies.stage.definition import config_arms
    from dpcounts.verify import recomputed_epsilon

    # the CLI's choices
    parser = build_parser()
    synthesize = parser._subparsers._group_actions[0].choices["synthesize"]
    choices = {a.dest: a.choices for a in synthesize._actions if a.choices}
    assert "toy" in choices["mechanism"] and "proven" in choices["method"]
    # the config schema's enums, as tools/write_schema_enums.py writes them
    text = enums.render(enums.SCHEMA.read_text())
    assert "mechanism: {enum: [md, pg, truncated, toy]}" in text
    assert "toy: {type: array, minItems: 1, items: {enum: [paper, proven]}}" in text
    # a study's arm, and its label
    (arm,) = config_arms("studies.s.arms", {"toy": ["proven"]})
    assert arm == Arm("toy", "proven") and arm_title(arm) == "Toy (proven)"
    # the figures draw it in its own colour, with its method's line
    from dpcounts.plots.style import arm_style

    assert arm_style(arm) == {"color": "tab:olive", "linestyle": ":", "marker": "v"}
    # the calibration dispatcher calls the toy's own function
    cal = calibrate("toy", 1.0, 100, np.full(4, 1000.0), method="proven")
    assert cal.mechanism == "toy" and cal.a == pytest.approx(200 / math.expm1(1.0))
    # the manifest's schema and status, verify's columns and privacy map
    assert "toy" in schema()["properties"]["mechanism"]["enum"]
    assert status("toy", "proven") == "certified" and status("toy", "paper") == "nominal"
    assert ("toy", "proven") in certified_pairs()
    hyper = pd.DataFrame({"a": cal.a, "population": cal.population})
    bound, how = recomputed_epsilon("toy", 100, hyper)
    assert how == "the toy's own map" and bound == pytest.approx(math.log1p(math.expm1(1) / 2))


def test_the_toy_leaves_no_trace():
    assert "toy" not in registry.names()
    with pytest.raises(ValueError, match=r"unknown mechanism 'toy'; expected one of \('md'"):
        registry.family("toy")
    with pytest.raises(ValueError, match="mechanism must be one of"):
        Arm("toy", "paper")


def test_a_family_is_registered_once_and_certifies_only_its_own_methods(toy):
    with pytest.raises(ValueError, match="registered already"):
        registry.register(toy)
    bad = registry.Family(name="bad", title="Bad", methods=("paper",),
                          certified={"certified": "?"}, hyperparameters=("a",),
                          calibrate=None, privacy_map=None, draw=None)  # fmt: skip
    with pytest.raises(ValueError, match=r"certified methods \['certified'\] are not among"):
        registry.register(bad)


def test_the_papers_families_are_the_registrys():
    assert registry.names() == ("md", "pg", "truncated")
    md, pg, truncated = map(registry.family, registry.names())
    assert not md.uses_prior and md.is_certified("paper") and md.is_certified("certified")
    assert pg.certified.keys() == {"certified"} and not pg.bounded
    assert truncated.bounded and truncated.settings == ("tail", "inflation")
    assert truncated.hyperparameters[-2:] == ("lower", "upper")
    assert registry.baselines() == ("geometric", "suppression")


@pytest.mark.parametrize("mechanism", ["md", "pg", "truncated"])
def test_each_familys_privacy_map_proves_its_certified_calibration(mechanism):
    """The map a release and verify use gives back the epsilon the certified calibration
    was made for (to rounding), from the published columns alone."""
    rng = np.random.default_rng(3)
    population = rng.integers(1_000, 50_000, 30).astype(float)
    cal = calibrate(mechanism, 2.0, 400, population, method="certified")
    columns = {"a": cal.a, "lower": cal.lower, "upper": cal.upper}
    bound, _ = registry.family(mechanism).privacy_map(400, columns)
    assert bound == pytest.approx(2.0, rel=1e-6)


def test_the_schema_enums_are_the_registrys():
    text = enums.SCHEMA.read_text()
    assert enums.render(text) == text, "run python tools/write_schema_enums.py (make format)"


def test_a_release_refuses_a_calibration_its_own_map_does_not_prove(toy):
    """The release checks its certified calibration with the family's privacy map, the one
    verify recomputes, before drawing: the papers' families pass; a family whose
    calibration leaks more than its epsilon is refused, naming the bound."""
    from types import SimpleNamespace

    from dpcounts.release.design import Design
    from dpcounts.release.plan import Plan
    from dpcounts.release.request import Budget, ReleaseError

    def check(cal):
        budget = Budget(1.0, 1e-9, 0.0, 1)
        design = Design(cal.mechanism, cal.method, budget)
        request = SimpleNamespace(input="t.csv")
        Plan(request, budget, design, None, None, cal, None, None, None).check_privacy_map()

    population = np.full(6, 5_000.0)
    for mechanism in ("md", "pg", "truncated"):
        check(calibrate(mechanism, 1.0, 300, population, method="certified"))
    leaky = Calibration("toy", "proven", 1.0, 300, np.full(6, 300 / math.expm1(1.0) / 2),
                        population=population)  # fmt: skip
    with pytest.raises(ReleaseError, match=r"proves epsilon 1\.48\d+ per set \(the toy.s own"):
        check(leaky)
    check(Calibration("toy", "paper", 1.0, 300, leaky.a, population=population))  # no claim
