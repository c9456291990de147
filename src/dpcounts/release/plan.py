"""A release planned before anything is spent: :class:`Plan`, the analogue of an OpenDP
Measurement.

:func:`plan_release` makes the plan of a :class:`~.request.ReleaseRequest` from its public
inputs and the counts' total only: the budget split, the strata (their keys and
populations), the prior when it is public, the calibration every set is drawn with, the
sampler's forecast within the limits, and what the ledger is charged (:class:`Charge`).
Every refusal an option or a public input decides is made here, in one place, before a
count is read beyond its total. The plan is immutable; it carries its own privacy map
(:meth:`Plan.privacy_map`), computed by the same functions ``dpcounts verify`` recomputes the
promise with (the family's map of :mod:`dpcounts.mechanisms.registry`, and
:func:`dpcounts.privacy.composition.compose`).

``dpcounts calibrate`` prints a plan (:mod:`.preview`); ``dpcounts synthesize`` releases one
(:func:`.sequence.release`): it checks the plan's map against the budget, charges the ledger
once, draws, writes and reports. A sanitised group prior exists only once the release draws
it (its budget spent): its plan has no calibration until :meth:`Plan.with_prior` makes the
completed plan from the drawn prior, whose map is checked again before a set is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from dpcounts.ledger import Charge
from dpcounts.release import folder, manifest
from dpcounts.release.design import Design, group_codes
from dpcounts.release.inputs import Strata, load_strata
from dpcounts.release.limits import check_cost
from dpcounts.release.report.summary import check_county_frame
from dpcounts.release.request import (
    DATASET_REQUIRED,
    Budget,
    ReleaseError,
    ReleaseRequest,
    plan_budget,
)


@dataclass(frozen=True)
class Prior:
    """The prior rates every set is calibrated with: per stratum, their manifest block and,
    for a sanitised prior, the public table of its groups' noisy totals."""

    rates: np.ndarray
    block: dict
    table: pd.DataFrame | None = None


@dataclass(frozen=True)
class Plan:
    """What a release of ``request`` will do and promise, decided before anything is spent.

    ``strata`` holds the table as read (the counts among them); the plan reads the counts
    for their total only. ``prior`` and ``calibration`` are None for a sanitised prior until
    :meth:`with_prior`. ``charge`` is None without a dataset name (a preview only)."""

    request: ReleaseRequest
    budget: Budget
    design: Design
    strata: Strata
    prior: Prior | None
    calibration: object
    #: the sampler's forecast (:func:`.limits.check_cost`) and floating-point floor
    forecast: dict | None
    floor: float | None
    charge: Charge | None
    #: made for ``synthesize`` (:func:`plan_release`'s ``releasing``): releasable
    releasing: bool = True

    @property
    def sanitised(self) -> bool:
        """Whether the prior is drawn by the release (a sanitised group prior)."""
        return self.prior is None or self.prior.block["kind"] == "sanitised"

    def privacy_map(self) -> tuple[float, float]:
        """(epsilon, delta) of the whole release, by basic composition of the prior's and
        every set's: a certified calibration's epsilon per set is its family's privacy map
        (what ``dpcounts verify`` recomputes from the published hyperparameters); a nominal
        one, or one not yet made, claims the epsilon per set it is made for."""
        from dpcounts.mechanisms import registry
        from dpcounts.privacy.composition import compose

        budget, cal = self.budget, self.calibration
        per_set = budget.epsilon_per_set
        if cal is not None and self.design.status == "certified":
            per_set, _ = registry.family(cal.mechanism).proven_epsilon(cal)
        return compose(budget.epsilon_prior, budget.sets, per_set, budget.delta_per_set)

    def check_privacy_map(self) -> None:
        """Refuse (ReleaseError) a plan whose privacy map exceeds the budget it charges:
        nothing is drawn with a calibration that does not prove its epsilon."""
        from dpcounts.mechanisms import registry

        epsilon, delta = self.privacy_map()
        budget = self.budget
        if epsilon <= budget.epsilon * (1 + registry.BOUND_RTOL) and delta <= budget.delta * (
            1 + registry.BOUND_RTOL
        ):
            return
        cal = self.calibration
        per_set, how = registry.family(cal.mechanism).proven_epsilon(cal)
        raise ReleaseError(
            f"{self.request.input}: the {cal.mechanism}/{cal.method} calibration proves "
            f"epsilon {per_set:.12g} per set ({how}), so epsilon {epsilon:.12g} and delta "
            f"{delta:.3g} for the release, more than the epsilon {budget.epsilon:.12g} and "
            f"delta {budget.delta:.3g} it was made for: refused before anything is drawn (a "
            "bug: please report it)"
        )

    def with_prior(self, prior: Prior) -> Plan:
        """The completed plan of a sanitised prior once drawn: its calibration made and
        checked (a refusal now follows a spending: the caller says so)."""
        cal, forecast, floor = _checked_calibration(
            self.request, self.design, self.strata, prior.rates
        )
        done = replace(self, prior=prior, calibration=cal, forecast=forecast, floor=floor)
        done.check_privacy_map()
        return done

    def assess(self) -> dict | None:
        """What the ledger would find of this plan's charge and whether it would refuse it
        (``Ledger.assess``, the ledger read, never written); None without a dataset name."""
        from dpcounts.ledger import Ledger, LedgerError

        if self.charge is None:
            return None
        path = self.request.ledger_path
        try:
            found = Ledger(path).assess(self.charge)
        except LedgerError as err:
            raise ReleaseError(str(err)) from err
        except ValueError as err:
            raise ReleaseError(f"{path}: {err}") from err
        return found.as_dict() | {"path": str(path)}


