"""The 1980 county frame of the contiguous US and its queen adjacency.

The frame comes from NCOVR's "NAT" file (3,085 counties of the 48 contiguous states and
DC; some of Virginia's independent cities are merged into their counties, so there are
fewer units than the 3,109 of the papers). See ``data/README.md`` for its derivation.

Assumptions stated by the file format (checked on load):

* ``fips`` is a unique five-character string (two-digit state, three-digit county code);
* ``population`` (1980 census count) is a non-negative integer, ``median_age`` (years)
  and ``land_area`` (square miles) are finite and positive;
* the geometry is in a declared CRS (geographic degrees, EPSG:4326, as shipped).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    import scipy.sparse

#: Columns of ``data/counties_1980.parquet`` (besides ``geometry``).
COUNTY_COLUMNS = (
    "fips",
    "state_fips",
    "state",
    "name",
    "population",
    "median_age",
    "land_area",
)

#: Columns of ``data/counties_1980_queen.csv``.
EDGE_COLUMNS = ("fips_a", "fips_b")

#: State FIPS code -> USPS postal abbreviation for the 48 contiguous states and DC.
STATE_POSTAL = {
    "01": "AL", "04": "AZ", "05": "AR", "06": "CA", "08": "CO", "09": "CT", "10": "DE",
    "11": "DC", "12": "FL", "13": "GA", "16": "ID", "17": "IL", "18": "IN", "19": "IA",
    "20": "KS", "21": "KY", "22": "LA", "23": "ME", "24": "MD", "25": "MA", "26": "MI",
    "27": "MN", "28": "MS", "29": "MO", "30": "MT", "31": "NE", "32": "NV", "33": "NH",
    "34": "NJ", "35": "NM", "36": "NY", "37": "NC", "38": "ND", "39": "OH", "40": "OK",
    "41": "OR", "42": "PA", "44": "RI", "45": "SC", "46": "SD", "47": "TN", "48": "TX",
    "49": "UT", "50": "VT", "51": "VA", "53": "WA", "54": "WV", "55": "WI", "56": "WY",
}  # fmt: skip


class DataFileError(ValueError):
    """A shipped or user-supplied data file does not have the expected content."""

    def __init__(self, path: str | os.PathLike, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


def require_columns(frame: pd.DataFrame, columns, path) -> None:
    """Raise :class:`DataFileError` naming ``path`` if any of ``columns`` is missing."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataFileError(
            path, f"missing column(s) {missing}; expected {list(columns)}, got {list(frame)}"
        )


def _refuse_rows(values: pd.Series, bad: pd.Series, column: str, path, must: str, note: str = ""):
    """Raise :class:`DataFileError` naming the first row where ``bad`` holds, if any:
    ``"column '<column>' must <must>; row <i> has <value><note>"``."""
    if bad.any():
        first = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataFileError(
            path, f"column {column!r} must {must}; row {first} has {values.iloc[first]!r}{note}"
        )


def require_counts(values: pd.Series, column: str, path) -> None:
    """Raise unless ``values`` are present, finite and non-negative."""
    numbers = pd.to_numeric(values, errors="coerce")
    bad = numbers.isna() | ~np.isfinite(numbers.astype(float)) | (numbers < 0)
    note = f" ({int(bad.sum())} bad row(s))"
    _refuse_rows(values, bad, column, path, "be a non-negative number", note)


def validate_fips(values: pd.Series, column: str, path, *, unique: bool) -> None:
    """Raise unless every value is a five-digit string (and, if asked, unique)."""
    bad = ~values.astype("string").str.fullmatch(r"\d{5}").fillna(False)
    _refuse_rows(values, bad, column, path, "hold 5-digit FIPS strings")
    if unique and values.duplicated().any():
        dups = sorted(values[values.duplicated()].unique())[:5]
        raise DataFileError(path, f"duplicate FIPS in column {column!r}: {dups}")


def load_counties(path: str | os.PathLike):
    """The 1980 county frame as a GeoDataFrame, one row per county, in file order.

    Columns: ``fips`` (str, 5 digits), ``state_fips`` (str, 2 digits), ``state`` (postal
    abbreviation), ``name``, ``population`` (1980 census, int64), ``median_age`` (years),
    ``land_area`` (square miles), ``geometry`` (simplified boundaries, CRS as stored).
    Raises :class:`DataFileError` naming the file for missing columns, duplicate FIPS,
    missing or negative populations, or a missing CRS.
    """
    import geopandas as gpd  # heavy import, only needed here

    path = Path(path)
    if not path.exists():
        raise DataFileError(path, "file not found")
    frame = gpd.read_parquet(path)
    require_columns(frame, (*COUNTY_COLUMNS, "geometry"), path)
    if frame.crs is None:
        raise DataFileError(path, "geometry has no CRS")
    _check_county_values(frame, path)
    if frame.geometry.isna().any() or frame.geometry.is_empty.any():
        raise DataFileError(path, "some counties have no geometry")
    frame["population"] = frame["population"].astype("int64")
    return frame.reset_index(drop=True)


