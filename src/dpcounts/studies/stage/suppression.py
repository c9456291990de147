"""The suppression arm of a study (issue #53): the table as an agency publishes it today,
scored by the study's measures, attacked by differencing, and set against the DP arms.

:func:`suppression_result` applies the study's rule (``suppression``; CDC WONDER's by
default: counts 1 to 9 not shown) to the true counts, completes each hidden count as the
analyst would (:meth:`dpcounts.baselines.suppression.SuppressionRule.complete`), scores
that one table by every measure of the study (no epsilon, no sets: one value per measure)
and runs the differencing attack (:func:`dpcounts.attack.differencing.feasible_ranges`)
with the margins the steward publishes beside the table. :func:`compare` then gives the
guide its suppression rows (the value and whether it is kept, judged against the truth
with the guide's tolerance, as the DP arms' no-privacy reference is) and, for every DP
arm and measure, ``epsilon_vs_suppression``: the smallest total epsilon from which the
arm keeps the measure at least as well as suppression (the whole 95% interval of its
median at least as near the truth, by the measure's kind, at that epsilon and every
larger one of the grid), or NaN, with the reason. :func:`headline` says it in one
sentence per arm.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: The guide's name of the suppression arm (its ``arm`` column), a baseline of the registry
#: (:mod:`dpcounts.privacy.families`).
ARM = "suppression"
#: Its label in the guide's table and the figures.
LABEL = "Suppression (counts {low}-{high} not shown)"
#: The differencing attack's LPs beyond propagation before it samples the open cells.
MAX_LPS = 4_000


def suppression_result(definition, strata: pd.DataFrame, measures, rng) -> dict:
    """The suppression arm of ``definition`` on its ``strata`` (with ``prior_rate``): the
    rule and completion, how many counts are hidden, every measure's value on the
    completed table (``measures``, the study's :class:`~dpcounts.studies.stage.measures.
    Measures`) and the attack's summary (:meth:`~dpcounts.attack.differencing.Ranges.
    summary`); ``rng`` draws the attack's sample where its LP budget runs out."""
    from dpcounts.attack.differencing import feasible_ranges

    spec = definition.suppression
    rule = spec.rule
    y, keys, mask, completed = published_table(definition, strata)
    from dpcounts.studies.stage.measures import ATTACK

    values = measures.values(completed, y).iloc[0].drop(list(ATTACK), errors="ignore")
    ranges = feasible_ranges(y, mask, keys, spec.published, rule=rule, max_lps=MAX_LPS, rng=rng)
    return {
        "study": definition.name,
        "rule": {
            "low": rule.low,
            "high": rule.high,
            "show_zeros": rule.show_zeros,
            "complementary": rule.complementary,
        },  # fmt: skip
        "completion": spec.completion,
        "published": [list(m) for m in spec.published],
        "sets": spec.sets,
        "strata": int(y.size),
        "suppressed": int(mask.sum()),
        "suppressed_primary": int(rule.primary(y).sum()),
        "measures": {name: _number(v) for name, v in values.items()},
        "attack": ranges.summary(),
    }


def published_table(definition, strata: pd.DataFrame):
    """(the true counts, the published margins' key columns, the mask of hidden counts, the
    table completed as the analyst completes it): the study's rule applied to its strata
    (with ``prior_rate``, for the ``prior`` completion)."""
    spec = definition.suppression
    rule = spec.rule
    y = strata[definition.count].to_numpy(dtype=np.int64)
    columns = list(dict.fromkeys(c for margin in spec.published for c in margin))
    keys = strata[columns].reset_index(drop=True)
    mask = rule.suppress(y, keys, spec.published) if rule.complementary else rule.suppress(y)
    expected = strata[definition.population].to_numpy(float) * strata["prior_rate"].to_numpy(float)
    return y, keys, mask, rule.complete(y, mask, spec.completion, expected)


def published_areas(definition, strata: pd.DataFrame, measures) -> pd.DataFrame:
    """The map of the suppressed table: one row per area of ``measures`` (the study's
    :class:`~dpcounts.studies.stage.measures.Measures`), its ``rate`` as the analyst
    computes it from the published table completed (the measures' area rate: age-adjusted
    with an age key), ``hidden`` (its strata whose count is not shown) and ``shown`` (its
    strata with a shown count above 0): with none shown and some hidden, nothing of the
    area's count is published (a one-key table's suppressed area)."""
    y, _, mask, completed = published_table(definition, strata)
    codes = pd.Categorical(strata[definition.area].astype(str), categories=measures.areas).codes
    size = len(measures.areas)
    return pd.DataFrame({
        "area": list(measures.areas),
        "rate": measures.area_rates(completed)[0],
        "hidden": np.bincount(codes, weights=mask, minlength=size).astype(np.int64),
        "shown": np.bincount(codes, weights=~mask & (y > 0), minlength=size).astype(np.int64),
    })  # fmt: skip


def _number(value) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def label(result: dict) -> str:
    """The suppression arm's label: ``Suppression (counts 1-9 not shown)``."""
    return LABEL.format(**result["rule"])


def compare(guide: pd.DataFrame, summary: pd.DataFrame, result: dict, measures, *,
            tolerance: float, scale: float, releasable=None) -> pd.DataFrame:  # fmt: skip
    """``guide`` (the DP arms' rows) with the suppression arm's rows and, on every row,
    ``suppression`` (its value of the measure) and ``epsilon_vs_suppression`` (the DP
    arm's smallest total epsilon from which it keeps the measure at least as well; NaN:
    none in the grid, the reason says why). ``summary``: the study's (median intervals per
    arm, measure and epsilon); ``scale``: the error kind's (the overall true rate);
    ``releasable(arm, epsilon)``: the largest epsilon per set a release allows (the guide's
    :func:`~dpcounts.studies.stage.guide.releasable_epsilon`; None: not judged), above which
    no epsilon is named, as the guide names none."""
    from dpcounts.studies.stage.guide import VERDICTS, smallest_epsilon

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


def headline(guide: pd.DataFrame, result: dict, measures=()) -> list[str]:
    """The guide's sentences: per DP arm, the epsilon from which it keeps every measure that
    suppression keeps (or the ones it never does within a release's epsilon, by their
    titles in ``measures``), then what differencing recovers."""
    titles = {m.name: m.title for m in measures}
    mine = guide[guide["arm"] == ARM]
    kept = mine[mine["verdict"] == "suppression_keeps"]["measure"]
    words = ", ".join(titles.get(name, name) for name in kept)
    out = [f"suppression keeps {len(kept)} of the {len(mine)} measures"
           + (f": {words}" if len(kept) else "")]  # fmt: skip
    for _, rows in guide[guide["arm"] != ARM].groupby("arm", sort=False):
        rows = rows[rows["measure"].isin(set(kept))]
        if not len(rows):
            continue
        label_ = rows["arm_label"].iloc[0]
        missing = rows[rows["epsilon_vs_suppression"].isna()]["measure"].tolist()
        if missing:
            named = ", ".join(titles.get(name, name) for name in missing)
            out.append(f"{label_} never keeps as well as suppression (within a release's "
                       f"epsilon): {named}")  # fmt: skip
        else:
            out.append(f"from epsilon {_g(rows['epsilon_vs_suppression'].max())}, {label_} "
                       "keeps every measure that suppression keeps")  # fmt: skip
    attack = result["attack"]
    if attack.get("cells"):
        pinned = attack["pinned"]["estimate"]
        out.append(f"differencing pins {pinned:.0%} of the {attack['cells']} suppressed counts "
                   f"exactly ({attack['within_one']['estimate']:.0%} to within one)")  # fmt: skip
    else:
        out.append("no count is suppressed")
    return out


def _g(x) -> str:
    return f"{float(x):.3g}"
