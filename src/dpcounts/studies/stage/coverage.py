"""Coverage as a study measure (issue #54, item 2): do an analyst's intervals from a
release's M sets cover the confidential value, and how wide are they against the exact
no-privacy interval of the confidential counts?

For every arm and epsilon of ``studies.<name>.coverage`` (a subset of the study's grid),
:func:`coverage_table` draws ``releases`` x ``sets`` synthetic tables from the arm's
calibration (the study's sampler, from the stream ``coverage`` of the study's, one per
arm), and each group of ``sets`` consecutive tables is the M sets of one release (as
:func:`dpcounts.studies.stage.measures.mode_shares` groups them for the attacker). From
each release and each method of :data:`METHODS` (a function of the M sets and the public
calibration alone, returning each unit's interval at the nominal ``level``), for each
quantity of :data:`QUANTITIES` the study has:

* ``area_rate``: each area's crude rate (its strata's events over its population, per
  100,000; an SMR with expected counts), against the exact (Garwood) Poisson interval of
  the confidential count (:func:`dpcounts.studies.intervals.poisson_rate_interval`);
* ``age_adjusted`` (a study with an ``age`` key): each area's directly age-adjusted rate
  by the study's standard population (the study stage's bands and weights,
  :mod:`dpcounts.studies.stage.age`), against the Fay-Feuer gamma interval of the
  confidential counts (:func:`dpcounts.studies.intervals.age_adjusted_interval`, R
  epitools' ``ageadjust.direct``);
* ``disparity`` (a study with ``disparities``): each disparity's ratio of its two sides'
  rates (age-adjusted where the study has an age key, as the study stage measures it),
  whose truth is the confidential ratio, against the log-ratio normal (delta-method)
  interval of the confidential counts
  (:func:`dpcounts.studies.intervals.rate_ratio_interval`). A disparity with a side
  without confidential events has no finite truth and is left out.

The columns, per arm, epsilon, method and quantity:

* ``coverage``: the share of the units' intervals that hold the unit's confidential value,
  averaged over the releases;
* ``coverage_se``: its Monte Carlo error, the standard deviation of the releases' shares
  over sqrt(releases) (the releases are independent; the units of one release are not
  counted as independent);
* ``width_ratio``: the median over the units and releases of an interval's width over the
  exact no-privacy interval's at the same level: 1.4 is 1.4x as wide as with no privacy.
  That interval is for the rate behind the confidential counts (their Poisson variation
  included), as the combining rules' are; the posterior's is for the counts' own rate, so
  where privacy adds less than that variation it is below 1 (``docs/analyse.md``). A
  median: the combining rules' t quantile on few degrees of freedom makes a few intervals
  very wide (or the whole line, where a set has a disparity's side without events).

The no-privacy reference (tables drawn with the privacy term removed,
:mod:`dpcounts.sampling.reference`; arm ``reference``, epsilon infinite) is scored by the
combining rules too: what they cover with synthesis alone. The posterior needs a
release's calibration, which the reference has not.

The methods (:mod:`dpcounts.inference`, one copy of each rule, which ``dpcounts estimate``
calls too):

* ``combining``: the combining rules for fully synthetic data
  (:func:`dpcounts.inference.combining.combine`; an age-adjusted rate and a disparity by
  :func:`dpcounts.inference.pieces.combined`) on each unit's value and Poisson variance in
  each set;
* ``posterior``: the noise-aware posterior (:mod:`dpcounts.inference.posterior`) of the
  true counts given the sets and the public hyperparameters, prior shape 1: an area's
  rate exactly from its total's law; an age-adjusted rate or a disparity by Monte Carlo,
  :data:`DRAWS` joint draws of its pieces' totals
  (:func:`dpcounts.inference.posterior.draws_from_laws`, the strata's laws computed once
  per release). Their error: each bound's tail probability is within sqrt(p (1 - p) /
  draws) of its nominal p = 0.05 (0.0049 at 2,000 draws, one standard error), so an
  interval's probability content is off by about 0.007, at random across intervals, and
  the mean over the U units x R releases (pennLC: 67 areas x 10 releases) by about 0.007 /
  sqrt(U R), under 0.001: small against the coverage's own Monte Carlo error
  (``coverage_se``, up to 0.05 for the areas there, 0.08 for the 5 disparities).

:func:`coverage_guide` turns the table into the guide's rows, one per arm, method and
quantity, in words (:func:`coverage_text`), which the study's ``guide.csv`` holds beside
its verdicts (:func:`guide_rows`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.design import at_epsilon
from dpcounts.studies.stage.definition import StudyDefinition

log = logging.getLogger(__name__)

#: The quantities whose intervals are scored (module docstring), in their order.
AREA_RATE, AGE_ADJUSTED, DISPARITY = "area_rate", "age_adjusted", "disparity"
QUANTITIES = (AREA_RATE, AGE_ADJUSTED, DISPARITY)
#: How the guide's words and the figure name each quantity's units.
QUANTITY_WORDS = {AREA_RATE: "the areas' rates", AGE_ADJUSTED: "the areas' age-adjusted rates",
                  DISPARITY: "the disparities"}  # fmt: skip
#: The posterior's Monte Carlo draws of an age-adjusted rate or a disparity, per release
#: (module docstring: their error).
DRAWS = 2_000
#: The arm name of the no-privacy reference's rows.
REFERENCE = "reference"
COVERAGE_COLUMNS = ["arm", "epsilon", "method", "quantity", "level", "sets", "releases",
                    "coverage", "coverage_se", "width_ratio"]  # fmt: skip
COVERAGE_GUIDE_COLUMNS = ["study", "arm", "arm_label", "method", "quantity", "level", "sets",
                          "releases", "epsilon", "coverage_low", "coverage_high",
                          "coverage_se", "width_low", "width_high", "epsilon_smallest",
                          "coverage_smallest", "text"]  # fmt: skip


@dataclass(frozen=True)
class Areas:
    """The areas of a study's table: each stratum's area code, each area's population
    (each population unit counted once), its confidential rate and its exact no-privacy
    interval's width at ``level``."""

    names: tuple[str, ...]
    codes: np.ndarray
    people: np.ndarray
    truth: np.ndarray
    exact_width: np.ndarray
    per: float
    cap: np.ndarray | None  # each stratum's largest count (its population), or None


