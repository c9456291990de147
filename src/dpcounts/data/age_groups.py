"""Modelled 1980 county populations by age group.

No county-by-age table of 1980 can be shipped here, so the county age-group sizes are
**modelled** from two real inputs: the national 1980 population by 5-year age group
(IPUMS USA via npm ``vega-datasets``) and each county's population and median age
(NCOVR NAT's ``PO80`` and ``MA80``). The model, in three steps:

1. **Tilt.** County ``c`` gets the national age distribution ``p_a`` tilted by one
   parameter: ``p_a(theta_c) ∝ p_a * exp(theta_c * (m_a - 40) / 10)``, with ``m_a`` the
   midpoint of 5-year group ``a`` (the open top group 90+ is taken as 90-99). Ages are
   uniform within a group, so the median is found by linear interpolation, and it
   increases with ``theta``; ``theta_c`` is solved so that the modelled median equals
   the county's median age.
2. **Scale** each county's distribution to its 1980 population.
3. **Rake** (iterative proportional fitting) the county x group table so that the county
   totals stay equal to the 1980 populations and the group totals equal the national age
   distribution scaled to the frame's total population. The frame (contiguous US) holds
   a little less than the national total, so it is the national *shares* that are
   matched, not the national counts. Raking moves the modelled medians slightly away from
   the census medians; ``data/README.md`` reports by how much.

Every population this module produces is modelled, not observed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.data.counties import DataFileError, require_columns, require_counts, validate_fips

#: Width assumed for the open top group (90+) when interpolating medians and midpoints.
OPEN_GROUP_WIDTH = 10


def age_bounds(label: str) -> tuple[int, int | None]:
    """(first age, first age past the group; None = open) of an age-group label:
    ``<1`` (0, 1), ``35-44`` (35, 45) or ``85+`` (85, None). The one reading of the
    labels of every table of age groups."""
    match = re.fullmatch(r"<(\d+)|(\d+)-(\d+)|(\d+)\+", label)
    if match is None:
        raise ValueError(f"age group {label!r}: expected a label such as '<1', '35-44' or '85+'")
    below, first, last, open_from = match.groups()
    if below is not None:
        return 0, int(below)
    if open_from is not None:
        return int(open_from), None
    return int(first), int(last) + 1


#: Shipped age groups: name -> (first age, first age past the group; None = open).
#: 35-44 is Study 1's group, 45-54 ... 85+ those of the paper's Appendix C, and 35+ the
#: population of the urban/rural rule (urban = modelled 35+ population over 50,000).
AGE_GROUPS: dict[str, tuple[int, int | None]] = {
    label: age_bounds(label)
    for label in ("35-44", "45-54", "55-64", "65-74", "75-84", "85+", "35+")
}

#: Columns of ``data/county_age_groups_1980.parquet``.
AGE_GROUP_COLUMNS = ("fips", "age_group", "population_modelled")

#: Tilt parameters outside this range give medians beyond any real county's.
TILT_BOUNDS = (-20.0, 20.0)


def read_national_population(path: str | os.PathLike, year: int = 1980) -> pd.DataFrame:
    """National population of ``year`` by 5-year group from vega-datasets' population.json.

    Returns columns ``age_start`` (0, 5, ..., 90) and ``population`` (both sexes), sorted.
    """
    path = Path(path)
    raw = pd.read_json(path)
    require_columns(raw, ("year", "age", "sex", "people"), path)
    rows = raw[raw["year"] == year]
    if rows.empty:
        raise DataFileError(path, f"no rows for year {year}")
    table = rows.groupby("age", sort=True)["people"].sum()
    expected = np.arange(0, 95, 5)
    if not np.array_equal(table.index.to_numpy(), expected):
        raise DataFileError(path, f"expected 5-year groups 0..90, got {list(table.index)}")
    return pd.DataFrame({"age_start": expected, "population": table.to_numpy(dtype=float)})


def group_edges(age_start) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper age edges of contiguous groups; the last (open) one gets
    :data:`OPEN_GROUP_WIDTH` years."""
    lower = np.asarray(age_start, dtype=float)
    upper = np.append(lower[1:], lower[-1] + OPEN_GROUP_WIDTH)
    return lower, upper


def grouped_median(counts, lower, upper) -> float:
    """Median age of grouped counts, ages uniform within each group."""
    counts = np.asarray(counts, dtype=float)
    cumulative = np.cumsum(counts)
    half = cumulative[-1] / 2
    k = int(np.searchsorted(cumulative, half))
    below = cumulative[k] - counts[k]
    return float(lower[k] + (half - below) / counts[k] * (upper[k] - lower[k]))


def tilted_shares(shares, lower, upper, theta: float) -> np.ndarray:
    """``shares * exp(theta * (midpoint - 40) / 10)``, normalised to sum to one."""
    midpoint = (np.asarray(lower) + np.asarray(upper)) / 2
    log_weights = np.log(shares) + theta * (midpoint - 40.0) / 10.0
    weights = np.exp(log_weights - log_weights.max())  # stable for large |theta|
    return weights / weights.sum()


def solve_tilt(shares, lower, upper, median_age: float) -> float:
    """The tilt ``theta`` whose tilted distribution has median ``median_age``.

    Raises ``ValueError`` if the median is outside what :data:`TILT_BOUNDS` can reach.
    """
    from scipy.optimize import brentq  # imported here: keeps a job's start-up short

    def gap(theta):
        return grouped_median(tilted_shares(shares, lower, upper, theta), lower, upper) - median_age

    low, high = TILT_BOUNDS
    if gap(low) > 0 or gap(high) < 0:
        raise ValueError(f"median age {median_age} cannot be reached by a tilt in {TILT_BOUNDS}")
    return brentq(gap, low, high, xtol=1e-12)


