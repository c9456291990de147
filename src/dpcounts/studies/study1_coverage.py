"""Study 1's coverage (issue #54, item 2): do an analyst's intervals from a release's M
sets cover the confidential county rates, when the confidential table varies?

In Study 1 each of the L datasets of a scenario is a simulated confidential table (y ~
Multinomial(y., n x rate / sum n x rate)), so the truth an interval must hold changes from
one dataset to the next: the frequentist check of the study stage's coverage
(:mod:`dpcounts.studies.stage.coverage`), whose pieces this module reuses (its
:class:`~dpcounts.studies.stage.coverage.Areas`, its disparities
:func:`~dpcounts.studies.stage.coverage.disparity_quantity`, its interval methods through
:func:`~dpcounts.studies.stage.coverage.release_quantities`, its words
:func:`~dpcounts.studies.stage.coverage.coverage_text`).

For every scenario, arm and epsilon of ``study1.coverage`` (:class:`Study1Coverage`) and
each of its first ``datasets`` datasets, :func:`arm_coverage` draws the ``sets`` synthetic
tables of one release from the arm's calibration (the data-independent calibration Study 1
scores the arm with, :func:`dpcounts.studies.study1.score_datasets`; the study sampler,
:class:`~dpcounts.sampling.study_mode.StudySampler`), from the arm's own stream
``run_rng(seed, (), "coverage", scenario, arm)`` (a stream no other artifact draws from;
the posterior's Monte Carlo of the disparities from the stream of the same labels and
``"draws"``, so that the sets do not depend on the methods). The quantities, each scored
against its dataset's confidential value:

* ``area_rate``: the counties (one stratum each), a county's confidential rate the
  dataset's count over its population, per 100,000, its exact interval the Garwood Poisson
  interval of the count;
* ``disparity``: the two group-rate ratios Study 1 reports (:data:`DISPARITIES`, Figure 2,
  :func:`dpcounts.studies.study1.group_metrics`): urban over rural counties and New
  Mexico over New York, crude rates of the groups' pooled counts; the confidential value
  the dataset's ratio, its exact interval the log-ratio normal interval of the dataset's
  counts (:func:`dpcounts.studies.intervals.rate_ratio_interval`); the posterior's
  interval from :data:`~dpcounts.studies.stage.coverage.DRAWS` joint draws of the two
  sides' true totals, as the study stage's.

From each release, method and quantity:

* ``coverage``: the share of the units (counties, disparities) whose interval holds the
  dataset's value, averaged over the datasets (one release each);
* ``coverage_se``: its Monte Carlo error, the standard deviation of the datasets' shares
  over sqrt(datasets): with two disparities a release's share is 0, 1/2 or 1, so the
  disparities' error is large (up to about 0.2 from 5 datasets);
* ``width_ratio``: the median over the units and datasets of an interval's width over the
  exact no-privacy interval's at the same level.

The arms scored: MD and the PG arms with a national or state prior, whose calibration is
data-independent (the state prior is the truth's, public in Study 1), and the geometric
baseline, whose M sets are M geometric releases of the dataset at epsilon (each set, as
each synthetic set, its own epsilon-DP release), scored by the methods that need no
calibration (:data:`NO_CALIBRATION`: the combining rules). The sanitised prior's
calibration depends on each dataset: it is not scored.

Where the posterior fails: its prior gives each county an independent law of shape 1
about the calibration's prior mean, which over the hundreds of small counties of a group
is far surer of the group's total than their real rates are. At a large epsilon, where
the sets pin each county's count down, the pull of each county towards its prior mean
adds up over the rural group beyond the group's posterior spread, and the urban / rural
interval misses the dataset's ratio (the shipped config, ``results/study1/coverage.csv``:
at epsilon 100 the posterior covers 40-50% of the two disparities, the urban / rural
ratio in no dataset), while each county's own interval covers 97-99%. The combining
rules, which read the sets alone, hold both there. ``tests/test_study1_coverage.py``
shows it on a small table of many small counties.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.arms import Arm, arm_title
from dpcounts.design import at_epsilon
from dpcounts.studies.stage.coverage import METHODS, QUANTITIES, Areas, Weighed, coverage_text
from dpcounts.studies.study1 import (
    Geography,
    Study1Design,
    load_datasets,
    load_scenario,
    run_rng,
    study1_arm,
    study1_calibration,
)
from dpcounts.units import PER_100K

log = logging.getLogger(__name__)

#: Columns of ``results/study1/coverage.parquet`` (the study stage's, by scenario).
COLUMNS = ["scenario", "arm", "epsilon", "method", "quantity", "level", "sets", "releases",
           "coverage", "coverage_se", "width_ratio"]  # fmt: skip
#: Columns of ``results/study1/coverage.csv``: one row in words per scenario, arm, method.
GUIDE_COLUMNS = ["scenario", "arm", "arm_label", "method", "quantity", "level", "sets",
                 "releases", "epsilon", "coverage_low", "coverage_high", "coverage_se",
                 "width_low", "width_high", "epsilon_smallest", "coverage_smallest",
                 "text"]  # fmt: skip


#: The methods that need no calibration: the only ones that score the geometric baseline.
NO_CALIBRATION = ("combining",)
#: The disparities whose intervals are scored (the ratios of Study 1's metrics and Figure 2):
#: (name, numerator group, denominator group) of
#: :attr:`dpcounts.studies.study1.Geography.groups`.
DISPARITIES = (("urban_rural", "urban", "rural"), ("nm_ny", "nm", "ny"))


def _fail(key: str, message: str):
    raise ValueError(f"study1.coverage.{key}: {message}")


@dataclass(frozen=True)
class Study1Coverage:
    """The config's ``study1.coverage`` (defaults filled by the schema), checked against
    Study 1's design: the ``scenarios`` (of ``study1.scenarios``), the nominal ``level``,
    the ``sets`` of a release, the first ``datasets`` of the L datasets, the ``epsilons``
    (of Study 1's grid), the ``arms`` (of ``study1.arms``: md, pg with a national or
    state prior, geometric) and the interval ``methods``."""

    scenarios: tuple[int, ...]
    level: float
    sets: int
    datasets: int
    epsilons: tuple[float, ...]
    arms: tuple[Arm, ...]
    methods: tuple[str, ...]

    @classmethod
    def from_config(cls, study1) -> Study1Coverage:
        """The setting of the config's ``study1`` entry (its ``coverage`` block)."""
        design = Study1Design.from_config(Study1Design.entry(study1))
        spec = study1["coverage"]
        scenarios = tuple(int(s) for s in spec["scenarios"])
        outside = [s for s in scenarios if s not in set(study1["scenarios"])]
        if outside:
            _fail("scenarios", f"{outside} are not run by study1.scenarios "
                  f"{list(study1['scenarios'])}; expected some of them")  # fmt: skip
        level = float(spec["level"])
        if not 0 < level < 1:
            _fail("level", f"got {spec['level']!r}; expected a number in (0, 1)")
        sets, datasets = int(spec["sets"]), int(spec["datasets"])
        if sets < 2:
            _fail("sets", f"got {sets}; expected at least 2 sets (the combining rules' "
                  "between-set variance)")  # fmt: skip
        if not 2 <= datasets <= design.datasets:
            _fail("datasets", f"got {datasets}; expected 2 to study1.datasets "
                  f"({design.datasets}): a Monte Carlo error needs 2 releases")  # fmt: skip
        epsilons = [float(e) for e in spec["epsilons"]]
        outside = [e for e in epsilons if not at_epsilon(list(design.epsilons), e).any()]
        if outside or not epsilons:
            _fail("epsilons", f"{outside or 'none'} are not in Study 1's grid "
                  f"{[float(f'{e:.6g}') for e in design.epsilons]}; expected epsilons of "
                  "it")  # fmt: skip
        arms = tuple(study1_arm(name) for name in spec["arms"])
        names = {arm.name for arm in design.arms}
        for arm in arms:
            if arm.prior == "sanitised":
                _fail("arms", f"{arm.name!r} has no data-independent calibration; expected "
                      "md, a pg arm with a national or state prior, or geometric")  # fmt: skip
            if arm.name not in names:
                _fail("arms", f"{arm.name!r} is not run by study1.arms; expected some of "
                      f"{sorted(names)}")  # fmt: skip
        methods = tuple(dict.fromkeys(spec["methods"]))
        unknown = [m for m in methods if m not in METHODS]
        if unknown or not methods:
            _fail("methods", f"got {list(methods)}; expected some of {list(METHODS)}")
        if any(arm.baseline for arm in arms) and not set(methods) & set(NO_CALIBRATION):
            _fail("methods", f"got {list(methods)}: the geometric baseline has no "
                  f"calibration; expected one of {list(NO_CALIBRATION)} among them")  # fmt: skip
        return cls(scenarios, level, sets, datasets, tuple(epsilons), arms, methods)


