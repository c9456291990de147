"""Read CDC WONDER exports ("Export Results" tab-delimited text) into tidy frames.

Layout assumed (the one WONDER's mortality databases write):

- tab-delimited, fields optionally quoted with ``"``; UTF-8 (a BOM is tolerated);
- the first non-blank line is the header and its first column is ``Notes``;
- data rows follow; a row whose only content is its ``Notes`` field is a footnote row and
  is skipped; a row whose ``Notes`` is ``Total`` is a subtotal/total row (see below);
- a line whose only field is ``---`` starts the footer (dataset name, query parameters,
  citation, caveats): its one-field ``Name: value`` lines (``Show Zero Values: False``)
  are kept in ``frame.attrs["query"]`` (a dict), the rest is ignored.

Values: ``Suppressed``, ``Missing`` and ``Not Applicable`` stand in for numbers and are
never turned into zeros: the number becomes ``<NA>`` and the row gets a boolean flag
(``suppressed``, ``missing``, ``not_applicable``; the three flag columns are always
present, so downstream code sees one schema). A rate written ``12.3 (Unreliable)`` keeps
its value and sets ``rate_unreliable``; a bare ``Unreliable`` (older databases) gives
``<NA>`` and sets the flag too.

Total rows are dropped by default because they repeat sums of the other rows and would
double count; ``keep_totals=True`` keeps them with a boolean ``total`` column instead.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

#: Columns holding counts (nullable integers) when present; every column whose header
#: contains "Rate" is read as a float.
COUNT_COLUMNS = ("Deaths", "Births", "Population")
#: Columns a file must have unless the caller asks otherwise.
DEFAULT_REQUIRED = ("Deaths", "Population")

_MARKERS = {"suppressed": "suppressed", "missing": "missing", "not applicable": "not_applicable"}
_UNRELIABLE_SUFFIX = re.compile(r"^\s*(?P<value>\S+)\s*\(unreliable\)\s*$", re.IGNORECASE)
_FLAG_COLUMNS = ("suppressed", "missing", "not_applicable", "rate_unreliable")


def snake_case(name: str) -> str:
    """``"Age Group Code"`` -> ``"age_group_code"``; ``"%"`` becomes ``pct``."""
    name = name.replace("%", " pct ")
    return re.sub(r"[^0-9a-z]+", "_", name.strip().lower()).strip("_")


def _is_rate(column: str) -> bool:
    return "rate" in column.lower()


class _Problem(ValueError):
    """A malformed value; the reader adds the file and line."""


def _parse_count(text: str, column: str) -> tuple[int | None, str | None]:
    """Return (value, marker flag) for a count cell; raise _Problem if it is neither."""
    stripped = text.strip()
    marker = _MARKERS.get(stripped.lower())
    if marker is not None:
        return None, marker
    if re.fullmatch(r"[+-]?\d+", stripped):
        return int(stripped), None
    raise _Problem(
        f"column {column!r} holds {text!r}; expected a whole number or one of "
        "Suppressed, Missing, Not Applicable"
    )


def _parse_rate(text: str, column: str) -> tuple[float, str | None, bool]:
    """Return (value or NaN, marker flag, unreliable) for a rate cell."""
    stripped = text.strip()
    marker = _MARKERS.get(stripped.lower())
    if marker is not None:
        return np.nan, marker, False
    if stripped.lower() == "unreliable":
        return np.nan, None, True
    unreliable = False
    match = _UNRELIABLE_SUFFIX.match(stripped)
    if match:
        stripped, unreliable = match["value"], True
    try:
        value = float(stripped)
    except ValueError:
        raise _Problem(
            f"column {column!r} holds {text!r}; expected a number (optionally followed by "
            "'(Unreliable)'), Unreliable, Suppressed, Missing or Not Applicable"
        ) from None
    if not np.isfinite(value):
        raise _Problem(f"column {column!r} holds {text!r}; expected a finite number")
    return value, None, unreliable


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err}); expected a CDC WONDER export") from err


def read_wonder(
    path: str | os.PathLike,
    *,
    required: tuple[str, ...] = DEFAULT_REQUIRED,
    keep_totals: bool = False,
) -> pd.DataFrame:
    """Read one CDC WONDER export into a tidy frame.

    Columns are the header's names in snake_case (``County Code`` -> ``county_code``),
    without ``notes``. Code and label columns stay strings (so ``"01001"`` keeps its
    leading zero); ``deaths``/``births``/``population`` are ``Int64``; rate columns are
    floats. Flags: ``suppressed``, ``missing``, ``not_applicable`` (the row holds that
    marker in some numeric column), ``rate_unreliable``, and ``total`` when
    ``keep_totals``.

    Raises ``ValueError`` naming the file, the line and the problem for: no header, a
    missing required column (``required``, header spelling), a line with the wrong number
    of fields, a numeric cell that is neither a number nor a known marker.
    """
    path = Path(path)
    text = _read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quotechar='"')

    header: list[str] | None = None
    header_line = 0
    rows: list[dict[str, object]] = []
    query: dict[str, str] = {}
    footer = False
    for fields in reader:
        line = reader.line_num
        if not any(field.strip() for field in fields):
            continue  # blank line
        if footer:
            name, sep, value = fields[0].partition(":")
            if len(fields) == 1 and sep and name.strip() and name.strip() not in query:
                query[name.strip()] = value.strip()
            continue
        if header is None:
            if fields[0].strip().lower() != "notes":
                raise ValueError(
                    f"{path}, line {line}: no header row; expected the first line to start "
                    f"with the column 'Notes' (CDC WONDER export layout), found {fields[:3]!r}"
                )
            header = [field.strip() for field in fields]
            header_line = line
            missing = [name for name in required if name not in header]
            if missing:
                raise ValueError(
                    f"{path}, line {line}: missing required column(s) {missing}; "
                    f"header has {header[1:]}"
                )
            continue
        if len(fields) == 1 and fields[0].strip() == "---":
            footer = True  # query parameters, notes and citations follow
            continue
        if len(fields) != len(header):
            raise ValueError(
                f"{path}, line {line}: {len(fields)} tab-separated fields; expected "
                f"{len(header)} as in the header on line {header_line}"
            )
        note = fields[0].strip()
        if note and not any(field.strip() for field in fields[1:]):
            continue  # a footnote row
        is_total = note.lower() == "total"
        if is_total and not keep_totals:
            continue
        try:
            rows.append(_parse_row(header, fields, is_total))
        except _Problem as problem:
            raise ValueError(f"{path}, line {line}: {problem}") from None

    if header is None:
        raise ValueError(f"{path}: no header row; the file is empty (expected a WONDER export)")
    frame = _to_frame(path, header_line, header, rows, keep_totals)
    frame.attrs["query"] = query
    return frame


def _parse_row(header: list[str], fields: list[str], is_total: bool) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(_FLAG_COLUMNS, False)
    row["total"] = is_total
    for column, text in zip(header[1:], fields[1:], strict=True):
        if column in COUNT_COLUMNS:
            value, marker = _parse_count(text, column)
            row[column] = pd.NA if value is None else value
        elif _is_rate(column):
            value, marker, unreliable = _parse_rate(text, column)
            row[column] = value
            row["rate_unreliable"] = row["rate_unreliable"] or unreliable
        else:
            row[column] = text.strip()
            marker = None
        if marker is not None:
            row[marker] = True
    return row


def _to_frame(
    path: Path,
    header_line: int,
    header: list[str],
    rows: list[dict[str, object]],
    keep_totals: bool,
) -> pd.DataFrame:
    columns = header[1:]
    flags = list(_FLAG_COLUMNS) + (["total"] if keep_totals else [])
    frame = pd.DataFrame(rows, columns=columns + flags)
    for column in columns:
        if column in COUNT_COLUMNS:
            frame[column] = frame[column].astype("Int64")
        elif _is_rate(column):
            frame[column] = frame[column].astype(float)
        else:
            frame[column] = frame[column].astype(object)
    for flag in flags:
        frame[flag] = frame[flag].astype(bool)
    names = [snake_case(column) for column in columns]
    if len(set(names)) != len(names):
        raise ValueError(
            f"{path}, line {header_line}: header columns {columns} are not distinct after "
            f"snake_case ({names}); expected one column per name"
        )
    return frame.rename(columns=dict(zip(columns, names, strict=True))).reset_index(drop=True)