def study_areas(definition: StudyDefinition, strata: pd.DataFrame, level: float) -> Areas:
    """:class:`Areas` of the study's area key."""
    from dpcounts.studies.intervals import poisson_rate_interval

    d = definition
    if d.area is None:
        raise ValueError(f"studies.{d.name}.coverage: the areas' rates need an area key "
                         f"(studies.{d.name}.area)")  # fmt: skip
    codes, names = pd.factorize(strata[d.area].astype(str), sort=True)
    units = strata.assign(_code=codes).drop_duplicates(list(d.population_keys))
    people = np.bincount(units["_code"], weights=units[d.population].to_numpy(float),
                         minlength=len(names))  # fmt: skip
    y = strata[d.count].to_numpy(float)
    events = np.bincount(codes, weights=y, minlength=len(names))
    exact = poisson_rate_interval(events, people, level, per=d.per)
    cap = None if d.denominator == "expected" else strata[d.population].to_numpy(float)
    return Areas(tuple(names), codes, people, events / people * d.per,
                 np.asarray(exact.upper) - np.asarray(exact.lower), d.per, cap)  # fmt: skip


def combining_intervals(sets: np.ndarray, areas: Areas, cal, level: float):
    """The combining rules' interval of each area's rate from the M ``sets`` (rows)."""
    from dpcounts.inference.combining import combine

    pooled = np.vstack([np.bincount(areas.codes, weights=row, minlength=areas.people.size)
                        for row in np.asarray(sets, dtype=float)])  # fmt: skip
    rates = pooled / areas.people * areas.per
    variances = pooled / areas.people**2 * areas.per**2
    out = combine(rates, variances, level)
    # a t quantile of 0 degrees of freedom (nu_f rounds to 0 where T_f is barely above 0)
    # is NaN: the interval is the whole line
    lower = np.where(np.isnan(out["lower"]), 0.0, np.maximum(out["lower"], 0.0))
    return lower, np.where(np.isnan(out["upper"]), np.inf, out["upper"])


