"""What an analyst can infer from a release folder alone (issue #54): a measure of each
group of strata (:data:`MEASURES`), with an interval, by one of two methods
(:data:`METHODS`).

:func:`estimate` reads nothing but the public folder (its manifest, ``synthetic.*`` and
``hyperparameters.*``; for an age-adjusted rate also the standard population, a public
table that ships, :data:`STANDARDS`), and refuses a folder that ``dpcounts verify``
rejects. The table has the group's keys, then :data:`COLUMNS` (``measure`` says which).

**The measures**, each a weighted sum of the true counts of some pieces of a group:

* ``rate``: the group's count over its population (per 100,000; an SMR with expected
  counts as the denominator): one piece, weight per / n.
* ``age-adjusted``: the group's directly age-adjusted rate, sum_b w_b y_b / n_b over the
  age bands b of the age key ``age`` (each band one piece: y_b the group's count in it,
  n_b its population, w_b the standard population's share of the band). The labels are
  read as ages and matched to the standard's groups by the study stage's rules
  (:func:`dpcounts.studies.stage.age.age_adjustment`: labels such as ``40-59``, ``85+``,
  ``Under 40``; bands on the standard's edges; ages at or past its open group adjusted as
  that group); every group needs people in every band.
* ``disparity``: within each group, the rate of the strata of ``numerator`` over that of
  the strata of ``denominator`` (filters column -> values, as a study's
  ``studies.<name>.disparities``), both age-adjusted when ``age`` is given (each side over
  the bands it covers, the weights normalised over them, as the study stage does). The
  sides must share no stratum. ``variance`` is that of the log ratio.

``posterior`` (the default): the noise-aware posterior of
:mod:`dpcounts.inference.posterior`. A rate: each stratum's true count gets a public prior
(gamma-Poisson of mean population x the published prior rate, md: the overall rate, shape
``prior_shape``, default 1) times the likelihood of the M sets under the published
hyperparameters; a group's total is the convolution of its strata's posteriors,
conditioned on the public total. ``estimate`` is the posterior mean of the rate,
``variance`` its posterior variance, ``lower`` and ``upper`` the equal-tailed posterior
quantiles at ``level``; ``df`` is NaN and ``adjusted`` False (neither has a meaning
here). It works from one set on. Its approximation (cells independent given the total,
the normaliser in saddle-point form) and where it fails (how an excess above a truncated
release's bounds is spread among strata; a prior far from the truth) are stated in that
module and ``docs/release.md``. On simulated tables where its prior holds
(``tests/test_estimate_posterior.py``) its 90% intervals cover about 90% of the groups'
true rates where the combining rules cover about 60% (pg and md, epsilon 0.5 a set):
hence the default. An age-adjusted rate or a disparity is not a function of one total:
its posterior is by Monte Carlo, ``draws`` (default :data:`DRAWS`, 20,000) joint draws of
the pieces' true totals given the sets and the public total
(:func:`dpcounts.inference.posterior.joint_draws`, exact sampling from the same strata laws,
seeded by ``seed``, default 0: the table is reproducible). ``estimate`` is then the mean of
the drawn age-adjusted rates (a disparity: the median of the drawn ratios), ``variance``
their variance (a disparity: of the log ratios; NaN where a draw leaves a side without
events), ``lower`` and ``upper`` their equal-tailed quantiles. The Monte Carlo error: each
bound's tail probability is within sqrt(p (1 - p) / draws) of its nominal p (one
standard error; 0.0015 for p = 0.05 at 20,000 draws), the estimate within its posterior
standard deviation / sqrt(draws) (0.7% of it). On simulated tables where the model holds
(``tests/test_estimate_measures.py``: 4 groups x 2 races x 4 age bands, 5 pg sets at
epsilon 0.5 a set, 100 tables) the 90% intervals of the age-adjusted rates cover 0.918 of
400 (standard error 0.015), the combining rules 0.65.

``combining``: the combining rules for fully synthetic data (Raghunathan, Reiter and
Rubin 2003). Set m gives the group's rate q_m = y_m / n and its Poisson variance u_m =
y_m / n^2 (same scale). :func:`~dpcounts.inference.combining.combine` then gives, over
the M sets:

* the estimate q_M = mean of q_m;
* b_M, the variance of the q_m across the sets, and u_M, the mean of the u_m;
* the variance T_f = (1 + 1/M) b_M - u_M, with nu_f = (M - 1) (1 - M u_M / ((M + 1)
  b_M))^2 degrees of freedom (Raghunathan, Reiter and Rubin 2003; Reiter 2002): the
  interval is q_M +- t_{nu_f} sqrt(T_f);
* where T_f <= 0 (which happens when the sets barely differ), the documented adjustment
  T* = (n_syn / n) u_M (Reiter 2002, section 3), here u_M (a synthetic set has the
  table's own size), with a normal quantile; the ``adjusted`` column says where.

An age-adjusted rate's per-set variance is its Poisson variance sum_b w_b^2 z_b / n_b^2
(Fay and Feuer's, :func:`dpcounts.studies.intervals.age_adjusted_interval`; a rate's y_m /
n^2 is the case of one band). A disparity is combined on the log scale: set m gives log
q_N,m - log q_D,m with the delta method's variance u_N,m / q_N,m^2 + u_D,m / q_D,m^2, and
``estimate``, ``lower`` and ``upper`` are the exponentials of the combined log ratio and its
bounds (NaN where a set has a side without events).

These rules assume each set is drawn from the posterior predictive of a model that holds,
and they do not see the privacy noise as such: where the DP noise dominates (small
epsilon) the sets differ for privacy, not for sampling, and are shrunk towards the prior
alike, so the interval is too narrow and misplaced; they need 2 sets or more.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from dpcounts.inference.combining import combine
from dpcounts.inference.pieces import Pieces, from_draws, piece_totals
from dpcounts.inference.pieces import combined as combined_rule
from dpcounts.inference.pieces import values as piece_values

#: The methods of :func:`estimate`.
METHODS = ("posterior", "combining")
#: The measures of :func:`estimate` (module docstring).
MEASURES = ("rate", "age-adjusted", "disparity")
#: The columns of the table :func:`estimate` returns, after the group's keys.
COLUMNS = ("measure", "estimate", "lower", "upper", "variance", "df", "adjusted", "method",
           "sets", "prior")  # fmt: skip
#: The checkout's data folder, where the standard populations ship.
DATA = Path(__file__).resolve().parents[3] / "data"
#: The standard populations that ship (name -> file of :data:`DATA`), for ``standard``.
STANDARDS = {"us2000": "us_standard_population_2000.csv"}
DEFAULT_STANDARD = "us2000"
#: The posterior's Monte Carlo draws of an age-adjusted rate or a disparity (module
#: docstring: their error).
DRAWS = 20_000


def estimate(folder, by, level: float = 0.9, method: str = "posterior",
             prior_shape: float = 1.0, measure: str = "rate", age: str | None = None,
             standard: str = DEFAULT_STANDARD, numerator=None, denominator=None,
             draws: int = DRAWS, seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """The ``measure`` (:data:`MEASURES`) of each group of the keys ``by`` (a list of the
    release's key or attribute columns; for a disparity it may be empty: one row) from the
    release in ``folder``, with its interval at ``level`` by ``method`` (module docstring;
    ``prior_shape``: the posterior's prior, s >= 1): one row per group, the group's keys
    then :data:`COLUMNS`. ``age``: the age key of an age-adjusted rate (and of a disparity
    of age-adjusted rates), by the standard population ``standard`` (a name of
    :data:`STANDARDS` or a CSV file); ``numerator`` and ``denominator``: a disparity's
    sides, each a mapping column -> value or values. ``draws`` and ``seed``: the posterior's
    Monte Carlo draws of an age-adjusted rate or a disparity. Refuses (ValueError) a folder
    ``dpcounts verify`` rejects, a key the release does not have, and for ``combining`` a
    release of one set."""
    from dpcounts.verify import FAIL, failed, load_manifest, verify_release
    from dpcounts.verify.readers import attributes

    folder = Path(folder)
    _check_options(method, measure, level, age, numerator, denominator)
    checks = verify_release(folder)
    if failed(checks):
        names = [f"{c.topic}/{c.name}" for c in checks if c.status == FAIL]
        raise ValueError(f"{folder}: dpcounts verify rejects this folder ({', '.join(names[:5])}"
                         "): no estimate from it")  # fmt: skip
    manifest, error = load_manifest(folder)
    if manifest is None:
        raise ValueError(f"{folder}: {error}")
    keys, by = list(manifest["keys"]), list(by)
    columns = [*keys, *attributes(manifest)]  # what a group or a side may be made of
    unknown = [c for c in by if c not in columns]
    if (not by and measure != "disparity") or unknown:
        raise ValueError(f"--by {by}: expected one or more of the release's keys {keys}"
                         + _also(columns, keys))  # fmt: skip
    sets = int(manifest["sets"])
    if sets < 2 and method == "combining":
        raise ValueError(f"{folder}: a release of {sets} set; the combining rules need at "
                         "least 2 (--sets 5 or more, or --method posterior)")  # fmt: skip
    files = manifest["files"]
    synthetic = _table(folder / files["synthetic"]["path"])
    hyper = _table(folder / files["hyperparameters"]["path"])
    expected = manifest.get("denominator", {}).get("kind") == "expected"
    per = 1.0 if expected else 1e5
    if by:
        groups = hyper[by].astype(str).agg("\x1f".join, axis=1) if len(by) > 1 else hyper[
            by[0]].astype(str)  # fmt: skip
    else:
        groups = pd.Series("", index=hyper.index)
    codes, uniques = pd.factorize(groups, sort=True)
    named = hyper.assign(_group=groups).drop_duplicates("_group").set_index("_group")
    out = named.loc[list(uniques), by].reset_index(drop=True)  # each group's keys
    # every set lists the hyperparameters' strata in their order (verify checks it)
    counts = np.vstack([rows.to_numpy(float) for _, rows in
                        synthetic.groupby("set", sort=True)["count"]])  # fmt: skip
    cap = None if expected else hyper["population"].to_numpy(float)
    prior_counts = _prior_counts(manifest, hyper)
    if measure == "rate" and method == "posterior":  # one piece a group: exact
        people = np.bincount(codes, weights=hyper["population"].to_numpy(float))
        combined = _posterior(manifest, hyper, counts, codes, people, per, level, prior_shape,
                              cap)  # fmt: skip
        prior = per * np.bincount(codes, weights=prior_counts) / people
    else:
        pieces = _pieces(folder, hyper, keys, columns, by, codes, out, per, age, standard,
                         numerator, denominator)  # fmt: skip
        prior = piece_values(piece_totals(prior_counts, pieces), pieces)[0][0]
        if method == "combining":
            combined = combined_rule(counts, pieces, level)
        else:
            rng = np.random.default_rng(seed)
            combined = _posterior_draws(manifest, hyper, counts, pieces, level, prior_shape,
                                        cap, draws, rng)  # fmt: skip
    out.insert(len(by), "measure", measure)
    for column in ("estimate", "lower", "upper", "variance", "df", "adjusted"):
        out[column] = combined[column]
    out["lower"] = np.maximum(out["lower"], 0.0)  # a rate is not negative
    out["method"] = method
    out["sets"] = sets
    out["prior"] = prior
    return out


def _prior_counts(manifest, hyper: pd.DataFrame) -> np.ndarray:
    """Each stratum's expected count under the release's published prior: population x its
    prior rate (md, which has none: the overall rate, total / population)."""
    population = hyper["population"].to_numpy(float)
    if "prior_rate" in hyper.columns:
        return population * hyper["prior_rate"].to_numpy(float)
    return population * float(manifest["total"]) / population.sum()


def leaning_to_parity(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a disparity by the posterior whose interval holds parity and whose
    sides the release's prior does not tell apart (its own ratio within 1% of 1): where
    the sets say little, the posterior leans both sides to the prior's rate, so such an
    interval may lean to parity (docs/analyse.md)."""
    if not len(table) or table["measure"].iloc[0] != "disparity":
        return table.iloc[:0]
    same = (table["method"] == "posterior") & (np.abs(np.log(table["prior"])) <= np.log(1.01))
    return table[same & (table["lower"] <= 1.0) & (table["upper"] >= 1.0)]


def _check_options(method, measure, level, age, numerator, denominator) -> None:
    """Refuses options that do not go together, before the folder is read."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if measure == "age-adjusted" and age is None:
        raise ValueError("--measure age-adjusted needs the age key (--age-column AGE)")
    if measure == "disparity" and not (numerator and denominator):
        raise ValueError("--measure disparity needs both sides (--numerator COLUMN=VALUE ... "
                         "--denominator COLUMN=VALUE ...)")  # fmt: skip
    if measure != "disparity" and (numerator or denominator):
        raise ValueError(f"--numerator and --denominator are a disparity's sides; the measure "
                         f"is {measure!r} (--measure disparity)")  # fmt: skip
    if measure == "rate" and age is not None:
        raise ValueError("--age-column is for --measure age-adjusted or disparity; the "
                         "measure is 'rate'")  # fmt: skip


def _also(columns, keys) -> str:
    """`` or attributes [...]`` when the release has attributes beside its keys."""
    extra = [c for c in columns if c not in keys]
    return f" or attributes {extra}" if extra else ""


def _pieces(folder, hyper, keys, columns, by, codes, out, per, age, standard, numerator,
            denominator) -> Pieces:  # fmt: skip
    """The pieces of every row's measure (:class:`~dpcounts.inference.pieces.Pieces`):
    the group's strata (a rate), its age bands (an age-adjusted rate), each side's (a
    disparity). ``columns``: the release's keys and attributes. Refuses an age key or a
    disparity's column that is not the release's, a band off the standard's groups, a
    group without population in a band its rate needs, and a disparity's sides that
    overlap."""
    import scipy.sparse

    from dpcounts.studies.stage.definition import Disparity

    spec = None
    if numerator or denominator:
        spec = Disparity("estimate", _filters(numerator, "--numerator", keys, columns, by),
                         _filters(denominator, "--denominator", keys, columns, by))  # fmt: skip
        sides = [_side(hyper, spec.numerator, "--numerator"),
                 _side(hyper, spec.denominator, "--denominator")]  # fmt: skip
        if (sides[0] & sides[1]).any():
            raise ValueError(f"--numerator {dict(spec.numerator)} and --denominator "
                             f"{dict(spec.denominator)} share strata; expected sides that "
                             "share none (a disparity compares two sets of strata)")  # fmt: skip
    else:
        sides = [np.ones(len(hyper), dtype=bool)]
    if age is None:
        band = np.full(len(hyper), "all ages", dtype=object)
        side_weights = [pd.Series({"all ages": 1.0})] * len(sides)
    else:
        band, side_weights = _age_weights(folder, hyper, keys, by, age, standard, spec)
    population = hyper["population"].to_numpy(float)
    piece = np.full(len(hyper), -1, dtype=np.int64)
    rows, entries, values = [], [], []
    groups = len(out)
    for s, (mask, weights) in enumerate(zip(sides, side_weights, strict=True)):
        for name, weight in weights.items():
            members = np.flatnonzero(mask & (band == name))
            people = np.bincount(codes[members], weights=population[members], minlength=groups)
            if not (people > 0).all():
                g = int(np.flatnonzero(~(people > 0))[0])
                where = f"age band {name!r} of {age!r}" if age is not None else "its strata"
                side = "" if spec is None else (" --numerator", " --denominator")[s]
                raise ValueError(f"group {_named(out, g)}{side}: no population in {where}; "
                                 "its rate needs people there (choose coarser --by keys, or "
                                 "another measure)")  # fmt: skip
            first = len(values)
            piece[members] = first + codes[members]
            rows.extend(np.arange(groups) * len(sides) + s)
            entries.extend(first + np.arange(groups))
            values.extend(per * weight / people)
    weights = scipy.sparse.csr_matrix((values, (rows, entries)),
                                      shape=(groups * len(sides), len(values)))  # fmt: skip
    return Pieces(piece, weights, len(sides))


def _named(out: pd.DataFrame, g: int) -> str:
    """A row's group as its keys say it (``county=A, race=B``; ``(the whole table)``)."""
    if not len(out.columns):
        return "(the whole table)"
    return ", ".join(f"{c}={out.iloc[g][c]}" for c in out.columns)


def _filters(given, option: str, keys, columns, by) -> dict[str, tuple[str, ...]]:
    """A disparity's side, ``column -> values`` (text), its columns the release's keys or
    attributes (``columns``) and none of ``by`` (a side within a group, not across)."""
    out = {}
    for column, wanted in dict(given).items():
        if column not in columns:
            raise ValueError(f"{option} {column}: not one of the release's keys {list(keys)}"
                             + _also(columns, keys))  # fmt: skip
        if column in by:
            raise ValueError(f"{option} {column}: a column of --by {list(by)}; a "
                             "disparity compares two sides within each group: leave it out "
                             "of --by")  # fmt: skip
        values = wanted if isinstance(wanted, list | tuple) else [wanted]
        out[str(column)] = tuple(str(v) for v in values)
    return out


def _side(hyper: pd.DataFrame, filters, option: str) -> np.ndarray:
    """The strata of a disparity's side (the study stage's filter, its refusals)."""
    from dpcounts.studies.stage.selection import StudyDataError, filter_mask

    text = hyper.astype({c: str for c in filters})
    for column in filters:  # a flag (True/False, as a file writes it) matches in any case
        if column in text and set(text[column].str.lower()) <= {"true", "false"}:
            text[column] = text[column].str.lower()
            filters = {**filters, column: tuple(v.lower() for v in filters[column])}
    try:
        return filter_mask(text, filters, option)
    except StudyDataError as error:
        raise ValueError(_plain(error)) from None


def _plain(error) -> str:
    """A study stage's message, said of this command's options (no config key)."""
    text = re.sub(r"config key (studies\.[^.]+\.)?(age\.bands: )?", "", str(error))
    return text.replace("age.standard_population", "--standard").replace(
        "the study's strata", "the release's strata")  # fmt: skip


def standard_path(standard: str) -> Path:
    """The CSV of a standard population: a name of :data:`STANDARDS` (in the checkout's
    ``data/``) or a CSV file."""
    if standard in STANDARDS:
        path = DATA / STANDARDS[standard]
        if not path.exists():
            raise ValueError(f"--standard {standard}: its table {path} is not here (it ships "
                             "in a checkout's data/); give --standard a CSV (age_start, "
                             "age_end, population)")  # fmt: skip
        return path
    path = Path(standard)
    if path.suffix != ".csv" or not path.exists():
        raise ValueError(f"--standard {standard!r}: expected one of {sorted(STANDARDS)} or a "
                         "CSV file with columns age_start, age_end, population")  # fmt: skip
    return path


class _AgeColumn(NamedTuple):
    """What the study stage's age adjustment (:mod:`dpcounts.studies.stage.age`) reads of
    a study, for a release's age key: labels read as ages, no bands given."""

    name: str
    age: str
    standard_population: Path
    age_bands: None = None
    single_years: bool = False
    area: None = None
    disparities: tuple = ()


def _age_weights(folder, hyper, keys, by, age, standard, spec):
    """Each stratum's age band, and each side's standard weights (summing to one over
    the bands it covers), by the study stage's rules (:mod:`dpcounts.studies.stage.age`)."""
    from dpcounts.studies.stage.age import age_adjustment, side_bands
    from dpcounts.studies.stage.selection import StudyDataError

    if age not in keys:
        raise ValueError(f"--age-column {age!r}: not one of the release's keys {list(keys)}")
    if age in by:
        raise ValueError(f"--age-column {age!r} is a column of --by {list(by)}; an age-adjusted "
                         "rate pools a group's ages: leave it out of --by")  # fmt: skip
    definition = _AgeColumn("estimate", age, standard_path(standard))
    strata = hyper.astype({age: str})
    try:
        adjustment = age_adjustment(definition, strata)
    except StudyDataError as error:
        raise ValueError(f"{folder}: --age-column {age} --standard {standard}: "
                         f"{_plain(error)}") from None  # fmt: skip
    weights = adjustment.weights
    if spec is None:
        return adjustment.band, [weights]
    out = []
    for side in ("numerator", "denominator"):
        bands = side_bands(definition, spec, side, strata, adjustment)
        out.append(weights[bands] / weights[bands].sum())
    return adjustment.band, out


def _posterior_draws(manifest, hyper, counts, pieces: Pieces, level, prior_shape, cap,
                     draws, rng) -> dict:  # fmt: skip
    """The posterior of each row's measure by Monte Carlo (module docstring): ``draws``
    joint draws of the pieces' true totals given the sets and the public total."""
    from dpcounts.inference.posterior import joint_draws

    cal = _calibration(manifest, hyper)
    totals = joint_draws(cal, counts.astype(np.int64), pieces.piece, draws, rng, prior_shape,
                         cap)  # fmt: skip
    return from_draws(totals, pieces, level)


def _posterior(manifest, hyper, counts, codes, people, per, level, prior_shape, cap) -> dict:
    """The noise-aware posterior of each group's rate (module docstring), from the
    calibration the folder publishes: exact (one piece a group)."""
    from dpcounts.inference.posterior import group_posteriors, summarise

    cal = _calibration(manifest, hyper)
    laws = group_posteriors(cal, counts.astype(np.int64), codes, prior_shape, cap)
    out = summarise(laws, people, per, level)
    out["df"] = np.full(len(laws), np.nan)
    out["adjusted"] = np.zeros(len(laws), dtype=bool)
    return out


def _calibration(manifest, hyper):
    """The calibration the folder publishes (its manifest and hyperparameters)."""
    from dpcounts.calibration import Calibration
    from dpcounts.mechanisms.registry import family

    mechanism = manifest["mechanism"]
    published = family(mechanism).hyperparameters
    columns = {name: hyper[name].to_numpy() if name in published else None
               for name in ("a", "b", "population", "prior_rate", "lower", "upper")}  # fmt: skip
    truncation = manifest.get("truncation") or {}
    if truncation:  # the bounds' settings, which the posterior's prior reads (its tail)
        columns |= {"tail": truncation.get("tail"), "inflation": truncation["inflation"]}
    return Calibration(mechanism, manifest["method"], manifest["budget"]["epsilon_per_set"],
                       int(manifest["total"]), **columns)  # fmt: skip


def _table(path: Path) -> pd.DataFrame:
    """A public table of the folder (Parquet or CSV, as the manifest names it)."""
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, dtype=str).pipe(_numbers)


def _numbers(frame: pd.DataFrame) -> pd.DataFrame:
    for column in ("set", "count", "population"):
        if column in frame:
            frame[column] = pd.to_numeric(frame[column])
    return frame


__all__ = ["COLUMNS", "DRAWS", "MEASURES", "METHODS", "STANDARDS", "combine", "estimate",
           "standard_path"]  # fmt: skip
