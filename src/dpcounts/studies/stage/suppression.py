"""The suppression arm of a study (issue #53): the table as an agency publishes it today,
scored by the study's measures, attacked by differencing, and set against the DP arms.

:func:`suppression_result` applies the study's rule (``suppression``; CDC WONDER's by
default: counts 1 to 9 not shown) to the true counts, completes each hidden count as the
analyst would (:meth:`dpcounts.baselines.suppression.SuppressionRule.complete`), scores
that one table by every measure of the study (no epsilon, no sets: one value per measure)
and runs the differencing attack (:func:`dpcounts.attack.differencing.feasible_ranges`)
with the margins the steward publishes beside the table. The guide's
:func:`~dpcounts.studies.stage.guide.compare_with_suppression` then gives it its suppression
rows (the value and whether it is kept, judged against the truth with the guide's
tolerance, as the DP arms' no-privacy reference is) and, for every DP arm and measure,
``epsilon_vs_suppression``: the smallest total epsilon from which the arm keeps the measure
at least as well as suppression (the whole 95% interval of its median at least as near the
truth, by the measure's kind, at that epsilon and every larger one of the grid), or NaN,
with the reason. :func:`headline` says it in one sentence per arm.
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
