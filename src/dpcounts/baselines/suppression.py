"""Cell suppression, the rule a health agency's tables follow instead of noise: a count in
the small range [low, high] is not shown (CDC WONDER: 1 to 9 deaths are "suppressed",
zeros are shown), and an analyst completes the table by a fixed value for each hidden cell.

:class:`SuppressionRule` holds the rule's settings:

* ``low``, ``high`` (default 1 and 9): primary suppression hides every count c with
  low <= c <= high; ``show_zeros=False`` hides the zeros too.
* ``complementary`` (default None: none): ``"single-in-margin"`` (:data:`COMPLEMENTARY`)
  protects the hidden cells from the published margins: while some group of a margin (the
  cells sharing the values of the margin's keys, e.g. one county's cells for the margin
  ``("county",)``) holds exactly one hidden cell, that cell would be its group's total less
  the shown cells, so the smallest shown nonzero cell of the group is hidden too (ties to
  the lower index; a group with no shown nonzero cell gives its first shown zero). Every
  group of one margin is treated in one step (the groups are disjoint), the margins in their
  order, and the steps repeat until no group of any margin holds exactly one hidden cell
  beside a shown one: a fixed point. A group whose only cell is hidden (a margin group of
  one cell) cannot be protected: its total is the cell.

:meth:`SuppressionRule.complete` gives the analyst's value of every hidden cell
(:data:`COMPLETIONS`): ``missing`` (NaN), ``zero``, ``midpoint`` of the primary range
[low', high] (low' = low with the zeros shown, 0 without: 5 for 1..9) or ``prior``, the
public prior's expected count clipped to [low', high]. A reader of the table sees one
"suppressed" flag and cannot tell a complementary cell from a primary one, so every hidden
cell is completed as if primary: a complementary cell (a shown count, above ``high`` or
zero) gets a value in [low', high] too.

:meth:`SuppressionRule.bounds` is the attacker's knowledge of each hidden cell
(:mod:`dpcounts.attack.differencing`): a primary cell lies in [low', high]; a
complementary cell holds a count that would have been shown, at least
:attr:`SuppressionRule.min_shown` (0 with the zeros shown; else high + 1, or 1 when
low > 1), with no upper bound but the margins'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.sampling.bounds import count_values

#: The complementary suppression methods by name (None: primary suppression only).
COMPLEMENTARY = ("single-in-margin",)
#: The analyst's completions of a hidden cell.
COMPLETIONS = ("missing", "zero", "midpoint", "prior")


def check_counts(counts) -> np.ndarray:
    """``counts`` as a 1-D int64 array of non-negative integers, or a ValueError that says
    what was expected (:func:`dpcounts.sampling.bounds.count_values`)."""
    array = np.asarray(counts)
    if array.ndim != 1:
        raise ValueError(f"counts must be a 1-D array (one count per stratum), got {array.ndim}-D")
    return count_values(array, "counts")


def check_mask(mask, size: int) -> np.ndarray:
    """``mask`` as a boolean array of ``size`` entries (True: hidden), or a ValueError."""
    array = np.asarray(mask)
    if array.dtype != bool:
        raise ValueError(f"mask must be a boolean array (True: suppressed), got {array.dtype}")
    if array.shape != (size,):
        raise ValueError(f"mask must have one entry per count ({size}), got shape {array.shape}")
    return array


def margin_groups(keys: pd.DataFrame, margins: Sequence[Sequence[str]], size: int) -> list:
    """For each margin (a tuple of key columns; () is the grand total), the group code of
    every stratum (0 .. groups - 1), in the margins' order. ValueError on a margin that is
    not a tuple of columns of ``keys`` or on ``keys`` of the wrong length."""
    if not isinstance(keys, pd.DataFrame):
        raise ValueError(f"keys must be a pandas DataFrame of key columns, got {type(keys)}")
    if len(keys) != size:
        raise ValueError(f"keys must have one row per count ({size}), got {len(keys)} rows")
    if isinstance(margins, str) or not isinstance(margins, Sequence):
        raise ValueError(f"margins must be a list of tuples of key names, got {margins!r}")
    codes = []
    for margin in margins:
        if isinstance(margin, str) or not isinstance(margin, Sequence):
            raise ValueError(
                f"each margin must be a tuple of key names, e.g. ('county',), got {margin!r}"
            )
        missing = [name for name in margin if name not in keys.columns]
        if missing:
            raise ValueError(
                f"margin {tuple(margin)!r} names {missing}, not columns of the keys "
                f"({list(keys.columns)})"
            )
        if len(margin) == 0:
            codes.append(np.zeros(size, dtype=np.int64))
            continue
        grouped = keys.groupby(list(margin), sort=False, observed=True, dropna=False)
        codes.append(grouped.ngroup().to_numpy(dtype=np.int64))
    return codes


@dataclass(frozen=True)
class SuppressionRule:
    """A suppression rule: primary suppression of the counts in [low, high] (and of the zeros
    with ``show_zeros=False``), then the optional ``complementary`` method (module
    docstring)."""

    low: int = 1
    high: int = 9
    show_zeros: bool = True
    complementary: str | None = None

    def __post_init__(self):
        for name in ("low", "high"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if not 1 <= self.low <= self.high:
            raise ValueError(f"need 1 <= low <= high, got low={self.low}, high={self.high}")
        if not isinstance(self.show_zeros, bool):
            raise ValueError(f"show_zeros must be True or False, got {self.show_zeros!r}")
        if self.complementary is not None and self.complementary not in COMPLEMENTARY:
            raise ValueError(
                f"complementary must be None or one of {COMPLEMENTARY}, got {self.complementary!r}"
            )

    @property
    def floor(self) -> int:
        """low': the least count primary suppression hides (low, or 0 with the zeros hidden)."""
        return self.low if self.show_zeros else 0

    @property
    def min_shown(self) -> int:
        """The least count the rule shows (0 with the zeros shown; else 1 or high + 1)."""
        if self.show_zeros:
            return 0
        return 1 if self.low > 1 else self.high + 1

    def primary(self, counts) -> np.ndarray:
        """The primary suppression mask (True: hidden): low <= count <= high, and the zeros
        with ``show_zeros=False``."""
        counts = check_counts(counts)
        hidden = (counts >= self.low) & (counts <= self.high)
        if not self.show_zeros:
            hidden |= counts == 0
        return hidden

    def suppress(self, counts, keys: pd.DataFrame | None = None, margins=None) -> np.ndarray:
        """The suppression mask (True: hidden): primary, then the complementary method over
        the groups of ``margins`` (tuples of columns of ``keys``, one row per count; needed
        only with a complementary method)."""
        counts = check_counts(counts)
        hidden = self.primary(counts)
        if self.complementary is None:
            return hidden
        if keys is None or margins is None:
            raise ValueError(
                f"complementary={self.complementary!r} needs keys (a DataFrame) and margins"
            )
        codes = margin_groups(keys, margins, counts.size)
        return _single_in_margin(counts, hidden, codes)

    def bounds(self, counts, mask) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) float arrays: what the attacker knows of each hidden cell (-inf,
        inf elsewhere are not used; shown cells get their count). A primary cell lies in
        [low', high]; a complementary one (hidden, not primary) in [min_shown, inf)."""
        counts = check_counts(counts)
        mask = check_mask(mask, counts.size)
        primary = self.primary(counts)
        if np.any(primary & ~mask):
            raise ValueError("mask must hide every cell the rule's primary suppression hides")
        lower = counts.astype(float)
        upper = counts.astype(float)
        lower[primary] = self.floor
        upper[primary] = self.high
        other = mask & ~primary
        lower[other] = self.min_shown
        upper[other] = np.inf
        return lower, upper

    def complete(self, counts, mask, completion: str, prior_expected=None) -> np.ndarray:
        """The analyst's table: the shown counts, and each hidden cell by ``completion``
        (:data:`COMPLETIONS`; module docstring). ``prior_expected`` (one expected count per
        stratum) is needed by ``prior``."""
        counts = check_counts(counts)
        mask = check_mask(mask, counts.size)
        if completion not in COMPLETIONS:
            raise ValueError(f"completion must be one of {COMPLETIONS}, got {completion!r}")
        out = counts.astype(float)
        if completion == "missing":
            out[mask] = np.nan
        elif completion == "zero":
            out[mask] = 0.0
        elif completion == "midpoint":
            out[mask] = (self.floor + self.high) / 2
        else:
            if prior_expected is None:
                raise ValueError("completion 'prior' needs prior_expected (one per stratum)")
            prior = np.asarray(prior_expected, dtype=float)
            if prior.shape != counts.shape:
                raise ValueError(
                    f"prior_expected must have one entry per count ({counts.size}), "
                    f"got shape {prior.shape}"
                )
            if not np.all(np.isfinite(prior[mask])) or np.any(prior[mask] < 0):
                raise ValueError("prior_expected must be finite and non-negative")
            out[mask] = np.clip(prior[mask], self.floor, self.high)
        return out


def _single_in_margin(counts: np.ndarray, hidden: np.ndarray, codes: list) -> np.ndarray:
    """Complementary suppression ``single-in-margin`` to its fixed point (module docstring)."""
    hidden = hidden.copy()
    index = np.arange(counts.size)
    # candidates in order: the smallest shown nonzero count, then the shown zeros; ties
    # to the lower index
    rank = np.where(counts > 0, counts, np.iinfo(np.int64).max)
    changed = True
    while changed:
        changed = False
        for code in codes:
            groups = int(code.max()) + 1 if code.size else 0
            per_group = np.bincount(code, weights=hidden, minlength=groups)
            shown = np.bincount(code, weights=~hidden, minlength=groups)
            single = (per_group == 1) & (shown > 0)
            if not single.any():
                continue
            candidate = np.flatnonzero(single[code] & ~hidden)
            order = np.lexsort((index[candidate], rank[candidate], code[candidate]))
            candidate = candidate[order]
            first = np.r_[True, code[candidate][1:] != code[candidate][:-1]]
            hidden[candidate[first]] = True
            changed = True
    return hidden
