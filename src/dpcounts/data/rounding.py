"""Fractional counts: refused, or rounded on request, before the strata validator.

Some public tables allocate cases fractionally (a death split between two counties, a
multiply-imputed count). The mechanisms need whole events, so such a table is refused
unless the data steward asks for rounding, and then every count is rounded half to even
(no drift up or down). The study stage (``studies.<name>.rounding``) and the release
command (``dpcounts synthesize --rounding``) call :func:`round_counts` with their own
name for the option, then :func:`dpcounts.data.validation.validate_strata`.

Nothing changes silently: :func:`round_counts` returns a :class:`RoundingReport` (how
many strata it changed, the table's total before and after), which the study stage
writes to its job's log (a warning) and to ``results/studies/<name>/table.json``, and a
release to its private folder (``provenance.json``, ``summary.md``).

Rounding is a preprocessing of the confidential counts before any mechanism sees them:
the privacy guarantee is about the rounded table (docs/privacy.md, Part 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.data.validation import _describe

#: The accepted values of the rounding option: refuse (the default) or nearest.
ROUNDING = ("refuse", "nearest")


@dataclass(frozen=True)
class RoundingReport:
    """What the rounding did to a table: its mode, how many of its ``strata`` it changed,
    and the total of the counts before and after (a whole total as an int). It depends on
    the confidential counts: private in a release."""

    mode: str
    strata: int
    strata_changed: int
    total_before: int | float
    total_after: int | float

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "strata_changed": self.strata_changed,
            "total_before": self.total_before,
            "total_after": self.total_after,
        }

    def describe(self) -> str:
        """``"rounding nearest changed 3 of 6 strata: total 101.4 before, 101 after"``."""
        if self.strata_changed == 0:
            return (
                f"rounding {self.mode}: no count was fractional, none changed "
                f"(total {self.total_after})"
            )
        change = self.total_after - self.total_before
        share = f" ({change / self.total_before:+.2%})" if self.total_before else ""
        return (
            f"rounding {self.mode} changed {self.strata_changed} of {self.strata} strata "
            f"(half to even): total {self.total_before} before, {self.total_after} "
            f"after{share}"
        )


def _total(counts: pd.Series) -> int | float:
    """The sum of the finite numeric counts (an int when whole); the validator names the
    others."""
    values = pd.to_numeric(counts, errors="coerce").astype(float).to_numpy()
    total = math.fsum(values[np.isfinite(values)])
    return int(total) if total.is_integer() else total


def fractional_counts(frame: pd.DataFrame, count: str) -> pd.Series:
    """Rows whose count is a finite number that is not whole (missing, non-numeric and
    infinite counts are left to the validator, which names them)."""
    counts = pd.to_numeric(frame[count], errors="coerce").astype(float)
    return counts.notna() & np.isfinite(counts) & (counts != np.round(counts))


def round_counts(
    frame: pd.DataFrame,
    *,
    count: str,
    keys: Sequence[str],
    rounding: str,
    source: str,
    option: str,
) -> tuple[pd.DataFrame, RoundingReport]:
    """``frame`` with whole counts, and the report of what was changed.

    ``rounding``: ``refuse`` raises ``ValueError`` when a count is fractional, naming
    ``source``, the strata (their ``keys``) and ``option``, the setting that asks for
    rounding (``"--rounding nearest"``, ``"studies.x.rounding: nearest"``); ``nearest``
    rounds every fractional count half to even. A negative fractional count is refused
    in both modes (rounded, -0.4 would pass as 0). Whole counts are never touched, and
    the frame is returned as it is when none is fractional.
    """
    if rounding not in ROUNDING:
        raise ValueError(f"{source}: rounding {rounding!r}; expected one of {list(ROUNDING)}")
    fractional = fractional_counts(frame, count)
    n = int(fractional.sum())
    before = _total(frame[count])
    if n == 0:
        return frame, RoundingReport(rounding, len(frame), 0, before, before)
    negative = fractional & (pd.to_numeric(frame[count], errors="coerce") < 0)
    if negative.any():  # -0.4 would round to 0 and hide the error
        raise ValueError(
            f"{source}: negative {count!r} at {_describe(frame, negative, list(keys))}; "
            "expected counts >= 0 (rounding does not mend negative counts)"
        )
    if rounding == "refuse":
        # the strata, not their values: a count is confidential, even in an error message
        raise ValueError(
            f"{source}: fractional counts in {count!r} at {n} strata: "
            f"{_describe(frame, fractional, list(keys))}; expected "
            "whole numbers of events. Some tables allocate cases fractionally: set "
            f"{option} to round them half to even (the guarantee is then about the rounded "
            "table), or fix the table"
        )
    frame = frame.copy()
    rounded = np.round(pd.to_numeric(frame.loc[fractional, count]).astype(float))  # half to even
    # object: a text column (CSV) keeps its other entries as they are, for the validator
    frame[count] = frame[count].astype(object)
    frame.loc[fractional, count] = rounded
    return frame, RoundingReport(rounding, len(frame), n, before, _total(frame[count]))