def plan_release(request: ReleaseRequest, releasing: bool = True, measure: bool = False) -> Plan:
    """The plan of ``request`` (module docstring), refused (ReleaseError) for every reason an
    option or a public input gives. ``releasing``: the plan is for ``synthesize`` (a dataset
    name is required, and the release folder must be free to write); ``measure``: the
    forecast measures this machine's speed (``calibrate``)."""
    budget = plan_budget(request)
    if releasing and request.dataset is None:
        raise ReleaseError(DATASET_REQUIRED)
    _check_study(request)
    manifest.check_method(request)
    if releasing:
        folder.check_destination(request.out, request.force)
        # where the private folder goes: its name ends with the root key's commitment,
        # drawn by the release; a stand-in has the same place relative to the release
        folder.check_apart(request.out, request.private_folder("0" * 64))
        _check_ledger_apart(request, request.out)
    # public decisions first (#36): the count-fit check, which reads the counts beyond
    # their total, is the release's (and calibrate's), after the plan
    strata = load_strata(request, check_fit=False)
    design = Design(request.mechanism, request.method, budget, request.tail, request.inflation)
    _check_options(request, strata)
    prior = public_prior(request, strata)
    cal = forecast = floor = None
    if prior is None:  # sanitised: drawn after the charge, checked as far as it can be
        try:
            design.check_without_prior(strata.total, strata.population)
        except ValueError as err:
            raise ReleaseError(f"{request.input}: cannot calibrate: {err}") from err
    else:
        cal, forecast, floor = _checked_calibration(
            request, design, strata, prior.rates, measure=measure
        )
    charge = _charge(request, budget, design, strata)
    plan = Plan(request, budget, design, strata, prior, cal, forecast, floor, charge, releasing)
    if cal is not None:
        plan.check_privacy_map()
    return plan


def _charge(request: ReleaseRequest, budget: Budget, design: Design, strata: Strata):
    """What the release charges the ledger: the whole budget under the dataset's name, with
    the table's identities (None without a name)."""
    if request.dataset is None:
        return None
    table, aliases = strata.identities()
    return Charge(
        request.dataset,
        budget.epsilon,
        budget.delta,
        table=table,
        aliases=aliases,
        budget=request.budget,
        guarantee=design.status,
        keys=strata.coded_keys(),
        counts=strata.counts,
        populations=strata.population,
        new_dataset=request.new_dataset,
    )