def posterior_intervals(sets: np.ndarray, areas: Areas, cal, level: float):
    """The noise-aware posterior's interval of each area's rate from the M ``sets`` and
    the public calibration ``cal``."""
    from dpcounts.inference.posterior import group_posteriors, summarise

    laws = group_posteriors(cal, np.asarray(sets).astype(np.int64), areas.codes, 1.0, areas.cap)
    out = summarise(laws, areas.people, areas.per, level)
    return out["lower"], out["upper"]


#: Each method: a function of (the M sets, the :class:`Areas`, the public calibration,
#: the level) returning each area's (lower, upper).
METHODS = {"combining": combining_intervals, "posterior": posterior_intervals}
#: How the guide's words name each method's intervals.
METHOD_WORDS = {"combining": "combining-rule", "posterior": "posterior"}


@dataclass(frozen=True)
class Weighed:
    """A quantity whose units weigh pieces of the table (an area's age-adjusted rate, a
    disparity): ``parts``, the units' pieces (:class:`dpcounts.inference.pieces.Pieces`;
    the pieces of one part disjoint: every area's bands in one, each disparity's sides in
    its own), their rows in order the units ``names``; each unit's confidential value and
    its exact no-privacy interval's width at ``level``."""

    quantity: str
    names: tuple[str, ...]
    parts: tuple
    truth: np.ndarray
    exact_width: np.ndarray
    cap: np.ndarray | None


def weighed_quantities(definition: StudyDefinition, strata: pd.DataFrame,
                       level: float) -> list[Weighed]:  # fmt: skip
    """The study's :class:`Weighed` quantities: ``age_adjusted`` where it has an age key,
    ``disparity`` where it has disparities (module docstring)."""
    from dpcounts.inference.pieces import piece_totals, values
    from dpcounts.studies.intervals import age_adjusted_interval
    from dpcounts.studies.stage.measures import AREA, study_measures

    d = definition
    rates = study_measures(d, strata).rates
    y = strata[d.count].to_numpy(float)
    cap = None if d.denominator == "expected" else strata[d.population].to_numpy(float)
    out = []
    if d.age is not None and d.area is not None:
        names = sorted(strata[d.area].astype(str).unique())
        part = rates.pieces([AREA + name for name in names])
        by_band = piece_totals(y, part)[0].reshape(len(names), len(rates.bands))
        people = rates.population[[rates.names.index(AREA + n) for n in names]]
        exact = age_adjusted_interval(by_band, people, rates.weights, level, per=d.per)
        out.append(Weighed(AGE_ADJUSTED, tuple(names), (part,), values(by_band.ravel(), part)[0][0],
                           np.asarray(exact.upper) - np.asarray(exact.lower), cap))  # fmt: skip
    pairs = [(s.name, f"{s.name}:numerator", f"{s.name}:denominator") for s in d.disparities]
    disparity = disparity_quantity(rates, pairs, y, level, cap, d.name)
    return out if disparity is None else [*out, disparity]


