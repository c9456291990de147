"""The public design of a release and the three steps that touch the counts.

A :class:`Design` holds what is public before any count is read: mechanism, calibration
method, budget split, truncation settings. From it and the strata come, in order,

1. the prior rates: an external (public) file or column, the public overall rate
   total / population, or a *sanitised* prior (group totals with discrete Laplace noise,
   ``epsilon_prior``; :func:`dpcounts.privacy.sanitised_prior.sanitised_group_prior`);
2. the calibration at ``epsilon_per_set`` from the total, populations and prior rates,
   never from the counts (:meth:`Design.calibrate`);
3. one release sampler for the counts (:meth:`Design.sampler`) whose total-variation
   error is at most ``tv_target = delta_per_set / (1 + e^epsilon_per_set)``, which makes
   each set (epsilon_per_set, delta_per_set)-DP (docs/privacy.md).

``dpcounts synthesize`` and the exact whole-release audit
(:mod:`dpcounts.privacy.release_audit`) both go through these functions, so the audit
checks the code that releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.calibration import Calibration
from dpcounts.data.validation import key_order
from dpcounts.mechanisms import registry
from dpcounts.release.request import Budget


@dataclass(frozen=True)
class Design:
    """Mechanism, method, budget split and truncation settings of a release."""

    mechanism: str
    method: str
    budget: Budget
    tail: float | None = None
    inflation: float = 1.0

    @property
    def status(self) -> str:
        """``certified`` or ``nominal``: decided here once (:func:`.manifest.status`), read
        by the ledger, the manifest, the summary and the preview."""
        from dpcounts.release.manifest import status

        return status(self.mechanism, self.method)

    def guarantee(self) -> dict:
        """The manifest's ``guarantee`` block (:func:`.manifest.guarantee`)."""
        from dpcounts.release.manifest import guarantee

        return guarantee(self.mechanism, self.method, self.budget.as_dict())

    @property
    def tv_target(self) -> float:
        """Largest total-variation error a set's sampler may have."""
        if self.budget.epsilon_per_set > 700.0:  # e^eps overflows: 0 to double precision
            return 0.0
        return self.budget.delta_per_set / (1.0 + math.exp(self.budget.epsilon_per_set))

    def calibrate(self, total: int, population, prior_rate) -> Calibration:
        """The calibration of every set (ValueError when it cannot be made)."""
        from dpcounts.privacy.calibrate import calibrate

        kwargs = {"method": self.method}
        if registry.family(self.mechanism).bounded:
            kwargs.update(tail=self.tail, inflation=self.inflation)
        return calibrate(
            self.mechanism,
            self.budget.epsilon_per_set,
            total,
            population,
            prior_rate if registry.family(self.mechanism).uses_prior else None,
            **kwargs,
        )

    def check_tv_target(self, cal: Calibration) -> float:
        """The public bound on the sampler's rounding term; ValueError if the target is too close.

        The rounding term of a release sampler depends on the counts (through how far
        its leaves are walked), so a target near it is met for some tables and missed for
        their neighbours: a refusal that depends on the counts, visible as "no release".
        :func:`~dpcounts.sampling.release_mode.public_rounding_bound` bounds it for every
        table from the calibration alone; a release needs ``tv_target`` at least twice
        that, and is refused otherwise (a refusal that depends on public quantities only).
        """
        from dpcounts.sampling.release_mode import public_rounding_bound

        floor = public_rounding_bound(cal)
        if self.tv_target < 2.0 * floor:
            raise ValueError(
                f"the sampler's total-variation target {self.tv_target:.3g} (delta per set / "
                f"(1 + e^epsilon per set)) is below twice {floor:.3g}, the floating-point "
                "error the sampler may have for some tables of these strata; such a target "
                "would be met for some counts and missed for their neighbours. "
                + self.tv_fix(floor)
            )
        return floor

    def tv_fix(self, floor: float) -> str:
        """What makes the target at least twice ``floor``, in numbers: the largest epsilon
        per set at this delta, and the delta this epsilon needs (none when above 1)."""
        from dpcounts.sampling.release_mode import largest_epsilon

        b = self.budget
        ratio = b.delta_per_set / (2.0 * floor)
        needed = 2.0 * floor * (1.0 + math.exp(min(b.epsilon_per_set, 700.0))) * b.sets
        fewer = ", or fewer --sets" if b.sets > 1 else ""
        largest = largest_epsilon(b.delta_per_set, floor)
        if ratio <= 2.0:
            at = f"at --delta {b.delta:.3g} no epsilon can"
        else:
            at = f"at --delta {b.delta:.3g}, an epsilon per set of at most {largest:.3g}"
            if b.epsilon_prior > 0 or b.sets > 1:
                parts = [f"the prior's {b.epsilon_prior:.3g}"] if b.epsilon_prior > 0 else []
                parts += [f"{b.sets} sets"] if b.sets > 1 else []
                total = b.epsilon_prior + b.sets * largest
                at += f" (a total --epsilon of {total:.3g}, with {' and '.join(parts)})"
        if needed < 1.0:
            return f"Use a smaller epsilon: {at}; or --delta {needed:.2g} or more{fewer}"
        return (
            f"No delta below 1 allows epsilon {b.epsilon_per_set:.3g} per set on these "
            f"strata (it would need {needed:.2g}): use a smaller epsilon, {at}{fewer}"
        )

    def check_without_prior(self, total: int, population) -> None:
        """The checks a release with a sanitised prior makes before drawing the prior,
        and so before spending anything (ValueError, the message of the check after it):
        those the prior cannot change. A method whose shapes and bounds do not read the
        prior (the registry's ``prior_blind``: pg/certified) has its calibration and target
        checked at a stand-in prior (the overall rate); any other design's target is
        checked against the least rounding bound of any calibration
        (:func:`~dpcounts.sampling.release_mode.least_rounding_bound`)."""
        from dpcounts.sampling.bounds import check_feasible
        from dpcounts.sampling.release_mode import least_rounding_bound

        population = np.asarray(population, dtype=float)
        if self.method in registry.family(self.mechanism).prior_blind:
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
                "floating-point error a sampler of these strata has, whatever the prior. "
                + self.tv_fix(floor)
            )

    def sampler(self, counts, cal: Calibration, progress=None, spill_dir=None, spilled=None):
        """The release sampler of the sets for these counts (``progress``: called with
        the fraction of each build done). With ``spill_dir`` (a private folder), a tree
        forecast (:func:`.cost.estimate_cost`, public) to need more than
        :data:`.cost.SPILL_SHARE` of the machine's memory is kept in an unlinked file there
        and read one level at a time (:class:`~dpcounts.sampling.spill.Spill`); ``spilled``:
        that forecast's decision, when already made (:func:`.limits.check_cost`)."""
        from dpcounts.release.cost import estimate_cost, spills
        from dpcounts.sampling.release_mode import release_sampler
        from dpcounts.sampling.spill import Spill

        spill = None
        if spilled is None and spill_dir is not None:
            spilled = spills(estimate_cost(cal, self.tv_target).entries)
        if spill_dir is not None and spilled:
            spill = Spill(spill_dir, 0.0)
        return release_sampler(counts, cal, self.tv_target, progress=progress, spill=spill)


def group_codes(keys: pd.DataFrame, columns) -> tuple[np.ndarray, pd.DataFrame]:
    """Per stratum, the code of its group of ``columns`` (groups sorted by their labels as
    the strata are, :func:`dpcounts.data.validation.key_order`: ids 1, 2, 10 numerically)."""
    labels = keys[list(columns)].astype(str)
    groups = key_order(labels.drop_duplicates(), list(columns))
    index = pd.MultiIndex.from_frame(groups)
    codes = index.get_indexer(pd.MultiIndex.from_frame(labels))
    return codes.astype(np.int64), groups
