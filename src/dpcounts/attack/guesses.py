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

The published hyperparameters (:class:`~dpcounts.calibration.Calibration`) are made from
public inputs only (the total, the populations, the prior rates), so they tell nothing of
the counts that the prior does not: :func:`hyperparameter_guess`, each cell's predictive
mean under them rounded, is the prior's guess (md: the uniform table, its alphas being
equal). They do tell the attacker how a synthetic count was drawn from a true one, and
:func:`posterior_guess` uses that: the true count in [low, high] of largest posterior
probability given the synthetic sets, the hyperparameters and a Poisson prior at the
hyperparameters' predictive mean (:func:`set_log_likelihood`).
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


def predictive_mean(cal) -> np.ndarray:
    """Each cell's expected synthetic count before any count is seen, from the
    hyperparameters alone: n a / b (pg; truncated, clipped to [L, U]) or y. alpha_i / sum
    alpha (md)."""
    from dpcounts.mechanisms.registry import family

    if not family(cal.mechanism).uses_prior:
        return cal.total * cal.a / cal.a.sum()
    mean = cal.population * cal.a / cal.b
    if cal.truncated:
        mean = np.clip(mean, cal.lower, cal.upper)
    return mean


def hyperparameter_guess(cal) -> np.ndarray:
    """The guess from the published hyperparameters alone: :func:`predictive_mean` rounded
    half up, as :func:`prior_guess` rounds the prior's expected counts (the same numbers:
    n a / b is n lambda0 for pg and truncated, y. / I for md)."""
    return prior_guess(predictive_mean(cal))


def set_log_likelihood(synthetic, cal, candidates, tilts=None) -> np.ndarray:
    """log P(z_i | y_i = c) for each candidate c (K values), set (M rows of ``synthetic``)
    and cell: shape (K, M, strata). The cell's own law under the hyperparameters ``cal``:
    md, the Dirichlet-multinomial's margin BetaBinomial(y., alpha_i + c, sum alpha + y. -
    alpha_i - c), exact; pg, NB(a_i + c, p_i) with success probability (b_i + n_i) / (b_i +
    2 n_i) (Quick (2021), eq 8), tilted as the set's conditioning on its total y. tilts it
    (``tilts``, one per set; None: each set's :func:`total_tilts`); truncated, that NB of
    the clamped candidate (:meth:`~dpcounts.calibration.Calibration.clamp`) restricted to
    [L_i, U_i], its tilt found on the windows."""
    from dpcounts.mechanisms.registry import family

    z = _integers(synthetic, "synthetic (sets x strata)", 2)[None, :, :]
    c = np.asarray(candidates, dtype=np.int64).reshape(-1, 1, 1)
    if not family(cal.mechanism).uses_prior:
        alpha = cal.a[None, None, :]
        left = alpha + c
        right = cal.a.sum() + cal.total - left
        return stats.betabinom.logpmf(z, cal.total, left, right)
    n, b = cal.population[None, None, :], cal.b[None, None, :]
    if cal.truncated:  # the counts enter the posterior clamped to the bounds
        low, high = cal.lower[None, None, :], cal.upper[None, None, :]
        c = np.clip(c, low, high)
    shape = cal.a[None, None, :] + c
    tilts = total_tilts(z[0], cal) if tilts is None else np.asarray(tilts, dtype=float)
    success = 1.0 - n / (b + 2.0 * n) * np.exp(tilts)[None, :, None]
    out = stats.nbinom.logpmf(z, shape, success)
    if cal.truncated:  # log P(L <= Z <= U) = log(sf(L - 1) - sf(U))
        below = stats.nbinom.logsf(low - 1, shape, success)
        above = stats.nbinom.logsf(high, shape, success)
        with np.errstate(divide="ignore"):
            out = out - (below + np.log1p(-np.exp(np.minimum(above - below, 0.0))))
    return out


