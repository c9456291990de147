"""How well a release's synthetic sets keep the confidential table: the steward's utility
report (issue #25), written into the private folder only (it shows the true totals).

R synthpop's ``compare()`` sets a synthetic data set against the original; here every
measure is also computed for tables drawn from the **no-privacy reference**
(:func:`dpcounts.sampling.reference.no_privacy_draws`: synthesis with no privacy at all, the
limit of md and pg as epsilon grows, truncation dropped), so the loss that privacy causes
is told apart from the noise of synthesis, which no epsilon removes:

* **totals by each key column** (every key, not only the first): the true total of each
  value against the totals of the sets (mean, min, max over sets) and of the reference;
  summed up per key as the mean absolute difference from the truth and as the study's
  margin, the largest relative error of a value's total (``margin:<key>``);
* **rMSE of the strata rates** per 100,000 (the study's ``rmse``,
  :mod:`dpcounts.studies.stage.measures`), median and range over sets and reference tables,
  and their **relative error** (``relative_error``), every stratum weighing alike;
* **rank correlation of the area rates** (the study's ``rank_correlation``, Spearman's
  rho of the crude rates of the areas), when an area column exists, chosen by
  :func:`area_column`;
* **true counts outside the truncation bounds** (truncated mechanism only): their share
  of the strata; such a count enters the mechanism clamped to its bound.

Each measure gets a one-line verdict, judged as the study's guide judges it
(:class:`dpcounts.studies.stage.measures.Kind`). The reference has as many tables as the release
has sets, and at least :data:`REFERENCE_MIN_TABLES`, at most what
:data:`REFERENCE_CELLS` allows for big tables; it is drawn and scored in batches of
:data:`BATCH_CELLS` counts, so memory stays small whatever the table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

# Counts drawn and scored at once (tables x strata per batch), the reference's batches.
from dpcounts.sampling.reference import BATCH_CELLS

#: The reference has at least this many tables (its spread needs them), else one per set.
REFERENCE_MIN_TABLES = 20
#: Above REFERENCE_MIN_TABLES, the reference draws at most this many counts in all
#: (tables x strata): 1 million strata get 20 tables, small tables one per set.
REFERENCE_CELLS = 20_000_000
#: Without a FIPS column or --group-by, the area is the key with the most values, if more.
AREA_MIN_VALUES = 5
#: Groups listed per key in utility.md before it says "and N more".
TABLE_ROWS = 30
#: Groups of a key named beside their points in utility.png (more would be unreadable).
LABELLED_GROUPS = 12
#: Above this many groups a key's panel shows the means only, without the min-max bars.
BARRED_GROUPS = 500
#: The columns of utility.csv, the long table (:meth:`Utility.long_table`).
CSV_COLUMNS = (
    "measure", "key", "group", "truth",
    "synthetic_mean", "synthetic_median", "synthetic_min", "synthetic_max",
    "reference_mean", "reference_median", "reference_min", "reference_max",
)  # fmt: skip
#: The files :func:`write_utility` writes into the private folder.
FILES = ("utility.md", "utility.csv", "utility.png")


@dataclass(frozen=True)
class Compared:
    """One measure's values per synthetic set and per reference table."""

    synthetic: np.ndarray
    reference: np.ndarray

    def noise_note(self) -> str:
        """Whether the sets' median lies within the reference tables' range: if so, the
        difference is within the noise of synthesis alone."""
        ours = np.nanmedian(self.synthetic)
        low, high = np.nanmin(self.reference), np.nanmax(self.reference)
        n = self.reference.size
        if low <= ours <= high:
            return (
                f" (within the range of the {n} no-privacy tables, {_human(low)} to "
                f"{_human(high)}: synthesis alone can do as badly)"
            )
        return (
            f" (outside the range of the {n} no-privacy tables, {_human(low)} to {_human(high)}: "
            "beyond what synthesis alone does)"
        )

    def ratio(self) -> float:
        """Median over the sets / median over the reference (inf when the latter is 0)."""
        ours, theirs = np.median(self.synthetic), np.median(self.reference)
        if theirs == 0:
            return 1.0 if ours == 0 else float("inf")
        return float(ours / theirs)