def _check_county_values(frame: pd.DataFrame, path: Path) -> None:
    """The checks of a county frame's columns (FIPS, populations, median ages, land
    areas), the same for :func:`load_counties` and :func:`load_county_table`."""
    validate_fips(frame["fips"], "fips", path, unique=True)
    require_counts(frame["population"], "population", path)
    for column in ("median_age", "land_area"):
        require_counts(frame[column], column, path)
        if (frame[column] <= 0).any():
            raise DataFileError(path, f"column {column!r} must be positive")


def load_county_table(path: str | os.PathLike) -> pd.DataFrame:
    """The county frame without its geometry: a pandas DataFrame of the columns
    :data:`COUNTY_COLUMNS`, one row per county, in file order, checked as
    :func:`load_counties` checks them (FIPS, populations, median ages, land areas).

    For jobs that need the counties' FIPS codes, states or populations but not their
    boundaries (Study 1's scenarios): it reads no geometry and needs no geopandas, whose
    import and reading take about half a second. The values are those of
    :func:`load_counties`.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise DataFileError(path, "file not found")
    names = pq.read_schema(path).names
    require_columns(pd.DataFrame(columns=names), (*COUNTY_COLUMNS, "geometry"), path)
    frame = pd.read_parquet(path, columns=list(COUNTY_COLUMNS))
    _check_county_values(frame, path)
    frame["population"] = frame["population"].astype("int64")
    return frame.reset_index(drop=True)


def load_queen_edges(path: str | os.PathLike) -> pd.DataFrame:
    """Queen-contiguity edges as a DataFrame ``fips_a, fips_b`` (strings), each pair once.

    Pairs are stored with ``fips_a < fips_b``. Raises :class:`DataFileError` naming the file
    for missing columns, malformed FIPS, self-loops or repeated pairs.
    """
    path = Path(path)
    if not path.exists():
        raise DataFileError(path, "file not found")
    edges = pd.read_csv(path, dtype=str, keep_default_na=False)
    require_columns(edges, EDGE_COLUMNS, path)
    for column in EDGE_COLUMNS:
        validate_fips(edges[column], column, path, unique=False)
    if (edges["fips_a"] == edges["fips_b"]).any():
        raise DataFileError(path, "an edge joins a county to itself")
    ordered = pd.DataFrame(
        {
            "fips_a": np.minimum(edges["fips_a"], edges["fips_b"]),
            "fips_b": np.maximum(edges["fips_a"], edges["fips_b"]),
        }
    )
    if ordered.duplicated().any():
        first = int(np.flatnonzero(ordered.duplicated().to_numpy())[0])
        raise DataFileError(path, f"pair on data row {first + 1} appears more than once")
    return ordered[list(EDGE_COLUMNS)].reset_index(drop=True)


def queen_adjacency(edges: pd.DataFrame, fips) -> scipy.sparse.csr_matrix:
    """Symmetric 0/1 adjacency matrix (CSR, int8) in the row order of ``fips``.

    ``fips`` is the frame's FIPS column (e.g. ``load_counties(...)["fips"]``); every FIPS
    named by an edge must be in it, otherwise a ``KeyError`` names the unknown codes.
    """
    import scipy.sparse  # imported here: the jobs that only read counties do not need it

    index = pd.Index(pd.Series(fips, dtype=str))
    if not index.is_unique:
        raise ValueError("fips must be unique to index an adjacency matrix")
    rows = index.get_indexer(edges["fips_a"])
    cols = index.get_indexer(edges["fips_b"])
    unknown = sorted(set(edges["fips_a"][rows < 0]).union(edges["fips_b"][cols < 0]))
    if unknown:
        raise KeyError(f"edges name FIPS codes not in the frame: {unknown[:5]}")
    n = len(index)
    data = np.ones(2 * len(rows), dtype=np.int8)
    matrix = scipy.sparse.coo_matrix(
        (data, (np.concatenate([rows, cols]), np.concatenate([cols, rows]))), shape=(n, n)
    )
    return matrix.tocsr()
