"""What a study measures on each synthetic table, against the confidential one: one
registry, :data:`MEASURES`, and the disparities of the study's config.

Each :class:`Measure` is declared once: its name (the summary's ``metric``), its title and
unit (the figures'), its :class:`Kind` and its function. The kind decides everything else
that differs between measures: how far a value is from a target in units of the guide's
tolerance (:meth:`Kind.distance`) and whether it is kept (:meth:`Kind.kept`), whether the
figure draws a truth line and a log scale.
A new measure is one entry of :data:`MEASURES`, one function and its tests.

* ``rmse`` (error): root mean squared error of the strata rates, per 100,000 (of the
  SMRs, observed / expected, with ``denominator: expected``): the papers' measure, which
  the strata with the largest rates dominate (the oldest ages).
* ``relative_error`` (relative): the mean over strata of |synthetic - true| / max(true,
  1), the strata's relative error (of their counts, so of their rates), every stratum
  weighing alike, small or large (a stratum with no event: its synthetic count).
* ``margin:<keys>`` (relative): for each key, and each combination of keys the study
  declares (``margins``, named ``margin:<a>,<b>``), the largest relative error of a
  value's total, max over values |synthetic total - true total| / max(true total, 1): is
  any county's, age group's or period's total far off?
* ``rank_correlation`` (correlation): Spearman's rho between the synthetic and the true
  area rates (age-adjusted when the study has an age key): are the areas still ranked as
  they are? Only with an area key.
* ``disparity:<name>`` (ratio): each configured disparity, the rate of its numerator
  strata over that of its denominator strata (age-adjusted with an age key; a disparity
  whose filters name the age column adjusts each side over the ages it selects,
  :mod:`dpcounts.studies.stage.age`).

An error and a relative error are judged by what they add to the target's (less is no
loss); a relative one in absolute terms: at a tolerance of 0.1, a margin the no-privacy
reference misses by 1% is kept up to 11% and lost at 17%.

:class:`Measures` scores many tables (rows) in one call.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.encoding import factorize
from dpcounts.studies.metrics import rmse_per_100k
from dpcounts.studies.stage.definition import StudyDefinition
from dpcounts.studies.stage.rates import GroupRates
from dpcounts.studies.stage.selection import filter_mask
from dpcounts.units import PER_100K

AREA = "area:"
DISPARITY = "disparity:"
MARGIN = "margin:"


#: The absolute band of a ratio's departure from parity, on the log scale: a truth within
#: 10% of 1 (|log truth| below log 1.1) is judged as if its departure were log 1.1, so a
#: truth of 1.01 is not held to a window of 1% of its 0.01.
RATIO_BAND = math.log(1.1)


@dataclass(frozen=True)
class Kind:
    """What kind of quantity a measure is, and so how it is judged and drawn.

    * ``error`` (0 is perfect, the truth's own value): distance max(value - target, 0) /
      scale, the scale being the table's overall true rate: the error a value adds to the
      target's, as a share of the rate (less error than the target is no loss);
    * ``relative`` (a relative error, 0 is perfect): distance max(value - target, 0), the
      relative error added, itself a share (no scale);
    * ``correlation`` (1 is perfect): distance |value - target|;
    * ``ratio`` (a disparity): what is kept of the true departure from parity, on the log
      scale: distance |log(value / target)| / max(|log truth|, :data:`RATIO_BAND`), the
      share of the truth's log departure from 1 that the value misses; and infinite where
      the value is nearer the prior's value than the truth (|log(value / prior)| <
      |log(value / truth)|): a disparity the synthesis pulled back to the prior is never
      kept, however near 1 both are. A truth of 1.117 and a prior of 1.00 at a tolerance
      of 0.1: the values kept are 1.105 to 1.129 (0.1 x log 1.117 either side); 1.01
      keeps 9% of the departure and is not kept.

    :meth:`kept` is the one test of the study's guide, its figures' shading
    (:meth:`within`) and a release's promise check
    (:func:`dpcounts.release.report.promise.check_promise`).
    """

    name: str
    truth_line: bool  # the truth is worth a line (an error's truth is 0)
    log_scale: bool  # the figure's y axis
    rule: str  # the distance, in words, for the docs and the guide's reasons

    def distance(self, value, target, scale: float = 1.0, *, truth=None,
                 prior=None) -> np.ndarray:  # fmt: skip
        """How far ``value`` is from ``target``, in the units of the guide's tolerance. A
        ratio's is relative to the log departure of ``truth`` (None: the target) and
        infinite where ``value`` is nearer ``prior`` (the prior's value; None: not
        judged) than the truth; the other kinds ignore both."""
        value, target = np.asarray(value, dtype=float), np.asarray(target, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.name == "error":
                return np.maximum(value - target, 0.0) / scale
            if self.name == "relative":
                return np.maximum(value - target, 0.0)
            if self.name == "correlation":
                return np.abs(value - target)
            truth = target if truth is None else np.asarray(truth, dtype=float)
            spread = np.maximum(np.abs(np.log(truth)), RATIO_BAND)
            out = np.abs(np.log(value / target)) / spread
            if prior is not None:
                prior = np.asarray(prior, dtype=float)
                nearer = np.abs(np.log(value / prior)) < np.abs(np.log(value / truth))
                out = np.where(nearer, np.inf, out)
            return out

    def judged_prior(self, truth, prior, tolerance: float):
        """The prior's value a ratio is told apart from: ``prior``, but None (not judged)
        where it is itself within ``tolerance`` of the truth (the measure cannot tell them
        apart: the guide's *the prior alone keeps it*), or not known, or the kind is not a
        ratio."""
        if self.name != "ratio" or prior is None or truth is None:
            return None
        prior = float(prior)
        if not np.isfinite(prior) or self.distance(prior, truth, truth=truth) <= tolerance:
            return None
        return prior

    def kept(self, value, target, tolerance: float, scale: float = 1.0, *, truth=None,
             prior=None) -> np.ndarray:  # fmt: skip
        """Whether ``value`` keeps ``target`` within ``tolerance`` (:meth:`distance` <=
        tolerance; for a ratio, relative to ``truth``'s departure from 1 and never nearer
        ``prior`` than the truth, where the two are told apart: :meth:`judged_prior`)."""
        prior = self.judged_prior(truth, prior, tolerance)
        distance = self.distance(value, target, scale, truth=truth, prior=prior)
        return distance <= tolerance

    def clamping_distance(self, clamped, truth, reference, scale: float = 1.0, *,
                          prior=None) -> float:  # fmt: skip
        """How far clamping the true counts to truncation bounds alone moves the measure:
        the distance of ``clamped`` (the measure of the clamped counts) from the truth; for
        an error, the error it adds to synthesis's (``reference``), the two independent
        (added in quadrature: sqrt(reference^2 + clamped^2) - reference)."""
        if self.name in ("error", "relative"):
            scale = scale if self.name == "error" else 1.0
            return float((np.hypot(reference, clamped) - reference) / scale)
        return float(self.distance(clamped, truth, scale, truth=truth, prior=prior))

    def within(self, target: float, tolerance: float, scale: float = 1.0, *,
               truth: float | None = None,
               prior: float | None = None) -> tuple[float, float]:  # fmt: skip
        """The values :meth:`kept` within ``tolerance`` of ``target`` (for a ratio, the
        window ``target`` x exp(+-tolerance x max(|log truth|, log 1.1)), cut at
        sqrt(truth x prior), the value as near the prior as the truth, on the prior's
        side)."""
        if self.name == "error":
            return 0.0, target + tolerance * scale
        if self.name == "relative":
            return 0.0, target + tolerance
        if self.name == "correlation":
            return target - tolerance, target + tolerance
        prior = self.judged_prior(truth, prior, tolerance)
        truth = target if truth is None else truth
        with np.errstate(invalid="ignore", divide="ignore"):
            step = tolerance * max(abs(float(np.log(truth))), RATIO_BAND)
            low, high = target * math.exp(-step), target * math.exp(step)
            middle = float(np.sqrt(truth * prior)) if prior is not None else math.nan
        if prior is not None and prior != truth and np.isfinite(middle):
            if prior < truth:
                low = max(low, middle)
            else:
                high = min(high, middle)
        return low, high


KINDS = {
    "error": Kind("error", False, True, "the added error / the overall true rate"),
    "relative": Kind("relative", False, True, "the added relative error"),
    "correlation": Kind("correlation", True, False, "|value - target|"),
    "ratio": Kind(
        "ratio",
        True,
        True,
        "the share of the true departure from parity missed, infinite when nearer the prior "
        "than the truth: |log(value / target)| / max(|log truth|, log 1.1)",
    ),
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


def _relative_error(m: Measures, counts, truth, rates) -> np.ndarray:
    strata = counts.shape[1] if m.strata is None else m.strata
    scale = 1.0 / np.maximum(truth, 1.0)
    return np.abs(counts - truth) @ scale / strata


def _margin(name: str):
    def function(m: Measures, counts, truth, rates) -> np.ndarray:
        codes, size = m.margins[name]
        true = np.bincount(codes, weights=truth, minlength=size)
        scale = 1.0 / np.maximum(true, 1.0)
        out = np.empty(len(counts))
        for k, row in enumerate(counts):  # one table at a time: no (tables, strata) copy
            out[k] = np.max(np.abs(np.bincount(codes, weights=row, minlength=size) - true)
                            * scale)  # fmt: skip
        return out

    return function


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
        "relative_error",
        "Relative error of the strata rates",
        "mean |synth. - true| / max(true, 1)",
        KINDS["relative"],
        _relative_error,
    ),  # fmt: skip
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


def margin_keys(definition: StudyDefinition) -> tuple[tuple[str, ...], ...]:
    """The key combinations whose totals a study measures: each key, then the declared
    ``margins`` (each in the keys' order)."""
    return (*((key,) for key in definition.keys), *definition.margins)


def margin_name(keys: tuple[str, ...]) -> str:
    """``margin:<a>,<b>``: the measure of the totals by ``keys``."""
    return MARGIN + ",".join(keys)


def _margin_measure(keys: tuple[str, ...]) -> Measure:
    words = " and ".join(keys) if len(keys) < 3 else ", ".join(keys[:-1]) + " and " + keys[-1]
    name = margin_name(keys)
    return Measure(name, f"Totals by {words}: largest relative error",
                   "max |synth. - true| / max(true, 1)", KINDS["relative"],
                   _margin(name))  # fmt: skip


def study_measure_list(definition: StudyDefinition) -> tuple[Measure, ...]:
    """The measures of a study, in panel order: :data:`MEASURES` (rank correlation only
    with an area key), its margins (:func:`margin_keys`), then its disparities in config
    order (titled by their labels)."""
    static = [m for m in MEASURES if definition.area is not None or not m.needs_areas]
    if definition.denominator == "expected":  # the rates are SMRs: ratios, not per 100,000
        static = [dataclasses.replace(m, title="rMSE of the strata SMRs",
                                      unit="a ratio, observed / expected")
                  if m.name == "rmse" else m for m in static]  # fmt: skip
    if definition.age is not None:  # the areas' rates are age-adjusted: say so (issue #52)
        static = [dataclasses.replace(m, title="Rank correlation of the age-adjusted area rates")
                  if m.name == "rank_correlation" else m for m in static]  # fmt: skip
    disparities = [
        Measure(
            DISPARITY + spec.name, spec.title, "rate ratio", KINDS["ratio"], _disparity(spec.name)
        )  # fmt: skip
        for spec in definition.disparities
    ]
    margins = [_margin_measure(keys) for keys in margin_keys(definition)]
    return (*static, *margins, *disparities)


@dataclass(frozen=True)
class Measures:
    rates: GroupRates
    population: np.ndarray
    areas: tuple[str, ...]
    measures: tuple[Measure, ...]
    per: float = PER_100K  # reported rate per rate per person (1 for SMRs)
    #: the strata in all when the counts are given at some only (:meth:`on`), else None
    strata: int | None = None
    #: a margin measure's name -> (each stratum's value code, the number of values)
    margins: Mapping[str, tuple[np.ndarray, int]] = dataclasses.field(default_factory=dict)
    #: (low, high): the small true counts an attacker guesses from each table (the study's
    #: suppression range), scored as :data:`ATTACK` columns beside the measures; None: not
    attack: tuple[int, int] | None = None
    #: the sets of a release the attacker takes the mode over (:func:`mode_shares`)
    attack_sets: int = 1

    def on(self, strata: np.ndarray, truth) -> tuple[Measures, np.ndarray]:
        """(these measures of tables given at ``strata`` only, every other count 0 in the
        tables and in the truth ``truth``; ``truth`` at ``strata``): the same values,
        from those strata alone (a national table's no-privacy reference is zero where
        it has no event)."""
        strata = np.asarray(strata)
        truth = np.asarray(truth)
        if np.any(np.delete(truth, strata)):
            raise ValueError("the truth has counts outside the strata given")
        margins = {name: (codes[strata], size) for name, (codes, size) in self.margins.items()}
        on = dataclasses.replace(self, rates=self.rates.on(strata),
                                 population=self.population[strata],
                                 strata=self.population.size, margins=margins)  # fmt: skip
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
        out = {m.name: m.function(self, counts, truth, rates) for m in self.measures}
        if self.attack is not None:
            out.update(attack_shares(counts, truth, *self.attack))
        return pd.DataFrame(out)


#: The attacker's columns (:func:`attack_shares`): not measures of utility, so the guide
#: judges none of them; the study's attack figure draws them against suppression's.
ATTACK = ("attack:exact", "attack:within_one")
#: The attacker's columns from the mode over a release's sets (:func:`mode_shares`).
MODE = ("attack:mode_exact", "attack:mode_within_one")


def attack_shares(counts, truth, low: int, high: int) -> dict[str, np.ndarray]:
    """Per table (row of ``counts``), the share of the strata whose true count is in [low,
    high] (the counts suppression hides) that the table gives exactly, and to within one:
    the attacker who reads one synthetic set as the truth (a count rounded half up, as
    :func:`dpcounts.attack.guesses.prior_guess` rounds the prior's expected counts). NaN
    without such a stratum."""
    counts = np.atleast_2d(np.asarray(counts, dtype=float))
    truth = np.asarray(truth, dtype=float)
    small = (truth >= low) & (truth <= high)
    if not small.any():
        return {name: np.full(len(counts), np.nan) for name in ATTACK}
    miss = np.abs(np.floor(counts[:, small] + 0.5) - truth[small])
    return {"attack:exact": (miss == 0).mean(axis=1), "attack:within_one": (miss <= 1).mean(axis=1)}


def mode_shares(tables, truth, low: int, high: int, sets: int) -> dict[str, np.ndarray]:
    """The attacker who has ``sets`` synthetic sets of one release: each group of ``sets``
    consecutive tables (rows) is one release, each small true count (in [low, high]) is
    guessed by its most frequent value over the group
    (:func:`dpcounts.attack.guesses.mode_guess`), and the group's shares guessed exactly
    and within one are written on its first row, NaN on the others and on the rows of an
    incomplete last group (so a summary over the rows is one over releases)."""
    from dpcounts.attack.guesses import mode_guess

    tables = np.atleast_2d(tables)
    truth = np.asarray(truth)
    out = {name: np.full(len(tables), np.nan) for name in MODE}
    small = (truth >= low) & (truth <= high)
    if not small.any():
        return out
    for first in range(0, len(tables) - sets + 1, sets):
        group = np.round(tables[first : first + sets][:, small]).astype(np.int64)
        miss = np.abs(mode_guess(group) - truth[small])
        out["attack:mode_exact"][first] = np.mean(miss == 0)
        out["attack:mode_within_one"][first] = np.mean(miss <= 1)
    return out


#: The attacker's columns from the hyperparameters and a release's sets
#: (:func:`posterior_shares`).
POSTERIOR = ("attack:posterior_exact", "attack:posterior_within_one")


def _shares(guess, truth) -> tuple[float, float]:
    miss = np.abs(guess - truth)
    return float(np.mean(miss == 0)), float(np.mean(miss <= 1))


def posterior_shares(tables, truth, cal, low: int, high: int, sets: int,
                     prior_expected=None) -> dict[str, np.ndarray]:  # fmt: skip
    """The attacker who reads the published hyperparameters ``cal`` and the ``sets``
    synthetic sets of one release, told that each count lies in [low, high]: each small
    true count guessed by its posterior mode given the group's tables and the prior
    expected counts ``prior_expected`` (:func:`dpcounts.attack.guesses.posterior_guess`);
    the group's shares exact and within one on its first row, NaN elsewhere, as
    :func:`mode_shares` writes them."""
    from dpcounts.attack.guesses import posterior_guess

    tables = np.atleast_2d(tables)
    truth = np.asarray(truth)
    out = {name: np.full(len(tables), np.nan) for name in POSTERIOR}
    small = (truth >= low) & (truth <= high)
    if not small.any():
        return out
    for first in range(0, len(tables) - sets + 1, sets):
        group = np.round(tables[first : first + sets]).astype(np.int64)
        guess = posterior_guess(group, cal, low, high, prior_expected)[small]
        exact, within = _shares(guess, truth[small])
        out["attack:posterior_exact"][first] = exact
        out["attack:posterior_within_one"][first] = within
    return out


def range_prior_shares(expected, truth, low: int, high: int) -> dict[str, float]:
    """:func:`posterior_shares`'s attacker with no set: the shares of
    :func:`dpcounts.attack.guesses.range_prior_guess` at the prior expected counts
    ``expected``, what being told the range alone gives."""
    from dpcounts.attack.guesses import range_prior_guess

    truth = np.asarray(truth)
    small = (truth >= low) & (truth <= high)
    if not small.any():
        return dict.fromkeys(POSTERIOR, np.nan)
    guess = range_prior_guess(np.asarray(expected, dtype=float), low, high)[small]
    return dict(zip(POSTERIOR, _shares(guess, truth[small]), strict=True))


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
    margins = {}
    for keys in margin_keys(definition):
        codes, size = np.zeros(len(strata), dtype=np.int64), 1
        for key in keys:  # the combination's code, then numbered 0.. over those present
            key_codes, values = factorize(strata[key])
            codes, size = codes * len(values) + key_codes, size * len(values)
        if len(keys) > 1:
            codes = np.unique(codes, return_inverse=True)[1].reshape(-1)
            size = int(codes.max()) + 1 if codes.size else 0
        margins[margin_name(keys)] = (codes, size)
    spec = definition.suppression
    attack = None if spec is None else (spec.low, spec.high)
    return Measures(rates, population, areas, study_measure_list(definition), definition.per,
                    margins=margins, attack=attack,
                    attack_sets=1 if spec is None else spec.sets)  # fmt: skip