@dataclass(frozen=True)
class KeyTotals:
    """Totals by one key column: per value of the key, true and per table."""

    key: str
    groups: np.ndarray  # the key's values, sorted
    truth: np.ndarray  # (groups,)
    synthetic: np.ndarray  # (sets, groups)
    reference: np.ndarray  # (reference tables, groups)

    def frame(self) -> pd.DataFrame:
        """One row per group: truth, then mean, median, min and max of sets and reference."""
        out = {"group": self.groups, "truth": self.truth}
        for name, values in (("synthetic", self.synthetic), ("reference", self.reference)):
            out[f"{name}_mean"] = values.mean(axis=0)
            out[f"{name}_median"] = np.median(values, axis=0)
            out[f"{name}_min"] = values.min(axis=0)
            out[f"{name}_max"] = values.max(axis=0)
        return pd.DataFrame(out)

    def largest_relative_error(self) -> Compared:
        """Per table, max over groups of |table's total - true total| / max(true total, 1):
        the study's ``margin:<key>`` (:mod:`dpcounts.studies.stage.measures`)."""
        scale = 1.0 / np.maximum(self.truth, 1.0)
        return Compared(
            (np.abs(self.synthetic - self.truth) * scale).max(axis=1, initial=0.0),
            (np.abs(self.reference - self.truth) * scale).max(axis=1, initial=0.0),
        )

    def furthest_group(self) -> str:
        """The group whose total the sets miss most often by the largest relative error."""
        scale = 1.0 / np.maximum(self.truth, 1.0)
        worst = np.argmax(np.abs(self.synthetic - self.truth) * scale, axis=1)
        return str(self.groups[np.bincount(worst, minlength=self.groups.size).argmax()])

    def mean_absolute_error(self) -> Compared:
        """Per table, the mean over groups of |table's total - true total|."""
        return Compared(
            np.abs(self.synthetic - self.truth).mean(axis=1),
            np.abs(self.reference - self.truth).mean(axis=1),
        )


@dataclass(frozen=True)
class Utility:
    """What :func:`utility_report` found; :func:`write_utility` writes it."""

    mechanism: str
    epsilon: float  # the calibration's, per set
    sets: int
    reference_tables: int
    strata: int
    total: int
    overall_rate: float  # per 100,000: the true total over the population
    totals: tuple[KeyTotals, ...]
    rmse: Compared
    relative_error: Compared
    area: str | None
    area_rule: str  # why this column is the area, or why there is none
    rank_correlation: Compared | None
    true_area_rates: np.ndarray | None  # per 100,000, one per area
    outside: int | None  # strata whose true count is outside [L, U] (truncated only)
    #: the measures of the prior alone, the table the sets drift to as epsilon shrinks
    #: (y. spread as n x prior_rate for pg and truncated, evenly for md): ``rmse`` and,
    #: with an area, ``rank_correlation``
    prior: dict | None = None
    #: the rates' reported unit: "per 100,000", or "SMR" (expected counts as denominator)
    unit: str = "per 100,000"

    @property
    def outside_share(self) -> float | None:
        return None if self.outside is None else self.outside / self.strata

    def verdicts(self) -> dict[str, str]:
        """One plain-language line per measure (keys: ``rmse``, ``relative_error``,
        ``rank_correlation``, ``total:<key>``, ``margin:<key>``, ``outside_bounds``)."""
        from dpcounts.studies.stage.measures import KINDS

        out = {}
        ratio = self.rmse.ratio()
        ours, theirs = np.median(self.rmse.synthetic), np.median(self.rmse.reference)
        added = KINDS["error"].distance(ours, theirs, self.overall_rate)
        out["rmse"] = (
            f"the synthetic sets' rMSE of the strata rates ({_human(ours)} {self.unit}, median) "
            f"is {_times(ratio)} that of synthesis with no privacy ({_human(theirs)}): privacy "
            f"adds {_human(max(ours - theirs, 0))} {self.unit}, {_human(100 * added, 2)}% of "
            f"the overall rate ({_human(self.overall_rate)})" + self.rmse.noise_note()
        )
        ours = np.median(self.relative_error.synthetic)
        theirs = np.median(self.relative_error.reference)
        out["relative_error"] = (
            f"the strata's relative error, every stratum weighing alike (mean |synthetic - "
            f"true| / max(true, 1), median over sets), is {_percent(ours)}, "
            f"{_percent(theirs)} with no privacy: privacy adds "
            f"{_points(KINDS['relative'].distance(ours, theirs))}"
            + self.relative_error.noise_note()
        )
        if self.rank_correlation is not None:
            ours = np.nanmedian(self.rank_correlation.synthetic)
            theirs = np.nanmedian(self.rank_correlation.reference)
            if np.isnan(ours) or np.isnan(theirs):
                out["rank_correlation"] = (
                    f"the {crude_rank_title()} (`{self.area}`) is undefined: their "
                    "true crude rates, or a table's, are all equal"
                )
            else:
                lost = KINDS["correlation"].distance(ours, theirs)
                out["rank_correlation"] = (
                    f"the sets rank the {self.true_area_rates.size} areas (`{self.area}`) "
                    f"by their crude rates with Spearman's rho {ours:.3f} (median) against "
                    "the true crude rates, "
                    f"synthesis with no privacy with {theirs:.3f}: "
                    + ("privacy costs " if ours < theirs else "a difference of ")
                    + f"{lost:.3f}"
                    + self.rank_correlation.noise_note()
                )
        for totals in self.totals:
            error = totals.mean_absolute_error()
            ours, theirs = np.median(error.synthetic), np.median(error.reference)
            out[f"total:{totals.key}"] = (
                f"totals by `{totals.key}` ({totals.groups.size} groups): the sets are off by "
                f"{_human(ours)} events per group (mean absolute difference, median over sets), "
                f"{_times(error.ratio())} synthesis with no privacy ({_human(theirs)})"
            )
            error = totals.largest_relative_error()
            ours, theirs = np.median(error.synthetic), np.median(error.reference)
            out[f"margin:{totals.key}"] = (
                f"the total by `{totals.key}` furthest off is {_percent(ours)} off (the "
                f"largest relative error over its groups, median over sets; most often "
                f"`{totals.furthest_group()}`), {_percent(theirs)} with no privacy: privacy "
                f"adds {_points(KINDS['relative'].distance(ours, theirs))}"
            )
        out.update(self._prior_verdicts())
        if self.outside is not None:
            out["outside_bounds"] = (
                f"{self.outside} of {self.strata} strata ({_human(100 * self.outside_share, 2)}%) "
                "have a true count outside their truncation bounds [L, U]: the mechanism "
                "sees them clamped to the nearest bound, and no set can reach them"
            )
        return out

    def _prior_verdicts(self) -> dict[str, str]:
        """A word where the sets are no closer to the truth than the prior alone: at this
        epsilon they then tell the table's users nothing the prior does not."""
        out = {}
        if not self.prior:
            return out
        ours, prior = float(np.median(self.rmse.synthetic)), self.prior["rmse"]
        if ours >= prior:
            out["prior:rmse"] = (
                f"the sets' rMSE ({_human(ours)} {self.unit}, median) is no better than the "
                f"prior alone's ({_human(prior)}, the total spread by the prior): at this "
                "epsilon the sets tell users nothing about the strata rates that the prior does "
                "not"
            )
        if self.rank_correlation is not None and "rank_correlation" in self.prior:
            ours = float(np.nanmedian(self.rank_correlation.synthetic))
            prior = self.prior["rank_correlation"]
            if np.isfinite(prior) and ours <= prior:
                out["prior:rank_correlation"] = (
                    f"the sets rank the areas' crude rates no better (rho {ours:.3f}, median) "
                    "than the prior "
                    f"alone ({prior:.3f}): at this epsilon they tell users nothing about the "
                    "ranking that the prior does not"
                )
        return out

    def long_table(self) -> pd.DataFrame:
        """utility.csv: one row per measure (and key and group for totals), columns
        :data:`CSV_COLUMNS`; ``key`` and ``group`` are empty where they do not apply."""
        rows = []
        for totals in self.totals:
            frame = totals.frame()
            frame.insert(0, "key", totals.key)
            frame.insert(0, "measure", "total")
            rows.append(frame)
        rows.append(_scalar_row("rmse", "", 0.0, self.rmse))
        rows.append(_scalar_row("relative_error", "", 0.0, self.relative_error))
        for totals in self.totals:
            rows.append(_scalar_row("margin", totals.key, 0.0, totals.largest_relative_error()))
        if self.rank_correlation is not None:
            rows.append(_scalar_row("rank_correlation", self.area, 1.0, self.rank_correlation))
        if self.outside is not None:
            rows.append(pd.DataFrame({"measure": ["outside_bounds"], "key": [""], "group": [""],
                                      "truth": [self.outside_share]}))  # fmt: skip
        table = pd.concat(rows, ignore_index=True).reindex(columns=list(CSV_COLUMNS))
        table["group"] = table["group"].astype(str)
        return table