def disparity_quantity(rates, pairs, counts, level: float, cap, where: str) -> Weighed | None:
    """The ``disparity`` :class:`Weighed` quantity of the confidential ``counts`` (one per
    stratum): a unit per ``(name, numerator, denominator)`` of ``pairs``, two groups of
    ``rates`` (a :class:`~dpcounts.studies.stage.rates.GroupRates`) whose rates' ratio it
    is; a disparity with a side without events is left out (logged, naming ``where``, the
    study), and None if none is left."""
    from dpcounts.inference.pieces import piece_totals, values
    from dpcounts.studies.intervals import rate_ratio_interval

    y = np.asarray(counts, dtype=float)
    kept, parts, truth, width = [], [], [], []
    for name, numerator, denominator in pairs:
        part = rates.pieces([numerator, denominator], sides=2)
        totals = piece_totals(y, part)
        ratio = values(totals, part)[0][0, 0]
        if not np.isfinite(ratio):
            log.warning("%s: disparity %s has a side without events: no coverage of it",
                        where, name)  # fmt: skip
            continue
        rate = np.asarray(part.weights @ totals[0])
        variance = np.asarray(part.weights.multiply(part.weights) @ totals[0])
        exact = rate_ratio_interval(rate[0], variance[0], rate[1], variance[1], level)
        kept.append(name)
        parts.append(part)
        truth.append(ratio)
        width.append(exact.upper - exact.lower)
    if not kept:
        return None
    return Weighed(DISPARITY, tuple(kept), tuple(parts), np.asarray(truth), np.asarray(width),
                   cap)  # fmt: skip


def _whole_line(lower, upper):
    """An interval's ends, NaN read as the whole line (a t quantile of 0 degrees of
    freedom, a set with a disparity's side without events): [0, inf)."""
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    return (np.where(np.isnan(lower), 0.0, np.maximum(lower, 0.0)),
            np.where(np.isnan(upper), np.inf, upper))  # fmt: skip


def weighed_intervals(sets: np.ndarray, quantity: Weighed, method: str, level: float,
                      laws=None, total: int | None = None, rng=None):  # fmt: skip
    """Each unit's interval of a :class:`Weighed` quantity from the M ``sets``: by the
    combining rules, or (``posterior``) from :data:`DRAWS` joint draws of its pieces'
    totals given ``laws`` (the strata's, :func:`dpcounts.inference.posterior.strata_laws`
    of the release), the public ``total`` and the generator ``rng``."""
    from dpcounts.inference.pieces import combined, from_draws
    from dpcounts.inference.posterior import draws_from_laws

    lower, upper = [], []
    for part in quantity.parts:
        if method == "combining":
            out = combined(sets, part, level)
        else:
            out = from_draws(draws_from_laws(laws, total, part.piece, DRAWS, rng), part, level)
        lower.append(np.atleast_1d(out["lower"]))
        upper.append(np.atleast_1d(out["upper"]))
    return _whole_line(np.concatenate(lower), np.concatenate(upper))


def _held(lower, upper, truth, exact_width) -> tuple[float, np.ndarray]:
    """The share of the units whose interval holds the truth (a relative slack of 1e-9: a
    value equal to an end, up to rounding, is held), and the width ratios."""
    slack = 1e-9 * np.maximum(np.abs(truth), 1e-300)
    held = (lower - slack <= truth) & (truth <= upper + slack)
    return float(held.mean()), (upper - lower) / exact_width


