"""The forecast of a release's cost, from public quantities only: :func:`estimate_cost`.

How much memory and time the release sampler of a calibration will need (:class:`Cost`),
and whether its tree goes to a spill file (:func:`spills`), before anything is spent: the
plan refuses a release beyond the limits (:func:`.limits.check_cost`), ``dpcounts
calibrate`` prints the forecast. The coefficients are fitted to real releases
(``benchmarks/fit_forecast.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.calibration import Calibration
from dpcounts.mechanisms import registry

#: A release tree forecast beyond this share of the machine's memory goes to a file
#: (:meth:`Design.sampler`): on a 24 GiB machine, above 3 GiB (10M strata of issue #36, a
#: tree of about 4.2 GiB), while 1M strata (0.9 GiB) stay in memory.
SPILL_SHARE = 0.125


def spills(entries: float) -> bool:
    """Whether a tree of ``entries`` double-doubles (16 bytes each) goes to a spill file:
    beyond :data:`SPILL_SHARE` of the machine's memory."""
    from dpcounts.release.request import machine_memory

    return 16.0 * entries > SPILL_SHARE * min(machine_memory(), 2.0**50)


@dataclass(frozen=True)
class Cost:
    """Forecast of a release's cost, from public quantities only.

    ``entries`` double-doubles stored in the sampler's tree, ``multiply_adds`` of its
    convolutions, ``bytes`` the peak resident memory of the whole release
    (:data:`_BASE_BYTES` for the interpreter and its libraries, plus per tree entry, per
    stratum and per stratum and set), ``widest`` the stratum whose leaf is widest,
    ``cutoff`` the first cutoff the build tries (the sampler's).
    """

    entries: float
    multiply_adds: float
    bytes: float
    widest: int
    cutoff: float
    n_cells: int
    sets: int = 1
    spilled: bool = False
    #: steps of the leaves' walks (a long leaf's twice)
    walked: float = 0.0

    def seconds(self, parallel: float, serial: float) -> float:
        """Forecast wall time on a machine that convolves ``parallel`` multiply-adds a
        second on all its cores and ``serial`` on one (the two rates of
        :func:`~dpcounts.sampling.tree_build.machine_rate`): the work of the compiled build
        (its convolutions, its entries, its leaves' walks), which runs on every core, at
        the first, and the one-threaded work per stratum and per stratum and set at the
        second, so the forecast follows the machine's speed, and its load, share by
        share."""
        built = (
            _CONVOLUTION_SHARE * self.multiply_adds
            + _WORK_PER_ENTRY * self.entries
            + _WORK_PER_STEP * self.walked
        )
        per_stratum = (_WORK_PER_STRATUM + _WORK_PER_STRATUM_SET * self.sets) * self.n_cells
        return built / parallel + per_stratum / serial + _START_SECONDS