def _scalar_row(measure: str, key: str, truth: float, values: Compared) -> pd.DataFrame:
    row = {"measure": measure, "key": key, "group": "", "truth": truth}
    for name, sample in (("synthetic", values.synthetic), ("reference", values.reference)):
        sample = sample[~np.isnan(sample)]
        for stat, function in (("mean", np.mean), ("median", np.median), ("min", np.min),
                               ("max", np.max)):  # fmt: skip
            row[f"{name}_{stat}"] = float(function(sample)) if sample.size else np.nan
    return pd.DataFrame([row])


def _human(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits as a reader writes it: never in exponent
    form, thousands separated (170, 12,300, 0.0012)."""
    value = float(value)
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    rounded = float(f"{value:.{digits}g}")
    decimals = max(digits - 1 - math.floor(math.log10(abs(rounded))), 0)
    text = f"{rounded:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _group_order(values) -> np.ndarray:
    """The positions of a key's distinct text values in key order, numbers within the text
    compared as numbers (age groups '5-9' before '10-14', '85+' last), ties by the text."""

    def natural(text: str):
        parts = re.split(r"(\d+(?:\.\d+)?)", text)
        return tuple(float(p) if i % 2 else p for i, p in enumerate(parts)), text

    return np.array(sorted(range(len(values)), key=lambda i: natural(str(values[i]))), int)


def _factorize(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(column, sort=True)``, text values in :func:`_group_order`."""
    if isinstance(column.dtype, pd.CategoricalDtype) or pd.api.types.is_numeric_dtype(column):
        return pd.factorize(column, sort=True)
    from dpcounts.encoding import factorize

    codes, values = factorize(column)
    values = np.asarray(values, dtype=object)
    order = _group_order(values)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], np.asarray(values)[order]


