"""An attribute that cannot be the data: refuse attributes that split the counts cleanly.

An attribute (``--attributes COLUMN``) is published exactly, beside the keys, on the
steward's word that it is public (a county's urban flag, its region). A column computed
from these counts is not: a flag "count below 10" (a suppression mark), "high rate" or
"no deaths" published exactly gives back, with no noise, which strata lie on which side
of a threshold of the counts, while the manifest states epsilon. As with a prior
(:mod:`.prior_check`), no check can prove a column public, but one can tell a column that
is a threshold of the counts.

The test. The attribute's values split the units (the strata, and, for an attribute
constant within the groups of a key, such as a county's flag in a table by county and
age, that key's groups with their totals) into groups. The attribute **separates** a
quantity (the units' counts, or their rates count / population) when the groups' ranges
of it do not overlap: every count of one group lies below every count of the next
(in the attribute's own order when it is numeric, in some order when it is a category).
A threshold of the counts always separates them; a public attribute rarely does, since
the counts scatter around their rates. The chance that labels given at random separate
``n`` distinct values into groups of sizes ``n_1 .. n_g`` is ``g! n_1! ... n_g! / n!``
(``2 n_1! ... n_g! / n!`` in a fixed order, up or down); ties in the quantity only make
separation rarer, so this bounds it.

A public attribute with a strong effect separates too: an urban flag that doubles the
rate splits the counties' rates cleanly when their counts are large, since the noise is
then far below the effect. What tells it from a threshold is where the split falls. A
threshold cuts through the counts wherever they are dense, so the counts' own noise would
mix the two sides; a public attribute splits where its effect lies, and the split stays
when the counts are drawn again. Each count is redrawn :data:`REDRAWS` times, Poisson
around itself (a fixed stream: the decision is the table's), and the share of redraws in
which the split stays clean is measured. A separation where random labels have a chance
below :data:`CHANCE` and which stays clean in at most :data:`PERSISTS` of the redraws is
refused. On simulated tables of 40 counties x 4 ages whose public urban flag doubles the
rate, the flag splits the counties' rates cleanly in 52 of 60 tables and the split stays
in 23% to 100% of the redraws; a mark ``count < 10`` stays in 0 to 2%
(``benchmarks/attribute_check.py``'s ``calibration``, on the tables of
``tests/test_release_attribute_check.py``). Its cost grows with the strata: the same
benchmark's ``timing``.

A public population explains a separation of the counts: a flag of the large counties
(made from the public population) separates the counts too, because counts grow with the
population. A separation of the counts is so not refused when the attribute separates the
populations the same way; a separation of the rates always is.

Like the prior's, this check reads the counts, so whether a release goes ahead depends on
them: a refusal before anything is spent, drawn or written (docs/privacy.md, Part 5). The
steward who knows the attribute is public, say a label that happens to order the rates
(an age band of a national table by age), passes ``--attributes-are-public-i-am-sure``. A
column derived from the counts in part (a flag of the large counts that missed one) may
pass: the check catches the common accident, it does not prove a column public.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: The chance of separating by random labels below which an attribute is refused; a
#: table of 25 strata split 12 and 13 reaches it (3.8e-7), one of 20 split 10 and 10 does
#: not (1.1e-5).
CHANCE = 1e-6
#: Redraws of the counts, each Poisson around the count, that test a clean split.
REDRAWS = 100
#: A clean split is refused when it stays clean in at most this share of the redraws.
PERSISTS = 0.05
#: The steward's override.
OVERRIDE = "--attributes-are-public-i-am-sure"


@dataclass(frozen=True)
class Separation:
    """An attribute that splits a quantity of some units with no overlap."""

    attribute: str
    units: str  # "the strata" or "the groups of <key>" (one key's groups, with their totals)
    quantity: str  # "counts" or "rates"
    groups: list[tuple[object, float, float]]  # (value, lowest, highest), in order
    chance: float  # of random labels separating as cleanly
    persists: float  # the share of redraws of the counts in which the split stays clean


def _log_chance(sizes: np.ndarray, ordered: bool) -> float:
    """log of the chance that random labels of these group sizes separate distinct values."""
    n = int(sizes.sum())
    orders = math.log(2.0) if ordered else math.lgamma(sizes.size + 1)
    return orders + float(sum(math.lgamma(s + 1) for s in sizes)) - math.lgamma(n + 1)


def _separates(codes: np.ndarray, x: np.ndarray, g: int, ordered: bool) -> np.ndarray | None:
    """The groups' order in which their ranges of ``x`` do not overlap, or None."""
    low = np.full(g, np.inf)
    high = np.full(g, -np.inf)
    np.minimum.at(low, codes, x)
    np.maximum.at(high, codes, x)
    orders = [np.arange(g), np.arange(g)[::-1]] if ordered else [np.argsort(low, kind="stable")]
    for order in orders:
        if np.all(high[order[:-1]] < low[order[1:]]):
            return order
    return None


