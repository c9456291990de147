"""What a study's config selects in its data: the rows and strata its filters name,
matched as text, in natural order, and the one error of data that do not hold what the
config names (:class:`StudyDataError`, naming the config key, the value and what the data
holds). Shared by the table's reading (:mod:`.table`) and the age adjustment
(:mod:`.age`), which both stand on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

#: Values of a column named in a message before it says "and N more".
SHOWN = 8


class StudyDataError(ValueError):
    """The data do not hold what a study's definition names."""


def natural_key(text: str) -> tuple:
    """Sort key of a value in messages: its numbers as numbers (``'9'`` before ``'10'``,
    ``'age 9'`` before ``'age 10'``), the rest as text; ties (``'01'``, ``'1'``) by the text."""
    parts = [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text) if t]
    return (*parts, (2, 0, text))


def levels(values: pd.Series) -> str:
    levels = sorted(values.astype(str).unique(), key=natural_key)
    text = ", ".join(repr(v) for v in levels[:SHOWN])
    return text + (f" and {len(levels) - SHOWN} more" if len(levels) > SHOWN else "")


def matching(frame: pd.DataFrame, column: str, wanted, key: str, holder: str) -> np.ndarray:
    """Rows whose ``column`` takes one of ``wanted``; ``key`` (the config entry) and
    ``holder`` (what holds the column) name the problem when the column or a value is
    absent."""
    if column not in frame.columns:
        raise StudyDataError(
            f"config key {key}.{column}: no column {column!r} in {holder}; "
            f"columns are {list(frame.columns)}"
        )
    values = frame[column].astype(str)
    absent = [v for v in wanted if not (values == v).any()]
    if absent:
        raise StudyDataError(
            f"config key {key}.{column}: value(s) {absent} not in {holder}; "
            f"{column!r} holds {levels(frame[column])}"
        )
    return values.isin(wanted).to_numpy()


def filter_mask(
    strata: pd.DataFrame, filters: Mapping[str, tuple[str, ...]], key: str
) -> np.ndarray:
    """Strata whose columns take one of the given values; ``key`` names the config entry
    in errors (a column that is not a key or attribute, a value not in the data, or no
    stratum left)."""
    mask = np.ones(len(strata), dtype=bool)
    for column, wanted in filters.items():
        if column not in strata.columns:
            raise StudyDataError(
                f"config key {key}.{column}: no column {column!r} in the study's strata; "
                f"columns are {list(strata.columns)}; expected a key or an attribute (list a "
                "public column of the table under the study's attributes to filter on it)"
            )
        mask &= matching(strata, column, wanted, key, "the study's strata")
    if not mask.any():
        raise StudyDataError(f"config key {key}: no stratum matches {dict(filters)}")
    return mask


def parse_age_band(label: str) -> tuple[int, int | None]:
    """Ages of a band label: ``"45-54"`` and ``"40.59"`` -> (45, 55) and (40, 60),
    ``"85+"`` -> (85, None), ``"Under.40"`` or ``"< 1 year"`` -> (0, 40) and (0, 1)."""
    numbers = [int(n) for n in re.findall(r"\d+", label)]
    lowered = label.strip().lower()
    if len(numbers) == 1 and (lowered.startswith(("under", "<")) or "under" in lowered):
        return 0, numbers[0]
    if len(numbers) == 1 and "+" in label:
        return numbers[0], None
    if len(numbers) == 2 and numbers[0] <= numbers[1]:
        return numbers[0], numbers[1] + 1
    raise ValueError(f"cannot read age band {label!r}")
