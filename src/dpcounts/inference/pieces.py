"""Measures that weigh pieces of a table: an age-adjusted rate (a group's age bands) and a
disparity (two sides' rates), each a weighted sum of the true counts of some disjoint
pieces of the table (:class:`Pieces`), with an interval by either method of
:mod:`dpcounts.inference`:

* :func:`combined`: the combining rules (:func:`~dpcounts.inference.combining.combine`)
  on each row's measure in each set: a rate sum_p w_p z_p with its Poisson variance sum_p
  w_p^2 z_p (an age-adjusted rate's is Fay and Feuer's,
  :func:`dpcounts.studies.intervals.age_adjusted_interval`; a crude rate's y_m / n^2 is
  the case of one band), or a disparity on the log scale: set m gives log q_N,m - log
  q_D,m with the delta method's variance u_N,m / q_N,m^2 + u_D,m / q_D,m^2, and
  ``estimate``, ``lower`` and ``upper`` are the exponentials of the combined log ratio and
  its bounds (NaN where a set has a side without events);
* :func:`from_draws`: the noise-aware posterior by Monte Carlo, from joint draws of the
  pieces' true totals (:func:`dpcounts.inference.posterior.joint_draws`): ``estimate`` the
  mean of the drawn rates (a disparity: the median of the drawn ratios), ``variance`` their
  variance (a disparity: of the log ratios; NaN where a draw leaves a side without events),
  ``lower`` and ``upper`` their equal-tailed quantiles.

``dpcounts estimate`` (:mod:`dpcounts.release.estimate`, from a release folder's keys) and a
study's coverage (:mod:`dpcounts.studies.stage.coverage`, from the study's groups) build the
pieces and call these: one copy of each rule.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dpcounts.inference.combining import combine


class Pieces(NamedTuple):
    """How each row's measure weighs the table: ``piece`` gives each stratum its piece
    (-1: none; the pieces are disjoint), ``weights`` (rows x sides, pieces; a scipy sparse
    matrix) the weight of one event of each piece in each row's side (per x its band's
    standard weight over the piece's population), ``sides`` 1 (a rate) or 2 (a disparity:
    numerator, denominator, side by side in each row)."""

    piece: np.ndarray
    weights: object
    sides: int


def piece_totals(counts, pieces: Pieces) -> np.ndarray:
    """Each piece's total in each row of ``counts`` (tables x strata): tables x pieces."""
    counts = np.atleast_2d(np.asarray(counts, dtype=float))
    used = pieces.piece >= 0
    size = pieces.weights.shape[1]
    return np.vstack([np.bincount(pieces.piece[used], weights=row[used], minlength=size)
                      for row in counts])  # fmt: skip


def values(totals, pieces: Pieces) -> tuple[np.ndarray, np.ndarray]:
    """Each row's measure and its Poisson variance from the pieces' ``totals`` (tables x
    pieces): a rate, or a disparity's ratio and the delta method's variance of its log
    (NaN where a side has no event); tables x rows each."""
    totals = np.atleast_2d(np.asarray(totals, dtype=float))
    rates = np.asarray(pieces.weights @ totals.T).T  # tables x (rows x sides)
    variances = np.asarray(pieces.weights.multiply(pieces.weights) @ totals.T).T
    if pieces.sides == 1:
        return rates, variances
    top, bottom = rates[:, 0::2], rates[:, 1::2]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = top / bottom
        spread = variances[:, 0::2] / top**2 + variances[:, 1::2] / bottom**2
    bad = ~(np.isfinite(ratio) & (ratio > 0))
    ratio[bad], spread[bad] = np.nan, np.nan
    return ratio, spread


def combined(counts, pieces: Pieces, level: float) -> dict:
    """The combining rules on each row's measure in the M sets ``counts`` (module
    docstring)."""
    totals = piece_totals(counts, pieces)
    rates = np.asarray(pieces.weights @ totals.T).T  # sets x (rows x sides)
    variances = np.asarray(pieces.weights.multiply(pieces.weights) @ totals.T).T
    if pieces.sides == 1:
        return combine(rates, variances, level)
    top, bottom = rates[:, 0::2], rates[:, 1::2]
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(top) - np.log(bottom)
        spread = variances[:, 0::2] / top**2 + variances[:, 1::2] / bottom**2
    bad = ~np.isfinite(logs).all(axis=0)  # a side without events in some set
    logs[:, bad], spread[:, bad] = np.nan, np.nan
    out = combine(logs, spread, level)
    with np.errstate(over="ignore"):  # a t quantile of nu_f near 0: an infinite bound
        for bound in ("estimate", "lower", "upper"):
            out[bound] = np.exp(out[bound])
    return out


def from_draws(totals, pieces: Pieces, level: float) -> dict:
    """The posterior of each row's measure from ``totals``, joint draws of the pieces'
    true totals (draws x pieces; module docstring)."""
    rates = np.asarray(pieces.weights @ np.asarray(totals, dtype=float).T).T
    if pieces.sides == 1:
        drawn, spread = rates, rates.var(axis=0)
        middle = drawn.mean(axis=0)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            drawn = rates[:, 0::2] / rates[:, 1::2]
            logs = np.log(drawn)
        middle = np.median(drawn, axis=0)
        finite = np.isfinite(logs).all(axis=0)  # no draw with a side without events
        spread = np.full(len(middle), np.nan)
        spread[finite] = logs[:, finite].var(axis=0)
    with np.errstate(invalid="ignore"):
        lower, upper = np.quantile(drawn, [(1 - level) / 2, (1 + level) / 2], axis=0)
    rows = len(middle)
    return {"estimate": middle, "variance": spread, "lower": lower, "upper": upper,
            "df": np.full(rows, np.nan), "adjusted": np.zeros(rows, bool)}  # fmt: skip


__all__ = ["Pieces", "combined", "from_draws", "piece_totals", "values"]
