"""The epsilon guide: for each arm and measure, one verdict, the epsilon it names (the total
the steward pays, the prior's budget included; only for ``met``), the verdict in a few
words (``verdict_text``, :func:`verdict_text`: what the figures say, word for word) and a
one-line reason. ``epsilon_privacy`` is the total epsilon from which privacy moves the
measure by at most the tolerance from the no-privacy reference, whatever the verdict (NaN:
not in the grid); ``within_low`` and ``within_high`` are the values within tolerance of
that reference; ``arm_label`` is the arm as the figures name it
(:func:`dpcounts.arms.arm_title`).

A synthetic table is a posterior predictive draw: even with no privacy at all it carries
synthesis noise (about twice a Poisson's variance per stratum). So the guide judges an
arm against three references of the study's summary (:mod:`dpcounts.studies.stage.summary`): the
truth, the prior alone (the measure of the expected counts n x lambda0) and the
no-privacy reference (tables drawn with the privacy term removed,
:mod:`dpcounts.sampling.reference`). Distances are the measure's kind's
(:class:`dpcounts.studies.stage.measures.Kind`: an error relative to the table's overall true rate,
a correlation's difference; a ratio's what it misses of the true departure from parity on
the log scale, |log(value / target)| / max(|log truth|, log 1.1), and never kept where it is
nearer the prior's value than the truth), against the tolerance t (``guide.tolerance``).
In this order, the first that holds:

1. ``truncation_bias``, *bias from truncation*: a truncated arm, true counts outside its
   bounds, at the grid's largest epsilon the arm still further than t from the no-privacy
   reference, and the true counts clamped to its bounds there (``truth_in_bounds``, where
   the arm arrives as epsilon grows, but for synthesis noise) further than t from the
   truth (:meth:`~dpcounts.studies.stage.measures.Kind.clamping_distance`; for an error, what it
   adds to synthesis's): the bounds, not the budget, hold the measure away (first:
   whatever else holds, this arm moves it). The reason names the settings that make the
   bounds, ``truncation.tail`` and ``truncation.inflation``;
2. ``prior_keeps``, *the prior alone keeps it*: the prior's value is within t of the
   truth, so keeping it says nothing (the measure is uninformative on this table);
3. ``synthesis_loses``, *synthesis alone loses it*: the no-privacy reference's median is
   further than t from the truth, so no epsilon helps; then ``prior_keeps`` again where
   the prior's value is within t of the no-privacy reference: an arm that returns the
   prior would pass the test of verdict 4, so at this tolerance the measure cannot tell
   (the reason says which tolerance would);
4. ``met``, *met from epsilon E*: the privacy loss is within t from E on: at E and at every
   larger epsilon of the grid, the whole 95% confidence interval of the arm's median
   (order statistics over the sets, :func:`dpcounts.studies.metrics.median_interval`) lies
   within t of the no-privacy reference's median. Where E (per set) is above the largest
   epsilon a release of the table allows at the default delta (:func:`releasable_epsilon`:
   the sampler's target delta / (1 + e^E) must be at least twice its rounding bound), the
   verdict is ``beyond_release`` instead, *not met within a release's largest epsilon*,
   with no epsilon named (so too for verdict 8 where the grid's largest epsilon is already
   beyond it): the guide never endorses an epsilon a release refuses, nor asks for one;
5. ``more_sets``, *more sets would decide*: not so at the largest epsilon, but
   the interval there straddles an edge of the tolerance: the sets, not epsilon, are
   too few to tell (``beyond_release`` instead where the grid's largest epsilon is beyond
   what a release allows: more sets could at best meet it there).
   ``sets_needed`` is how many would: a median's confidence interval narrows as
   1/sqrt(L) over L sets, so with h the distance from the median to the interval's end
   beyond the edge (its half-width on that side) and d the distance from the median to that
   edge, the interval clears the edge from ``L_needed = ceil(L x (h / d)^2)`` sets on
   (both edges crossed: the larger);
6. ``shape_floor``, *the shape is at its floor: no epsilon helps*: a truncated arm whose
   gamma shapes are all at their floor at the largest epsilon (1/3 where a stratum's
   lower bound is 0, Kerman, and 1e-3 elsewhere;
   :func:`dpcounts.mechanisms.poisson_gamma.truncated_shape_floor`). A calibration's
   shapes fall as epsilon grows down to their floor and its bounds do not depend on
   epsilon, so from there every larger epsilon has the same calibration and draws the
   same tables: a larger epsilon changes nothing. The reason says from which epsilon of
   the grid the shapes are at their floor, how little the median moved there, and names
   what still changes it, ``truncation.tail`` and ``truncation.inflation`` (the bounds,
   which decide which strata have the floor of 1/3 and which true counts lie outside);
7. ``truncation_stalls``, *no nearer with epsilon: a larger one may not help*: a
   truncated arm with shapes still above their floor whose median at the largest epsilon
   is no nearer the reference than the whole 95% interval at the epsilon before (its
   trend over the top of the grid, beyond Monte Carlo error): the shapes left to fall
   may move it, but the grid gives no sign that they bring it within tolerance, and at
   the floor it stops. The reason names ``truncation.tail`` and ``truncation.inflation``;
8. ``beyond_grid``, *a larger epsilon is needed*: outside the tolerance at the largest
   epsilon, where a larger epsilon moves the arm towards the reference: MD and PG tend
   to the no-privacy reference as epsilon grows (it is their limit), a truncated arm
   whose median came clearly nearer over the top of the grid, while some of its shapes
   are above their floor (the reason says what share, and that at the floor it stops).
   The reason gives the median's trend over the top two epsilons of the grid.

The reasons of verdicts 2 and 3 also say from which epsilon privacy adds no more than t,
where it does.

The rule is robust to Monte Carlo error by construction: an epsilon counts as met only
when the median's confidence interval, not the median alone, is within tolerance, so one
wobble of a small number of sets cannot make a verdict; too few sets show as
``more_sets`` with the number that would decide, never as a false ``met`` nor as a
call for more epsilon.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.calibration import DEFAULT_DELTA
from dpcounts.mechanisms.registry import family, names
from dpcounts.studies.stage.measures import Measure

#: Summary rows about calibrations, not measured on draws: no guide criterion.
CALIBRATION_METRICS = ("gamma_shape", "gamma_shape_max", "outside_bounds_share",
                       "calibration_skipped")  # fmt: skip
#: The verdicts, in the order they are tried, and their words (:func:`verdict_text` adds
#: the epsilon of ``met`` and the sets of ``more_sets``).
VERDICTS = {
    "truncation_bias": "bias from truncation: no epsilon helps; tail or inflation change it",
    "prior_keeps": "the prior alone keeps it (uninformative)",
    "synthesis_loses": "synthesis alone loses it: no epsilon helps",
    "met": "met from epsilon",
    "beyond_release": "not met within a release's largest epsilon",
    "more_sets": "more sets would decide",
    "shape_floor": "shape at its floor: no epsilon helps; tail or inflation change it",
    "truncation_stalls": "no nearer with epsilon: a larger one may not help; tail or "
    "inflation change it",
    "beyond_grid": "a larger epsilon is needed (beyond the grid)",
    # the suppression arm's (dpcounts.studies.stage.suppression): one table, no epsilon
    "suppression_keeps": "suppression keeps it",
    "suppression_loses": "suppression loses it",
}
GUIDE_COLUMNS = ["study", "arm", "arm_label", "measure", "verdict", "verdict_text",
                 "epsilon", "epsilon_privacy", "epsilon_prior", "tolerance",
                 "truth", "prior", "reference", "within_low", "within_high",
                 "median_at_largest", "sets", "sets_needed",
                 "outside_bounds_share", "truth_in_bounds", "shape_floor_from",
                 "reason", "suppression", "epsilon_vs_suppression"]  # fmt: skip


def verdict_text(verdict: str, epsilon: float = float("nan"), sets: int | None = None,
                 sets_needed: float = float("nan"),
                 releasable: float = float("inf")) -> str:  # fmt: skip
    """A verdict in a few words: guide.csv's ``verdict_text``, which the figures print as
    it is (one source of the words). ``met`` names its (total) epsilon; ``more_sets``
    how many sets would decide (``sets_needed``) beside those run (``sets``);
    ``beyond_release`` the largest epsilon per set a release allows (``releasable``)."""
    words = VERDICTS[verdict]
    if verdict == "met":
        return f"{words} {_g(epsilon)}"
    if verdict == "beyond_release":
        return f"{words} ({_g(releasable)})"
    if verdict == "more_sets":
        if not np.isfinite(sets_needed):
            return f"{words}, but the median sits on the tolerance's edge"
        run = f" ({sets} run)" if sets is not None else ""
        return f"{words}: about {int(sets_needed)} needed{run}"
    return words


@dataclass(frozen=True)
class Truncation:
    """What a truncated arm's calibrations say at the grid's largest epsilon: ``outside``,
    the share of the true counts outside its bounds; ``tail`` and ``inflation``, the
    settings that made the bounds; ``zero_lower``, the share of strata whose lower bound
    is 0 (their shape's floor is 1/3); ``at_floor``, the share of strata whose shape is at
    its floor; ``floor_from``, the smallest epsilon of the grid from which every shape is
    at its floor (NaN: not at the largest). Epsilons are the sets', without the prior's."""

    outside: float = 0.0
    tail: float = float("nan")
    inflation: float = 1.0
    zero_lower: float = 0.0
    at_floor: float = 0.0
    floor_from: float = float("nan")

    def settings(self) -> str:
        """The settings that make the bounds (``studies.<name>.truncation``), with their
        values here."""
        return (f"truncation.tail (here {_g(self.tail)}) and truncation.inflation (here "
                f"{_g(self.inflation)})")  # fmt: skip


def truncations(calibrations: pd.DataFrame, outside: dict[str, float]) -> dict[str, Truncation]:
    """Each arm's :class:`Truncation` from its calibrations' table form (``arm`` and
    :data:`dpcounts.calibration.FRAME_COLUMNS`; the caller gives truncated arms only) and
    its share of true counts outside its bounds (``outside``, by arm)."""
    from dpcounts.mechanisms.poisson_gamma import truncated_shape_floor

    out = {}
    for arm, cells in calibrations.groupby("arm", sort=True):
        floor = truncated_shape_floor(cells["lower"].to_numpy())
        cells = cells.assign(at_floor=cells["a"].to_numpy(float) <= floor * (1 + 1e-9))
        by_epsilon = cells.groupby("epsilon", sort=True)
        share = by_epsilon["at_floor"].mean()
        top = cells[cells["epsilon"] == share.index[-1]]
        out[arm] = Truncation(
            outside=outside.get(arm, 0.0), tail=float(top["tail"].iloc[0]),
            inflation=float(top["inflation"].iloc[0]),
            zero_lower=float((top["lower"] == 0).mean()), at_floor=float(share.iloc[-1]),
            floor_from=smallest_epsilon(share.index.to_numpy(float), share.to_numpy() == 1.0),
        )  # fmt: skip
    return out


def _releasable_at(releasable, epsilon: float) -> float:
    """The largest epsilon per set a release allows with the calibration at ``epsilon``
    (``releasable``, :func:`judge`'s; None: not judged, infinite)."""
    return math.inf if releasable is None else float(releasable(epsilon))


def smallest_epsilon(epsilons: np.ndarray, met: np.ndarray) -> float:
    """The smallest epsilon from which ``met`` holds at every larger one (NaN: never)."""
    order = np.argsort(epsilons)
    epsilons, met = epsilons[order], met[order]
    if not met.size or not met[-1]:
        return float("nan")
    failing = np.flatnonzero(~met)
    return float(epsilons[failing[-1] + 1] if failing.size else epsilons[0])


def _g(x: float) -> str:
    return f"{x:.3g}"


def _straddle(median: float, low: float, high: float, edges) -> tuple[float, float]:
    """(h, d) of :func:`sets_needed`: the interval's half-width on the side of the edge
    it crosses and the median's distance to that edge (both edges crossed: the pair of the
    larger h / d; (nan, nan) where it crosses none)."""
    w_low, w_high = edges
    pairs = []
    if w_low <= median <= w_high:
        if high > w_high:
            pairs.append((high - median, w_high - median))
        if low < w_low:
            pairs.append((median - low, median - w_low))
    elif median > w_high:
        pairs.append((median - low, median - w_high))
    else:
        pairs.append((high - median, w_low - median))
    if not pairs:
        return float("nan"), float("nan")
    return max(pairs, key=lambda p: p[0] / p[1] if p[1] > 0 else float("inf"))


def sets_needed(sets: int, median: float, low: float, high: float, edges) -> float:
    """How many sets would tell whether a median is within ``edges`` (the values within
    tolerance), where its 95% confidence interval [``low``, ``high``] over ``sets``
    straddles one. The rule: the interval narrows as 1/sqrt(L) over L sets, so it
    clears the edge from L_needed = ceil(L x (h / d)^2) sets on, h the interval's
    half-width on the edge's side (from the median to the interval's end beyond the edge)
    and d the median's distance to the edge (both edges crossed: the larger). At least
    L + 1; infinite where the median sits on the edge (no number of sets decides)."""
    h, d = _straddle(median, low, high, edges)
    if not np.isfinite(h):
        return float(sets)
    if d <= 0:
        return float("inf")
    # rounded to 9 digits first: 20 x (0.15 / 0.1)^2 is 45, not 45.000000000000007
    return float(max(math.ceil(round(sets * (h / d) ** 2, 9)), sets + 1))


def judge(measure: Measure, rows: pd.DataFrame, *, scale: float, tolerance: float,
          epsilon_prior: float, sets: int, truncation: Truncation | None = None,
          releasable=None) -> dict:  # fmt: skip
    """The verdict of one arm on one measure from its summary rows (one per epsilon, with
    ``median``, ``median_lower``, ``median_upper``, ``truth``, ``prior`` and ``reference``).

    ``scale``: the error kind's scale (the overall true rate per 100,000);
    ``epsilon_prior``: the prior's budget this arm pays on top of each epsilon;
    ``sets``: how many sets each median is over;
    ``truncation``: for a truncated arm, what its calibrations say (None otherwise);
    ``releasable``: a function of an epsilon of the grid, the largest epsilon per set a
    release of the table allows with the arm's calibration there, at the default delta
    (:func:`releasable_epsilon`; None: not judged).
    """
    rows = rows.sort_values("epsilon")
    kind, tol = measure.kind, tolerance
    eps = rows["epsilon"].to_numpy(dtype=float)
    truth, prior, reference = (float(rows[c].iloc[0]) for c in ("truth", "prior", "reference"))
    low, high = rows["median_lower"].to_numpy(float), rows["median_upper"].to_numpy(float)
    medians = rows["median"].to_numpy(float)
    inside = (low <= reference) & (reference <= high)
    # a ratio is judged on what it keeps of the true departure from parity, never nearer
    # the prior's value than the truth (Kind.kept, as a release's promise check judges it);
    # where the no-privacy reference is itself nearer the prior, synthesis loses it (below)
    # and privacy's share is judged around the reference alone; so too where the prior is
    # within tolerance of the truth (the prior alone keeps it: Kind.judged_prior)
    free = dict(truth=truth)
    reference_lost = not kind.kept(reference, truth, tol, scale, truth=truth, prior=prior)
    told_apart = kind.judged_prior(truth, prior, tol)
    judged = dict(truth=truth, prior=None if reference_lost else told_apart)
    d_low = kind.distance(low, reference, scale, **judged)
    d_high = kind.distance(high, reference, scale, **judged)
    near = np.where(inside, 0.0, np.minimum(d_low, d_high))
    far = np.maximum(d_low, d_high)
    met = kind.kept(low, reference, tol, scale, **judged) & kind.kept(
        high, reference, tol, scale, **judged
    )
    first = smallest_epsilon(eps, met)
    releasable_here = math.inf  # the largest epsilon a release allows, where it decides
    total = first + epsilon_prior
    at_largest = float(medians[-1])
    in_bounds = float(rows["truth_in_bounds"].iloc[-1]) if "truth_in_bounds" in rows else truth
    d_bounds = kind.clamping_distance(in_bounds, truth, reference, scale, prior=told_apart)
    within = kind.within(reference, tol, scale, **judged)
    trunc = truncation or Truncation()
    out = dict(verdict="", epsilon=np.nan, epsilon_privacy=total, epsilon_prior=epsilon_prior,
               tolerance=tol,
               truth=truth, prior=prior, reference=reference, within_low=within[0],
               within_high=within[1], median_at_largest=at_largest, sets=sets,
               sets_needed=np.nan, outside_bounds_share=trunc.outside,
               truth_in_bounds=in_bounds,
               shape_floor_from=trunc.floor_from + epsilon_prior)  # fmt: skip
    privacy = (f"; privacy adds no more than {tol:g} from epsilon {_g(total)} on"
               if np.isfinite(first) else "")  # fmt: skip
    # the prior's own value against the truth: is it within tolerance (uninformative)?
    d_prior = float(kind.distance(prior, truth, scale, **free))
    d_prior_reference = float(kind.distance(prior, reference, scale, **judged))
    d_reference = float(kind.distance(reference, truth, scale, truth=truth, prior=told_apart))
    largest = f"at the largest epsilon of the grid ({_g(eps[-1] + epsilon_prior)})"
    trend = (f"; it moved from {_g(medians[-2])} at epsilon {_g(eps[-2] + epsilon_prior)}"
             if eps.size > 1 else "")  # fmt: skip
    floored = np.isfinite(trunc.floor_from)
    floor_words = (f"its gamma shapes are at their floor from epsilon "
                   f"{_g(trunc.floor_from + epsilon_prior)} on: 1/3 where a stratum's "
                   f"lower bound is 0 ({trunc.zero_lower:.0%} of the strata here), 1e-3 "
                   "elsewhere")  # fmt: skip
    # clearly nearer the reference at the largest epsilon: its median beyond the previous
    # epsilon's whole interval, towards the reference
    # (on the distance alone, whichever side of the prior: the trend, not the verdict)
    before = math.inf
    if eps.size > 1 and not inside[-2]:
        before = float(np.min(kind.distance(np.array([low[-2], high[-2]]), reference, scale,
                                            **free)))  # fmt: skip
    elif eps.size > 1:
        before = 0.0
    nearer = eps.size > 1 and float(kind.distance(at_largest, reference, scale, **free)) < before
    bounds_words = (f"What changes where it goes: {trunc.settings()}, which set the bounds "
                    "(which strata have a lower bound of 0, so the floor of 1/3, and which "
                    "true counts lie outside): a larger tail or an inflation nearer 1 raises "
                    "lower bounds above 0, leaving more true counts outside; or an arm "
                    "without truncation, which tends to the no-privacy reference")  # fmt: skip
    if trunc.outside > 0 and not met[-1] and d_bounds > tol:
        out["verdict"] = "truncation_bias"
        out["reason"] = (f"{trunc.outside:.1%} of the true counts lie outside the truncation "
                         f"bounds, which alone move it to {_g(in_bounds)} against a true "
                         f"{_g(truth)} ({_g(reference)} with no privacy): at epsilon "
                         f"{_g(eps[-1] + epsilon_prior)} the median is {_g(at_largest)}, and "
                         "no epsilon brings it back"
                         + (f"; {floor_words}" if floored else "")
                         + f". The bounds are set by {trunc.settings()}: a smaller tail or a "
                         "larger inflation widens them, leaving fewer true counts outside; "
                         "or an arm without truncation")  # fmt: skip
    elif d_prior <= tol:
        out["verdict"] = "prior_keeps"
        out["reason"] = (f"the prior alone gives {_g(prior)} against a true {_g(truth)} "
                         f"({kind.rule} = {d_prior:.2g} <= {tol:g}): keeping it says nothing "
                         f"about the table{privacy}")  # fmt: skip
    elif d_reference > tol:
        out["verdict"] = "synthesis_loses"
        out["reason"] = (f"with no privacy at all the synthetic tables give {_g(reference)} "
                         f"against a true {_g(truth)} ({kind.rule} = {d_reference:.2g} > "
                         f"{tol:g}): no epsilon helps{privacy}")  # fmt: skip
    elif d_prior_reference <= tol:
        out["verdict"] = "prior_keeps"
        out["reason"] = (f"the prior alone gives {_g(prior)} against {_g(reference)} with no "
                         f"privacy ({kind.rule} = {d_prior_reference:.2g} <= {tol:g}; a true "
                         f"{_g(truth)}): a table that returns the prior passes this "
                         f"tolerance, so keeping it says nothing; a tolerance below "
                         f"{d_prior_reference:.2g} would tell{privacy}")  # fmt: skip
    elif np.isfinite(first):
        k = int(np.flatnonzero(eps == first)[0])
        out["verdict"], out["epsilon"] = "met", total
        prior_part = f", the prior's {epsilon_prior:g} included" if epsilon_prior else ""
        out["reason"] = (f"privacy moves it by at most {tol:g} from epsilon {_g(total)} on "
                         f"(total{prior_part}): there the median's 95% interval is "
                         f"[{_g(low[k])}, {_g(high[k])}] against {_g(reference)} with no "
                         f"privacy and a true {_g(truth)}")  # fmt: skip
        releasable_here = math.inf if releasable is None else releasable(first)
        if first > releasable_here * (1 + 1e-9):  # no release can spend it: not endorsed
            out["verdict"], out["epsilon"] = "beyond_release", np.nan
            out["reason"] += (
                f"; but a release of this table allows at most {_g(releasable_here)} per set "
                f"at delta {DEFAULT_DELTA:g} (the sampler's target delta / (1 + e^epsilon) "
                "must be at least twice its rounding bound): no release keeps it; a larger "
                "tolerance or --delta would"
            )
    elif near[-1] <= tol and eps[-1] > _releasable_at(releasable, eps[-1]) * (1 + 1e-9):
        # more sets could at best meet it at the grid's largest epsilon, which no
        # release can spend: not endorsed, nor asked for
        releasable_here = _releasable_at(releasable, eps[-1])
        out["verdict"] = "beyond_release"
        out["reason"] = (
            f"{largest} the median's 95% interval [{_g(low[-1])}, {_g(high[-1])}] straddles "
            f"the tolerance [{_g(within[0])}, {_g(within[1])}] around {_g(reference)} (no "
            "privacy), so more sets might meet it there at best; but a release of this "
            f"table allows at most {_g(releasable_here)} per set at delta {DEFAULT_DELTA:g}: "
            "no release keeps it; a larger tolerance or --delta would"
        )
    elif near[-1] <= tol:
        out["verdict"] = "more_sets"
        needed = sets_needed(sets, at_largest, low[-1], high[-1], within)
        out["sets_needed"] = needed
        h, d = _straddle(at_largest, low[-1], high[-1], within)
        how_many = (f"about {int(needed)} sets would (the interval narrows as "
                    f"1/sqrt(sets): ceil({sets} x ({_g(h)} / {_g(d)})^2), its "
                    f"half-width beyond the edge over the median's distance to it)"
                    if np.isfinite(needed) else
                    "but the median sits on the tolerance's edge, so no number of sets "
                    "decides; a slightly different tolerance would")  # fmt: skip
        out["reason"] = (f"{largest} the median's 95% interval [{_g(low[-1])}, "
                         f"{_g(high[-1])}] over {sets} sets straddles the tolerance "
                         f"[{_g(within[0])}, {_g(within[1])}] around {_g(reference)} (no "
                         f"privacy), the median {_g(at_largest)}: the sets, not "
                         "epsilon, are too few to tell; more sets would decide: "
                         f"{how_many}")  # fmt: skip
    elif floored:
        out["verdict"] = "shape_floor"
        out["reason"] = (f"{largest} the median is {_g(at_largest)} against {_g(reference)} "
                         f"with no privacy ({kind.rule} = {far[-1]:.2g} > {tol:g}){trend}; "
                         f"{floor_words}, and its bounds do not depend on epsilon, so every "
                         "larger epsilon draws the same tables: no epsilon helps. "
                         f"{bounds_words}")  # fmt: skip
    elif truncation is not None and not nearer:
        out["verdict"] = "truncation_stalls"
        out["reason"] = (f"{largest} the median is {_g(at_largest)} against {_g(reference)} "
                         f"with no privacy ({kind.rule} = {far[-1]:.2g} > {tol:g}){trend}, "
                         "no nearer the reference beyond its Monte Carlo error, and "
                         f"{trunc.at_floor:.0%} of its gamma shapes are at their floor "
                         "there (a larger epsilon no longer lowers them): a larger "
                         f"epsilon may not help. {bounds_words}")  # fmt: skip
    else:
        out["verdict"] = "beyond_grid"
        if truncation is None:
            still = "as epsilon grows the arm tends to the no-privacy reference"
        else:
            still = (f"{1 - trunc.at_floor:.0%} of its gamma shapes are still above their "
                     "floor there, so a larger epsilon still moves it; once all are at "
                     "their floor it moves no more, and whether it comes within tolerance "
                     "before then the grid does not tell")  # fmt: skip
        out["reason"] = (f"{largest} the median is {_g(at_largest)} against {_g(reference)} "
                         f"with no privacy ({kind.rule} = {far[-1]:.2g} > {tol:g}){trend}: "
                         f"a larger epsilon is needed ({still})")  # fmt: skip
        releasable_here = math.inf if releasable is None else releasable(eps[-1])
        if eps[-1] >= releasable_here * (1 - 1e-9):  # a larger one cannot be released
            out["verdict"] = "beyond_release"
            out["reason"] = (
                f"{largest} the median is {_g(at_largest)} against {_g(reference)} with no "
                f"privacy ({kind.rule} = {far[-1]:.2g} > {tol:g}), and a release of this "
                f"table allows at most {_g(releasable_here)} per set at delta "
                f"{DEFAULT_DELTA:g}: no release keeps it; a larger tolerance or --delta would"
            )
    out["verdict_text"] = verdict_text(out["verdict"], out["epsilon"], sets,
                                       out["sets_needed"], releasable_here)  # fmt: skip
    return out


def epsilon_guide(summary: pd.DataFrame, measures, *, overall_rate: float, tolerance: float,
                  epsilon_prior: float, sets: int, calibrations: pd.DataFrame,
                  arms=(), table: tuple[int, int] | None = None) -> pd.DataFrame:  # fmt: skip
    """The guide table (:data:`GUIDE_COLUMNS` but ``study``) of a study summary.

    ``measures``: the study's :class:`~dpcounts.studies.stage.measures.Measure` list (rows follow
    its order, then the arms'); ``overall_rate``: the true overall rate per 100,000;
    ``epsilon_prior``: the prior's budget, paid by every arm that uses the prior (not md);
    ``sets``: the sets per epsilon; ``calibrations``: the calibrations' table form
    (an ``arm`` column and :data:`dpcounts.calibration.FRAME_COLUMNS`), read for the
    truncated arms; ``arms``: the study's :class:`~dpcounts.arms.Arm` values, whose labels
    (:func:`dpcounts.arms.arm_title`) fill ``arm_label`` (an arm not among them is labelled
    from its mechanism and method); ``table``: (total, strata) of the study's table, whose
    releases allow epsilons up to :func:`releasable_epsilon` (a met beyond it is
    ``beyond_release``; None: not judged).
    """
    from dpcounts.arms import Arm, arm_title

    rows = []
    outside = summary[summary["metric"] == "outside_bounds_share"].sort_values("epsilon")
    shares = outside.groupby("arm")["median"].last().to_dict()
    mechanisms = summary.drop_duplicates("arm").set_index("arm")["mechanism"]
    truncated = [arm for arm, m in mechanisms.items() if m in names() and family(m).bounded]
    mine = calibrations[calibrations["arm"].isin(truncated)] if len(calibrations) else None
    truncated_arms = truncations(mine, shares) if mine is not None and len(mine) else {}
    labels = {arm.name: arm_title(arm) for arm in arms}
    for measure in measures:
        of_measure = summary[(summary["metric"] == measure.name) & summary["median"].notna()]
        for arm, group in of_measure.groupby("arm", sort=True):
            mechanism = group["mechanism"].iloc[0]
            label = labels.get(arm) or arm_title(Arm(mechanism, group["method"].iloc[0], arm))
            releasable = (None if table is None else functools.partial(
                _releasable, arm, mechanism, total=table[0], n_cells=table[1],
                calibrations=calibrations))  # fmt: skip
            verdict = judge(measure, group, scale=overall_rate, tolerance=tolerance,
                            epsilon_prior=epsilon_prior if family(mechanism).uses_prior
                            else 0.0, sets=sets,
                            truncation=truncated_arms.get(arm, Truncation())
                            if family(mechanism).bounded else None,
                            releasable=releasable)  # fmt: skip
            rows.append({"arm": arm, "arm_label": label, "measure": measure.name, **verdict})
    return pd.DataFrame(rows, columns=GUIDE_COLUMNS[1:])


def releasable_epsilon(
    total: int, n_cells: int, calibration: pd.DataFrame | None = None, delta: float = DEFAULT_DELTA
) -> float:
    """The largest epsilon per set a one-set release allows at ``delta`` for a calibration
    of ``n_cells`` strata and ``total`` events: untruncated (``calibration`` None), its
    windows are the whole ``[0, total]``; truncated, ``calibration`` holds its ``lower`` and
    ``upper`` bounds. Above it the sampler's target is below twice the calibration's
    rounding bound and the release refuses
    (:func:`dpcounts.sampling.release_mode.largest_epsilon`)."""
    from dpcounts.sampling.release_mode import largest_epsilon, window_rounding_bound

    if calibration is None:
        floor = window_rounding_bound(total, n_cells=n_cells)
    else:
        floor = window_rounding_bound(total, calibration["lower"], calibration["upper"])
    return largest_epsilon(delta, floor)


def _releasable(
    arm: str,
    mechanism: str,
    epsilon: float,
    *,
    total: int,
    n_cells: int,
    calibrations: pd.DataFrame | None,
) -> float:
    """:func:`releasable_epsilon` of ``arm`` at the grid's ``epsilon``: its calibration
    there for a truncated arm (inf where the study kept none: not judged), else the full
    windows."""
    if not family(mechanism).bounded:
        return releasable_epsilon(total, n_cells)
    if calibrations is None or not len(calibrations):
        return math.inf
    mine = calibrations[(calibrations["arm"] == arm)
                        & np.isclose(calibrations["epsilon"], epsilon)]  # fmt: skip
    if not len(mine):
        return math.inf
    return releasable_epsilon(total, n_cells, mine)


def study_guide(definition, strata: pd.DataFrame, summary: pd.DataFrame,
                epsilon_prior: float, calibrations: pd.DataFrame,
                suppression: dict | None = None) -> pd.DataFrame:  # fmt: skip
    """:func:`epsilon_guide` of a study: its measures and arms, its rMSE scaled by the
    table's true overall rate, ``epsilon_prior`` the budget its prior spent,
    ``calibrations`` its arms' calibrations (table form, an ``arm`` column first);
    ``suppression``: its suppression arm's result
    (:func:`dpcounts.studies.stage.suppression.suppression_result`), whose rows and
    comparison columns it adds (:func:`compare_with_suppression`)."""
    from dpcounts.studies.stage.measures import overall_rate, study_measure_list

    overall = overall_rate(definition, strata)
    total = int(strata[definition.count].sum())
    guide = epsilon_guide(summary, study_measure_list(definition), overall_rate=overall,
                          tolerance=definition.tolerance, epsilon_prior=epsilon_prior,
                          sets=definition.sets, calibrations=calibrations,
                          arms=definition.arms, table=(total, len(strata)))  # fmt: skip
    guide.insert(0, "study", definition.name)
    if suppression is not None:
        mechanisms = {arm.name: arm.mechanism for arm in definition.arms}

        def releasable(arm: str, epsilon: float) -> float:
            return _releasable(arm, mechanisms[arm], epsilon, total=total,
                               n_cells=len(strata), calibrations=calibrations)  # fmt: skip

        guide = compare_with_suppression(
            guide, summary, suppression, study_measure_list(definition),
            tolerance=definition.tolerance, scale=overall, releasable=releasable,
        )[GUIDE_COLUMNS]  # fmt: skip
    return guide


def compare_with_suppression(guide: pd.DataFrame, summary: pd.DataFrame, result: dict, measures, *,
            tolerance: float, scale: float, releasable=None) -> pd.DataFrame:  # fmt: skip
    """``guide`` (the DP arms' rows) with the suppression arm's rows and, on every row,
    ``suppression`` (its value of the measure) and ``epsilon_vs_suppression`` (the DP
    arm's smallest total epsilon from which it keeps the measure at least as well; NaN:
    none in the grid, the reason says why). ``summary``: the study's (median intervals per
    arm, measure and epsilon); ``scale``: the error kind's (the overall true rate);
    ``releasable(arm, epsilon)``: the largest epsilon per set a release allows (the guide's
    :func:`~dpcounts.studies.stage.guide.releasable_epsilon`; None: not judged), above which
    no epsilon is named, as the guide names none."""
    from dpcounts.studies.stage.suppression import ARM, label

    by_name = {m.name: m for m in measures}
    guide = guide.copy()
    guide["suppression"] = guide["measure"].map(lambda n: result["measures"].get(n, np.nan))
    guide["epsilon_vs_suppression"] = np.nan
    extra = []
    for k, row in guide.iterrows():
        measure = by_name.get(row["measure"])
        value = row["suppression"]
        if measure is None or value is None or not np.isfinite(value):
            continue
        kind, truth = measure.kind, float(row["truth"])
        d_supp = float(kind.distance(value, truth, scale, truth=truth))
        rows = summary[(summary["arm"] == row["arm"]) & (summary["metric"] == row["measure"])]
        rows = rows[rows["median"].notna()].sort_values("epsilon")
        if not len(rows):
            continue
        eps = rows["epsilon"].to_numpy(float)
        far = np.maximum(
            kind.distance(rows["median_lower"].to_numpy(float), truth, scale, truth=truth),
            kind.distance(rows["median_upper"].to_numpy(float), truth, scale, truth=truth),
        )
        first = smallest_epsilon(eps, far <= d_supp)
        paid = 0.0 if not np.isfinite(row.get("epsilon_prior", 0.0)) else row["epsilon_prior"]
        most = (
            np.inf
            if releasable is None or not np.isfinite(first)
            else releasable(row["arm"], first)
        )
        beyond = np.isfinite(first) and first > most * (1 + 1e-9)
        named = np.isfinite(first) and not beyond
        guide.loc[k, "epsilon_vs_suppression"] = first + paid if named else np.nan
        d_ref = float(kind.distance(row["reference"], truth, scale, truth=truth))
        if beyond:
            words = (f"; as near the truth as suppression ({_g(value)}) only from epsilon "
                     f"{_g(first + paid)}, beyond a release's largest ({_g(most)} per "
                     "set)")  # fmt: skip
        elif named:
            words = (f"; as near the truth as suppression ({_g(value)}, {kind.rule} = "
                     f"{d_supp:.2g}) from epsilon {_g(first + paid)} on")  # fmt: skip
        elif d_ref > d_supp:
            words = (f"; never as near the truth as suppression ({_g(value)}, {kind.rule} = "
                     f"{d_supp:.2g}): synthesis alone, with no privacy, is further "
                     f"({_g(row['reference'])}, {d_ref:.2g})")  # fmt: skip
        else:
            words = (f"; not as near the truth as suppression ({_g(value)}, {kind.rule} = "
                     f"{d_supp:.2g}) within the grid, though synthesis alone is "
                     f"({_g(row['reference'])}, {d_ref:.2g})")  # fmt: skip
        guide.loc[k, "reason"] = str(row["reason"]) + words
    for measure in measures:
        value = result["measures"].get(measure.name)
        of_measure = guide[(guide["measure"] == measure.name) & (guide["arm"] != ARM)]
        if value is None or not len(of_measure):
            continue
        first = of_measure.iloc[0]
        truth = float(first["truth"])
        kept = bool(measure.kind.kept(value, truth, tolerance, scale, truth=truth,
                                      prior=first["prior"]))  # fmt: skip
        distance = float(measure.kind.distance(value, truth, scale, truth=truth))
        verdict = "suppression_keeps" if kept else "suppression_loses"  # guide.VERDICTS
        extra.append({
            "study": first.get("study", result["study"]), "arm": ARM, "arm_label": label(result),
            "measure": measure.name, "verdict": verdict,
            "verdict_text": VERDICTS[verdict], "epsilon": np.nan, "epsilon_privacy": np.nan,
            "epsilon_prior": 0.0, "tolerance": tolerance, "truth": truth,
            "prior": first["prior"], "reference": np.nan, "suppression": value,
            "reason": (f"{result['suppressed']} of {result['strata']} counts not shown, each "
                       f"completed by the {result['completion']}: {_g(value)} against a true "
                       f"{_g(truth)} ({measure.kind.rule} = {distance:.2g} "
                       f"{'<=' if kept else '>'} {tolerance:g})"),
        })  # fmt: skip
    if extra:
        guide = pd.concat([guide, pd.DataFrame(extra)], ignore_index=True)
    return guide
