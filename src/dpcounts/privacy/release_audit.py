"""Exact audit of a whole release on small instances, through the code that releases.

A release is the sanitised prior's noisy group totals (if any) and N synthetic sets drawn
from release-mode samplers calibrated with that prior. :func:`audit_release` takes a
:class:`~dpcounts.release.design.Design` (the same object ``dpcounts synthesize`` uses) and
a small public instance, and for every data vector y with the total and every neighbour x
(one event moved between two strata):

* enumerates the prior's outputs v (every noisy-total vector within ``window`` of the true
  totals of y and x; their exact discrete Laplace probabilities under y and under x),
* for each v, makes the calibration and the two release samplers exactly as a release
  does (:meth:`Design.calibrate`, :meth:`Design.sampler`) and computes the probability that
  each implemented sampler draws each support point
  (:func:`dpcounts.sampling.implemented.implemented_pmf`),
* forms the probability of every whole output (v, z_1, ..., z_N) under y and under x,
  where "no release" is an output of its own: a calibration the prior admits for neither
  (both refused), or a sampler that cannot be built for one table (``Design.sampler``
  raising, as a release would then stop), which its neighbour may not share. A release
  that happens for y and not for x is then mass that x cannot produce, so it shows in
  ``unmatched`` and ``delta`` instead of crashing the audit (a count-dependent refusal was
  the leak the adversarial audit found; docs/privacy.md, Part 5).

It reports the largest privacy loss |log P_y(o) - log P_x(o)| over outputs both can
produce (the realised epsilon of the whole release), the largest hockey-stick divergence
sum_o max(0, P_y(o) - e^eps P_x(o)) at the release's total epsilon (its realised delta,
over the enumerated outputs), and the largest mass one dataset puts on outputs its
neighbour cannot produce.

With a sanitised prior the audit is **exact within a window**, not exact: prior outputs
outside the window are not enumerated, and their probability (at most
:attr:`ReleaseAudit.window_mass_outside`, a probability) is reported, not hidden
(:meth:`ReleaseAudit.describe`). At the default prior share (10% of epsilon) the prior's
noise is wide: epsilon 1 gives epsilon_prior 0.1 and a noise scale of 20, so the default
window of 12 leaves out most of its mass (0.78 with two groups), and
:func:`window_for` the window that would leave out at most a given mass (about 290 for
1e-6), whose (2 window + 2)^groups outputs each need a calibration and a sampler: too
many to enumerate. Audits with a sanitised prior therefore use a large prior share (tests
use epsilon_prior 2 of 3, window 12: mass outside below 1e-5).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from dpcounts.sampling.enumeration import compositions


@dataclass(frozen=True)
class ReleaseAudit:
    """The realised privacy of a whole release on one small instance."""

    epsilon: float  # largest |privacy loss| over outputs both datasets can produce
    delta: float  # largest hockey-stick divergence at epsilon_total over neighbour pairs
    unmatched: float  # largest mass on outputs the neighbour cannot produce
    epsilon_total: float  # what the manifest states
    delta_total: float
    pairs: int
    outputs: int
    window_mass_outside: float  # prior mass not enumerated (0 without a sanitised prior)
    window: int | None = None  # noisy totals enumerated: true totals -window..+window

    def describe(self) -> str:
        """What the audit enumerated, in words: exact, or exact within a window."""
        if self.window is None or self.window_mass_outside == 0:
            return "exact: every output of the release enumerated"
        return (
            f"exact within a window: noisy totals within {self.window} of the true ones; "
            f"the prior's mass outside it, at most {self.window_mass_outside:.3g}, is not "
            "audited"
        )


def _outside(epsilon_prior: float, n_groups: int, window: int) -> float:
    """At most the prior's mass outside the window: some group's noise beyond +-window.
    One group's noise, P(e = k) proportional to q^|k| with q = e^(-epsilon_prior / 2), lies
    beyond it with probability 2 q^(window + 1) / (1 + q)."""
    q = math.exp(-epsilon_prior / 2)
    one = 2 * q ** (window + 1) / (1 + q)
    return float(-math.expm1(n_groups * math.log1p(-min(one, 1.0)))) if one < 1 else 1.0


def window_for(epsilon_prior: float, n_groups: int, mass: float) -> int:
    """The smallest window whose prior mass outside is at most ``mass``."""
    q = math.exp(-epsilon_prior / 2)
    one = -math.expm1(math.log1p(-mass) / n_groups)  # each group's share of the mass
    return max(0, math.ceil(math.log(one * (1 + q) / 2) / math.log(q)) - 1)


def _prior_outputs(design, totals_y, totals_x, groups, group_population, window):
    """Noisy-total vectors v in the window, with P(v | y), P(v | x) and the rates."""
    from dpcounts.privacy.discrete_laplace import discrete_laplace_pmf, scale_for
    from dpcounts.privacy.sanitised_prior import rates_from_noisy_totals

    scale = scale_for(design.budget.epsilon_prior, 2)
    centre = np.minimum(totals_y, totals_x)
    ranges = [range(int(c) - window, int(c) + window + 2) for c in centre]
    for v in itertools.product(*ranges):
        v = np.array(v)
        p_y = float(np.prod(discrete_laplace_pmf(v - totals_y, scale)))
        p_x = float(np.prod(discrete_laplace_pmf(v - totals_x, scale)))
        yield v, p_y, p_x, rates_from_noisy_totals(v, group_population)[groups]


def _joint(pmf: np.ndarray, sets: int) -> np.ndarray:
    out = pmf
    for _ in range(sets - 1):
        out = np.multiply.outer(out, pmf).reshape(-1)
    return out


def audit_release(
    design,
    population,
    total: int,
    *,
    prior_rate=None,
    groups=None,
    window: int = 12,
) -> ReleaseAudit:
    """Exact (epsilon, delta) of a whole release of ``design`` on a small instance.

    ``population`` (public) has one entry per stratum. Give either ``prior_rate`` (a public
    prior, one rate per stratum; ignored by md) or ``groups`` (a group code 0..G-1 per
    stratum: the sanitised prior of ``design.budget.epsilon_prior``).
    """
    from dpcounts.sampling.implemented import hockey_stick, implemented_pmf

    population = np.asarray(population, dtype=float)
    n_cells, sets = population.size, design.budget.sets
    eps_total, delta_total = design.budget.epsilon, design.budget.delta
    data = compositions(total, np.zeros(n_cells, np.int64), np.full(n_cells, total))
    slot = {tuple(z): k for k, z in enumerate(data)}
    refused = np.zeros(len(data) ** sets + 1)  # every set's outcome, then "no release"
    refused[-1] = 1.0
    cache: dict = {}

    def set_pmf(y, key, rates):
        """The N sets' joint pmf over the compositions of the total, then the probability
        of no release (1 when the prior admits no calibration or the sampler cannot be
        built for y, as a release would stop there)."""
        if (tuple(y), key) not in cache:
            try:
                cal = design.calibrate(total, population, rates)
                sampler = design.sampler(y, cal)
            except (ValueError, RuntimeError):
                cache[(tuple(y), key)] = refused
            else:
                support, pmf = implemented_pmf(sampler)
                one_set = np.zeros(len(data))
                one_set[[slot[tuple(z)] for z in support]] = pmf
                cache[(tuple(y), key)] = np.append(_joint(one_set, sets), 0.0)
        return cache[(tuple(y), key)]

    outside = 0.0
    if groups is not None:
        groups = np.asarray(groups)
        group_population = np.bincount(groups, weights=population)
        # the window is widened by one on the far side, so it holds -window..window of each
        outside = _outside(design.budget.epsilon_prior, int(groups.max() + 1), window)

    worst_eps = worst_delta = worst_unmatched = 0.0
    pairs = outputs = 0
    for y in data:
        for i, j in itertools.permutations(range(n_cells), 2):
            if y[i] == 0:
                continue
            x = y.copy()
            x[i] -= 1
            x[j] += 1
            pairs += 1
            if groups is None:
                priors = [(None, 1.0, 1.0, prior_rate)]
            else:
                totals_y = np.bincount(groups, weights=y).astype(np.int64)
                totals_x = np.bincount(groups, weights=x).astype(np.int64)
                priors = _prior_outputs(
                    design, totals_y, totals_x, groups, group_population, window
                )
            out_y, out_x = [], []
            for v, p_y, p_x, rates in priors:
                key = None if v is None else tuple(v)
                out_y.append(p_y * set_pmf(y, key, rates))
                out_x.append(p_x * set_pmf(x, key, rates))
            py, px = np.concatenate(out_y), np.concatenate(out_x)
            outputs = py.size
            both = (py > 0) & (px > 0)
            if both.any():
                loss = np.abs(np.log(py[both]) - np.log(px[both]))
                worst_eps = max(worst_eps, float(loss.max()))
            worst_unmatched = max(worst_unmatched, float(py[(py > 0) & (px == 0)].sum()))
            worst_delta = max(worst_delta, hockey_stick(py, px, eps_total))
    return ReleaseAudit(
        worst_eps,
        worst_delta,
        worst_unmatched,
        eps_total,
        delta_total,
        pairs,
        outputs,
        outside,
        None if groups is None else window,
    )
