"""The public design of a release and the three steps that touch the counts.

A :class:`Design` holds what is public before any count is read: mechanism, calibration
method, budget split, truncation settings. From it and the strata come, in order,

1. the prior rates: an external (public) file or column, the public overall rate
   total / population, or a *sanitised* prior (group totals with discrete Laplace noise,
   ``epsilon_prior``; :func:`dpsynth.privacy.sanitised_prior.sanitised_group_prior`);
2. the calibration at ``epsilon_per_set`` from the total, populations and prior rates,
   never from the counts (:meth:`Design.calibrate`);
3. one release-mode sampler for the counts (:meth:`Design.sampler`) whose total-variation
   error is at most ``tv_target = delta_per_set / (1 + e^epsilon_per_set)``, which makes
   each set (epsilon_per_set, delta_per_set)-DP (docs/privacy.md).

``dpsynth synthesize`` and the exact whole-release audit
(:mod:`dpsynth.privacy.release_audit`) both go through these functions, so the audit
checks the code that releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpsynth.calibration import Calibration
from dpsynth.data.validation import key_order
from dpsynth.release.request import Budget

#: Widths estimated from this many standard deviations of a cell's count.
_SPREAD_SDS = 40


@dataclass(frozen=True)
class Design:
    """Mechanism, method, budget split and truncation settings of a release."""

    mechanism: str
    method: str
    budget: Budget
    tail: float | None = None
    inflation: float = 1.0

    @property
    def tv_target(self) -> float:
        """Largest total-variation error a set's sampler may have."""
        if self.budget.epsilon_per_set > 700.0:  # e^eps overflows: 0 to double precision
            return 0.0
        return self.budget.delta_per_set / (1.0 + math.exp(self.budget.epsilon_per_set))

    def calibrate(self, total: int, population, prior_rate) -> Calibration:
        """The calibration of every set (ValueError when it cannot be made)."""
        from dpsynth.privacy.calibrate import calibrate

        kwargs = {"method": self.method}
        if self.mechanism == "truncated":
            kwargs.update(tail=self.tail, inflation=self.inflation)
        return calibrate(
            self.mechanism,
            self.budget.epsilon_per_set,
            total,
            population,
            None if self.mechanism == "md" else prior_rate,
            **kwargs,
        )

    def check_tv_target(self, cal: Calibration) -> float:
        """The public bound on the sampler's rounding term; ValueError if the target is too close.

        The rounding term of a release-mode sampler depends on the counts (through how far
        its leaves are walked), so a target near it is met for some tables and missed for
        their neighbours: a refusal that depends on the counts, visible as "no release".
        :func:`~dpsynth.sampling.conditioned.public_rounding_bound` bounds it for every
        table from the calibration alone; a release needs ``tv_target`` at least twice
        that, and is refused otherwise (a refusal that depends on public quantities only).
        """
        from dpsynth.sampling.conditioned import public_rounding_bound

        floor = public_rounding_bound(cal)
        if self.tv_target < 2.0 * floor:
            raise ValueError(
                f"the sampler's total-variation target {self.tv_target:.3g} (delta per set / "
                f"(1 + e^epsilon per set)) is below twice {floor:.3g}, the floating-point "
                "error the sampler may have for some tables of these strata; such a target "
                "would be met for some counts and missed for their neighbours. Use a larger "
                "--delta, fewer --sets or a smaller epsilon per set"
            )
        return floor

    def check_without_prior(self, total: int, population) -> None:
        """The checks a release with a sanitised prior makes before drawing the prior,
        and so before spending anything (ValueError, the message of the check after it):
        those the prior cannot change. pg/certified's shapes and bounds do not depend on
        the prior, so its calibration and target are checked at a stand-in prior (the
        overall rate); for any other design the target is checked against the least
        rounding bound of any calibration (:func:`~dpsynth.sampling.conditioned.
        least_rounding_bound`)."""
        from dpsynth.sampling.conditioned import check_feasible, least_rounding_bound

        population = np.asarray(population, dtype=float)
        if self.mechanism == "pg" and self.method == "certified":
            stand_in = np.full(population.size, max(total, 1) / float(population.sum()))
            cal = self.calibrate(total, population, stand_in)
            check_feasible(cal)
            self.check_tv_target(cal)
            return
        floor = least_rounding_bound(population.size, total)
        if self.tv_target < 2.0 * floor:
            raise ValueError(
                f"the sampler's total-variation target {self.tv_target:.3g} (delta per set / "
                f"(1 + e^epsilon per set)) is below twice {floor:.3g}, the least "
                "floating-point error a sampler of these strata has, whatever the prior. Use "
                "a larger --delta, fewer --sets or a smaller epsilon per set"
            )

    def sampler(self, counts, cal: Calibration):
        """The release-mode sampler of the sets for these counts."""
        from dpsynth.sampling.conditioned import release_sampler

        return release_sampler(counts, cal, self.tv_target)


def group_codes(keys: pd.DataFrame, columns) -> tuple[np.ndarray, pd.DataFrame]:
    """Per stratum, the code of its group of ``columns`` (groups sorted by their labels as
    the strata are, :func:`dpsynth.data.validation.key_order`: ids 1, 2, 10 numerically)."""
    labels = keys[list(columns)].astype(str)
    groups = key_order(labels.drop_duplicates(), list(columns))
    index = pd.MultiIndex.from_frame(groups)
    codes = index.get_indexer(pd.MultiIndex.from_frame(labels))
    return codes.astype(np.int64), groups


def estimate_cost(cal: Calibration) -> tuple[float, float, int]:
    """Estimated (bytes, multiply-adds, widest cell) of building the release sampler.

    From public quantities only (bounds, total, shapes and the prior's expected shares),
    so a refusal reveals nothing about the counts. A cell's window is its truncation
    range, or about 40 standard deviations of its count; a node's window is that of the
    sum of its cells, capped at the total; direct convolution costs the product of the
    children's widths.
    """
    total = cal.total
    lower, upper = cal.bounds()
    upper = np.minimum(upper, total)
    if cal.truncated:
        width = (upper - lower + 1).astype(float)
        sd = width / 2.0
    else:
        if cal.mechanism == "md":
            share = np.full(cal.n_cells, 1.0 / cal.n_cells)
        else:
            expected = cal.population * cal.prior_rate
            share = expected / expected.sum()
        mean = total * share
        sd = np.sqrt(mean * (1.0 + mean / (cal.a + mean)) + 1.0)
        width = np.minimum(_SPREAD_SDS * sd + 1.0, total + 1.0)
    widest = int(np.argmax(width))
    nodes = list(zip(width.tolist(), (sd**2).tolist(), strict=True))
    entries = float(width.sum())
    work = 0.0
    while len(nodes) > 1:
        merged = []
        for i in range(0, len(nodes) - 1, 2):
            (w1, v1), (w2, v2) = nodes[i], nodes[i + 1]
            work += w1 * w2
            var = v1 + v2
            w = min(w1 + w2 - 1.0, _SPREAD_SDS * math.sqrt(var) + 1.0, total + 1.0)
            merged.append((max(w, 1.0), var))
            entries += w
        if len(nodes) % 2:
            merged.append(nodes[-1])
        nodes = merged
    return 8.0 * entries * 3.0, work, widest
