"""The limits a release's sampler must fit, decided from public quantities before anything
is spent: its forecast memory and time (:func:`check_cost`), with a refusal that names only
the options that would let it run."""

from __future__ import annotations

import math

from dpcounts.mechanisms import registry
from dpcounts.release.cost import estimate_cost
from dpcounts.release.design import Design
from dpcounts.release.inputs import Strata
from dpcounts.release.request import ReleaseError, machine_memory

#: Multiply-adds a second that no laptop of the last decade falls below, on all its cores
#: and on one: a forecast at this rate within the limits needs no measurement of the
#: machine.
_SLOWEST_RATE = 2e7


def check_cost(request, design: Design, strata: Strata, cal, measure: bool = False) -> dict:
    """The forecast of building the sampler (:func:`~dpcounts.release.cost.estimate_cost`,
    public), refused (ReleaseError) beyond ``--max-memory`` or ``--max-minutes``; the
    message names only the options that would let it run. The machine's speed is measured
    (:func:`~dpcounts.sampling.tree_build.machine_rate`) only when the forecast at the
    slowest rate would not fit the time limit, or when ``measure`` asks for it."""
    cost = estimate_cost(cal, design.tv_target, design.budget.sets)
    limit = request.max_minutes * 60.0
    rate = (_SLOWEST_RATE, _SLOWEST_RATE)  # (on every core, on one)
    measured = measure or cost.seconds(*rate) > limit
    if measured:
        from dpcounts.sampling.tree_build import machine_rate

        rate = machine_rate()
    seconds = cost.seconds(*rate)
    forecast = {
        "bytes": cost.bytes,
        "multiply_adds": cost.multiply_adds,
        "entries": cost.entries,
        "walked": cost.walked,
        "spilled": cost.spilled,
        "seconds": seconds,
        "measured_rate": measured,
    }
    over_memory, over_time = cost.bytes > request.max_memory, seconds > limit
    if not (over_memory or over_time):
        return forecast
    where = ", ".join(f"{k}={v!r}" for k, v in strata.keys.iloc[cost.widest].items())
    ways = []  # only what would let this release run
    raises = []  # larger limits: useful only if every limit exceeded can be raised
    if over_memory and cost.bytes <= machine_memory():  # one reading of the machine
        raises.append(f"--max-memory {math.ceil(cost.bytes / 2**30 * 10) / 10:g}")
    if over_time and seconds <= _LONGEST_SUGGESTED:
        raises.append(f"--max-minutes {math.ceil(seconds / 60.0):d}")
    if len(raises) == over_memory + over_time:
        ways.append(" and ".join(raises) + (" (the machine has the memory)" if over_memory else ""))
    lighter = registry.family(request.mechanism).lighter
    if lighter is not None and _fits(lighter, request, design, strata, cal, rate):
        ways.append(f"--mechanism {lighter} (its bounded strata make a sampler within the "
                    "limits)")  # fmt: skip
    ways.append("fewer strata or a smaller total")
    raise ReleaseError(
        f"{request.input}: the sampler would need about {cost.bytes / 2**30:.1f} GiB and "
        f"{seconds / 60.0:.1f} minutes on this machine ({cost.multiply_adds:.2g} "
        f"multiply-adds; limits --max-memory {request.max_memory / 2**30:g} GiB, --max-minutes "
        f"{request.max_minutes:g}); the widest stratum is ({where}). Use " + ", or ".join(ways)
    )


#: A forecast longer than this is not worth suggesting a larger --max-minutes for.
_LONGEST_SUGGESTED = 24 * 3600.0


def _fits(
    mechanism: str, request, design: Design, strata: Strata, cal, rate: tuple[float, float]
) -> bool:
    """Whether ``mechanism``, same method, prior and budget, fits the limits."""
    lighter = Design(mechanism, design.method, design.budget, design.tail, design.inflation)
    try:
        other = lighter.calibrate(strata.total, strata.population, cal.prior_rate)
        cost = estimate_cost(other, lighter.tv_target, design.budget.sets)
    except ValueError:
        return False
    return cost.bytes <= request.max_memory and cost.seconds(*rate) <= request.max_minutes * 60