def _percent(share: float) -> str:
    """A share as a percentage, to three significant digits (0.176 -> 17.6%)."""
    return f"{_human(100 * float(share))}%"


def _points(share: float) -> str:
    """An added share in percentage points (0.05 -> 5 percentage points)."""
    return f"{_human(100 * float(share))} percentage points"


def _times(ratio: float) -> str:
    return "infinitely many times" if np.isinf(ratio) else f"{ratio:.2f}x"


def reference_tables(sets: int, strata: int) -> int:
    """How many reference tables: one per set, at least :data:`REFERENCE_MIN_TABLES`, and
    above that no more than :data:`REFERENCE_CELLS` counts in all."""
    return max(REFERENCE_MIN_TABLES, min(sets, REFERENCE_CELLS // max(strata, 1)))


def area_column(keys: pd.DataFrame, fips: str | None, group_by: str | None):
    """(the area column or None, the rule that chose it, in words).

    The rule: the county FIPS column (``--fips-column``, or a key named fips, county_fips
    or county_code holding 5-digit codes); else ``--group-by``; else the key with the most
    values (the first of equals; nested keys such as prefecture > municipality give the
    finer), if it has more than :data:`AREA_MIN_VALUES`. A column with fewer than 3 values
    ranks nothing.
    """
    from dpcounts.encoding import factorize

    def values(column: str) -> int:  # the keys have no missing value
        return len(factorize(keys[column])[1])

    if fips is not None:
        name, why = fips, f"`{fips}`, the county FIPS column"
    elif group_by is not None:
        name, why = group_by, f"`{group_by}`, the column of --group-by"
    else:
        many = [c for c in keys.columns if values(c) > AREA_MIN_VALUES]
        if not many:
            return None, (
                f"no area: no FIPS column, no --group-by and no key with more than "
                f"{AREA_MIN_VALUES} values"
            )
        name = max(many, key=values)  # the first of equals
        why = f"`{name}`, the key with the most values ({values(name)})"
    if values(name) < 3:
        return None, f"no area: {why} has fewer than 3 values to rank"
    return name, why


def _indicator(codes: np.ndarray, groups: int):
    """strata x groups sparse 0/1 matrix of a key's codes."""
    import scipy.sparse

    n = codes.size  # one entry a row: the row pointers are 0..n
    index = np.int32 if n < 2**31 else np.int64  # scipy's own choice: no copy to convert
    return scipy.sparse.csr_matrix(
        (
            np.ones(n, dtype=np.int64),
            codes.astype(index, copy=False),
            np.arange(n + 1, dtype=index),
        ),
        shape=(n, groups),
    )


def _batches(tables: np.ndarray) -> Iterator[np.ndarray]:
    rows = max(1, BATCH_CELLS // max(tables.shape[1], 1))
    for start in range(0, tables.shape[0], rows):
        yield tables[start : start + rows]


def utility_report(
    keys: pd.DataFrame,
    counts,
    population,
    synthetic,
    cal,
    rng: np.random.Generator,
    *,
    area: str | None = None,
    area_rule: str = "no area column given",
    people: float | None = None,
    denominator: str = "population",
) -> Utility:
    """Score the synthetic sets (``synthetic``, shape (sets, strata), in the order of
    ``keys``) and :func:`reference_tables` tables of the no-privacy reference (drawn from
    ``rng``) against the true ``counts`` of the strata ``keys`` with ``population``.

    ``cal`` (the release's :class:`~dpcounts.calibration.Calibration`) gives the
    mechanism, epsilon and, when truncated, the bounds. ``area`` names the key whose
    areas are ranked (:func:`area_column`; None: no rank correlation).
    ``people`` is the population counted once (strata that share a population, such as
    the causes of death of one place, share it; default: the sum of ``population``).
    ``denominator`` ``expected``: ``population`` holds expected counts, the rates are SMRs
    (reported as ratios, not per 100,000).
    """
    from dpcounts.encoding import factorize
    from dpcounts.sampling.reference import drawn_strata, reference_batches
    from dpcounts.studies.stage.measures import AREA, MEASURES, Measures
    from dpcounts.studies.stage.rates import GroupRates
    from dpcounts.units import rate_scale

    per = rate_scale(denominator)

    y = np.asarray(counts)
    population = np.asarray(population, dtype=float)
    synthetic = np.asarray(synthetic)
    if synthetic.ndim != 2 or synthetic.shape[1] != y.size or len(keys) != y.size:
        raise ValueError(
            f"the synthetic sets have shape {synthetic.shape}, the table {y.size} strata and "
            f"{len(keys)} rows of keys: expected (sets, {y.size})"
        )
    if area is not None and area not in keys.columns:
        raise ValueError(f"area column {area!r} is not a key; keys are {list(keys.columns)}")
    n_reference = reference_tables(synthetic.shape[0], y.size)

    # the study's measures (rMSE, and rank correlation with an area), on crude rates
    if area is not None:  # the areas split the strata: no mask per area
        codes, values = factorize(keys[area], sort=True)
        names = [AREA + str(v) for v in values]
        rates = GroupRates.partition(population, codes, names, per=per)
        areas = tuple(map(str, values))
    else:
        rates, areas = GroupRates(population, {"all": np.ones(y.size, dtype=bool)}, per=per), ()
    chosen = tuple(m for m in MEASURES if area is not None or not m.needs_areas)
    measures = Measures(rates, population, areas, chosen, per)

    key_codes = []
    for column in keys.columns:
        codes, values = _factorize(keys[column])
        key_codes.append((column, np.asarray(values), _indicator(codes, len(values))))

    def score(tables_batches, measures, truth, indicators):
        scores, totals = [], [[] for _ in indicators]
        for batch in tables_batches:
            scores.append(measures.values(batch, truth))
            for k, indicator in enumerate(indicators):
                totals[k].append(np.asarray((indicator.T @ batch.T).T))
        return pd.concat(scores, ignore_index=True), [np.vstack(t) for t in totals]

    indicators = [indicator for _, _, indicator in key_codes]
    ours, our_totals = score(_batches(synthetic), measures, y, indicators)
    # the reference is zero where the truth is (a national table is mostly empty): scored
    # at its drawn strata only, the same values (sums skip zeros)
    drawn = drawn_strata(y)
    theirs, their_totals = score(
        reference_batches(y, n_reference, rng, at=drawn), *measures.on(drawn, y),
        [indicator[drawn] for indicator in indicators],
    )  # fmt: skip
    totals = tuple(
        KeyTotals(column, values, np.asarray(indicator.T @ y), mine, reference)
        for (column, values, indicator), mine, reference in zip(
            key_codes, our_totals, their_totals, strict=True
        )
    )
    rank = None
    if area is not None:
        rank = Compared(ours["rank_correlation"].to_numpy(), theirs["rank_correlation"].to_numpy())
    outside = None
    if cal.truncated:
        outside = int(np.count_nonzero((y < cal.lower) | (y > cal.upper)))
    weights = np.ones(y.size) if cal.prior_rate is None else population * cal.prior_rate
    drift = measures.values(y.sum() * weights / weights.sum(), y).iloc[0]
    return Utility(
        mechanism=cal.mechanism,
        epsilon=cal.epsilon,
        sets=synthetic.shape[0],
        reference_tables=n_reference,
        strata=y.size,
        total=int(y.sum()),
        overall_rate=float(y.sum() / (population.sum() if people is None else people) * per),
        totals=totals,
        rmse=Compared(ours["rmse"].to_numpy(), theirs["rmse"].to_numpy()),
        relative_error=Compared(
            ours["relative_error"].to_numpy(), theirs["relative_error"].to_numpy()
        ),
        area=area,
        area_rule=area_rule,
        rank_correlation=rank,
        true_area_rates=None if area is None else measures.area_rates(y)[0],
        outside=outside,
        prior={name: float(value) for name, value in drift.items()},
        unit="per 100,000" if denominator == "population" else "SMR",
    )


# --- writing ------------------------------------------------------------------------------


def write_utility(folder: Path, request, strata, cal, synthetic, rng) -> list[str]:
    """Score the release (:func:`utility_report`) and write :data:`FILES` into the private
    ``folder``; return their names. The area is the study's (``--study``), else follows
    :func:`area_column` with the request's ``--fips-column`` (or a detected FIPS key) and
    ``--group-by``."""
    from dpcounts.release.report.summary import fips_column

    # one no-privacy reference for the whole report: the general measures and the study's
    # (below) score the same tables, drawn twice from one seed
    reference_seed = int(rng.integers(2**63))
    keys = strata.keys
    if request.study is not None:  # the study's areas, the ones its guide judged, or none
        area = request.study.definition.area
        rule = (f"`{area}`, the study's area" if area is not None
                else f"no area: study `{request.study.name}` names none")  # fmt: skip
    else:
        area, rule = area_column(keys, fips_column(request, keys), request.group_by)
    report = utility_report(
        keys, strata.counts, strata.population, synthetic, cal,
        np.random.default_rng(reference_seed), area=area, area_rule=rule,
        people=strata.unit_population(), denominator=request.denominator,
    )  # fmt: skip
    report.long_table().to_csv(folder / "utility.csv", index=False)
    _write_figure(report, folder / "utility.png")
    text = markdown(report, request.input.name)
    names = list(FILES)
    if request.study is not None:  # the study's measures against its guide's promise
        from dpcounts.release.report import promise
        from dpcounts.release.request import plan_budget

        budget = plan_budget(request)
        epsilon = budget.epsilon_prior + budget.epsilon_per_set
        arm = request.study.arm(request.mechanism, request.method).name
        n = reference_tables(synthetic.shape[0], strata.counts.size)
        kept = promise.check_promise(request.study, strata, synthetic, arm, n,
                                     np.random.default_rng(reference_seed), epsilon)  # fmt: skip
        lines = promise.markdown(kept, request.study, arm, epsilon, synthetic.shape[0])
        lines += promise.suppression_lines(request.study, strata, synthetic, cal,
                                           np.random.default_rng(reference_seed))  # fmt: skip
        lines += promise.coverage_lines(request.study, strata, synthetic, cal)
        study_arm = request.study.arm(request.mechanism, request.method)
        if promise.write_map(folder / promise.MAP, request.study, strata, synthetic,
                             study_arm, epsilon):  # fmt: skip
            names.append(promise.MAP)
            lines += ["", f"![true and synthetic area rates on the study's map]({promise.MAP})"]
        text += "\n" + "\n".join(lines) + "\n"
    (folder / "utility.md").write_text(text)
    return names


def _number(value) -> str:
    value = float(value)
    return f"{value:.0f}" if value == round(value) and abs(value) < 1e15 else f"{value:.1f}"


def markdown(report: Utility, name: str) -> str:
    """utility.md: one page, what each number means, the verdicts and the tables."""
    r = report
    rank_title = crude_rank_title()
    plural = "s" if r.sets > 1 else ""
    lines = [
        "# Utility of the release: what the synthetic sets kept",
        "",
        "**Private: every number here is computed from the original (confidential) counts. "
        "Never publish this file.**",
        "",
        f"`{name}`: {r.strata} strata, total {r.total} events; mechanism `{r.mechanism}`, "
        f"epsilon {r.epsilon:g} per set, {r.sets} synthetic set{plural}.",
        "",
        "Each measure compares a table with the original. It is computed for every "
        f"synthetic set and for {r.reference_tables} tables of the **no-privacy reference**: "
        "synthesis with no privacy at all (Dirichlet-multinomial with the true total and "
        "the true counts as weights, the limit of md and pg as epsilon grows, truncation "
        f"dropped), as many tables as sets and at least {REFERENCE_MIN_TABLES}. What the "
        "reference loses, synthesis loses at any epsilon; what the sets lose beyond it is "
        "the cost of privacy.",
        "",
        "## Verdicts",
        "",
        *[f"- {line}" for line in r.verdicts().values()],
        "",
        "## Measures",
        "",
        (
            "- **rMSE**: root mean squared error of the strata rates (count / population), per "
            "100,000; 0 is perfect."
            if r.unit == "per 100,000"
            else "- **rMSE**: root mean squared error of the strata SMRs (observed / expected "
            "count, a ratio); 0 is perfect."
        ),
        f"- **{rank_title}**: Spearman's rho between a table's and the true crude rates "
        "of the areas (events / population of each area, not age-adjusted); 1 keeps every "
        "area's rank. Area: " + r.area_rule + ".",
        "- **relative error**: the mean over strata of |synthetic - true| / max(true, 1), "
        "every stratum weighing alike, small or large (the rMSE weighs the largest rates "
        "most); 0 is perfect.",
        "- **totals**: per value of each key, the sum of its strata; mean absolute "
        "difference from the true totals over the key's values, and the largest relative "
        "error of a value's total, |synthetic - true| / max(true, 1) (the study's margin).",
        "",
        f"| measure | synthetic sets ({r.sets}): median [min, max] "
        f"| no-privacy reference ({r.reference_tables}): median [min, max] |",
        "|---|---:|---:|",
        f"| rMSE {r.unit} | {_band(r.rmse.synthetic)} | {_band(r.rmse.reference)} |",
        f"| relative error of the strata | {_band(r.relative_error.synthetic)} "
        f"| {_band(r.relative_error.reference)} |",
    ]
    if r.rank_correlation is not None:
        lines.append(
            f"| {rank_title} (`{r.area}`) | {_band(r.rank_correlation.synthetic, 3)} "
            f"| {_band(r.rank_correlation.reference, 3)} |"
        )
    for totals in r.totals:
        error = totals.mean_absolute_error()
        lines.append(
            f"| totals by `{totals.key}`: mean absolute difference | {_band(error.synthetic)} "
            f"| {_band(error.reference)} |"
        )
        error = totals.largest_relative_error()
        lines.append(
            f"| totals by `{totals.key}`: largest relative error | {_band(error.synthetic)} "
            f"| {_band(error.reference)} |"
        )
    if r.outside is not None:
        lines += [
            "",
            f"True counts outside the truncation bounds: {r.outside} of {r.strata} strata "
            f"({_human(100 * r.outside_share, 2)}%).",
        ]
    lines += [
        "",
        "![the strata rates' error and the totals per key](utility.png)",
        "",
        "The figure: first, the rMSE of the strata rates of each synthetic set and each "
        "no-privacy table as empirical distributions (where the sets' curve lies on the "
        "reference's, privacy costs nothing that synthesis does not; the dashed line is the "
        "prior alone's); then, per key, each value's synthetic totals (mean, bars from min to "
        "max over the sets) and the reference's (beside them) against its true total.",
    ]
    for totals in r.totals:
        frame = totals.frame()
        lines += [
            "",
            f"## Totals by `{totals.key}`",
            "",
            f"| {totals.key} | true | synthetic mean [min, max] | reference mean [min, max] |",
            "|---|---:|---:|---:|",
        ]
        for row in frame.head(TABLE_ROWS).itertuples(index=False):
            lines.append(
                f"| {row.group} | {_number(row.truth)} | {row.synthetic_mean:.1f} "
                f"[{_number(row.synthetic_min)}, {_number(row.synthetic_max)}] "
                f"| {row.reference_mean:.1f} [{_number(row.reference_min)}, "
                f"{_number(row.reference_max)}] |"
            )
        if len(frame) > TABLE_ROWS:
            lines.append(f"| and {len(frame) - TABLE_ROWS} more (utility.csv) | | | |")
    lines += ["", "Every number, per key and group: `utility.csv`."]
    return "\n".join(lines) + "\n"


def crude_rank_title() -> str:
    """The name of this report's rank correlation, of the areas' crude rates: the measure's
    title as the guide gives it (:func:`dpcounts.studies.stage.measures.study_measure_list`),
    of the crude area rates, in lower case (``rank correlation of the crude area rates``),
    so that it is never read as the guide's age-adjusted one of a study with ages."""
    from dpcounts.studies.stage.measures import MEASURES

    title = next(m.title for m in MEASURES if m.name == "rank_correlation")
    title = title.replace("age-adjusted ", "").replace("crude ", "")
    title = title.replace("area rates", "crude area rates")
    return title[:1].lower() + title[1:]


def _band(values: np.ndarray, digits: int = 3) -> str:
    values = values[~np.isnan(values)]
    if values.size == 0:
        return "undefined"
    med, lo, hi = (_human(v, digits) for v in (np.median(values), values.min(), values.max()))
    return f"{med} [{lo}, {hi}]"


def _write_figure(report: Utility, path: Path) -> None:
    """utility.png: :func:`utility_figure`, laid out there, saved at its own size
    (``tight=False``: one draw, not a second to crop it) and at its own resolution, so that
    the draw measures no text again."""
    from dpcounts.io import save_figure

    save_figure(utility_figure(report), path, tight=False)


def utility_figure(report: Utility):
    """utility.png: the rMSE of the sets against the no-privacy reference's (ECDFs), then
    per key each value's synthetic totals against its true total, beside the reference's
    (in the style of every figure, :mod:`dpcounts.plots.style`). Every text is plain, epsilon
    a character and linear axes' ticks plain numbers (:func:`~dpcounts.plots.style.linear_axis`),
    so that drawing it never calls mathtext's parser (only a power of ten on a log axis
    that reaches a million is mathtext); its cost does not grow with the table.

    A figure of its own, not pyplot's (no figure manager, no redraw hook called at each
    change of an artist), at :data:`dpcounts.io.FIGURE_DPI`, the resolution it is saved at
    (every text is measured once, for the layout, and drawn at that size); laid out by one
    pass of matplotlib's tight layout over the panels' extents (constrained layout takes
    two)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import TightLayoutEngine

    from dpcounts.arms import mechanism_name
    from dpcounts.io import FIGURE_DPI
    from dpcounts.plots.style import RC, eps_equals

    panels = len(report.totals) + 1
    columns = min(3, panels)
    rows = -(-panels // columns)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(4.2 * columns, 3.9 * rows), dpi=FIGURE_DPI)
        FigureCanvasAgg(fig)  # drawn and measured by Agg, as it is saved
        axes = fig.subplots(rows, columns, squeeze=False)
        _rmse_panel(axes.flat[0], report)
        for ax, totals in zip(axes.flat[1:], report.totals, strict=False):
            _totals_panel(ax, totals, report)
        for ax in axes.flat[panels:]:
            ax.set_visible(False)
        mechanism = mechanism_name(report.mechanism)
        fig.suptitle(
            f"The strata rates' error and the totals per key\n{report.sets} synthetic "
            f"set{'s' if report.sets > 1 else ''} ({mechanism}, "
            f"{eps_equals(report.epsilon, plain=True)} per set) and {report.reference_tables} "
            "tables with no privacy"
        )
        # one pass over the panels' extents; no engine kept, so the save draws once
        TightLayoutEngine().execute(fig)
    return fig


def _rmse_panel(ax, report: Utility) -> None:
    """The rMSE of the strata rates as empirical distributions (ECDFs): the sets' against
    the no-privacy tables', with the prior alone's as a line. Where the sets' curve lies on
    the reference's, privacy costs nothing that synthesis does not."""
    from dpcounts.plots.style import linear_axis

    handles = {}
    for values, colour, label in (  # the sets drawn last, over the reference
        (report.rmse.reference, "C1", f"no privacy ({report.reference_tables} tables)"),
        (report.rmse.synthetic, "C0", f"synthetic sets ({report.sets})"),
    ):
        values = np.asarray(values, dtype=float)
        values = values[~np.isnan(values)]
        if values.size:  # matplotlib's ECDF, as the pseudo-posterior figure draws them
            handles[colour] = ax.ecdf(values, color=colour, lw=1.5, label=label)
    ax.set_ylim(0, 1)
    prior = (report.prior or {}).get("rmse")
    if prior is not None and np.isfinite(prior):
        ax.axvline(prior, color="grey", ls="--", lw=1)
        ax.annotate("prior alone", (prior, 0.5), xytext=(3, 0), textcoords="offset points",
                    rotation=90, va="center", fontsize="small", color="grey")  # fmt: skip
    if handles:  # the sets first, as they are read
        ax.legend(handles=[handles[c] for c in ("C0", "C1") if c in handles], loc="best")
    for axis in (ax.xaxis, ax.yaxis):
        linear_axis(axis)
    unit = "SMR" if report.unit == "SMR" else report.unit
    ax.set_xlabel(f"rMSE of the strata rates ({unit})")
    ax.set_ylabel("share of tables at or below")
    ax.set_title("rMSE: sets against no privacy", y=1.0)  # y: nothing above to clear


def _totals_panel(ax, totals: KeyTotals, report: Utility) -> None:
    from dpcounts.plots.style import human, linear_axis, log_axis, symlog_axis

    frame = totals.frame()
    truth = frame["truth"].to_numpy(dtype=float)
    top = float(max(truth.max(), frame["synthetic_max"].max(), frame["reference_max"].max()))
    low = float(min(truth.min(), frame["synthetic_min"].min(), frame["reference_min"].min()))
    positive = truth[truth > 0]
    log = positive.size > 1 and top / positive.min() >= 100
    if log:
        shift = np.where(truth > 0, truth * 1.06, 0.1)  # the reference beside the sets
    else:
        low = 0.0 if low < 0.25 * top else low  # from 0 unless every total is far from it
        shift = truth + 0.012 * (top - low + 1)
    bars = len(frame) <= BARRED_GROUPS
    for x, name, colour, label in (  # the sets drawn last, over the reference
        (shift, "reference", "C1", f"no privacy ({report.reference_tables} tables)"),
        (truth, "synthetic", "C0", f"synthetic sets ({report.sets})"),
    ):
        mean = frame[f"{name}_mean"].to_numpy()
        if not bars:  # too many groups for bars to be seen: the means, as one raster
            ax.plot(x, mean, ".", ms=2, color=colour, alpha=0.5, label=label, rasterized=True)
            continue
        spread = np.vstack([mean - frame[f"{name}_min"], frame[f"{name}_max"] - mean])
        ax.errorbar(x, mean, yerr=spread, fmt="o", ms=3, capsize=1.5, elinewidth=1,
                    color=colour, alpha=0.75, label=label)  # fmt: skip
    if log:
        zero = low == 0
        scale = "symlog" if zero else "log"  # symlog: linear from 0 to 1, log above
        options = {"linthresh": 1} if zero else {}
        line = np.geomspace(1 if zero else positive.min() / 2, top * 1.5, 50)
        line = np.concatenate([[0.0], line]) if zero else line
        ax.set_xscale(scale, **options)
        ax.set_yscale(scale, **options)
        for axis in (ax.xaxis, ax.yaxis):  # no minor ticks: each costs a draw of its own
            (symlog_axis if zero else log_axis)(axis, minor=False)
    else:
        pad = 0.08 * (top - low) + 0.5  # points and their labels at the ends stay inside
        line = np.array([low - pad, top + pad])
        ax.set(xlim=line, ylim=line)
        for axis in (ax.xaxis, ax.yaxis):  # big totals close together: still readable
            linear_axis(axis)
    if len(frame) <= LABELLED_GROUPS:  # few groups: say which is which
        order = np.argsort(np.argsort(truth, kind="stable"))  # neighbours alternate sides
        last = len(order) - 1
        for x, y, name, k in zip(truth, frame["synthetic_mean"], frame["group"], order,
                                 strict=True):  # fmt: skip
            # alternate above-left and below-right of the diagonal; the lowest total's
            # label above-right and the highest's below-left, so none leaves the panel
            up = k == 0 or (k % 2 == 1 and k != last)
            right = k == 0 or (k != last and k % 2 == 0)
            ax.annotate(str(name), (x, y), xytext=(4 if right else -4, 6 if up else -11),
                        textcoords="offset points", ha="left" if right else "right",
                        fontsize="small", color="C0")  # fmt: skip
    ax.plot(line, line, color="grey", lw=1, ls="--", label="= true total")
    ax.set_xlabel(f"true total by {human(totals.key)}" + (" (log)" if log else ""))
    ax.set_ylabel("table's total: mean" + (", bars min to max" if bars else " (no bars)"))
    ax.set_title(f"by {human(totals.key)}: {totals.groups.size} groups", y=1.0)
    ax.legend(loc="upper left", fontsize="small")
