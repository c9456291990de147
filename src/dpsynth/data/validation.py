"""Reading and checking strata (count + population per key) before any mechanism sees
them: :func:`read_table` and :func:`validate_strata`, shared by ``dpsynth synthesize``
(:mod:`dpsynth.release.inputs`) and the study stage (:mod:`dpsynth.study.table`).

Every failure raises ``ValueError`` whose message starts with the data's source (a file
name or a description), names the offending keys (the first few when there are many)
and says what was expected. Checks run in a fixed order and the first failing one
raises, so a message is about one problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

#: How many offending keys a message lists before it says "and N more".
SHOWN = 5
#: Largest count accepted: every integer up to 2^53 is exact in a float64.
MAX_COUNT = 2**53


def _describe(frame: pd.DataFrame, mask: pd.Series, keys: Sequence[str]) -> str:
    """``"fips='01001', fips='01003' and 2 more"`` for the rows where ``mask`` holds."""
    rows = frame.loc[mask.to_numpy(), list(keys)]
    shown = [
        ", ".join(f"{key}={value!r}" for key, value in zip(keys, row, strict=True))
        for row in rows.head(SHOWN).itertuples(index=False)
    ]
    text = "; ".join(f"({item})" if len(keys) > 1 else item for item in shown)
    if len(rows) > SHOWN:
        text += f" and {len(rows) - SHOWN} more"
    return text


def _refuse(
    frame: pd.DataFrame,
    mask: pd.Series,
    keys: Sequence[str],
    source: str,
    problem: str,
    expected: str,
) -> None:
    """Raise ``"<source>: <problem> <the rows where mask holds>; <expected>"`` if any does."""
    if mask.any():
        raise ValueError(f"{source}: {problem} {_describe(frame, mask, keys)}; {expected}")


def _require_columns(frame: pd.DataFrame, columns: Sequence[str], source: str) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{source}: missing column(s) {missing}; expected columns {list(columns)}, "
            f"found {list(frame.columns)}"
        )


def _as_float(frame: pd.DataFrame, column: str, keys: Sequence[str], source: str) -> pd.Series:
    """The column as floats (NaN for missing); a non-numeric entry is an error."""
    values = pd.to_numeric(frame[column], errors="coerce").astype(float)
    bad = values.isna() & frame[column].notna()
    _refuse(frame, bad, keys, source, f"column {column!r} is not numeric at", "expected numbers")
    return values


def validate_strata(
    frame: pd.DataFrame,
    *,
    count: str = "count",
    population: str = "population",
    keys: Sequence[str] = ("fips",),
    source: str = "strata",
) -> pd.DataFrame:
    """Check strata and return ``frame`` unchanged when they are fit for a mechanism.

    Expected: the columns ``keys``, ``count`` and ``population`` exist; at least one row;
    counts present, finite, whole, non-negative and at most 2^53; populations present,
    finite and positive; no count above its population; each key
    combination appears once; counts sum to a positive total (the mechanisms condition
    on the total y., which must not be zero).
    """
    keys = list(keys)
    _require_columns(frame, [*keys, count, population], source)
    if frame.empty:
        raise ValueError(f"{source}: no strata; expected at least one row")

    missing_key = frame[keys].isna().any(axis=1)
    if missing_key.any():
        raise ValueError(
            f"{source}: {int(missing_key.sum())} row(s) with a missing key "
            f"(row positions {np.flatnonzero(missing_key.to_numpy())[:SHOWN].tolist()}); "
            f"expected every row to have {keys}"
        )

    counts = _as_float(frame, count, keys, source)

    def refuse(mask, problem, expected):
        _refuse(frame, mask, keys, source, problem, expected)

    refuse(
        counts.isna(),
        f"missing {count!r} at",
        "expected a count for every stratum (suppressed cells must be resolved first)",
    )
    refuse(~np.isfinite(counts), f"infinite {count!r} at", "expected whole numbers of events")
    refuse(
        counts.abs() > MAX_COUNT,
        f"{count!r} beyond 2^53 at",
        "expected counts that a float64 holds exactly",
    )
    refuse(
        counts != np.round(counts),
        f"non-integer {count!r} at",
        "expected whole numbers of events (fractional counts, as some public tables "
        "allocate cases, must be rounded by the data steward first)",
    )
    refuse(counts < 0, f"negative {count!r} at", "expected counts >= 0")

    populations = _as_float(frame, population, keys, source)
    refuse(
        populations.isna(),
        f"missing {population!r} at",
        "expected a population for every stratum",
    )
    refuse(populations <= 0, f"{population!r} <= 0 at", "expected populations > 0")
    refuse(~np.isfinite(populations), f"infinite {population!r} at", "expected finite populations")
    refuse(
        counts > populations,
        f"{count!r} above {population!r} at",
        "expected at most one event per person (count <= population)",
    )
    refuse(
        frame.duplicated(subset=keys, keep=False),
        "duplicate key(s)",
        f"expected each {keys} to appear once",
    )

    if counts.sum() == 0:
        raise ValueError(
            f"{source}: the counts in {count!r} sum to 0 over {len(frame)} strata; "
            "expected a positive total"
        )
    return frame


def read_table(path: Path) -> pd.DataFrame:
    """A CSV (``.csv``, ``.csv.gz``, ``.txt``) or Parquet (``.parquet``, ``.pq``) file.

    CSV columns are read as text (so codes such as FIPS ``01001`` keep their leading
    zeros); value columns are converted and checked later. The one reader of a table of
    strata: ``dpsynth synthesize`` (its input and ``--prior`` file) and the study stage
    (``studies.<name>.table`` and ``prior.path``) both read through it. A missing,
    unreadable or unknown file raises ``ValueError`` naming the path.
    """
    if not path.is_file():
        raise ValueError(f"{path}: file not found; expected a CSV or Parquet file of strata")
    name = path.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        if name.endswith((".csv", ".csv.gz", ".txt")):
            return pd.read_csv(path, dtype=str, skipinitialspace=True)
    except (ValueError, OSError) as err:  # pyarrow and the CSV parser raise these
        raise ValueError(f"{path}: could not be read ({err})") from err
    raise ValueError(
        f"{path}: unknown file type; expected .csv, .csv.gz, .txt, .parquet or .pq "
        "(or a CDC WONDER export with --wonder)"
    )