#: Peak resident memory of a release = _BASE_BYTES + _BYTES_PER_ENTRY x tree entries (a
#: spilled tree, :func:`spills`: x _SPILL_LEVELS of its largest level's entries) +
#: _BYTES_PER_STRATUM x strata + _BYTES_PER_STRATUM_SET x strata x sets: fitted (issue
#: #36) to ``dpcounts synthesize`` on the national tables of ``benchmarks/national_table.py``
#: on the default path (``benchmarks/release.py --national``): truncated at 1,005,440
#: strata for 1 and 10 sets (in memory, 1.72 and 1.74 GiB), truncated and pg at 10,054,400
#: strata (spilled, 5.48 and 5.85 GiB), all within 5%; and at 100,800 strata for 1, 10 and
#: 100 sets (``tests/test_release_forecast.py``, within 25%). An in-memory tree's 16 bytes
#: an entry (hi and lo) are kept until the sets are written; the long table of the sets is
#: written by parts (:func:`.folder.write_public_parts`), so a set costs its counts.
#: A spilled tree (:func:`spills`) holds about one of its largest level at a time: the
#: leaves are walked in chunks and go to the file as they come, while the first level
#: they make is held.
_SPILL_LEVELS = 1.05
_BASE_BYTES = 0.385 * 2**30
_BYTES_PER_ENTRY = 16.4
_BYTES_PER_STRATUM = 420.0
_BYTES_PER_STRATUM_SET = 15.0
#: Seconds a release spends besides its work (the command's imports, loading the compiled
#: sampler, the steward's figures), and the work, in multiply-adds of
#: :func:`~dpcounts.sampling.tree_build.machine_rate`. On every core (its parallel rate):
#: the build's convolutions at _CONVOLUTION_SHARE of the measured rate's cost (at least 1:
#: no faster than the kernel measured), per tree entry (trimming the leaves, trimming and
#: gathering the levels, spilling them) and per step of the leaves' walks
#: (:attr:`Cost.walked`). On one core (its serial rate): per stratum (reading, identifying
#: the table, calibrating, the count-fit check, the summary and utility report) and per
#: stratum and set (drawing, writing and scoring the sets). Fitted by
#: ``benchmarks/fit_forecast.py`` (issue #36, session of 2026-11-28 night; relative least
#: squares, non-negative) to the ten runs of one ``benchmarks/release.py --national`` on
#: a 2-core machine at load 0.7 to 1.3: 10k to 10M strata, 1 to 100 sets, truncated and
#: pg; in sample within 4% of all ten. Two rates rather than one, because a release is
#: mostly one-threaded: with another program on one core the parallel rate halves while
#: the release slows by far less, and one rate scaled everything (a forecast 1.7 times
#: the time, 2026-11-28).
_START_SECONDS = 2.706
_WORK_PER_STRATUM = 6_629.0
_WORK_PER_STRATUM_SET = 1_029.0
_CONVOLUTION_SHARE = 1.0
_WORK_PER_ENTRY = 76.41
_WORK_PER_STEP = 156.9


