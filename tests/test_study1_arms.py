"""Every Study 1 arm shows the behaviour Quick (2021, Section 3) reports for it, or that
its construction implies, on a small scenario-4 country: four states of ten counties,
New Mexico small and high-rate, New York large and low-rate, seeds fixed.

- MD adds the same pseudo-count to every county: at small epsilon small counties' rates
  are inflated (the paper's New Mexico / New York "14/2 = 7");
- PG with a national prior pulls every rate to the national rate at small epsilon;
- PG with state priors keeps the states' rates (and so the NM / NY ratio);
- the certified calibrations spend at least the paper's pseudo-counts (never less prior);
- the sanitised state prior pays for its noise at small epsilon and tends to PG-state at
  large epsilon;
- geometric output perturbation's added noise falls like 1 / epsilon.
"""

from __future__ import annotations

import numpy as np
import pytest
from workflow_helpers import schema_defaults

from dpcounts.data.scenarios import draw_datasets, make_scenario
from dpcounts.privacy.calibrate import calibrate
from dpcounts.studies.study1 import Geography, score_datasets

PRIOR_SHARE = schema_defaults()["study1"]["prior_budget_fraction"]

STATES = np.repeat(["NM", "NY", "TX", "OH"], 10)
_rng = np.random.default_rng(2021)
POP = np.concatenate(
    [
        _rng.uniform(2e3, 2e4, 10),  # New Mexico: small counties
        _rng.uniform(1e5, 6e5, 10),  # New York: large ones
        _rng.uniform(1e4, 2e5, 10),
        _rng.uniform(1e4, 2e5, 10),
    ]
)
STATE_RATE = {"NM": 9e-4, "NY": 3e-4, "TX": 5e-4, "OH": 4e-4}
RATE = np.array([STATE_RATE[s] for s in STATES]) * _rng.lognormal(0.0, 0.1, STATES.size)
URBAN = POP > 5e4
TOTAL = int(round(float(POP @ RATE)))
L = 60


@pytest.fixture(scope="module")
def study():
    scenario = make_scenario(4, POP, RATE, total=TOTAL)
    geo = Geography(state=STATES, urban=URBAN)
    data = draw_datasets(scenario, L, np.random.default_rng(7))
    return scenario, geo, data


def medians(study, mechanism: str, epsilon: float, seed: int = 11) -> dict[str, float]:
    """Median over the L datasets of each metric of one arm at one epsilon."""
    scenario, geo, data = study
    scores, _ = score_datasets(scenario, geo, data, np.arange(L), mechanism, [epsilon],
                               np.random.default_rng(seed),
                               prior_budget_fraction=PRIOR_SHARE)  # fmt: skip
    return scores.groupby("metric")["value"].median().to_dict()


def truth(study) -> dict[str, float]:
    from dpcounts.studies.study1 import truth_metrics

    scenario, geo, _ = study
    return truth_metrics(scenario, geo)


def test_md_inflates_the_small_counties_at_small_epsilon(study):
    true = truth(study)
    small = medians(study, "md", 0.1)
    assert small["rate_nm"] > 2 * true["rate_nm"]
    assert small["ratio_nm_ny"] > 2 * true["ratio_nm_ny"]
    large = medians(study, "md", 50.0)
    assert large["ratio_nm_ny"] == pytest.approx(true["ratio_nm_ny"], rel=0.1)


def test_pg_national_pulls_every_rate_to_the_national_rate(study):
    small = medians(study, "pg_national", 0.01)
    assert small["ratio_nm_ny"] == pytest.approx(1.0, abs=0.05)
    assert small["ratio_urban_rural"] == pytest.approx(1.0, abs=0.05)


def test_pg_state_keeps_the_states_rates(study):
    true = truth(study)
    small = medians(study, "pg_state", 0.01)
    assert small["ratio_nm_ny"] == pytest.approx(true["ratio_nm_ny"], rel=0.05)
    assert small["rmse"] < medians(study, "pg_national", 0.01)["rmse"]


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 1.0, 10.0])
@pytest.mark.parametrize("prior", ["national", "state"])
def test_certified_calibrations_spend_at_least_the_papers_pseudo_counts(study, epsilon, prior):
    scenario, geo, _ = study
    rates = geo.state_rates(scenario.population, scenario.rate) if prior == "state" else None
    args = ("pg", epsilon, scenario.total, scenario.population, rates)
    paper, certified = (calibrate(*args, method=m) for m in ("paper", "certified"))
    assert np.all(certified.a >= paper.a * (1 - 1e-12))


def test_certified_arms_tend_to_the_paper_arms_at_large_epsilon(study):
    for prior in ("national", "state"):
        paper = medians(study, f"pg_{prior}", 100.0)["rmse"]
        certified = medians(study, f"pg_{prior}_certified", 100.0)["rmse"]
        assert certified == pytest.approx(paper, rel=0.15)


def test_the_sanitised_prior_pays_for_its_noise_and_then_matches_pg_state(study):
    assert (
        medians(study, "pg_state_sanitised", 0.05)["rmse"]
        > (medians(study, "pg_state", 0.05)["rmse"])
    )
    large = medians(study, "pg_state_sanitised", 100.0)["rmse"]
    assert large == pytest.approx(medians(study, "pg_state", 100.0)["rmse"], rel=0.15)


def test_geometric_noise_falls_like_one_over_epsilon(study):
    """rMSE^2 = the data's own sampling error^2 (reached at large epsilon) + the added
    noise^2; the added part shrinks about tenfold from epsilon 0.1 to 1."""
    floor, at_1, at_01 = (medians(study, "geometric", eps)["rmse"] for eps in (100.0, 1.0, 0.1))
    added = [np.sqrt(rmse**2 - floor**2) for rmse in (at_01, at_1)]
    assert 5 < added[0] / added[1] < 20