def rake(table, row_totals, column_totals, *, tol: float = 1e-10, max_iter: int = 1000):
    """Iterative proportional fitting of a positive table to consistent margins."""
    table = np.array(table, dtype=float)
    row_totals = np.asarray(row_totals, dtype=float)
    column_totals = np.asarray(column_totals, dtype=float)
    if not np.isclose(row_totals.sum(), column_totals.sum(), rtol=1e-12):
        raise ValueError("row and column totals must have the same sum")
    for _ in range(max_iter):
        table *= (column_totals / table.sum(axis=0))[None, :]
        row_sums = table.sum(axis=1)
        scale = np.divide(row_totals, row_sums, out=np.zeros_like(row_sums), where=row_sums > 0)
        table *= scale[:, None]
        if np.allclose(table.sum(axis=0), column_totals, rtol=tol, atol=0):
            return table
    raise RuntimeError(f"raking did not converge in {max_iter} iterations")


def model_county_age_counts(national: pd.DataFrame, populations, median_ages) -> np.ndarray:
    """Modelled county x 5-year-group populations (rows follow ``populations``).

    ``national`` is :func:`read_national_population`'s frame. County totals equal
    ``populations``; group totals equal the national shares times ``sum(populations)``.
    """
    lower, upper = group_edges(national["age_start"])
    shares = national["population"].to_numpy(dtype=float)
    shares = shares / shares.sum()
    populations = np.asarray(populations, dtype=float)
    tilted = np.vstack(
        [
            tilted_shares(shares, lower, upper, solve_tilt(shares, lower, upper, m))
            for m in median_ages
        ]
    )
    table = tilted * populations[:, None]
    return rake(table, populations, shares * populations.sum())


def aggregate_age_groups(counts, age_start, groups=AGE_GROUPS) -> dict[str, np.ndarray]:
    """Sum the 5-year columns of ``counts`` into the named ``groups``.

    Each group's bounds must fall on 5-year edges; ``None`` as the upper bound means open.
    """
    counts = np.asarray(counts, dtype=float)
    age_start = np.asarray(age_start)
    out = {}
    for name, (first, past) in groups.items():
        if first not in age_start or (past is not None and past not in age_start):
            raise ValueError(f"group {name} does not fall on the 5-year edges {list(age_start)}")
        columns = (age_start >= first) & (True if past is None else age_start < past)
        out[name] = counts[:, columns].sum(axis=1)
    return out


def age_group_frame(fips, grouped: dict[str, np.ndarray]) -> pd.DataFrame:
    """Long frame ``fips, age_group, population_modelled`` (sorted by fips, then group)."""
    fips = np.asarray(fips, dtype=str)
    frames = [
        pd.DataFrame({"fips": fips, "age_group": name, "population_modelled": values})
        for name, values in grouped.items()
    ]
    frame = pd.concat(frames, ignore_index=True)
    order = {name: i for i, name in enumerate(grouped)}
    frame = frame.sort_values(
        ["fips", "age_group"], key=lambda s: s.map(order) if s.name == "age_group" else s
    )
    return frame.reset_index(drop=True)


def load_age_groups(path: str | os.PathLike) -> pd.DataFrame:
    """The modelled county age-group populations, long format.

    Columns: ``fips`` (str), ``age_group`` (one of :data:`AGE_GROUPS`), and
    ``population_modelled`` (float; modelled, see the module docstring). Raises
    :class:`~dpcounts.data.counties.DataFileError` naming the file for missing columns,
    unknown groups, repeated (fips, age_group) pairs or missing/negative populations.
    """
    path = Path(path)
    if not path.exists():
        raise DataFileError(path, "file not found")
    frame = pd.read_parquet(path)
    require_columns(frame, AGE_GROUP_COLUMNS, path)
    validate_fips(frame["fips"], "fips", path, unique=False)
    unknown = sorted(set(frame["age_group"]) - set(AGE_GROUPS))
    if unknown:
        raise DataFileError(path, f"unknown age_group(s) {unknown}; expected {list(AGE_GROUPS)}")
    if frame.duplicated(["fips", "age_group"]).any():
        raise DataFileError(path, "duplicate (fips, age_group) rows")
    require_counts(frame["population_modelled"], "population_modelled", path)
    return frame.reset_index(drop=True)


def group_population(frame: pd.DataFrame, age_group: str, fips=None) -> pd.Series:
    """One age group's modelled populations (from :func:`load_age_groups`), indexed by
    FIPS; in the order of ``fips`` when given (a KeyError names any FIPS without one)."""
    if age_group not in AGE_GROUPS:
        raise ValueError(f"unknown age group {age_group!r}; expected one of {list(AGE_GROUPS)}")
    population = frame.loc[frame["age_group"] == age_group].set_index("fips")
    population = population["population_modelled"]
    return population if fips is None else population.loc[list(fips)]


def age_group_wide(frame: pd.DataFrame) -> pd.DataFrame:
    """Wide view: one row per fips (sorted), one column per age group (modelled)."""
    wide = frame.pivot(index="fips", columns="age_group", values="population_modelled")
    return wide[[g for g in AGE_GROUPS if g in wide.columns]]
