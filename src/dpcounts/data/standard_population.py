"""The US 2000 standard population and its weights for direct age adjustment.

The shipped table (``data/us_standard_population_2000.csv``) has the 19 age groups of the
2000 US standard population (Census P25-1130 projection, as published by NCHS and SEER):
``age_start`` (first age), ``age_end`` (last age, empty for 85+) and ``population``.
Its total, 274,633,642, is the 274,634,000 of NCHS's table rounded to thousands.

Weights for any set of bands whose edges fall on the table's edges come from
:func:`standard_weights`; :class:`dpcounts.studies.stage.rates.GroupRates` applies them (the one
implementation of direct age adjustment).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.data.counties import DataFileError, require_columns, require_counts

STANDARD_COLUMNS = ("age_start", "age_end", "population")


def load_standard_population(path: str | os.PathLike) -> pd.DataFrame:
    """The standard population table, rows sorted by ``age_start``.

    ``age_end`` is the last age of the group (inclusive) and is missing only for the open
    top group. Raises :class:`~dpcounts.data.counties.DataFileError` naming the file for
    missing columns, gaps or overlaps between groups, or missing/negative populations.
    """
    path = Path(path)
    if not path.exists():
        raise DataFileError(path, "file not found")
    table = pd.read_csv(path, dtype={"age_start": "Int64", "age_end": "Int64"})
    require_columns(table, STANDARD_COLUMNS, path)
    require_counts(table["population"], "population", path)
    table = table.sort_values("age_start").reset_index(drop=True)
    if table["age_start"].isna().any() or table["age_start"].iloc[0] != 0:
        raise DataFileError(path, "age_start must be present and start at 0")
    if table["age_end"].iloc[:-1].isna().any():
        raise DataFileError(path, "only the last group may be open (empty age_end)")
    follows = table["age_start"].iloc[1:].to_numpy() == table["age_end"].iloc[:-1].to_numpy() + 1
    if not follows.all():
        first = int(np.flatnonzero(~follows)[0]) + 1
        raise DataFileError(path, f"group starting at {table['age_start'].iloc[first]} leaves "
                            "a gap or overlaps the previous one")  # fmt: skip
    table["population"] = table["population"].astype("int64")
    return table


def standard_weights(table: pd.DataFrame, bands: Mapping[str, tuple[int, int | None]]) -> pd.Series:
    """Standard-population weights of ``bands`` (name -> (first age, first age past; None =
    open)), summing to one over the bands given.

    Each band's edges must be edges of the table, e.g. pennLC's
    ``{"Under.40": (0, 40), "40.59": (40, 60), "60.69": (60, 70), "70+": (70, None)}``.
    Bands need not cover all ages; the weights are normalised over the ages they cover.
    """
    starts = table["age_start"].to_numpy(dtype=int)
    totals = {}
    for name, (first, past) in bands.items():
        if first not in starts or (past is not None and past not in starts):
            raise ValueError(f"band {name!r} = ({first}, {past}) does not fall on the table's "
                             f"group edges {list(starts)}")  # fmt: skip
        rows = (starts >= first) & (starts < past if past is not None else True)
        totals[name] = float(table.loc[rows, "population"].sum())
    weights = pd.Series(totals, name="weight")
    return weights / weights.sum()