def county_areas(population, counts, level: float) -> Areas:
    """The counties of one dataset as the study stage's :class:`Areas` (one stratum per
    county): its confidential rates (``counts`` over ``population``, per 100,000) and each
    county's exact Garwood interval width at ``level``; a county's count is at most its
    population."""
    from dpcounts.studies.intervals import poisson_rate_interval

    population = np.asarray(population, dtype=float)
    counts = np.asarray(counts, dtype=float)
    exact = poisson_rate_interval(counts, population, level, per=PER_100K)
    return Areas(
        names=tuple(str(i) for i in range(population.size)),
        codes=np.arange(population.size),
        people=population,
        truth=counts / population * PER_100K,
        exact_width=np.asarray(exact.upper) - np.asarray(exact.lower),
        per=PER_100K,
        cap=population,
    )


def county_disparities(geo: Geography, population, counts, level: float) -> Weighed | None:
    """The ``disparity`` quantity of one dataset (``counts``, one per county): the
    :data:`DISPARITIES` as the study stage's
    :class:`~dpcounts.studies.stage.coverage.Weighed` (crude rates of the county groups
    ``geo.groups``, per 100,000), each with the dataset's ratio and the width of its
    log-ratio normal interval at ``level``. A disparity with a side without a county
    (a geography without New Mexico) or without events is left out (logged); None if
    none is left."""
    from dpcounts.studies.stage.coverage import disparity_quantity
    from dpcounts.studies.stage.rates import GroupRates

    groups = {name: mask for name, mask in geo.groups.items() if np.any(mask)}
    pairs = [pair for pair in DISPARITIES if {pair[1], pair[2]} <= set(groups)]
    for name, *_ in sorted(set(DISPARITIES) - set(pairs)):
        log.warning("Study 1: disparity %s has a side without counties: no coverage of it",
                    name)  # fmt: skip
    if not pairs:
        return None
    population = np.asarray(population, dtype=float)
    rates = GroupRates(population, groups, per=PER_100K)
    return disparity_quantity(rates, pairs, counts, level, population, "Study 1")


