"""The epsilon guide: for each arm and measure, one verdict, the epsilon it names (the total
the steward pays, the prior's budget included; only for ``met``) and a one-line reason.
``epsilon_privacy`` is the total epsilon from which privacy moves the measure by at most
the tolerance from the no-privacy reference, whatever the verdict (NaN: not in the grid);
``within_low`` and ``within_high`` are the values within tolerance of that reference.

A synthetic table is a posterior predictive draw: even with no privacy at all it carries
synthesis noise (about twice a Poisson's variance per stratum). So the guide judges an
arm against three references of the study's summary (:mod:`dpsynth.study.summary`): the
truth, the prior alone (the measure of the expected counts n x lambda0) and the
no-privacy reference (tables drawn with the privacy term removed,
:mod:`dpsynth.sampling.reference`). Distances are the measure's kind's
(:class:`dpsynth.study.measures.Kind`: an error relative to the table's overall true rate,
a correlation's difference, a ratio's relative difference), against the tolerance t
(``guide.tolerance``). In this order, the first that holds:

1. ``truncation_bias``, *bias from truncation*: a truncated arm, true counts outside its
   bounds, at the grid's largest epsilon the arm still further than t from the no-privacy
   reference, and the true counts clamped to its bounds there (``truth_in_bounds``, where
   the arm arrives as epsilon grows, but for synthesis noise) further than t from the
   truth (:meth:`~dpsynth.study.measures.Kind.clamping_distance`; for an error, what it
   adds to synthesis's): the bounds, not the budget, hold the measure away (first:
   whatever else holds, this arm moves it);
2. ``prior_keeps``, *the prior alone keeps it*: the prior's value is within t of the
   truth, so keeping it says nothing (the measure is uninformative on this table);
3. ``synthesis_loses``, *synthesis alone loses it*: the no-privacy reference's median is
   further than t from the truth, so no epsilon helps; then ``prior_keeps`` again where
   the prior's value is within t of the no-privacy reference: an arm that returns the
   prior would pass the test of verdict 4, so at this tolerance the measure cannot tell
   (the reason says which tolerance would);
4. ``met``, *met from epsilon E*: the privacy loss is within t from E on: at E and at every
   larger epsilon of the grid, the whole 95% confidence interval of the arm's median
   (order statistics over the datasets, :func:`dpsynth.metrics.median_interval`) lies
   within t of the no-privacy reference's median;
5. ``beyond_grid``, *needs more than the grid*: not so at the largest epsilon (the reason
   says whether the interval straddles the tolerance there, so that more datasets would
   decide, or lies outside it).

The reasons of verdicts 2 and 3 also say from which epsilon privacy adds no more than t,
where it does.

The rule is robust to Monte Carlo error by construction: an epsilon counts as met only
when the median's confidence interval, not the median alone, is within tolerance, so one
wobble of a small number of datasets cannot make a verdict; too few datasets show as
``beyond_grid`` with "more datasets would decide", never as a false ``met``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpsynth.study.measures import Measure
from dpsynth.units import PER_100K

#: Summary rows about calibrations, not measured on draws: no guide criterion.
CALIBRATION_METRICS = ("gamma_shape", "gamma_shape_max", "outside_bounds_share",
                       "calibration_skipped")  # fmt: skip
#: The verdicts, in the order they are tried, and how figures and reasons say them.
VERDICTS = {
    "truncation_bias": "bias from truncation",
    "prior_keeps": "the prior alone keeps it",
    "synthesis_loses": "synthesis alone loses it",
    "met": "met from epsilon",
    "beyond_grid": "needs more than the grid",
}
GUIDE_COLUMNS = ["study", "arm", "measure", "verdict", "epsilon", "epsilon_privacy",
                 "epsilon_prior", "tolerance",
                 "truth", "prior", "reference", "within_low", "within_high",
                 "median_at_largest", "outside_bounds_share", "truth_in_bounds",
                 "reason"]  # fmt: skip


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


def judge(measure: Measure, rows: pd.DataFrame, *, scale: float, tolerance: float,
          epsilon_prior: float, outside: float = 0.0) -> dict:  # fmt: skip
    """The verdict of one arm on one measure from its summary rows (one per epsilon, with
    ``median_lower``, ``median_upper``, ``truth``, ``prior`` and ``reference``).

    ``scale``: the error kind's scale (the overall true rate per 100,000);
    ``epsilon_prior``: the prior's budget this arm pays on top of each epsilon;
    ``outside``: for a truncated arm, the share of true counts outside its bounds at the
    largest epsilon (0 otherwise).
    """
    rows = rows.sort_values("epsilon")
    kind, tol = measure.kind, tolerance
    eps = rows["epsilon"].to_numpy(dtype=float)
    truth, prior, reference = (float(rows[c].iloc[0]) for c in ("truth", "prior", "reference"))
    low, high = rows["median_lower"].to_numpy(float), rows["median_upper"].to_numpy(float)
    far = np.maximum(kind.distance(low, reference, scale), kind.distance(high, reference, scale))
    inside = (low <= reference) & (reference <= high)
    near = np.where(inside, 0.0, np.minimum(kind.distance(low, reference, scale),
                                            kind.distance(high, reference, scale)))  # fmt: skip
    met = far <= tol
    first = smallest_epsilon(eps, met)
    total = first + epsilon_prior
    at_largest = float(rows["median"].iloc[-1])
    in_bounds = float(rows["truth_in_bounds"].iloc[-1]) if "truth_in_bounds" in rows else truth
    d_bounds = kind.clamping_distance(in_bounds, truth, reference, scale)
    within = kind.within(reference, tol, scale)
    out = dict(verdict="", epsilon=np.nan, epsilon_privacy=total, epsilon_prior=epsilon_prior,
               tolerance=tol,
               truth=truth, prior=prior, reference=reference, within_low=within[0],
               within_high=within[1], median_at_largest=at_largest,
               outside_bounds_share=outside)  # fmt: skip
    out["truth_in_bounds"] = in_bounds
    privacy = (f"; privacy adds no more than {tol:g} from epsilon {_g(total)} on"
               if np.isfinite(first) else "")  # fmt: skip
    d_prior = float(kind.distance(prior, truth, scale))
    d_prior_reference = float(kind.distance(prior, reference, scale))
    d_reference = float(kind.distance(reference, truth, scale))
    if outside > 0 and not met[-1] and d_bounds > tol:
        out["verdict"] = "truncation_bias"
        out["reason"] = (f"{outside:.1%} of the true counts lie outside the truncation "
                         f"bounds, which alone move it to {_g(in_bounds)} against a true "
                         f"{_g(truth)} ({_g(reference)} with no privacy): at epsilon "
                         f"{_g(eps[-1] + epsilon_prior)} the median is {_g(at_largest)}, and "
                         "no epsilon brings it back")  # fmt: skip
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
    else:
        out["verdict"] = "beyond_grid"
        where = f"at the largest epsilon of the grid ({_g(eps[-1] + epsilon_prior)})"
        if near[-1] <= tol:
            out["reason"] = (f"{where} the median's 95% interval [{_g(low[-1])}, "
                             f"{_g(high[-1])}] straddles the tolerance around {_g(reference)} "
                             "(no privacy): more datasets would decide")  # fmt: skip
        else:
            out["reason"] = (f"{where} the median is {_g(at_largest)} against {_g(reference)} "
                             f"with no privacy ({kind.rule} = {far[-1]:.2g} > {tol:g}): "
                             "a larger epsilon is needed")  # fmt: skip
    return out


def epsilon_guide(summary: pd.DataFrame, measures, *, overall_rate: float, tolerance: float,
                  epsilon_prior: float) -> pd.DataFrame:  # fmt: skip
    """The guide table (:data:`GUIDE_COLUMNS` but ``study``) of a study summary.

    ``measures``: the study's :class:`~dpsynth.study.measures.Measure` list (rows follow
    its order, then the arms'); ``overall_rate``: the true overall rate per 100,000;
    ``epsilon_prior``: the prior's budget, paid by every arm that uses the prior (not md).
    """
    rows = []
    outside = summary[summary["metric"] == "outside_bounds_share"]
    for measure in measures:
        of_measure = summary[(summary["metric"] == measure.name) & summary["median"].notna()]
        for arm, group in of_measure.groupby("arm", sort=True):
            mechanism = group["mechanism"].iloc[0]
            share = 0.0
            if mechanism == "truncated":
                mine = outside[outside["arm"] == arm].sort_values("epsilon")
                share = float(mine["median"].iloc[-1]) if len(mine) else 0.0
            verdict = judge(measure, group, scale=overall_rate, tolerance=tolerance,
                            epsilon_prior=0.0 if mechanism == "md" else epsilon_prior,
                            outside=share)  # fmt: skip
            rows.append({"arm": arm, "measure": measure.name, **verdict})
    return pd.DataFrame(rows, columns=GUIDE_COLUMNS[1:])


def study_guide(definition, strata: pd.DataFrame, summary: pd.DataFrame,
                epsilon_prior: float) -> pd.DataFrame:  # fmt: skip
    """:func:`epsilon_guide` of a study: its measures, its rMSE scaled by the table's true
    overall rate, ``epsilon_prior`` the budget its prior spent."""
    from dpsynth.study.measures import study_measure_list

    overall = strata[definition.count].sum() / strata[definition.population].sum() * PER_100K
    guide = epsilon_guide(summary, study_measure_list(definition), overall_rate=overall,
                          tolerance=definition.tolerance, epsilon_prior=epsilon_prior)  # fmt: skip
    guide.insert(0, "study", definition.name)
    return guide
