"""What a study measures on each synthetic table, against the confidential one: one
registry, :data:`MEASURES`, and the disparities of the study's config.

Each :class:`Measure` is declared once: its name (the summary's ``metric``), its title and
unit (the figures'), its :class:`Kind` and its function. The kind decides everything else
that differs between measures: how far a value is from a target in units of the guide's
tolerance (:meth:`Kind.distance`), whether the figure draws a truth line and a log scale.
A new measure is one entry of :data:`MEASURES`, one function and its tests.

* ``rmse`` (error): root mean squared error of the strata rates, per 100,000 (of the
  SMRs, observed / expected, with ``denominator: expected``).
* ``rank_correlation`` (correlation): Spearman's rho between the synthetic and the true
  area rates (age-adjusted when the study has an age key): are the areas still ranked as
  they are? Only with an area key.
* ``disparity:<name>`` (ratio): each configured disparity, the rate of its numerator
  strata over that of its denominator strata (age-adjusted with an age key; a disparity
  whose filters name the age column adjusts each side over the ages it selects,
  :mod:`dpcounts.studies.stage.age`).

:class:`Measures` scores many tables (rows) in one call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.studies.metrics import rmse_per_100k
from dpcounts.studies.stage.definition import StudyDefinition
from dpcounts.studies.stage.rates import GroupRates
from dpcounts.studies.stage.selection import filter_mask
from dpcounts.units import PER_100K

AREA = "area:"
DISPARITY = "disparity:"


@dataclass(frozen=True)
class Kind:
    """What kind of quantity a measure is, and so how it is judged and drawn.

    * ``error`` (0 is perfect, the truth's own value): distance max(value - target, 0) /
      scale, the scale being the table's overall true rate: the error a value adds to the
      target's, as a share of the rate (less error than the target is no loss);
    * ``correlation`` (1 is perfect): distance |value - target|;
    * ``ratio`` (a disparity; compared multiplicatively): distance |value / target - 1|.
    """

    name: str
    truth_line: bool  # the truth is worth a line (an error's truth is 0)
    log_scale: bool  # the figure's y axis
    rule: str  # the distance, in words, for the docs and the guide's reasons

    def distance(self, value, target, scale: float = 1.0) -> np.ndarray:
        """How far ``value`` is from ``target``, in the units of the guide's tolerance."""
        value, target = np.asarray(value, dtype=float), np.asarray(target, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.name == "error":
                return np.maximum(value - target, 0.0) / scale
            if self.name == "correlation":
                return np.abs(value - target)
            return np.abs(value / target - 1)

    def clamping_distance(self, clamped, truth, reference, scale: float = 1.0) -> float:
        """How far clamping the true counts to truncation bounds alone moves the measure:
        the distance of ``clamped`` (the measure of the clamped counts) from the truth; for
        an error, the error it adds to synthesis's (``reference``), the two independent
        (added in quadrature: sqrt(reference^2 + clamped^2) - reference)."""
        if self.name == "error":
            return float((np.hypot(reference, clamped) - reference) / scale)
        return float(self.distance(clamped, truth, scale))

    def within(self, target: float, tolerance: float, scale: float = 1.0) -> tuple[float, float]:
        """The values within ``tolerance`` of ``target`` (:meth:`distance` <= tolerance)."""
        if self.name == "error":
            return 0.0, target + tolerance * scale
        if self.name == "correlation":
            return target - tolerance, target + tolerance
        return target * (1 - tolerance), target * (1 + tolerance)


KINDS = {
    "error": Kind("error", False, True, "the added error / the overall true rate"),
    "correlation": Kind("correlation", True, False, "|value - target|"),
    "ratio": Kind("ratio", True, True, "|value / target - 1|"),
}


@dataclass(frozen=True)
class Measure:
    """One measure: ``function(measures, counts, truth, rates)`` gives its value per table
    (row of ``counts``, shape (tables, strata)) against the true counts ``truth``; ``rates``
    are the tables' group rates (:class:`GroupRates`, computed once for every measure)."""

    name: str
    title: str
    unit: str
    kind: Kind
    function: Callable[[Measures, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    needs_areas: bool = False


def _rmse(m: Measures, counts, truth, rates) -> np.ndarray:
    return rmse_per_100k(counts / m.population, truth / m.population, m.per, cells=m.strata)


def average_ranks(values) -> np.ndarray:
    """``scipy.stats.rankdata(values, axis=-1)``: ranks from 1 along the last axis, tied
    values given the mean of their ranks, a row holding a NaN all NaN. The same numbers
    (whole and half ranks are exact doubles) without importing scipy.stats, about a
    second of every job and release that scores tables. The sort need not be stable: a
    run of equal values gets one rank whatever order its members are sorted in (NumPy's
    default sort, faster than a stable one on rows of rates)."""
    values = np.asarray(values, dtype=float)
    rows = values.reshape(-1, values.shape[-1]) if values.ndim else values.reshape(1, 1)
    n = rows.shape[1]
    order = np.argsort(rows, axis=1)
    ordered = np.take_along_axis(rows, order, axis=1)
    at = np.arange(n)
    starts = np.ones(ordered.shape, dtype=bool)  # where a run of equal values begins
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones(ordered.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, at, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, at, n - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(rows.shape)
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=1)
    ranks[np.isnan(rows).any(axis=1)] = np.nan
    return ranks.reshape(values.shape)


def _rank_correlation(m: Measures, counts, truth, rates) -> np.ndarray:
    ranks = average_ranks(rates[:, : len(m.areas)])
    true_ranks = average_ranks(m.area_rates(truth)[0])
    ranks = ranks - ranks.mean(axis=1, keepdims=True)
    true_ranks = true_ranks - true_ranks.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ranks @ true_ranks) / (
            np.sqrt((ranks**2).sum(axis=1)) * np.sqrt((true_ranks**2).sum())
        )


#: Every measure but the disparities, in the order of the figures' panels.
MEASURES = (
    Measure("rmse", "rMSE of the strata rates", "rMSE per 100,000", KINDS["error"], _rmse),
    Measure(
        "rank_correlation",
        "Rank correlation of the area rates",
        "Spearman's rho",
        KINDS["correlation"],
        _rank_correlation,
        needs_areas=True,
    ),  # fmt: skip
)


def _disparity(name: str):
    def function(m: Measures, counts, truth, rates) -> np.ndarray:
        index = {group: k for k, group in enumerate(m.rates.names)}
        with np.errstate(invalid="ignore", divide="ignore"):
            return rates[:, index[f"{name}:numerator"]] / rates[:, index[f"{name}:denominator"]]

    return function


def study_measure_list(definition: StudyDefinition) -> tuple[Measure, ...]:
    """The measures of a study, in panel order: :data:`MEASURES` (rank correlation only
    with an area key), then its disparities in config order (titled by their labels)."""
    static = [m for m in MEASURES if definition.area is not None or not m.needs_areas]
    if definition.denominator == "expected":  # the rates are SMRs: ratios, not per 100,000
        static = [dataclasses.replace(m, title="rMSE of the strata SMRs",
                                      unit="a ratio, observed / expected")
                  if m.name == "rmse" else m for m in static]  # fmt: skip
    disparities = [
        Measure(
            DISPARITY + spec.name, spec.title, "rate ratio", KINDS["ratio"], _disparity(spec.name)
        )  # fmt: skip
        for spec in definition.disparities
    ]
    return (*static, *disparities)


@dataclass(frozen=True)
class Measures:
    rates: GroupRates
    population: np.ndarray
    areas: tuple[str, ...]
    measures: tuple[Measure, ...]
    per: float = PER_100K  # reported rate per rate per person (1 for SMRs)
    #: the strata in all when the counts are given at some only (:meth:`on`), else None
    strata: int | None = None

    def on(self, strata: np.ndarray, truth) -> tuple[Measures, np.ndarray]:
        """(these measures of tables given at ``strata`` only, every other count 0 in the
        tables and in the truth ``truth``; ``truth`` at ``strata``): the same values,
        from those strata alone (a national table's no-privacy reference is zero where
        it has no event)."""
        strata = np.asarray(strata)
        truth = np.asarray(truth)
        if np.any(np.delete(truth, strata)):
            raise ValueError("the truth has counts outside the strata given")
        on = dataclasses.replace(self, rates=self.rates.on(strata),
                                 population=self.population[strata],
                                 strata=self.population.size)  # fmt: skip
        return on, truth[strata]

    def area_rates(self, counts) -> np.ndarray:
        """Rates per 100,000 of every area, shape (rows, areas)."""
        rates = np.atleast_2d(self.rates.rates(counts))
        return rates[:, : len(self.areas)]

    def values(self, counts, truth) -> pd.DataFrame:
        """One row per table of ``counts``, one column per measure (its name)."""
        counts = np.atleast_2d(np.asarray(counts, dtype=float))
        truth = np.asarray(truth, dtype=float)
        rates = np.atleast_2d(self.rates.rates(counts))
        return pd.DataFrame({m.name: m.function(self, counts, truth, rates) for m in self.measures})


def overall_rate(definition: StudyDefinition, strata: pd.DataFrame) -> float:
    """The table's true overall rate (per 100,000; the overall SMR with ``denominator:
    expected``): its events over its people, each population unit's population counted
    once (strata that share it, ``population_keys``, count it once, as
    :class:`~dpcounts.studies.stage.rates.GroupRates` does). The scale of the error kind's
    tolerance, in the guide and in a release's report alike."""
    people = strata.drop_duplicates(list(definition.population_keys))[definition.population]
    return float(strata[definition.count].sum() / people.sum() * definition.per)


def study_measures(definition: StudyDefinition, strata: pd.DataFrame) -> Measures:
    """The measures of a study on its strata (with an age key, the standard population
    is read from ``definition.standard_population``)."""
    groups: dict[str, np.ndarray] = {}
    areas: tuple[str, ...] = ()
    if definition.area is not None:
        codes, values = pd.factorize(strata[definition.area].astype(str), sort=True)
        areas = tuple(values)
        for k, name in enumerate(areas):
            groups[AREA + name] = codes == k
    for k, spec in enumerate(definition.disparities):
        key = f"studies.{definition.name}.disparities[{k}]"
        where = filter_mask(strata, spec.where, f"{key}.where")
        for side in ("numerator", "denominator"):
            groups[f"{spec.name}:{side}"] = (
                filter_mask(strata, getattr(spec, side), f"{key}.{side}") & where
            )
    groups["all"] = np.ones(len(strata), dtype=bool)
    population = strata[definition.population].to_numpy(dtype=float)
    options = {}
    if definition.population_keys != definition.keys:  # strata share their unit's population
        units = strata[list(definition.population_keys)].astype(str)
        options["unit"] = units.agg("|".join, axis=1).to_numpy()
    if definition.age is not None:  # the bands and weights (rules: dpcounts.studies.stage.age)
        from dpcounts.studies.stage.age import age_adjustment, names_age, side_bands

        adjustment = age_adjustment(definition, strata)
        options["weights"] = adjustment.weights
        options["band"] = adjustment.band
        # a disparity that compares ages: each side adjusted over the bands it selects
        own = {}
        for spec in definition.disparities:
            if names_age(definition, spec):
                for side in ("numerator", "denominator"):
                    own[f"{spec.name}:{side}"] = side_bands(
                        definition, spec, side, strata, adjustment
                    )
        if own:
            options["group_bands"] = own
    rates = GroupRates(population, groups, per=definition.per, **options)
    return Measures(rates, population, areas, study_measure_list(definition), definition.per)