def arm_coverage(scenario, geo: Geography, datasets: np.ndarray, arm: Arm,
                 spec: Study1Coverage, rng: np.random.Generator,
                 draws: np.random.Generator) -> list[dict]:  # fmt: skip
    """One row of :data:`COLUMNS`' numbers per epsilon, method and quantity of ``spec``
    for ``arm`` on ``datasets`` (rows of counts of ``scenario``, each one release of
    ``spec.sets`` tables drawn from ``rng``: epsilon by epsilon, dataset by dataset; the
    posterior's Monte Carlo of the disparities from ``draws``). The geometric baseline is
    scored by the methods of :data:`NO_CALIBRATION` alone."""
    from dpcounts.baselines.geometric import geometric_release_each
    from dpcounts.sampling.study_mode import StudySampler
    from dpcounts.studies.stage.coverage import release_quantities

    n = scenario.population
    state_prior = geo.state_rates(n, scenario.rate) if arm.prior == "state" else None
    areas = [county_areas(n, y, spec.level) for y in datasets]
    weighed = [[w] if (w := county_disparities(geo, n, y, spec.level)) else []
               for y in datasets]  # fmt: skip
    methods = [m for m in spec.methods if not arm.baseline or m in NO_CALIBRATION]
    rows = []
    for epsilon in spec.epsilons:
        if arm.baseline:  # each set its own geometric release of the dataset
            cal = None
            releases = [geometric_release_each(np.repeat(y[None, :], spec.sets, axis=0),
                                               epsilon, rng) for y in datasets]  # fmt: skip
        else:
            cal = study1_calibration(arm, epsilon, scenario, state_prior)
            releases = [StudySampler(y, cal).draw(spec.sets, rng) for y in datasets]
        for method in methods:
            found = {}  # quantity: (each dataset's share, its units' width ratios)
            for sets, county, disparity in zip(releases, areas, weighed, strict=True):
                scores = release_quantities(sets, county, disparity, cal, method, spec.level,
                                            spec.sets, draws)  # fmt: skip
                for quantity, (share, ratio) in scores.items():
                    found.setdefault(quantity, ([], []))
                    found[quantity][0].append(share[0])
                    found[quantity][1].append(ratio[0])
            for quantity in sorted(found, key=QUANTITIES.index):
                shares, ratios = np.asarray(found[quantity][0]), found[quantity][1]
                se = shares.std(ddof=1) / math.sqrt(shares.size) if shares.size > 1 else math.nan
                rows.append({"scenario": scenario.number, "arm": arm.name, "epsilon": epsilon,
                             "method": method, "quantity": quantity, "releases": shares.size,
                             "coverage": float(shares.mean()), "coverage_se": float(se),
                             "width_ratio": float(np.median(np.concatenate(ratios)))})  # fmt: skip
        log.info("scenario %d, %s at epsilon=%g: %d releases", scenario.number, arm.name,
                 epsilon, len(releases))  # fmt: skip
    return rows