def _persistence(codes, counts, population, rates: bool, order, g: int) -> float:
    """The share of :data:`REDRAWS` redraws of the counts (Poisson around each, a fixed
    stream: the decision is the table's, not chance's) in which the split stays clean in
    ``order``; stops early once it is above :data:`PERSISTS`."""
    by_group = np.argsort(codes, kind="stable")  # each group's units together, in order
    starts = np.searchsorted(codes[by_group], np.arange(g))
    counts = counts[by_group]
    scale = population[by_group] if rates else 1.0
    rng = np.random.default_rng(0)
    kept = 0
    for done in range(1, REDRAWS + 1):
        x = rng.poisson(counts) / scale
        low, high = np.minimum.reduceat(x, starts), np.maximum.reduceat(x, starts)
        kept += bool(np.all(high[order[:-1]] < low[order[1:]]))
        if kept > PERSISTS * REDRAWS:
            return kept / done
    return kept / REDRAWS


def _separation(name, units, values: pd.Series, counts, population) -> Separation | None:
    """The first quantity (counts, then rates) that ``values`` separate on these units
    beyond chance and that the redraws undo (module docstring), or None."""
    ordered = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    codes, labels = pd.factorize(values, sort=ordered)
    g = labels.size
    if g < 2 or (codes < 0).any():
        return None
    explained = _separates(codes, population, g, ordered) is not None
    keep = population > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.where(keep, counts / population, np.nan)
    for quantity, x, kept in (("counts", counts, np.ones_like(keep)), ("rates", rates, keep)):
        if quantity == "counts" and explained:
            continue
        c = codes[kept]
        sizes = np.bincount(c, minlength=g)
        if (sizes == 0).any() or _log_chance(sizes, ordered) >= math.log(CHANCE):
            continue
        order = _separates(c, x[kept], g, ordered)
        if order is None:
            continue
        persists = _persistence(c, counts[kept], population[kept], quantity == "rates",
                                order, g)  # fmt: skip
        if persists <= PERSISTS:
            groups = [(labels[k], float(x[kept][c == k].min()), float(x[kept][c == k].max()))
                      for k in order]  # fmt: skip
            chance = math.exp(_log_chance(sizes, ordered))
            return Separation(name, units, quantity, groups, chance, persists)
    return None


def attribute_separation(keys: pd.DataFrame, attributes: pd.DataFrame | None, counts,
                         population) -> Separation | None:  # fmt: skip
    """The first attribute that separates the counts or rates (module docstring): of the
    strata, then of the groups of each key that the attribute is constant within."""
    if attributes is None:
        return None
    counts = np.asarray(counts, dtype=float)
    population = np.asarray(population, dtype=float)
    keys = keys.reset_index(drop=True)
    for name in attributes.columns:
        values = attributes[name].reset_index(drop=True)
        found = _separation(name, "the strata", values, counts, population)
        if found is not None:
            return found
        for key in keys.columns:
            groups = keys[key]
            if groups.nunique() in (1, len(groups)):
                continue
            per_group = values.groupby(groups, sort=False).nunique(dropna=False)
            if (per_group != 1).any():  # not constant within the key's groups
                continue
            frame = pd.DataFrame({"v": values, "c": counts, "p": population, "k": groups})
            total = frame.groupby("k", sort=False).agg(v=("v", "first"), c=("c", "sum"),
                                                       p=("p", "sum"))  # fmt: skip
            found = _separation(name, f"the groups of {key}", total["v"], total["c"].to_numpy(),
                                total["p"].to_numpy())  # fmt: skip
            if found is not None:
                return found
    return None


def refusal(where: str, found: Separation) -> str:
    """The refusal: the file, the attribute, the split it makes, what to do."""
    shown = [f"{_plain(value)!r}: {low:.4g}..{high:.4g}" for value, low, high in found.groups[:6]]
    more = f", ... ({len(found.groups)} values)" if len(found.groups) > 6 else ""
    chance = f"{found.chance:.1g}" if found.chance > 0 else "below 1e-300"
    return (
        f"{where}: attribute {found.attribute!r} looks computed from these counts: its values "
        f"split {found.units} by their {found.quantity} with no overlap "
        f"({'; '.join(shown)}{more}), a split that the counts' own Poisson noise undoes in "
        f"{1 - found.persists:.0%} of {REDRAWS} redraws and labels at random make with chance "
        f"{chance}. Published exactly (attributes get no noise), it would publish that split "
        "of the counts; give a column made without them, or, if it is public, say so with "
        f"{OVERRIDE}"
    )


def _plain(value):
    """A numpy scalar as the Python value it holds."""
    return value.item() if isinstance(value, np.generic) else value
