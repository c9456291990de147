"""Coverage as a study measure (issue #54, item 2): do an analyst's intervals from a
release's M sets cover the confidential value, and how wide are they against the exact
no-privacy interval of the confidential counts?

For every arm and epsilon of ``studies.<name>.coverage`` (a subset of the study's grid),
:func:`coverage_table` draws ``datasets`` synthetic tables from the arm's calibration (the
study's sampler, from the stream ``coverage`` of the study's, one per arm), and each group
of ``sets`` consecutive tables is the M sets of one release (as
:func:`dpcounts.studies.stage.measures.mode_shares` groups them for the attacker). From
each release and each method of :data:`METHODS` (a function of the M sets and the public
calibration alone, returning each area's interval at the nominal ``level``):

* ``coverage``: the share of the areas' intervals (each area's crude rate, its strata's
  events over its population, per 100,000; an SMR with expected counts) that hold the
  area's confidential rate, averaged over the releases;
* ``coverage_se``: its Monte Carlo error, the standard deviation of the releases' shares
  over sqrt(releases) (the releases are independent; the areas of one release are not
  counted as independent);
* ``width_ratio``: the median over the areas and releases of an interval's width over the
  exact (Garwood) Poisson interval of the confidential count at the same level
  (:func:`dpcounts.studies.intervals.poisson_rate_interval`): 1.4 is 1.4x as wide as with no
  privacy. A median: the combining rules' t quantile on few degrees of freedom makes a
  few intervals very wide.

The no-privacy reference (tables drawn with the privacy term removed,
:mod:`dpcounts.sampling.reference`; arm ``reference``, epsilon infinite) is scored by the
combining rules too: what they cover with synthesis alone. The posterior needs a
release's calibration, which the reference has not.

The methods (:mod:`dpcounts.release.estimate`, one copy of each rule):

* ``combining``: the combining rules for fully synthetic data
  (:func:`dpcounts.release.estimate.combine`) on each area's rate and Poisson variance in
  each set;
* ``posterior``: the noise-aware posterior (:mod:`dpcounts.inference.posterior`) of each
  area's total given the sets and the public hyperparameters, prior shape 1.

:func:`coverage_guide` turns the table into the guide's rows, one per arm, method and
quantity, in words (:func:`coverage_text`).
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

#: The quantity whose intervals are scored: each area's crude rate.
AREA_RATE = "area_rate"
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
    width ratio; module docstring) from ``tables``."""
    shares, ratios = release_scores(tables, areas, cal, method, level, sets)
    n = shares.size
    se = float(shares.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return {"releases": n, "coverage": float(shares.mean()), "coverage_se": se,
            "width_ratio": float(np.median(ratios))}  # fmt: skip


def coverage_table(definition: StudyDefinition, strata: pd.DataFrame,
                   calibrations: pd.DataFrame, seed: int) -> pd.DataFrame:  # fmt: skip
    """The coverage of every arm, epsilon and method of the study's ``coverage`` setting,
    and of the combining rules on the no-privacy reference: :data:`COVERAGE_COLUMNS`.
    ``calibrations``: every arm's calibrations (table form, an ``arm`` column first)."""
    from dpcounts.sampling.reference import no_privacy_draws
    from dpcounts.sampling.study_mode import StudySampler
    from dpcounts.seeding import job_rng
    from dpcounts.studies.stage.simulate import arm_calibration

    d, spec = definition, definition.coverage
    areas = study_areas(d, strata, spec.level)
    y = strata[d.count].to_numpy()
    rows = []
    for arm in d.arms:
        rng = job_rng(seed, *d.stream, "coverage", arm.name)
        mine = calibrations[calibrations["arm"] == arm.name]
        for epsilon in spec.epsilons:
            cells = mine[at_epsilon(mine["epsilon"], epsilon)]
            if cells.empty:
                continue  # skipped calibration (on_calibration_failure: skip)
            cal = arm_calibration(d, arm, cells.drop(columns="arm"), strata)
            sampler = StudySampler(y, cal)
            tables = np.vstack([sampler.draw(min(d.batch, spec.datasets - start), rng)
                                for start in range(0, spec.datasets, d.batch)])  # fmt: skip
            for method in spec.methods:
                scored = score(tables, areas, cal, method, spec.level, spec.sets)
                rows.append({"arm": arm.name, "epsilon": float(epsilon), "method": method,
                             **scored})  # fmt: skip
            log.info("%s at epsilon=%g: coverage of %d releases", arm.name, epsilon,
                     spec.datasets // spec.sets)  # fmt: skip
    if "combining" in spec.methods:
        rng = job_rng(seed, *d.stream, "coverage", REFERENCE)
        tables = no_privacy_draws(y, spec.datasets, rng)
        rows.append({"arm": REFERENCE, "epsilon": math.inf, "method": "combining",
                     **score(tables, areas, None, "combining", spec.level, spec.sets)})  # fmt: skip
    out = pd.DataFrame(rows)
    out["quantity"], out["level"], out["sets"] = AREA_RATE, spec.level, spec.sets
    return out[COVERAGE_COLUMNS]


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
                  epsilon_prior: float = 0.0) -> dict:  # fmt: skip
    """The guide's row of one arm and method from its coverage rows (one per epsilon): the
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
    nominal = f"{_pct(level)} {METHOD_WORDS[method]} intervals from {sets} sets"
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
    """The guide's coverage rows (:data:`COVERAGE_GUIDE_COLUMNS`): one per arm (the
    no-privacy reference last), method and quantity of :func:`coverage_table`'s
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
            text = (f"with no privacy, {_pct(level)} {METHOD_WORDS[method]} intervals from "
                    f"{sets} sets cover {_pct(row['coverage'])}{error} and are "
                    f"{row['width_ratio']:.2g}x as wide as the exact interval")  # fmt: skip
            out.append({**base, "arm_label": "no privacy (reference)", "epsilon": np.inf,
                        "coverage_low": row["coverage"], "coverage_high": row["coverage"],
                        "coverage_se": se, "width_low": row["width_ratio"],
                        "width_high": row["width_ratio"], "epsilon_smallest": np.inf,
                        "coverage_smallest": row["coverage"], "text": text})  # fmt: skip
            continue
        spent = epsilon_prior if family(arms[arm].mechanism).uses_prior else 0.0
        words = coverage_text(rows, method=method, level=level, sets=sets,
                              epsilon_prior=spent)  # fmt: skip
        out.append({**base, "arm_label": arm_title(arms[arm]), **words})
    return pd.DataFrame(out, columns=COVERAGE_GUIDE_COLUMNS)


__all__ = ["AREA_RATE", "COVERAGE_COLUMNS", "COVERAGE_GUIDE_COLUMNS", "METHODS", "Areas",
           "combining_intervals", "coverage_guide", "coverage_table", "coverage_text",
           "posterior_intervals", "reaches", "release_scores", "score", "study_areas"]  # fmt: skip