def release_quantities(tables: np.ndarray, areas: Areas, weighed: list[Weighed], cal,
                       method: str, level: float, sets: int, rng=None) -> dict:  # fmt: skip
    """Per quantity (``area_rate`` and each of ``weighed``), per release (each group of
    ``sets`` consecutive rows of ``tables``; an incomplete last group left out): the share
    of the units whose interval by ``method`` holds the confidential value and the width
    ratios, ``{quantity: (shares (releases,), ratios (releases, units))}``. The posterior
    computes each release's strata laws once for every quantity; ``rng`` draws its Monte
    Carlo."""
    from dpcounts.inference.posterior import group_laws, strata_laws, summarise

    found = {q: ([], []) for q in [AREA_RATE] + [w.quantity for w in weighed]}
    for first in range(0, len(tables) - sets + 1, sets):
        release = tables[first : first + sets]
        laws = None
        if method == "posterior":
            laws = strata_laws(cal, np.asarray(release).astype(np.int64), 1.0, areas.cap)
            out = summarise(group_laws(laws, int(cal.total), areas.codes), areas.people,
                            areas.per, level)  # fmt: skip
            lower, upper = out["lower"], out["upper"]
        else:
            lower, upper = METHODS[method](release, areas, cal, level)
        share, ratio = _held(np.asarray(lower, float), np.asarray(upper, float), areas.truth,
                             areas.exact_width)  # fmt: skip
        found[AREA_RATE][0].append(share)
        found[AREA_RATE][1].append(ratio)
        total = None if cal is None else int(cal.total)
        for quantity in weighed:
            lower, upper = weighed_intervals(release, quantity, method, level, laws, total, rng)
            share, ratio = _held(lower, upper, quantity.truth, quantity.exact_width)
            found[quantity.quantity][0].append(share)
            found[quantity.quantity][1].append(ratio)
    return {q: (np.asarray(a), np.vstack(b)) for q, (a, b) in found.items() if a}