def estimate_cost(cal: Calibration, tv_target: float, sets: int = 1) -> Cost:
    """What building the release sampler of ``cal`` will cost (:class:`Cost`).

    From public quantities only (bounds, total, shapes, populations and the prior's
    expected shares), so a refusal reveals nothing about the counts. Each cell's count is
    taken at its prior's expected share of the total, y_k ~ mu_k: its leaf is then the
    negative binomial of shape mu_k + a_k and success p_k c, c the tilt that makes the
    expected total y. (as the build does), cut to its truncation range. A node's window is
    the span holding all but ``cutoff`` of each side of its sum's distribution,
    2 z(cutoff) sd (+ 1), sd from the variances of its cells (they add), capped by its
    children's spans and y. + 1; a convolution costs the product of its children's widths.
    ``benchmarks/release.py --national`` prints the forecast beside what the build did.
    """
    from scipy.special import ndtri

    from dpcounts.sampling.bounds import check_feasible
    from dpcounts.sampling.release_mode import release_cutoffs
    from dpcounts.sampling.tree_build import KEPT
    from dpcounts.sampling.tree_draw import FLOOR_BITS

    total, n_cells = int(cal.total), cal.n_cells
    lower, upper = check_feasible(cal)
    upper = np.minimum(upper, total)
    cutoff = release_cutoffs(n_cells, total, tv_target)[0]
    # both tails of a window; the 2^-FLOOR_BITS floor bounds the span when cutoff = 0
    z = float(-ndtri(max(cutoff, 2.0**-FLOOR_BITS)))
    spread = 2.0 * z
    if not registry.family(cal.mechanism).uses_prior:  # md: the Dirichlet's even weights
        share = np.full(n_cells, 1.0 / n_cells)
    else:
        expected = np.asarray(cal.population, float) * np.asarray(cal.prior_rate, float)
        share = expected / expected.sum()
    mean = total * share
    shape = mean + cal.a
    log_p = np.asarray(cal.log_success(), dtype=float)
    # the tilt c with sum_k shape_k q_k / (1 - q_k) = y., q = p c (untruncated cells)
    top = -float(np.max(log_p))
    low, high = top - 60.0, top - 1e-12
    # q = p c with p = e^log_p once: a product per step, not an exponential; each distinct
    # (shape, p) once, weighted by how many strata share it (a national table of 10M
    # strata has about 10^5)
    p = np.exp(log_p + top)
    pairs = np.empty(n_cells, dtype=complex)
    pairs.real, pairs.imag = shape, p
    codes, distinct = pd.factorize(pairs)
    repeats = np.bincount(codes, minlength=distinct.size).astype(float)
    shape_u, p_u = distinct.real.copy(), distinct.imag.copy()
    del pairs, distinct
    for _ in range(200):  # bisection to 1e-10 in log c: about 40 steps
        if high - low <= 1e-10:
            break
        mid = 0.5 * (low + high)
        q = p_u * math.exp(mid - top)
        if float(np.sum(repeats * shape_u * q / (1.0 - q))) < total:
            low = mid
        else:
            high = mid
    q = p * math.exp(low - top)
    var = shape * q / (1.0 - q) ** 2
    width = np.minimum(spread * np.sqrt(var) + 2.0, total + 1.0)
    # each leaf's walk: from its window's start past its mode to where the pmf is 2^-440
    # of its peak (the walk's stop), or its window's end; walked again when it keeps more
    # entries than the first pass holds (dpcounts.sampling.tree_build)
    ends = _walk_ends(shape_u, p_u * math.exp(low - top), cutoff)[codes]
    del codes
    start = lower if cal.truncated else np.zeros(n_cells)
    walked = np.maximum(np.minimum(upper, ends) - start + 1.0, 1.0)
    if cal.truncated:
        span = (upper - lower + 1).astype(float)
        width = np.minimum(width, span)
        var = np.minimum(var, span**2 / 4.0)
    walked = float(np.sum(walked * np.where(width > KEPT, 2.0, 1.0)))
    del ends, start
    widest = int(np.argmax(width))
    entries = float(width.sum())
    level_entries = [entries]  # per level: the entries it stores
    work = 0.0
    widths, variances = width, var
    while widths.size > 1:
        pairs = widths.size // 2
        wl, wr = widths[0 : 2 * pairs : 2], widths[1 : 2 * pairs : 2]
        vl, vr = variances[0 : 2 * pairs : 2], variances[1 : 2 * pairs : 2]
        if widths.size > 2:  # the root forms only its value at y.
            work += float(np.sum(wl * wr))
        merged_var = vl + vr
        merged = np.minimum(
            np.minimum(wl + wr - 1.0, spread * np.sqrt(merged_var) + 2.0), total + 1.0
        )
        entries += float(merged.sum())
        level_entries.append(float(merged.sum()))
        widths = np.concatenate([merged, widths[2 * pairs :]])
        variances = np.concatenate([merged_var, variances[2 * pairs :]])
    per_stratum = _BYTES_PER_STRATUM + _BYTES_PER_STRATUM_SET * sets
    spilled = spills(entries)
    # a spilled tree holds two levels at a time while it is built (the one convolved and
    # the one it makes), never the whole
    held = _BYTES_PER_ENTRY * (max(level_entries) * _SPILL_LEVELS if spilled else entries)
    size = _BASE_BYTES + held + per_stratum * n_cells
    return Cost(entries, work, size, widest, cutoff, n_cells, sets, spilled, walked)


def _walk_ends(shape: np.ndarray, q: np.ndarray, cutoff: float) -> np.ndarray:
    """Where the walk of a leaf of negative binomial ``shape`` and success ``q`` stops
    when its tails of mass ``cutoff`` are cut: the first count past its mode whose pmf is
    below 2^-``walk_stop_bits(cutoff)`` of the mode's (the walk's stop,
    :func:`~dpcounts.sampling.tree_draw.leaf_walk`, less its remainder bound's step or
    two), by bisection on the log pmf."""
    from scipy.special import gammaln

    from dpcounts.sampling.tree_draw import walk_stop_bits

    log_q = np.log(q)

    def log_pmf(z):  # up to a constant per leaf
        return gammaln(z + shape) - gammaln(z + 1.0) + z * log_q

    drop = walk_stop_bits.py_func(cutoff) * math.log(2.0)
    mode = np.maximum(0.0, np.floor((shape - 1.0) * q / (1.0 - q)))
    peak = log_pmf(mode)
    below, above = mode, mode + 1.0
    for _ in range(64):  # double the step until past the stop
        short = peak - log_pmf(above) < drop
        if not short.any():
            break
        above = np.where(short, mode + 2.0 * (above - mode), above)
    for _ in range(60):  # to a quarter of a count: the stop is a count
        if np.all(above - below <= 0.25):
            break
        mid = 0.5 * (below + above)
        inside = peak - log_pmf(mid) < drop
        below, above = np.where(inside, mid, below), np.where(inside, above, mid)
    return np.ceil(above)
