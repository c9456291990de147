"""Pennsylvania lung-cancer strata (``pennLC``) and the state's county map.

``pennLC`` (R packages SpatialEpi and RgoogleMaps) holds 2002 lung-cancer cases and 2000
census populations for the 67 counties of Pennsylvania, by race (``w`` white, ``o``
other), sex (``f``, ``m``) and four age bands (``Under.40``, ``40.59``, ``60.69``,
``70+``): 67 x 2 x 2 x 4 = 1,072 strata. Labels are kept exactly as in pennLC.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.data.counties import DataFileError, require_columns, require_counts, validate_fips
from dpcounts.units import PER_100K

#: pennLC's age bands -> (first age, first age past the band; None = open).
PENNLC_AGE_BANDS: dict[str, tuple[int, int | None]] = {
    "Under.40": (0, 40),
    "40.59": (40, 60),
    "60.69": (60, 70),
    "70+": (70, None),
}
RACES = ("w", "o")
SEXES = ("f", "m")

#: Columns of ``data/pennlc_strata.parquet``.
STRATA_COLUMNS = ("county", "race", "sex", "age", "cases", "population")
#: Columns of ``data/pennsylvania_counties.parquet`` (besides ``geometry``).
PA_COUNTY_COLUMNS = ("county", "fips", "name", "land_area", "smoking")


def pennlc_strata_frame(data: pd.DataFrame) -> pd.DataFrame:
    """Tidy strata from pennLC's ``data`` table: renames ``gender`` to ``sex``, orders the
    categories (age bands young to old), sorts by county, race, sex, age."""
    frame = pd.DataFrame(
        {
            "county": data["county"].astype(str),
            "race": pd.Categorical(data["race"].astype(str), categories=RACES),
            "sex": pd.Categorical(data["gender"].astype(str), categories=SEXES),
            "age": pd.Categorical(
                data["age"].astype(str), categories=list(PENNLC_AGE_BANDS), ordered=True
            ),
            "cases": data["cases"].astype("int64"),
            "population": data["population"].astype("int64"),
        }
    )
    return frame.sort_values(["county", "race", "sex", "age"]).reset_index(drop=True)


def load_pennlc(path: str | os.PathLike) -> pd.DataFrame:
    """The 1,072 pennLC strata: ``county, race, sex, age, cases, population``.

    ``race``, ``sex`` and ``age`` are categoricals with pennLC's labels (``age`` ordered).
    Raises :class:`~dpcounts.data.counties.DataFileError` naming the file for missing
    columns, unknown labels, repeated strata or missing/negative counts.
    """
    path = Path(path)
    if not path.exists():
        raise DataFileError(path, "file not found")
    frame = pd.read_parquet(path)
    require_columns(frame, STRATA_COLUMNS, path)
    for column, labels in (("race", RACES), ("sex", SEXES), ("age", tuple(PENNLC_AGE_BANDS))):
        unknown = sorted(set(frame[column].astype(str)) - set(labels))
        if unknown:
            raise DataFileError(path, f"column {column!r} has unknown labels {unknown}")
    if frame.duplicated(["county", "race", "sex", "age"]).any():
        raise DataFileError(path, "duplicate (county, race, sex, age) strata")
    for column in ("cases", "population"):
        require_counts(frame[column], column, path)
    if (frame["cases"] > frame["population"]).any():
        raise DataFileError(path, "some strata have more cases than population")
    frame["race"] = pd.Categorical(frame["race"].astype(str), categories=RACES)
    frame["sex"] = pd.Categorical(frame["sex"].astype(str), categories=SEXES)
    frame["age"] = pd.Categorical(
        frame["age"].astype(str), categories=list(PENNLC_AGE_BANDS), ordered=True
    )
    return frame.reset_index(drop=True)


def load_pennsylvania_counties(path: str | os.PathLike):
    """Pennsylvania's 67 counties as a GeoDataFrame.

    Columns: ``county`` (pennLC's lower-case key), ``fips``, ``name``, ``land_area``
    (square miles, 1980, from the NAT frame), ``smoking`` (pennLC's county smoking
    proportion), ``geometry`` (pennLC's ``spatial.polygon``, longitude/latitude).
    """
    import geopandas as gpd

    path = Path(path)
    if not path.exists():
        raise DataFileError(path, "file not found")
    frame = gpd.read_parquet(path)
    require_columns(frame, (*PA_COUNTY_COLUMNS, "geometry"), path)
    validate_fips(frame["fips"], "fips", path, unique=True)
    if frame["county"].duplicated().any():
        raise DataFileError(path, "duplicate county names")
    require_counts(frame["land_area"], "land_area", path)
    if frame.crs is None:
        raise DataFileError(path, "geometry has no CRS")
    return frame.reset_index(drop=True)


def county_crude_rates(strata: pd.DataFrame, per: float = PER_100K) -> pd.DataFrame:
    """Per county: total ``cases``, ``population`` and crude ``rate`` per ``per`` people."""
    totals = strata.groupby("county", observed=True, sort=True)[["cases", "population"]].sum()
    totals["rate"] = totals["cases"] / totals["population"] * per
    return totals.reset_index()


def polygon_rings(spatial_polygons) -> tuple[list[str], list[list[np.ndarray]]]:
    """IDs and rings of an R ``SpatialPolygons`` object as read by ``rdata``.

    Holes are not expected (pennLC has none) and raise ``ValueError`` if met.
    """
    ids, rings = [], []
    for polygons in spatial_polygons.polygons:
        ids.append(str(np.asarray(polygons.ID).item()))
        parts = []
        for part in polygons.Polygons:
            if bool(np.asarray(part.hole).item()):
                raise ValueError(f"county {ids[-1]} has a hole; not supported")
            parts.append(np.asarray(part.coords, dtype=float))
        rings.append(parts)
    return ids, rings