def _check_ledger_apart(request: ReleaseRequest, where) -> None:
    """Refuse a ledger inside a folder this release creates or replaces (``--force``): it
    would be lost, or published, and its budget reset."""
    path = request.ledger_path
    if path.resolve().is_relative_to(where.resolve()):
        raise ReleaseError(
            f"the ledger {path} lies inside {where}, which this release creates or "
            "replaces; keep the ledger outside every release folder (--ledger, "
            "$DPCOUNTS_LEDGER)"
        )


def _check_study(request: ReleaseRequest) -> None:
    """A ``--study`` release: the study judged this arm, and its guide is current unless the
    steward said to release without it, before any count is read and before the ledger."""
    from dpcounts.release.study_source import StudySourceError

    if request.study is None:
        return
    try:
        request.study.arm(request.mechanism, request.method)
        if not request.release_without_guide:
            request.study.check_guide()
    except StudySourceError as err:
        raise ReleaseError(str(err)) from None


def _check_options(request: ReleaseRequest, strata: Strata) -> None:
    """The options that name key columns, the county frame, a sanitised prior's groups."""
    keys = list(strata.keys.columns)
    for option, name in (("--group-by", request.group_by),
                         ("--fips-column", request.fips_column)):  # fmt: skip
        if name is not None and name not in keys:
            raise ReleaseError(
                f"{request.input}: {option} {name!r} is not a key column; keys are {keys}"
            )
    check_county_frame(request, strata.keys)
    if (
        request.sanitised_prior_by
        and len(group_codes(strata.groupable(), request.sanitised_prior_by)[1]) < 2
    ):
        raise ReleaseError(
            f"--sanitised-prior-by {list(request.sanitised_prior_by)} makes a single "
            "group, whose total is public: give --sanitised-prior-by with no column (the "
            "overall rate, no budget) instead of spending --prior-epsilon on it"
        )


def public_prior(request: ReleaseRequest, strata: Strata) -> Prior | None:
    """The prior when it needs no budget, else None.

    md has no prior; an external file or an input column is declared public by the
    steward; the overall rate total / population is public. A sanitised group prior
    (``--sanitised-prior-by`` with columns) is drawn by the release: None.
    """
    if not request.needs_prior:
        block = dict(kind="none", description="md uses no prior", epsilon=0.0)
        return Prior(None, block)
    if request.sanitised_prior_by is None:
        kind = "external-file" if request.prior_file is not None else "input-column"
        checked = "overridden" if request.prior_is_public_i_am_sure else "passed"
        block = dict(
            kind=kind,
            description=strata.prior_description,
            groups=strata.prior_groups,
            declared_source=strata.prior_declared,
            count_fit_check=checked,
        )
        return Prior(strata.prior_rate, block)
    if len(request.sanitised_prior_by) == 0:
        rate = strata.total / strata.population.sum()
        text = "the overall rate total / sum of populations (public: both are released exactly)"
        if request.denominator == "expected":
            text = ("the overall SMR total / sum of expected counts (public: both are "
                    "released exactly)")  # fmt: skip
        block = dict(kind="total", description=text, groups=[])
        return Prior(np.full(strata.counts.size, rate), block)
    return None


def _checked_calibration(request, design: Design, strata: Strata, rates, measure: bool = False):
    """The calibration and the sampler's forecast (:func:`.limits.check_cost`), refused
    (ReleaseError) when it cannot be drawn within the limits or the sampler's
    total-variation target: every check sees public quantities only. Returns (calibration,
    forecast, the sampler's floating-point floor)."""
    from dpcounts.sampling.bounds import check_feasible

    try:
        cal = design.calibrate(strata.total, strata.population, rates)
        check_feasible(cal)
    except ValueError as err:
        raise ReleaseError(f"{request.input}: cannot calibrate: {err}") from err
    forecast = check_cost(request, design, strata, cal, measure=measure)
    try:  # public, like the limits above: a target the sampler may miss for some counts
        floor = design.check_tv_target(cal)
    except ValueError as err:
        raise ReleaseError(f"{request.input}: {err}") from err
    return cal, forecast, floor
