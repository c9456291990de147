"""The differencing attacker against DP synthetic sets: how often a guess of a small true
count (low..high, 1..9 by default: the counts suppression hides) is exact or within one.

Two guesses of each cell's true count, both pure functions of public arrays:

* :func:`mode_guess`, from M synthetic sets: the value the cell takes most often over the
  sets (ties to the smaller value; :func:`scipy.stats.mode`);
* :func:`prior_guess`, from the public prior alone: the prior's expected count of the
  stratum rounded half up (floor(e + 1/2)); what the attacker guesses without the release.

:func:`recovery_shares` scores a guess on the cells whose true count is in [low, high]:
``exact`` (guess == truth) and ``within_one`` (|guess - truth| <= 1), the measures a study
sets against suppression's ``pinned`` and ``within_one`` shares
(:meth:`dpcounts.attack.differencing.Ranges.summary`); :func:`attack_shares` gives both
guesses' shares in one call.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def _integers(values, name: str, ndim: int) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got {array.ndim}-D")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        if not np.issubdtype(array.dtype, np.floating) or not np.all(array == np.round(array)):
            raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    return array.astype(np.int64)


def mode_guess(synthetic) -> np.ndarray:
    """Each cell's most frequent value over the synthetic sets (rows of ``synthetic``, an
    M x strata integer array), ties to the smaller value."""
    synthetic = _integers(synthetic, "synthetic (sets x strata)", 2)
    if synthetic.shape[0] == 0:
        raise ValueError("synthetic must hold at least one set (row)")
    return stats.mode(synthetic, axis=0, keepdims=False).mode.astype(np.int64)


def prior_guess(prior_expected) -> np.ndarray:
    """The prior's expected count of each stratum rounded half up, floor(e + 1/2)."""
    expected = np.asarray(prior_expected, dtype=float)
    if expected.ndim != 1:
        raise ValueError(f"prior_expected must be a 1-D array, got {expected.ndim}-D")
    if not np.all(np.isfinite(expected)) or np.any(expected < 0):
        raise ValueError("prior_expected must be finite and non-negative")
    return np.floor(expected + 0.5).astype(np.int64)


def recovery_shares(truth, guess, low: int = 1, high: int = 9) -> dict:
    """On the cells with low <= truth <= high: their number (``cells``) and the shares whose
    guess is ``exact`` and ``within_one`` (NaN with no such cell)."""
    truth = _integers(truth, "truth", 1)
    guess = np.asarray(guess)
    if guess.shape != truth.shape:
        raise ValueError(f"guess must have one entry per count ({truth.size}), got {guess.shape}")
    if not low <= high:
        raise ValueError(f"need low <= high, got low={low}, high={high}")
    small = (truth >= low) & (truth <= high)
    n = int(small.sum())
    if n == 0:
        return {"cells": 0, "exact": float("nan"), "within_one": float("nan")}
    miss = np.abs(guess[small] - truth[small])
    return {
        "cells": n,
        "exact": float(np.mean(miss == 0)),
        "within_one": float(np.mean(miss <= 1)),
    }


def attack_shares(truth, synthetic, prior_expected, low: int = 1, high: int = 9) -> dict:
    """:func:`recovery_shares` of :func:`mode_guess` (``synthetic``) and of
    :func:`prior_guess` (``prior``) on the true counts in [low, high]."""
    truth = _integers(truth, "truth", 1)
    synthetic = _integers(synthetic, "synthetic (sets x strata)", 2)
    if synthetic.shape[1:] != truth.shape:
        raise ValueError(
            f"synthetic must have one column per count ({truth.size}), got {synthetic.shape}"
        )
    return {
        "synthetic": recovery_shares(truth, mode_guess(synthetic), low, high),
        "prior": recovery_shares(truth, prior_guess(prior_expected), low, high),
        "sets": int(synthetic.shape[0]),
    }
