"""Rates of many groups of strata for many count vectors at once, age-adjusted or crude.

For group g, rate_g = sum_b w_b * cases_gb / pop_gb * 100,000 where b runs over the age
bands, ``w`` are standard-population weights (summing to one; direct adjustment), cases_gb
sums the counts of the group's strata in band b and pop_gb the populations of its distinct
population units in band b (strata that share a population, such as the cancer types of
Study 2's stand-in, count it once). Without age bands there is one band of weight one and
the rate is the crude rate: the group's events over its population. A group given its own
bands (``group_bands``: a disparity that compares ages) is adjusted over those bands only,
the weights normalised to sum to one over them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Mapping

import numpy as np
import pandas as pd
import scipy.sparse

from dpcounts.units import PER_100K

#: The single band of crude rates.
CRUDE = "all ages"


def band_key(label: str) -> tuple:
    """Sort key of an age band's label by its ages, not its text: ``"9"`` before ``"10"``,
    ``"Under 40"`` first, ``"85+"`` after ``"80-84"``."""
    numbers = [int(n) for n in re.findall(r"\d+", label)]
    lowered = label.lower()
    first = 0 if ("under" in lowered or "<" in lowered) else (numbers[0] if numbers else -1)
    return (first, "+" in label, numbers, label)


class GroupRates:
    """Rates per 100,000 of named groups of strata (boolean masks), by one sparse product.

    ``band`` (a label per stratum) and ``weights`` (label -> standard weight) give direct
    age adjustment; ``band=None`` gives crude rates. ``unit`` (an id per stratum) names
    the population unit of each stratum; ``None`` means every stratum is its own.
    ``group_bands`` (group name -> band labels) adjusts those groups over their own bands
    (the weights normalised over them). Counts passed to :meth:`rates` may be floats
    (expected counts) and hold many rows.
    """

    def __init__(self, population, groups: Mapping[str, np.ndarray], *, band=None,
                 weights: pd.Series | None = None, unit=None,
                 group_bands: Mapping[str, Collection[str]] | None = None,
                 per: float = PER_100K):  # fmt: skip
        self.per = per  # reported rate per rate per person: 100,000, or 1 for SMRs
        population = np.asarray(population, dtype=float)
        n = population.size
        if band is None:
            band = np.full(n, CRUDE, dtype=object)
            weights = pd.Series({CRUDE: 1.0})
        band = np.asarray(band).astype(str)
        unknown = sorted(set(band) - set(weights.index))
        if unknown:
            raise ValueError(f"strata age bands {unknown} have no standard weight")
        unit = None if unit is None else np.asarray(unit)
        self.names = list(groups)
        self.bands = list(weights.index)
        self.weights = weights.to_numpy(dtype=float)
        band_index = pd.Index(self.bands).get_indexer(band)
        n_bands = len(self.bands)
        group_bands = dict(group_bands or {})
        #: group index -> its own weights over every band (0 outside its bands)
        self._own_weights: dict[int, np.ndarray] = {}
        rows, cols = [], []
        pop = np.zeros((len(self.names), n_bands))
        for g, name in enumerate(self.names):
            mask = np.asarray(groups[name], dtype=bool)
            if mask.shape != (n,):
                raise ValueError(f"group {name!r}: mask has shape {mask.shape}, not ({n},)")
            members = np.flatnonzero(mask)
            rows.append(members)
            cols.append(g * n_bands + band_index[members])
            # the population of a unit counts once, whichever of its strata are in the group:
            # its first stratum's, added in the strata's order
            counted = members
            if unit is not None:
                counted = members[np.sort(np.unique(unit[members], return_index=True)[1])]
            np.add.at(pop[g], band_index[counted], population[counted])
            needed = range(n_bands)
            if name in group_bands:
                own = set(map(str, group_bands[name]))
                unknown = sorted(own - set(self.bands), key=band_key)
                if unknown or not own:
                    raise ValueError(f"group {name!r}: bands {unknown} have no standard weight")
                needed = [b for b in range(n_bands) if self.bands[b] in own]
                w = np.zeros(n_bands)
                w[needed] = self.weights[needed] / self.weights[needed].sum()
                self._own_weights[g] = w
            empty = sorted((self.bands[b] for b in needed if pop[g, b] <= 0), key=band_key)
            if empty:
                raise ValueError(f"group {name!r} has no population in age band(s) {empty}")
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        self._indicator = scipy.sparse.csr_matrix(
            (np.ones(rows.size), (rows, cols)), shape=(n, len(self.names) * n_bands)
        )
        self.population = pop

    @classmethod
    def partition(cls, population, codes, names, per: float = PER_100K) -> GroupRates:
        """Crude rates of groups that split the strata: stratum i is in group ``codes[i]``
        (``names[k]`` names group k; a negative code, no group), every stratum its own
        population unit. The same object, to the bit, as ``GroupRates(population, {name:
        codes == k})``, without a mask per group: each group's population is summed in
        the strata's order, as there."""
        population = np.asarray(population, dtype=float)
        codes = np.asarray(codes, dtype=np.int64)
        n, names = population.size, list(names)
        if codes.shape != (n,):
            raise ValueError(f"codes have shape {codes.shape}, not ({n},)")
        rows = np.flatnonzero(codes >= 0)
        cols = codes[rows]
        pop = np.bincount(cols, weights=population[rows], minlength=len(names))[:, None]
        empty = [names[g] for g in np.flatnonzero(pop[: len(names), 0] <= 0)]
        if empty:
            raise ValueError(f"group {empty[0]!r} has no population in age band(s) {[CRUDE]}")
        self = cls.__new__(cls)
        self.per = per
        self.names, self.bands, self.weights = names, [CRUDE], np.array([1.0])
        # one entry a row of a group, in row order: its row pointers count them
        pointers = np.concatenate([[0], np.cumsum(codes >= 0)])
        self._indicator = scipy.sparse.csr_matrix(
            (np.ones(rows.size), cols, pointers), shape=(n, len(names))
        )
        self.population = pop
        return self

    def on(self, strata: np.ndarray) -> GroupRates:
        """These rates of count vectors given at ``strata`` only, every other count 0: the
        same rates, to the bit (a group's sum skips the zeros; its population is the whole
        group's)."""
        out = copy.copy(self)
        out._indicator = self._indicator[np.asarray(strata)]
        return out

    def pieces(self, names, sides: int = 1):
        """The rates of the groups ``names`` as weighted sums of pieces
        (:class:`dpcounts.inference.pieces.Pieces`, what the analyst's methods take): each
        group's age band one piece, of weight per x the band's standard weight (the
        group's own, where it has bands of its own) over its population; ``sides`` 2: the
        groups are numerator and denominator in turn, one disparity a pair. Refuses groups
        that share a stratum (the pieces of one call are disjoint)."""
        from dpcounts.inference.pieces import Pieces

        index = [self.names.index(name) for name in names]
        bands = len(self.bands)
        columns = [g * bands + b for g in index for b in range(bands)]
        sub = self._indicator[:, columns].tocoo()
        piece = np.full(self._indicator.shape[0], -1, dtype=np.int64)
        if np.unique(sub.row).size != sub.row.size:
            raise ValueError(f"groups {list(names)} share strata; their pieces must not")
        piece[sub.row] = sub.col
        own = getattr(self, "_own_weights", {})
        rows, cols, values = [], [], []
        for k, g in enumerate(index):
            weights = own.get(g, self.weights)
            people = self.population[g]
            safe = np.where(people > 0, people, 1.0)
            rows.extend([k] * bands)
            cols.extend(k * bands + np.arange(bands))
            values.extend(np.where(people > 0, self.per * weights / safe, 0.0))
        matrix = scipy.sparse.csr_matrix((values, (rows, cols)),
                                         shape=(len(index), len(index) * bands))  # fmt: skip
        return Pieces(piece, matrix, sides)

    def rates(self, counts) -> np.ndarray:
        """Rates per 100,000 (times ``per`` / 100,000: SMRs with ``per`` 1): shape (rows,
        groups) (or (groups,) for 1-D counts)."""
        counts = np.asarray(counts, dtype=float)
        flat = counts[None, :] if counts.ndim == 1 else counts
        by_band = np.asarray(self._indicator.T @ flat.T).T  # (rows, groups * bands)
        by_band = by_band.reshape(flat.shape[0], len(self.names), len(self.bands))
        if not getattr(self, "_own_weights", None):
            out = _weighted_bands(by_band / self.population[None], self.weights) * self.per
            return out[0] if counts.ndim == 1 else out
        # groups with bands of their own have no population outside them: 0 there, not 0/0
        population = np.where(self.population > 0, self.population, 1.0)
        out = _weighted_bands(by_band / population[None], self.weights) * self.per
        for g, w in self._own_weights.items():
            out[:, g] = _weighted_bands(by_band[:, g, :] / population[g], w) * self.per
        return out[0] if counts.ndim == 1 else out


def _weighted_bands(rates: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """sum_b rates[..., b] weights[b], band after band: each group's number is the same
    bits whatever the other groups (a BLAS product's summation order depends on the
    shape and the machine's kernel, so a group's rate could change with its neighbours)."""
    weights = np.asarray(weights, dtype=float)
    out = rates[..., 0] * weights[0]
    for b in range(1, weights.size):
        out = out + rates[..., b] * weights[b]
    return out