def coverage_table(scenario_paths, dataset_paths, spec: Study1Coverage, seed: int,
                   rng_labels=()) -> pd.DataFrame:  # fmt: skip
    """The coverage of every scenario (``scenario_paths`` and ``dataset_paths``, in the
    order of ``spec.scenarios``: Study 1's scenario and datasets artifacts), arm, epsilon
    and method of ``spec``: :data:`COLUMNS`. Each arm of a scenario draws from its own
    stream (:func:`dpcounts.studies.study1.run_rng` of ``"coverage"``, the scenario and
    the arm's name; the posterior's Monte Carlo from that and ``"draws"``). The rows by
    quantity (the counties' rates first), then as drawn."""
    if len(scenario_paths) != len(spec.scenarios) or len(dataset_paths) != len(spec.scenarios):
        raise ValueError(f"expected one scenario and one datasets file per scenario of "
                         f"study1.coverage.scenarios {list(spec.scenarios)}")  # fmt: skip
    rows = []
    for number, scenario_path, dataset_path in zip(spec.scenarios, scenario_paths,
                                                   dataset_paths, strict=True):  # fmt: skip
        scenario, geo = load_scenario(scenario_path)
        if scenario.number != number:
            raise ValueError(f"{scenario_path}: holds scenario {scenario.number}, expected "
                             f"{number}")  # fmt: skip
        datasets = load_datasets(dataset_path, np.arange(spec.datasets))
        for arm in spec.arms:
            rng = run_rng(seed, rng_labels, "coverage", number, arm.name)
            draws = run_rng(seed, rng_labels, "coverage", number, arm.name, "draws")
            rows += arm_coverage(scenario, geo, datasets, arm, spec, rng, draws)
    out = pd.DataFrame(rows)
    out["level"], out["sets"] = spec.level, spec.sets
    out = out.sort_values("quantity", key=lambda c: c.map(QUANTITIES.index), kind="stable")
    return out[COLUMNS].reset_index(drop=True)


def coverage_guide(table: pd.DataFrame, spec: Study1Coverage) -> pd.DataFrame:
    """One row in words per scenario, arm and method of :func:`coverage_table`'s
    ``table`` (:data:`GUIDE_COLUMNS`; the words of the study stage's guide,
    :func:`dpcounts.studies.stage.coverage.coverage_text`: Study 1's arms spend no
    epsilon on their prior)."""
    arms = {arm.name: arm for arm in spec.arms}
    out = []
    keys = ["scenario", "arm", "method", "quantity"]
    for (scenario, arm, method, quantity), rows in table.groupby(keys, sort=False):
        level, sets = float(rows["level"].iloc[0]), int(rows["sets"].iloc[0])
        words = coverage_text(rows, method=method, level=level, sets=sets, quantity=quantity)
        out.append({"scenario": int(scenario), "arm": arm, "arm_label": arm_title(arms[arm]),
                    "method": method, "quantity": quantity, "level": level, "sets": sets,
                    "releases": int(rows["releases"].min()), **words})  # fmt: skip
    return pd.DataFrame(out, columns=GUIDE_COLUMNS)


__all__ = ["COLUMNS", "DISPARITIES", "GUIDE_COLUMNS", "NO_CALIBRATION", "Study1Coverage",
           "arm_coverage", "county_areas", "county_disparities", "coverage_guide",
           "coverage_table"]  # fmt: skip
