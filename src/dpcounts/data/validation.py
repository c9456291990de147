"""Reading and checking strata (count + population per key) before any mechanism sees
them: :func:`read_table` and :func:`validate_strata`, shared by ``dpcounts synthesize``
(:mod:`dpcounts.release.inputs`) and the study stage (:mod:`dpcounts.studies.stage.table`).

Every failure raises ``ValueError`` whose message starts with the data's source (a file
name or a description), names the offending keys (the first few when there are many)
and says what was expected. Checks run in a fixed order and the first failing one
raises, so a message is about one problem.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

#: How many offending keys a message lists before it says "and N more".
SHOWN = 5
#: How many rows a message about empty cells lists.
SHOWN_ROWS = 8
#: Largest count accepted: every integer up to 2^53 is exact in a float64.
MAX_COUNT = 2**53
#: File names read as CSV (the rest are Parquet).
CSV_SUFFIXES = (".csv", ".csv.gz", ".txt")
#: Spreadsheets, refused with a hint: dpcounts reads no workbook (which sheet, which cells,
#: dates and numbers as the program shows them).
SPREADSHEET_SUFFIXES = (".xlsx", ".xlsm", ".xls", ".ods")
#: The first bytes of a spreadsheet saved under another name: a zip (.xlsx, .ods) or an
#: OLE2 compound file (.xls).
SPREADSHEET_MAGIC = (b"PK\x03\x04", b"\xd0\xcf\x11\xe0")
#: The delimiters a CSV's first kilobyte is sniffed for (a semicolon where the decimal
#: separator is a comma, a tab, a bar); the comma when the header line holds one.
DELIMITERS = ",;\t|"


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


def describe_duplicates(frame: pd.DataFrame, keys: Sequence[str]) -> str:
    """``"fips='01001' (3 rows); fips='01009' (2 rows)"``: each key that more than one row
    holds, once, with its number of rows, in the order of first appearance."""
    keys = list(keys)
    repeated = frame.loc[frame.duplicated(subset=keys, keep=False), keys]
    sizes = repeated.groupby(keys, sort=False, dropna=False).size()
    shown = []
    for key, rows in sizes.head(SHOWN).items():
        values = key if isinstance(key, tuple) else (key,)
        item = ", ".join(f"{name}={value!r}" for name, value in zip(keys, values, strict=True))
        shown.append(f"({item}) ({rows} rows)" if len(keys) > 1 else f"{item} ({rows} rows)")
    text = "; ".join(shown)
    if len(sizes) > SHOWN:
        text += f" and {len(sizes) - SHOWN} more"
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
    """The column as floats (NaN for missing); a non-numeric entry (text such as ``NA``,
    which is read as text, not as missing) is an error naming the strata, and the value
    only when it holds no digit (``NA``, ``*``): one with digits (``3,08``) may be a
    confidential count written oddly, so it is not repeated."""
    values = pd.to_numeric(frame[column], errors="coerce").astype(float)
    bad = values.isna() & frame[column].notna()
    if bad.any():
        first = str(frame.loc[bad.to_numpy(), column].iloc[0])
        shown = (
            f"first value {first!r}"
            if not any(c.isdigit() for c in first)
            else "a value with digits, not shown: it may be a count"
        )
        raise ValueError(
            f"{source}: column {column!r} is not numeric at {_describe(frame, bad, keys)} "
            f"({shown}); expected numbers (an empty cell is a missing value, "
            "text such as 'NA' is not)"
        )
    return values


def refuse_empty_cells(
    frame: pd.DataFrame, columns: Sequence[str], source: str, *, lines: bool
) -> None:
    """Raise ``ValueError`` if a cell of ``columns`` is missing (an empty cell of a CSV),
    naming the column and its first rows: file lines when ``lines`` (the frame's index
    counts a CSV's data rows from 0, as :func:`read_table` reads them), else row numbers
    from 1."""
    for column in columns:
        missing = frame[column].isna().to_numpy()
        if not missing.any():
            continue
        index = frame.index if pd.api.types.is_integer_dtype(frame.index) else range(len(frame))
        index = np.asarray(index, dtype=np.int64)[missing][:SHOWN_ROWS]
        numbers = ", ".join(str(n) for n in index + (2 if lines else 1))
        more = f" and {int(missing.sum()) - SHOWN_ROWS} more" if missing.sum() > SHOWN_ROWS else ""
        where = "line(s)" if lines else "row(s)"
        raise ValueError(
            f"{source}: column {column!r} is empty at {where} {numbers}{more}; expected a "
            "value in every row of a key or attribute column (text such as 'NA' or 'None' "
            "is kept as text; only an empty cell is missing)"
        )


def _key_kind(column: pd.Series) -> str:
    """How :func:`key_order` compares a key column: ``number``, ``category``, ``text as
    number`` or ``text``."""
    return _key_codes(column)[0]


def _key_codes(column: pd.Series) -> tuple[str, np.ndarray]:
    """(the column's kind, as :func:`_key_kind` names it, and an integer code per row
    whose order is :func:`key_positions`' order of the values: equal values, equal codes).

    The text of a column is parsed as numbers once per distinct value, not per row; a
    column pyarrow holds is encoded once however often it is coded
    (:func:`dpcounts.encoding.factorize`).
    """
    if isinstance(column.dtype, pd.CategoricalDtype):
        return "category", np.asarray(column.cat.codes, dtype=np.int64)
    if pd.api.types.is_numeric_dtype(column):
        codes, uniques = pd.factorize(column, sort=True)  # missing values: code -1, last
        return "number", np.where(codes < 0, len(uniques), codes).astype(np.int64)
    from dpcounts.encoding import factorize

    # a text column is its own text (the same array, whose codes are shared)
    text = column if isinstance(column.dtype, pd.StringDtype) else column.astype(str)
    if text.hasnans:
        codes, uniques = pd.factorize(text, sort=True)  # in the order of the texts
    else:  # pyarrow's dictionary encoding where it holds the texts, several times faster
        codes, uniques = factorize(text, sort=True)
    codes = np.asarray(codes, dtype=np.int64)
    missing = codes < 0
    if missing.any() or not len(column):  # a missing text reads as no number
        return "text", np.where(missing, len(uniques), codes)
    numbers = pd.to_numeric(pd.Series(uniques), errors="coerce")
    if numbers.isna().any():
        return "text", codes
    # the distinct texts by number, ties broken by the text (a sort of distinct pairs)
    by_number = pd.DataFrame({"n": numbers, "t": pd.Series(uniques)})
    order = by_number.sort_values(["n", "t"], kind="stable").index.to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return "text as number", rank[codes]


def key_kinds(frame: pd.DataFrame, keys: Sequence[str]) -> dict[str, str]:
    """Per key column, how :func:`key_order` compares it (for a report)."""
    return {key: _key_kind(frame[key]) for key in keys}


def key_order(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """``frame``'s rows sorted by ``keys`` (a new index 0..n-1), the order of every study's
    strata and of every release (:func:`key_positions`)."""
    return frame.iloc[key_positions(frame, keys)].reset_index(drop=True)


def key_positions(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """The positions of ``frame``'s rows in key order (a stable sort by ``keys``).

    Each key column is compared by its own values: a numeric column numerically, a
    categorical one in its declared order, and a text column numerically when every value
    of it reads as a number (ids 1, 2, 10, 100; ties such as '01' and '1' broken by the
    text), as text otherwise ('0-4', '85+', county names). The values are not changed:
    keys read as text stay text. Zero-padded codes (FIPS '01001') sort the same way as
    numbers and as text.
    """
    return positions_by_codes(key_sort_codes(frame, keys), len(frame))


def key_sort_codes(frame: pd.DataFrame, keys: Sequence[str]) -> list[np.ndarray]:
    """Per key, an integer code per row whose order is the key's order in
    :func:`key_positions` (computed once, they sort the rows by any order of the keys:
    :func:`positions_by_codes`)."""
    return [_key_codes(frame[key].reset_index(drop=True))[1] for key in keys]


def key_codes_by_entry(values: pd.Series, entry: np.ndarray) -> np.ndarray:
    """:func:`key_sort_codes` of one key column given as its distinct ``values`` and each
    row's position ``entry`` among them (a dictionary encoding): the codes of the values
    some row holds, taken per row. The same order as coding every row, since a column's
    codes depend on the set of its values only; but a few thousand values are parsed and
    sorted instead of ten million rows."""
    used = np.bincount(entry, minlength=len(values)) > 0
    codes = np.zeros(len(values), dtype=np.int64)
    codes[used] = _key_codes(values[used].reset_index(drop=True))[1]
    return codes[entry]


def positions_by_codes(codes: Sequence[np.ndarray], rows: int) -> np.ndarray:
    """The positions of the rows sorted stably by ``codes`` (the first most significant)."""
    if not codes:
        return np.arange(rows, dtype=np.int64)
    codes = [np.asarray(c, dtype=np.int64) for c in codes]
    # already sorted (a release's strata by their own keys): the stable sort keeps them
    if not _steps(codes, rows)[0].any():
        return np.arange(rows, dtype=np.int64)
    # one stable sort of the codes combined, when they fit in 62 bits
    lows = [int(c.min()) if rows else 0 for c in codes]
    sizes = [int(c.max()) - low + 1 if rows else 1 for c, low in zip(codes, lows, strict=True)]
    if sum(math.log2(s) for s in sizes) < 62:
        key = np.zeros(rows, dtype=np.int64)
        for column, low, size in zip(codes, lows, sizes, strict=True):
            key *= size
            key += column - low
        return np.argsort(key, kind="stable").astype(np.int64, copy=False)
    return np.lexsort(codes[::-1]).astype(np.int64, copy=False)


def key_runs(codes: Sequence[np.ndarray], rows: int) -> tuple[bool, int]:
    """Whether the rows whose key codes (:func:`key_sort_codes`) are ``codes`` are in key
    order, and how many of them repeat the keys of another row, by comparing each row with
    the next (a sort only when they are out of order): a few booleans a row, not a sort's
    indices."""
    if rows < 2:
        return True, 0
    descending, equal = _steps(codes, rows)
    ordered = not descending.any()
    if not ordered:
        order = positions_by_codes(codes, rows)
        _, equal = _steps([c[order] for c in codes], rows)
    return ordered, int(equal.sum())


def _steps(codes: Sequence[np.ndarray], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Per pair of neighbouring rows, whether the second comes before the first in key
    order, and whether the two have equal keys."""
    descending = np.zeros(max(rows - 1, 0), dtype=bool)
    equal = np.ones(max(rows - 1, 0), dtype=bool)
    for c in codes:
        before, after = c[:-1], c[1:]
        descending |= equal & (after < before)
        equal &= after == before
    return descending, equal


def _has_duplicates(frame: pd.DataFrame, keys: Sequence[str]) -> bool:
    """Whether two rows of ``frame`` have the same ``keys`` (``frame.duplicated(keys)
    .any()``; the keys have no missing value): each key's values coded, the codes combined
    into one number a row when they fit, counted (10 million rows: a fraction of pandas'
    time)."""
    from dpcounts.encoding import factorize

    factorized = [factorize(frame[key]) for key in keys]
    sizes = [max(len(uniques), 1) for _, uniques in factorized]
    if sum(math.log2(s) for s in sizes) >= 62:
        return bool(frame.duplicated(subset=list(keys)).any())
    combined = np.zeros(len(frame), dtype=np.int64)
    for (codes, _), size in zip(factorized, sizes, strict=True):
        combined *= size
        combined += codes
    if math.prod(sizes) <= 4 * len(frame) + 1024:  # dense: count every combination
        return bool(np.bincount(combined).max(initial=0) > 1)
    return bool(np.unique(combined).size < len(frame))


def validate_strata(
    frame: pd.DataFrame,
    *,
    count: str = "count",
    population: str = "population",
    keys: Sequence[str] = ("fips",),
    source: str = "strata",
    denominator: str = "population",
) -> pd.DataFrame:
    """Check strata and return ``frame`` unchanged when they are fit for a mechanism.

    Expected: the columns ``keys``, ``count`` and ``population`` exist; at least one row;
    counts present, finite, whole, non-negative and at most 2^53; populations present,
    finite and positive; no count above its population; each key
    combination appears once; counts sum to a positive total (the mechanisms condition
    on the total y., which must not be zero).

    ``denominator="expected"``: the ``population`` column holds expected counts E_i
    (indirect standardisation). They must be present, finite and > 0 like populations,
    but no count bound applies: a count is Poisson around E_i x its relative risk, so
    "cases above expected" is an ordinary stratum, not more than one event per person.
    """
    if denominator not in ("population", "expected"):
        raise ValueError(f"{source}: denominator {denominator!r}; expected population or expected")
    expected = denominator == "expected"
    what = "expected count" if expected else "population"
    keys = list(keys)
    _require_columns(frame, [*keys, count, population], source)
    if frame.empty:
        raise ValueError(f"{source}: no strata; expected at least one row")

    for key in keys:
        missing_key = frame[key].isna().to_numpy()
        if missing_key.any():
            raise ValueError(
                f"{source}: {int(missing_key.sum())} row(s) with no {key!r} (row positions "
                f"{np.flatnonzero(missing_key)[:SHOWN_ROWS].tolist()}, from 0); expected "
                f"every row to have {keys}"
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
        f"expected a {what} for every stratum",
    )
    refuse(populations <= 0, f"{population!r} <= 0 at", f"expected {what}s > 0")
    refuse(~np.isfinite(populations), f"infinite {population!r} at", f"expected finite {what}s")
    if not expected:  # expected counts bound nothing: a count is Poisson around E_i x risk
        refuse(
            counts > populations,
            f"{count!r} above {population!r} at",
            "expected at most one event per person (count <= population); if the column "
            "holds expected counts (observed vs expected), say so: denominator: expected "
            "in a study, --expected-column in dpcounts synthesize",
        )
    if _has_duplicates(frame, keys):
        raise ValueError(
            f"{source}: duplicate key(s) {describe_duplicates(frame, keys)}; "
            f"expected each {keys} to appear once"
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
    zeros, and a place named ``NA`` stays a place): only an empty cell is missing, no
    word ('NA', 'null', 'None', 'nan') is. Value columns are converted and checked later
    (a count of 'NA' is refused as not numeric). The one reader of a table of
    strata: ``dpcounts synthesize`` (its input and ``--prior`` file) and the study stage
    (``studies.<name>.table`` and ``prior.path``) both read through it. A missing,
    unreadable or unknown file raises ``ValueError`` naming the path.
    """
    if not path.is_file():
        raise ValueError(f"{path}: file not found; expected a CSV or Parquet file of strata")
    name = path.name.lower()
    if name.endswith(SPREADSHEET_SUFFIXES):
        raise ValueError(_SPREADSHEET.format(path=path, kind=f"a spreadsheet ({path.suffix})"))
    csv_file = name.endswith(CSV_SUFFIXES)
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        if csv_file:
            # text stays text: only an empty cell is missing ('NA' may be a place)
            sep = csv_delimiter(path)
            frame = pd.read_csv(
                path, sep=sep, dtype=str, skipinitialspace=True, keep_default_na=False,
                na_values=[""],
            )  # fmt: skip
            (header,) = frame.columns if len(frame.columns) == 1 else ("",)
            other = [repr(d) for d in DELIMITERS[1:] if d in str(header)]
            if other:
                raise ValueError(
                    f"{path}: one column named {str(header)[:60]!r}: the file seems delimited "
                    f"by {' or '.join(other)}, not commas; save it as comma-delimited CSV"
                )
            return frame
    except (ValueError, OSError) as err:  # pyarrow and the CSV parser raise these
        if str(err).startswith(f"{path}: "):
            raise
        raise ValueError(f"{path}: could not be read ({err})") from err
    raise ValueError(
        f"{path}: unknown file type; expected .csv, .csv.gz, .txt, .parquet or .pq "
        "(or a CDC WONDER export with --wonder)"
    )


_SPREADSHEET = (
    "{path}: {kind}; dpcounts reads CSV or Parquet files only: save the sheet as CSV "
    "(comma-delimited, UTF-8) or Parquet and give that file"
)


def csv_delimiter(path: Path) -> str:
    """The delimiter of the CSV ``path``: the comma, unless its header line holds none and
    :class:`csv.Sniffer` finds a semicolon, a tab or a bar in its first kilobyte. A
    spreadsheet saved under a CSV name raises ``ValueError`` with a hint."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as file:
        head = file.read(1024)
    if head.startswith(SPREADSHEET_MAGIC):
        raise ValueError(
            _SPREADSHEET.format(path=path, kind="a spreadsheet saved under a CSV name")
        )
    sample = head.decode("utf-8", errors="replace")
    header = sample.splitlines()[0] if sample else ""
    if "," in header:
        return ","
    try:
        found = csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:  # one column, or no pattern to find
        return ","
    return found if found in header else ","