def _numbers(shares: np.ndarray, ratios: np.ndarray) -> dict:
    """One row's numbers of :data:`COVERAGE_COLUMNS` from the releases' shares and ratios."""
    n = shares.size
    se = float(shares.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return {"releases": n, "coverage": float(shares.mean()), "coverage_se": se,
            "width_ratio": float(np.median(ratios))}  # fmt: skip


def release_scores(tables: np.ndarray, areas: Areas, cal, method: str, level: float,
                   sets: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per release (each group of ``sets`` consecutive rows of ``tables``; an incomplete
    last group is left out): the share of the areas whose interval by ``method`` holds the
    confidential rate, and the areas' widths over the exact no-privacy widths, shape
    (releases, areas)."""
    function = METHODS[method]
    shares, ratios = [], []
    for first in range(0, len(tables) - sets + 1, sets):
        lower, upper = function(tables[first : first + sets], areas, cal, level)
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        # a relative slack of 1e-9: a rate equal to an end, up to rounding, is held
        slack = 1e-9 * np.maximum(np.abs(areas.truth), 1e-300)
        held = (lower - slack <= areas.truth) & (areas.truth <= upper + slack)
        shares.append(held.mean())
        ratios.append((upper - lower) / areas.exact_width)
    return np.asarray(shares), np.vstack(ratios)


def score(tables, areas: Areas, cal, method: str, level: float, sets: int) -> dict:
    """One row's numbers of :data:`COVERAGE_COLUMNS` (coverage, its Monte Carlo error, the
    width ratio; module docstring) of the areas' rates from ``tables``."""
    return _numbers(*release_scores(tables, areas, cal, method, level, sets))


def coverage_table(definition: StudyDefinition, strata: pd.DataFrame,
                   calibrations: pd.DataFrame, seed: int) -> pd.DataFrame:  # fmt: skip
    """The coverage of every arm, epsilon, method and quantity of the study's ``coverage``
    setting, and of the combining rules on the no-privacy reference:
    :data:`COVERAGE_COLUMNS`. ``calibrations``: every arm's calibrations (table form, an
    ``arm`` column first)."""
    from dpcounts.sampling.reference import no_privacy_draws
    from dpcounts.sampling.study_mode import StudySampler
    from dpcounts.seeding import job_rng
    from dpcounts.studies.stage.simulate import arm_calibration

    d, spec = definition, definition.coverage
    areas = study_areas(d, strata, spec.level)
    weighed = weighed_quantities(d, strata, spec.level)
    y = strata[d.count].to_numpy()
    tables_per = spec.releases * spec.sets
    rows = []

    def add(arm, epsilon, method, found):
        for quantity, (shares, ratios) in found.items():
            rows.append({"arm": arm, "epsilon": float(epsilon), "method": method,
                         "quantity": quantity, **_numbers(shares, ratios)})  # fmt: skip

    for arm in d.arms:
        rng = job_rng(seed, *d.stream, "coverage", arm.name)
        # the posterior's Monte Carlo: its own stream, so the tables are the same whatever
        # the quantities and methods
        draws = job_rng(seed, *d.stream, "coverage", arm.name, "draws")
        mine = calibrations[calibrations["arm"] == arm.name]
        for epsilon in spec.epsilons:
            cells = mine[at_epsilon(mine["epsilon"], epsilon)]
            if cells.empty:
                continue  # skipped calibration (on_calibration_failure: skip)
            cal = arm_calibration(d, arm, cells.drop(columns="arm"), strata)
            sampler = StudySampler(y, cal)
            tables = np.vstack([sampler.draw(min(d.batch, tables_per - start), rng)
                                for start in range(0, tables_per, d.batch)])  # fmt: skip
            for method in spec.methods:
                add(arm.name, epsilon, method, release_quantities(
                    tables, areas, weighed, cal, method, spec.level, spec.sets, draws))  # fmt: skip
            log.info("%s at epsilon=%g: coverage of %d releases", arm.name, epsilon,
                     spec.releases)  # fmt: skip
    if "combining" in spec.methods:
        rng = job_rng(seed, *d.stream, "coverage", REFERENCE)
        tables = no_privacy_draws(y, tables_per, rng)
        add(REFERENCE, math.inf, "combining", release_quantities(
            tables, areas, weighed, None, "combining", spec.level, spec.sets))  # fmt: skip
    out = pd.DataFrame(rows, columns=[c for c in COVERAGE_COLUMNS if c not in ("level", "sets")])
    out["level"], out["sets"] = spec.level, spec.sets
    order = {q: k for k, q in enumerate(QUANTITIES)}
    out = out.sort_values("quantity", key=lambda c: c.map(order), kind="stable")
    return out[COVERAGE_COLUMNS].reset_index(drop=True)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _range(low: float, high: float, unit: str = "%") -> str:
    if unit == "%":
        a, b = f"{100 * low:.0f}", f"{100 * high:.0f}"
        return f"{a}%" if a == b else f"{a}-{b}%"
    a, b = f"{low:.2g}", f"{high:.2g}"
    return f"{a}x" if a == b else f"{a}-{b}x"


def reaches(coverage, se, level: float) -> np.ndarray:
    """Whether a coverage share is not below the nominal ``level`` beyond its Monte Carlo
    error: share + 2 x se >= level (se unknown, one release: share >= level)."""
    coverage, se = np.asarray(coverage, float), np.asarray(se, float)
    return coverage + 2 * np.where(np.isfinite(se), se, 0.0) >= level


def coverage_text(rows: pd.DataFrame, *, method: str, level: float, sets: int,
                  epsilon_prior: float = 0.0, quantity: str = AREA_RATE) -> dict:  # fmt: skip
    """The guide's row of one arm, method and quantity from its coverage rows (one per
    epsilon): the
    smallest epsilon from which its intervals reach their level at every larger epsilon
    (:func:`reaches`; the total, ``epsilon_prior`` included), their coverage and width
    ratio from there on, the coverage at the smallest epsilon, and the words."""
    from dpcounts.studies.stage.guide import smallest_epsilon

    rows = rows.sort_values("epsilon")
    eps = rows["epsilon"].to_numpy(float)
    total = eps + epsilon_prior
    ok = reaches(rows["coverage"], rows["coverage_se"], level)
    first = smallest_epsilon(eps, ok)
    shown = rows[eps >= first] if np.isfinite(first) else rows
    cov, width = shown["coverage"].to_numpy(float), shown["width_ratio"].to_numpy(float)
    se = float(np.nanmax(shown["coverage_se"])) if shown["coverage_se"].notna().any() else np.nan
    error = f" (Monte Carlo error up to {100 * se:.1f} points)" if np.isfinite(se) else ""
    nominal = (f"{_pct(level)} {METHOD_WORDS[method]} intervals of {QUANTITY_WORDS[quantity]} "
               f"from {sets} sets")  # fmt: skip
    at_smallest = (f"; at epsilon {total[0]:.3g} they cover {_pct(rows['coverage'].iloc[0])}"
                   if np.isfinite(first) and first > eps[0] else "")  # fmt: skip
    if np.isfinite(first):
        start = total[eps == first][0]
        text = (f"from epsilon {start:.3g}, {nominal} cover {_range(cov.min(), cov.max())}"
                f"{error} and are {_range(width.min(), width.max(), 'x')} as wide as with no "
                f"privacy{at_smallest}")  # fmt: skip
    else:
        text = (f"at no epsilon of the grid ({total[0]:.3g} to {total[-1]:.3g}) do {nominal} "
                f"reach {_pct(level)}: they cover {_range(cov.min(), cov.max())}{error}, "
                f"{_range(width.min(), width.max(), 'x')} as wide as with no privacy")  # fmt: skip
    return {"epsilon": start if np.isfinite(first) else np.nan,
            "coverage_low": float(cov.min()), "coverage_high": float(cov.max()),
            "coverage_se": se, "width_low": float(width.min()),
            "width_high": float(width.max()), "epsilon_smallest": float(total[0]),
            "coverage_smallest": float(rows["coverage"].iloc[0]), "text": text}  # fmt: skip


def coverage_guide(table: pd.DataFrame, definition: StudyDefinition,
                   epsilon_prior: float) -> pd.DataFrame:  # fmt: skip
    """The guide's coverage rows (:data:`COVERAGE_GUIDE_COLUMNS`): one per arm, method
    and quantity (the no-privacy reference last of each quantity) of :func:`coverage_table`'s
    ``table``. An arm that uses the prior pays ``epsilon_prior`` too: its epsilons are
    totals, as the epsilon guide's are."""
    from dpcounts.arms import arm_title
    from dpcounts.mechanisms.registry import family

    arms = {arm.name: arm for arm in definition.arms}
    out = []
    for (arm, method, quantity), rows in table.groupby(["arm", "method", "quantity"],
                                                      sort=False):  # fmt: skip
        level, sets = float(rows["level"].iloc[0]), int(rows["sets"].iloc[0])
        base = {"study": definition.name, "arm": arm, "method": method, "quantity": quantity,
                "level": level, "sets": sets, "releases": int(rows["releases"].min())}  # fmt: skip
        if arm == REFERENCE:
            row = rows.iloc[0]
            se = row["coverage_se"]
            error = f" (Monte Carlo error {100 * se:.1f} points)" if np.isfinite(se) else ""
            text = (f"with no privacy, {_pct(level)} {METHOD_WORDS[method]} intervals of "
                    f"{QUANTITY_WORDS[quantity]} from {sets} sets cover "
                    f"{_pct(row['coverage'])}{error} and are {row['width_ratio']:.2g}x as wide "
                    "as the exact interval")  # fmt: skip
            out.append({**base, "arm_label": "no privacy (reference)", "epsilon": np.inf,
                        "coverage_low": row["coverage"], "coverage_high": row["coverage"],
                        "coverage_se": se, "width_low": row["width_ratio"],
                        "width_high": row["width_ratio"], "epsilon_smallest": np.inf,
                        "coverage_smallest": row["coverage"], "text": text})  # fmt: skip
            continue
        spent = epsilon_prior if family(arms[arm].mechanism).uses_prior else 0.0
        words = coverage_text(rows, method=method, level=level, sets=sets,
                              epsilon_prior=spent, quantity=quantity)  # fmt: skip
        out.append({**base, "arm_label": arm_title(arms[arm]), **words})
    return pd.DataFrame(out, columns=COVERAGE_GUIDE_COLUMNS)


#: The coverage rows' verdicts in ``guide.csv`` (:func:`guide_rows`).
COVERAGE_VERDICTS = {
    "covers": "the intervals reach their level (coverage + 2 Monte Carlo errors) from epsilon",
    "under_covers": "the intervals reach their level at no epsilon of the grid",
}
#: The prefix of a coverage row's measure in ``guide.csv``: ``coverage:<quantity>``.
COVERAGE_MEASURE = "coverage:"


def guide_rows(rows: pd.DataFrame, epsilon_prior: float) -> pd.DataFrame:
    """:func:`coverage_guide`'s ``rows`` as rows of the study's ``guide.csv``: its
    columns (:data:`dpcounts.studies.stage.guide.GUIDE_COLUMNS`) then the coverage's
    (``method``, the coverage and width ranges, ``sets_per_release``); ``sets`` the sets
    the row rests on (releases x sets per release); ``measure`` is ``coverage:<quantity>``,
    ``verdict`` one of :data:`COVERAGE_VERDICTS`, ``verdict_text`` and ``reason`` the
    row's words (:func:`coverage_text`); ``epsilon`` the total from which the intervals
    reach their level (NaN: at no epsilon of the grid; infinite: the no-privacy
    reference)."""
    from dpcounts.studies.stage.guide import GUIDE_COLUMNS

    out = rows.copy()
    out["measure"] = COVERAGE_MEASURE + out["quantity"]
    reference = (out["arm"] == REFERENCE).to_numpy()
    reached = np.where(reference, reaches(out["coverage_low"], out["coverage_se"],
                                          out["level"]),
                       np.isfinite(out["epsilon"].to_numpy(float)))  # fmt: skip
    out["verdict"] = np.where(reached, "covers", "under_covers")
    out["verdict_text"] = out["text"]
    out["reason"] = [COVERAGE_VERDICTS[v] + (f" {e:.3g}" if v == "covers" and np.isfinite(e)
                                             else "") for v, e in zip(out["verdict"],
                                                                      out["epsilon"],
                                                                      strict=True)]  # fmt: skip
    out["epsilon_prior"] = epsilon_prior
    # ``sets``, as in every guide row, is the synthetic sets the row rests on: here its
    # releases x their sets each (``sets_per_release``, the M of one release)
    out["sets_per_release"] = out["sets"]
    out["sets"] = out["releases"] * out["sets_per_release"]
    extra = [c for c in COVERAGE_GUIDE_COLUMNS if c not in GUIDE_COLUMNS and c not in (
        "quantity", "text")]  # fmt: skip
    columns = GUIDE_COLUMNS + extra + ["sets_per_release"]
    return out.reindex(columns=columns)


def with_coverage(guide: pd.DataFrame, rows: pd.DataFrame, epsilon_prior: float) -> pd.DataFrame:
    """The study's guide (:func:`dpcounts.studies.stage.guide.study_guide`) followed by
    its coverage rows (:func:`guide_rows` of :func:`coverage_guide`'s ``rows``): one table,
    ``guide.csv``; the verdicts' rows have no coverage columns, the coverage rows none of a
    verdict's numbers (truth, tolerance, sets...)."""
    extra = guide_rows(rows, epsilon_prior)
    if not len(extra):
        return guide
    return pd.concat([guide.astype({c: object for c in guide.columns if guide[c].isna().all()}),
                      extra], ignore_index=True)[list(extra.columns)]  # fmt: skip


__all__ = ["AGE_ADJUSTED", "AREA_RATE", "COVERAGE_COLUMNS", "COVERAGE_GUIDE_COLUMNS",
           "COVERAGE_MEASURE", "COVERAGE_VERDICTS", "DISPARITY", "DRAWS", "METHODS",
           "QUANTITIES", "Areas", "Weighed", "combining_intervals", "coverage_guide",
           "coverage_table", "coverage_text", "disparity_quantity", "guide_rows",
           "posterior_intervals", "reaches", "release_quantities", "release_scores", "score",
           "study_areas", "weighed_intervals", "weighed_quantities", "with_coverage"]  # fmt: skip