def total_tilts(synthetic, cal) -> np.ndarray:
    """Per set (row), the attacker's estimate of the tilt theta by which conditioning on
    the total y. turns each cell's NB(a_i + y_i, q_i) (q_i = n_i / (b_i + 2 n_i), the
    failure probability) into NB(a_i + y_i, q_i e^theta): the root of the cells' means
    summing to y., with the set's own counts z_i standing in for the unknown true ones.
    A cell's mean is r t / (1 - t), t = q_i e^theta, r = a_i + z_i; truncated, the mean on
    [L_i, U_i] at the clamped count, r t / (1 - t) (F_{r+1}(U - 1) - F_{r+1}(L - 2)) /
    (F_r(U) - F_r(L - 1)), F_r the NB's distribution function. theta stays where every t
    is below 1 (a truncated cell's window would allow more; there the root is cut)."""
    from scipy.optimize import brentq

    q = cal.population / (cal.b + 2.0 * cal.population)
    top = -np.log(q.max()) - 1e-9  # q e^theta < 1 in every cell

    def mean(theta, shape):
        t = q * np.exp(theta)
        plain = shape * t / (1.0 - t)
        if not cal.truncated:
            return plain
        p, low, high = 1.0 - t, cal.lower, cal.upper
        inside = stats.nbinom.cdf(high, shape, p) - stats.nbinom.cdf(low - 1, shape, p)
        shifted = stats.nbinom.cdf(high - 1, shape + 1, p) - stats.nbinom.cdf(low - 2, shape + 1, p)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = plain * shifted / inside
        return np.where(np.isfinite(out), out, np.clip(plain, low, high))

    def excess(theta, shape):
        return float(np.sum(mean(theta, shape)) - cal.total)

    out = np.zeros(len(synthetic))
    for m, row in enumerate(synthetic):
        shape = cal.a + (cal.clamp(row) if cal.truncated else row)
        low = -1.0
        while excess(low, shape) > 0 and low > -60:
            low *= 2.0
        # the mean rises with theta in every cell, window or not: one root, or none below top
        out[m] = top if excess(top, shape) < 0 else brentq(excess, low, top, args=(shape,),
                                                            xtol=1e-7)  # fmt: skip
    return out


def posterior_guess(synthetic, cal, low: int = 1, high: int = 9,
                    prior_expected=None) -> np.ndarray:  # fmt: skip
    """The attacker who reads the hyperparameters ``cal`` and M synthetic sets (rows of
    ``synthetic``) and is told that each count lies in [low, high] (as suppression's
    attacker is, by the flag): each cell's count c in [low, high] of largest posterior
    probability, sum over the sets of :func:`set_log_likelihood` (pg, truncated: each set
    at its own :func:`total_tilts`) plus log Poisson(c; e), ties to the smaller. e, the
    attacker's prior expected count: ``prior_expected`` (a study gives the public prior's
    n lambda0 to every arm), else :func:`predictive_mean` (for md the uniform y. / I, a
    poor prior where the strata's populations differ). With a flat likelihood (epsilon -> 0)
    it is the prior's mode in [low, high] (:func:`range_prior_guess`, also its guess from
    M = 0 sets); the sets' weight grows with epsilon and M."""
    if not low <= high:
        raise ValueError(f"need low <= high, got low={low}, high={high}")
    synthetic = _integers(synthetic, "synthetic (sets x strata)", 2)
    if synthetic.shape[1] != cal.n_cells:
        raise ValueError(f"synthetic must be M sets x {cal.n_cells} strata (the "
                         f"calibration's cells), got {synthetic.shape}")  # fmt: skip
    candidates = np.arange(low, high + 1)
    score = set_log_likelihood(synthetic, cal, candidates).sum(axis=1)
    expected = predictive_mean(cal) if prior_expected is None else np.asarray(prior_expected)
    if expected.shape != (cal.n_cells,):
        raise ValueError(f"prior_expected must hold one count per stratum ({cal.n_cells}), "
                         f"got shape {expected.shape}")  # fmt: skip
    score = score + stats.poisson.logpmf(candidates[:, None], expected[None, :])
    return candidates[np.argmax(score, axis=0)]


def range_prior_guess(prior_expected, low: int = 1, high: int = 9) -> np.ndarray:
    """The same attacker without a synthetic set: told that each count lies in [low, high],
    the mode there of Poisson(e) at the expected count e, clip(ceil(e) - 1, low, high) (the
    Poisson pmf rises up to ceil(e) - 1 and, for a whole e, ties it with e: ties to the
    smaller)."""
    expected = np.asarray(prior_expected, dtype=float)
    if expected.ndim != 1 or not np.all(np.isfinite(expected)) or np.any(expected < 0):
        raise ValueError("prior_expected must be a 1-D array, finite and non-negative")
    return np.clip(np.ceil(expected) - 1, low, high).astype(np.int64)
