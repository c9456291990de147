"""The differencing attack on a suppressed table: the feasible range [min, max] of every
hidden cell, given what the table and the margins published beside it tell.

The attacker knows every shown cell, every published margin total exactly (the margins are
totals of the true counts, published unsuppressed: by default each key's and each pair of
keys', :func:`default_margins`), the rule's range of each hidden cell
(:meth:`dpcounts.baselines.suppression.SuppressionRule.bounds`) and that counts are not
negative. Each group of a margin (its cells sharing the margin's key values) gives one
equality: the sum of its hidden cells is the group's total less its shown cells. A hidden
cell's feasible range is the least and the largest value it takes over the real solutions
of these equalities within the bounds (the linear programme's continuous range); its
integer range is [ceil(min - TOL), floor(max + TOL)], with :data:`TOL` = 1e-6 above HiGHS's
default feasibility tolerance of 1e-7 (a vertex may be fractional: the equalities of a
three-way table are not totally unimodular).

:func:`feasible_ranges` computes them in steps, each exact:

1. bound propagation: for every group, a cell's bounds are tightened to the group's
   residual less the other cells' bounds, until no bound changes (the bounds stay integers,
   so the fixed point is reached in finitely many rounds; at most ``max_rounds``). A cell
   whose bounds meet is pinned; the propagated bounds contain the LP's range;
2. the remaining cells fall into independent connected components (cells linked by
   sharing a group); each component is one LP (SciPy's HiGHS, ``linprog(method="highs")``),
   the pinned cells' values moved to the right-hand side, a margin whose keys are a subset
   of another's left out (:func:`implied_margins`: its equalities are sums of the other's).
   A component of one equality needs no LP (its propagated bounds are its ranges);
3. every LP's solution is a feasible point, and a cell whose value at some feasible point
   (the true counts are one) reaches its outer bound has that bound as its exact min or
   max. A component of at most ``direct_cells`` cells gets two batch LPs, the least and the
   largest sum of its cells; a larger one is split into blocks (:func:`_blocks`: the
   cells linked by the equalities of few cells, e.g. one county's, each block at most
   ``max_block`` cells; the equalities of many cells, e.g. a race x age total over every
   county, link the blocks). Per block, small LPs only:

   * a restriction: the block and its next ``helpers`` blocks free, every other cell at
     its true count, every equality kept; its solutions (the least and the largest sum of
     the block, then each open side of each cell) are feasible points of the whole;
   * a relaxation: the block alone with its own equalities (the linking ones dropped); its
     min and max of a cell are outer bounds;

   a side whose restriction reaches its relaxation's bound is exact; the sides still open
   are retried with :data:`WIDEN` times as many helpers;
4. two LPs of the whole component per cell, min and max, for the sides still open (each
   solution again settles the other cells it reaches).

The measures (:meth:`Ranges.summary`), over the hidden cells' integer ranges:

* ``pinned``: the share whose range is one value (max == min): the attacker knows the count;
* ``within_one``: the share with max - min <= 2: the range's midpoint is within one of
  every value in it, so the attacker's guess (the midpoint) is within one of the truth
  whatever it is; the measure of :mod:`dpcounts.attack.guesses`'s ``within_one``
  (|guess - truth| <= 1) for a guess that cannot miss by more. (The issue's "76% to within
  one" of pennLC is this share);
* ``width_at_most_one``: the share with max - min <= 1 (at most two values);
* ``mean_width``: the mean of max - min (infinite if some cell is unbounded).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import stats
from scipy.optimize import linprog
from scipy.sparse.csgraph import connected_components

from dpcounts.baselines.suppression import (
    SuppressionRule,
    check_counts,
    check_mask,
    margin_groups,
)

#: The restrictions of a block's sides still open after its ``helpers`` blocks take this
#: many times as many.
WIDEN = 8
#: A component's LP of more cells runs without HiGHS's presolve.
PRESOLVE_CELLS = 5_000
#: Tolerance of the integer rounding and of a bound reached (above HiGHS's 1e-7).
TOL = 1e-6


def default_margins(names: Sequence[str]) -> list[tuple[str, ...]]:
    """The margins a steward publishes by default: each key's totals and each pair of keys'
    (``["county", "race"]`` -> ``[("county",), ("race",), ("county", "race")]``)."""
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise ValueError(f"names must be a list of key names, got {names!r}")
    names = list(names)
    if len(set(names)) != len(names):
        raise ValueError(f"key names must be distinct, got {names}")
    return [(name,) for name in names] + list(combinations(names, 2))


@dataclass
class Ranges:
    """The feasible ranges of the hidden cells (arrays over ``cells``, the hidden strata's
    indices in the table's order).

    * ``lower``, ``upper``: the continuous min and max (NaN where not computed: an unsampled
      cell); ``outer_lower``, ``outer_upper``: the propagated bounds, which contain them;
    * ``method``: ``propagation`` (pinned by step 1), ``lp`` (steps 2 to 4) or ``none``;
    * ``status``: ``exact`` (settled before any sampling, or everything without sampling),
      ``sampled`` (in the random sample of the open cells) or ``unsampled`` (open, not in
      the sample; its range may still be known from other cells' LPs, but the estimate
      does not use it).
    """

    cells: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    outer_lower: np.ndarray
    outer_upper: np.ndarray
    method: np.ndarray
    status: np.ndarray
    components: int
    lps: int
    confidence: float = 0.95
    meta: dict = field(default_factory=dict)

    @property
    def integer_lower(self) -> np.ndarray:
        """ceil(lower - TOL) (NaN where unknown)."""
        return np.ceil(self.lower - TOL)

    @property
    def integer_upper(self) -> np.ndarray:
        """floor(upper + TOL) (NaN where unknown, inf where unbounded)."""
        return np.floor(self.upper + TOL)

    @property
    def width(self) -> np.ndarray:
        """The integer range's width max - min (NaN where unknown)."""
        return self.integer_upper - self.integer_lower

    def summary(self) -> dict:
        """The shares pinned and within one and the mean width, each as ``estimate``,
        ``low``, ``high`` (the interval; equal to the estimate when every cell is exact),
        with the counts of cells exact, sampled and unsampled."""
        n = self.cells.size
        exact = self.status == "exact"
        sampled = self.status == "sampled"
        open_cells = n - int(exact.sum())
        width = self.width
        out = {
            "cells": int(n),
            "exact": int(exact.sum()),
            "sampled": int(sampled.sum()),
            "unsampled": int((self.status == "unsampled").sum()),
            "components": self.components,
            "lps": self.lps,
            "confidence": self.confidence,
        }
        if n == 0:
            return out
        measures = ("pinned", 0), ("within_one", 2), ("width_at_most_one", 1)
        for name, hit in ((name, width <= most) for name, most in measures):
            known = int(hit[exact].sum())
            if open_cells == 0:
                share = known / n
                out[name] = {"estimate": share, "low": share, "high": share, "count": known}
                continue
            k, m = int(hit[sampled].sum()), int(sampled.sum())
            if m == 0:
                low, high, p = 0.0, 1.0, math.nan
            else:
                ci = stats.binomtest(k, m).proportion_ci(self.confidence, method="wilson")
                low, high, p = ci.low, ci.high, k / m
            out[name] = {
                "estimate": (known + open_cells * p) / n,
                "low": (known + open_cells * low) / n,
                "high": (known + open_cells * high) / n,
                "count_exact": known,
                "count_sampled": k,
            }
        total = float(width[exact].sum())
        if open_cells == 0:
            mean = total / n
            out["mean_width"] = {"estimate": mean, "low": mean, "high": mean}
        else:
            sample = width[sampled]
            if sample.size >= 2 and np.all(np.isfinite(sample)):
                half = stats.t.ppf((1 + self.confidence) / 2, sample.size - 1) * (
                    sample.std(ddof=1) / math.sqrt(sample.size)
                )
            else:
                half = math.inf
            mean = sample.mean() if sample.size else math.nan
            out["mean_width"] = {
                "estimate": (total + open_cells * mean) / n,
                "low": (total + open_cells * (mean - half)) / n,
                "high": (total + open_cells * (mean + half)) / n,
            }
        out["unbounded"] = int(np.isinf(self.upper).sum())
        return out


def feasible_ranges(
    counts,
    mask,
    keys: pd.DataFrame,
    margins: Sequence[Sequence[str]] | None = None,
    *,
    rule: SuppressionRule | None = None,
    bounds: tuple | None = None,
    max_lps: int | None = None,
    rng: np.random.Generator | None = None,
    confidence: float = 0.95,
    batch: bool = True,
    max_rounds: int = 10_000,
    direct_cells: int = 1_000,
    max_block: int = 200,
    helpers: int = 32,
    workers: int = 1,
) -> Ranges:
    """The feasible range of every hidden cell (``mask`` True) of the true ``counts`` (one
    per stratum, the rows of ``keys``), the ``margins`` (default :func:`default_margins` of
    the key columns) published exactly. The attacker's bounds of each cell are
    ``bounds = (lower, upper)`` (one per stratum) or else ``rule.bounds(counts, mask)``
    (default rule: :class:`SuppressionRule()`). ``max_lps`` (None: no limit) and ``rng``:
    the budget of step 4's LPs and the sample beyond it; ``batch``: step 3's batch LPs of
    the small components; ``direct_cells``, ``max_block``, ``helpers``: which components
    are split into blocks, the blocks' size and each restriction's helper blocks (module
    docstring); ``workers``: processes sharing a large component's blocks. The ranges do
    not depend on these settings, only the time to get them."""
    counts = check_counts(counts)
    mask = check_mask(mask, counts.size)
    if margins is None:
        if not isinstance(keys, pd.DataFrame):
            raise ValueError(f"keys must be a pandas DataFrame of key columns, got {type(keys)}")
        margins = default_margins(list(keys.columns))
    codes = margin_groups(keys, margins, counts.size)
    if bounds is None:
        lower, upper = (rule or SuppressionRule()).bounds(counts, mask)
    else:
        lower, upper = (np.asarray(b, dtype=float) for b in bounds)
        if lower.shape != counts.shape or upper.shape != counts.shape:
            raise ValueError(f"bounds must be two arrays of one entry per count ({counts.size})")
    if max_lps is not None and (not isinstance(max_lps, (int, np.integer)) or max_lps < 0):
        raise ValueError(f"max_lps must be None or a non-negative integer, got {max_lps!r}")
    if max_lps is not None and not isinstance(rng, np.random.Generator):
        raise ValueError("max_lps needs rng, a numpy.random.Generator, to draw the sample")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    cells = np.flatnonzero(mask)
    truth = counts[cells].astype(float)
    lo = np.maximum(lower[cells], 0.0)
    hi = upper[cells].copy()
    if np.any(np.isnan(lo) | np.isnan(hi)) or np.any(np.isinf(lo)):
        raise ValueError("the lower bounds must be finite and no bound NaN")
    if np.any((truth < lo) | (truth > hi)):
        raise ValueError("the bounds must contain the true count of every hidden cell")

    n = cells.size
    # the incidence of hidden cells and the groups holding one (every margin's groups)
    entry_cell, entry_group, entry_margin, offset = [], [], [], 0
    for m, code in enumerate(codes):
        entry_cell.append(np.arange(n))
        entry_group.append(code[cells] + offset)
        entry_margin.append(np.full(n, m))
        offset += int(code.max()) + 1 if code.size else 0
    empty = np.zeros(0, np.int64)
    entry_cell = np.concatenate(entry_cell) if codes else empty
    entry_group = np.concatenate(entry_group) if codes else empty
    entry_margin = np.concatenate(entry_margin) if codes else empty
    _, entry_group = np.unique(entry_group, return_inverse=True)
    implied = implied_margins(margins)
    in_lp = ~np.isin(entry_margin, implied)
    groups = int(entry_group.max()) + 1 if entry_group.size else 0
    residual = np.bincount(entry_group, weights=truth[entry_cell], minlength=groups)

    clock = [time.perf_counter()]
    lo, hi = propagate(lo, hi, entry_cell, entry_group, residual, max_rounds)
    clock.append(time.perf_counter())
    pinned = hi - lo <= TOL
    solver = _Solver(truth, lo, hi, pinned, entry_cell[in_lp], entry_group[in_lp], residual)
    attack = _Attack(solver, lo, hi, pinned)
    if batch:
        for component in range(solver.components):
            members = solver.members[component]
            if members.size > 1 and attack.open(members).any():
                if members.size > direct_cells:
                    continue  # the blocks' batch LPs below
                solver.solve(component, -np.ones(members.size))
                solver.solve(component, np.ones(members.size))
        attack.settle()
    for component in range(solver.components):
        members = solver.members[component]
        if members.size > direct_cells and attack.open(members).any():
            attack.sandwich(component, max_block, helpers, workers)
    block_lps = solver.lps
    clock.append(time.perf_counter())

    status = np.full(n, "exact", dtype=object)
    open_cells = np.flatnonzero(attack.open())
    sides = int((~attack.settled_lo).sum() + (~attack.settled_hi).sum())
    if max_lps is None or sides <= max_lps:
        for j in open_cells:
            attack.solve_cell(j)
    else:
        status[open_cells] = "unsampled"
        for j in rng.permutation(open_cells):
            need = int(not attack.settled_lo[j]) + int(not attack.settled_hi[j])
            if solver.lps - block_lps + need > max_lps:
                break
            attack.solve_cell(j)
            status[j] = "sampled"
    clock.append(time.perf_counter())
    method = np.where(pinned, "propagation", "none").astype(object)
    method[~pinned & ~attack.open()] = "lp"
    result_lower = np.where(attack.settled_lo, attack.result_lo, np.nan)
    result_upper = np.where(attack.settled_hi, attack.result_hi, np.nan)
    return Ranges(
        cells=cells,
        lower=result_lower,
        upper=result_upper,
        outer_lower=attack.lo,
        outer_upper=attack.hi,
        method=method.astype(str),
        status=status.astype(str),
        components=solver.components,
        lps=solver.lps,
        confidence=confidence,
        meta={
            "groups": groups,
            "implied_margins": [tuple(margins[m]) for m in implied],
            "pinned_by_propagation": int(pinned.sum()),
            "largest_component": max((m.size for m in solver.members), default=0),
            "blocks": attack.blocks,
            "lps_before_cells": block_lps,
            "cell_lps": solver.lps - block_lps,
            "seconds": dict(
                zip(("propagation", "components", "cells"), np.diff(clock).tolist(), strict=True)
            ),
        },
    )


def implied_margins(margins: Sequence[Sequence[str]]) -> list[int]:
    """The indices of the margins another margin implies: a margin whose keys are a subset
    of a later margin's, or a strict subset of any margin's (its groups are sums of that
    margin's groups, so its equalities are sums of that margin's and the LPs leave them
    out; propagation uses every margin)."""
    sets = [frozenset(margin) for margin in margins]
    return [
        i
        for i, keys in enumerate(sets)
        if any(keys < other or (keys == other and j > i) for j, other in enumerate(sets))
    ]


def propagate(lo, hi, entry_cell, entry_group, residual, max_rounds: int = 10_000):
    """Interval propagation over the equalities sum_{cells of g} x = residual[g] (entries
    (cell, group)) until no bound changes or ``max_rounds``: each cell's upper bound becomes
    at most residual - the others' lower bounds, its lower bound at least residual - the
    others' upper bounds. Returns the new (lo, hi); ValueError if they cross (bounds that
    admit no solution)."""
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    groups = residual.size
    for _ in range(max_rounds):
        lo_e, hi_e = lo[entry_cell], hi[entry_cell]
        infinite = np.isinf(hi_e)
        finite_hi = np.where(infinite, 0.0, hi_e)
        sum_lo = np.bincount(entry_group, weights=lo_e, minlength=groups)
        sum_hi = np.bincount(entry_group, weights=finite_hi, minlength=groups)
        n_inf = np.bincount(entry_group, weights=infinite, minlength=groups)
        r = residual[entry_group]
        cap = r - (sum_lo[entry_group] - lo_e)
        others_inf = n_inf[entry_group] - infinite > 0
        floor = np.where(others_inf, -np.inf, r - (sum_hi[entry_group] - finite_hi))
        new_hi, new_lo = hi.copy(), lo.copy()
        np.minimum.at(new_hi, entry_cell, cap)
        np.maximum.at(new_lo, entry_cell, floor)
        if np.any(new_lo > new_hi + TOL):
            raise ValueError("the bounds and margins admit no table (inconsistent input)")
        if np.array_equal(new_lo, lo) and np.array_equal(new_hi, hi):
            break
        lo, hi = new_lo, new_hi
    return lo, hi


class _Solver:
    """The LPs of the cells propagation left open, one per connected component, and the
    least and largest value each cell has taken at a feasible point so far."""

    def __init__(self, truth, lo, hi, pinned, entry_cell, entry_group, residual):
        self.seen_lo, self.seen_hi = truth.copy(), truth.copy()
        self.truth = truth
        self.lps = 0
        self.presolve_cells = PRESOLVE_CELLS
        n, groups = truth.size, residual.size
        residual = residual - np.bincount(
            entry_group, weights=np.where(pinned, truth, 0.0)[entry_cell], minlength=groups
        )
        keep = ~pinned[entry_cell]
        cell, group = entry_cell[keep], entry_group[keep]
        incidence = sp.csr_matrix((np.ones(cell.size), (cell, group)), shape=(n, groups))
        graph = sp.bmat([[None, incidence], [incidence.T, None]], format="csr")
        count, label = connected_components(graph, directed=False)
        cell_label, group_label = label[:n], label[n:]
        open_cells = np.flatnonzero(~pinned)
        used = np.unique(cell_label[open_cells])
        self.components = int(used.size)
        renumber = np.full(count, -1)
        renumber[used] = np.arange(used.size)
        self.component = renumber[cell_label]
        self.component[pinned] = -1
        self.members, self.problems = [], []
        order = np.argsort(self.component[open_cells], kind="stable")
        sorted_cells = open_cells[order]
        bounds = np.searchsorted(self.component[sorted_cells], np.arange(used.size + 1))
        incidence_t = incidence.T.tocsr()
        group_component = np.where(group_label >= 0, renumber[group_label], -1)
        for c in range(used.size):
            members = sorted_cells[bounds[c] : bounds[c + 1]]
            rows = np.flatnonzero((group_component == c) & (np.diff(incidence_t.indptr) > 0))
            a = incidence_t[rows][:, members]
            self.members.append(members)
            self.problems.append((a, residual[rows], np.column_stack([lo[members], hi[members]])))
            if rows.size == 1:
                self._one_equality(members, residual[rows[0]], lo[members], hi[members])

    def _one_equality(self, members, total, lo, hi):
        """A component of one equality sum x = total: each cell's exact range is its box
        cut by total less the others' bounds, and both ends are reached."""
        finite = np.where(np.isinf(hi), 0.0, hi)
        others_inf = np.isinf(hi).sum() - np.isinf(hi) > 0
        least = np.maximum(lo, np.where(others_inf, -np.inf, total - (finite.sum() - finite)))
        most = np.minimum(hi, total - (lo.sum() - lo))
        self.seen_lo[members] = np.minimum(self.seen_lo[members], least)
        self.seen_hi[members] = np.maximum(self.seen_hi[members], most)

    def solve(self, component: int, objective: np.ndarray) -> float:
        """min objective . x over the component's LP (inf if unbounded); records the
        solution's values."""
        a, b, bounds = self.problems[component]
        self.lps += 1
        # HiGHS's presolve spends minutes removing the dependent equalities of a large
        # component (the pairs' totals share their one-key sums); the LP without it, seconds
        options = {"presolve": False} if bounds.shape[0] > self.presolve_cells else {}
        result = linprog(objective, A_eq=a, b_eq=b, bounds=bounds, method="highs", options=options)
        if result.status == 3:
            return -math.inf
        if result.status != 0:
            raise RuntimeError(f"HiGHS failed on a component's LP: {result.message}")
        members = self.members[component]
        self.seen_lo[members] = np.minimum(self.seen_lo[members], result.x)
        self.seen_hi[members] = np.maximum(self.seen_hi[members], result.x)
        return float(result.fun)


def _blocks(a, max_block: int):
    """(local, block): the equalities (rows of ``a``) kept local and each column's block,
    the connected components of the columns over the local rows. The local rows are those
    of at most t cells, t the largest row size whose blocks hold at most ``max_block``
    cells (binary search; at worst no row is local and every cell is a block)."""
    size = np.diff(a.indptr)
    m = a.shape[1]

    def split(threshold):
        local = size <= threshold
        part = a[local]
        graph = sp.bmat([[None, part.T], [part, None]], format="csr", dtype=float)
        _, label = connected_components(graph, directed=False)
        return local, np.unique(label[:m], return_inverse=True)[1]

    candidates = np.unique(size)
    best = (np.zeros(size.size, dtype=bool), np.arange(m))
    low, high = 0, candidates.size - 1
    while low <= high:
        middle = (low + high) // 2
        local, block = split(candidates[middle])
        if np.bincount(block).max() <= max_block:
            best, low = (local, block), middle + 1
        else:
            high = middle - 1
    return best


class _Attack:
    """The state of the computation: each cell's outer bounds (propagated, then cut by the
    blocks' relaxations), the sides (min, max) settled and their values."""

    def __init__(self, solver, lo, hi, pinned):
        self.solver = solver
        self.lo, self.hi = lo.copy(), hi.copy()
        self.result_lo, self.result_hi = lo.copy(), hi.copy()
        self.settled_lo, self.settled_hi = pinned.copy(), pinned.copy()
        self.blocks = 0
        self.settle()

    def open(self, cells=None) -> np.ndarray:
        """Whether each cell (of ``cells``, default all) has a side still open."""
        open_ = ~(self.settled_lo & self.settled_hi)
        return open_ if cells is None else open_[cells]

    def settle(self):
        """Settle the sides whose outer bound some feasible point reaches."""
        reach_lo = ~self.settled_lo & (self.solver.seen_lo <= self.lo + TOL)
        reach_hi = ~self.settled_hi & (self.solver.seen_hi >= self.hi - TOL)
        self.result_lo[reach_lo] = self.lo[reach_lo]
        self.result_hi[reach_hi] = self.hi[reach_hi]
        self.settled_lo |= reach_lo
        self.settled_hi |= reach_hi

    def solve_cell(self, j: int):
        """The open sides of cell ``j`` by its component's LP."""
        component = self.solver.component[j]
        objective = (self.solver.members[component] == j).astype(float)
        if not self.settled_hi[j]:
            self.result_hi[j] = -self.solver.solve(component, -objective)
            self.hi[j] = self.result_hi[j]
            self.settled_hi[j] = True
        if not self.settled_lo[j]:
            self.result_lo[j] = self.solver.solve(component, objective)
            self.lo[j] = self.result_lo[j]
            self.settled_lo[j] = True
        self.settle()

    def sandwich(self, component: int, max_block: int, helpers: int, workers: int = 1):
        """Settle what can be of a large component by its blocks' small LPs (module
        docstring), over ``workers`` processes (each a share of the blocks; their feasible
        points and outer bounds merged)."""
        solver = self.solver
        members = solver.members[component]
        a, b, bounds = solver.problems[component]
        a = a.tocsr()
        local, block = _blocks(a, max_block)
        blocks = int(block.max()) + 1
        self.blocks += blocks
        problem = (a, b, bounds, solver.truth[members], local, block, helpers)
        state = {
            "lo": self.lo[members],
            "hi": self.hi[members],
            "seen_lo": solver.seen_lo[members],
            "seen_hi": solver.seen_hi[members],
            "settled_lo": self.settled_lo[members],
            "settled_hi": self.settled_hi[members],
        }
        if workers <= 1 or blocks < 2 * workers:
            outs = [_sandwich(problem, np.arange(blocks), state)]
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            shares = np.array_split(np.arange(blocks), workers)
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=context) as pool:
                outs = list(pool.map(_sandwich, [problem] * workers, shares, [state] * workers))
        merged = {
            "lo": np.max([o["lo"] for o in outs], axis=0),
            "hi": np.min([o["hi"] for o in outs], axis=0),
            "seen_lo": np.min([o["seen_lo"] for o in outs], axis=0),
            "seen_hi": np.max([o["seen_hi"] for o in outs], axis=0),
        }
        self.lo[members], self.hi[members] = merged["lo"], merged["hi"]
        solver.seen_lo[members], solver.seen_hi[members] = merged["seen_lo"], merged["seen_hi"]
        solver.lps += sum(o["lps"] for o in outs)
        self.settle()


def _lp(a, b, bounds, objective):
    """(min objective . x subject to a x = b within bounds, x); (-inf, None) if unbounded."""
    if a.shape[0] == 0:
        x = np.where(objective > 0, bounds[:, 0], np.where(objective < 0, bounds[:, 1], 0.0))
        return float(objective @ np.where(objective == 0, 0.0, x)), None
    result = linprog(objective, A_eq=a, b_eq=b, bounds=bounds, method="highs")
    if result.status == 3:
        return -math.inf, None
    if result.status != 0:
        raise RuntimeError(f"HiGHS failed on an LP: {result.message}")
    return float(result.fun), result.x


def _sandwich(problem, share, state) -> dict:
    """Step 3 on the blocks ``share`` of one large component (module docstring): the
    component's equalities ``a x = b``, its cells' ``bounds`` and true counts ``x0``, its
    ``local`` rows and each cell's ``block``; ``state`` the component's cells' outer
    bounds, least and largest values at feasible points and settled sides. Returns the
    state after, with ``lps`` the number of LPs solved."""
    a, b, bounds, x0, local, block, helpers = problem
    state = {name: value.copy() for name, value in state.items()}
    lo, hi, seen_lo, seen_hi = state["lo"], state["hi"], state["seen_lo"], state["seen_hi"]
    settled = {"lo": state["settled_lo"], "hi": state["settled_hi"]}
    lps = 0
    blocks = int(block.max()) + 1
    order = np.argsort(block, kind="stable")
    start = np.searchsorted(block[order], np.arange(blocks + 1))
    columns = [order[start[k] : start[k + 1]] for k in range(blocks)]
    a_local, b_local = a[local], b[local]
    row_order = np.argsort(block[a_local.indices[a_local.indptr[:-1]]], kind="stable")
    row_block = block[a_local.indices[a_local.indptr[:-1]]][row_order]
    row_start = np.searchsorted(row_block, np.arange(blocks + 1))
    a_csc = a.tocsc()

    def settle(cells):
        for side, seen, outer, sign in (("lo", seen_lo, lo, 1.0), ("hi", seen_hi, hi, -1.0)):
            reach = sign * (seen[cells] - outer[cells]) <= TOL
            settled[side][cells] |= reach

    def restricted(k, count):
        chosen = np.concatenate([columns[(k + h) % blocks] for h in range(min(count + 1, blocks))])
        sub = a_csc[:, chosen].tocsr()
        sub = sub[np.flatnonzero(np.diff(sub.indptr) > 0)]
        return chosen, sub, sub @ x0[chosen]

    def restriction(chosen, sub, rhs, objective):
        nonlocal lps
        lps += 1
        _, x = _lp(sub, rhs, bounds[chosen], objective)
        if x is not None:
            seen_lo[chosen] = np.minimum(seen_lo[chosen], x)
            seen_hi[chosen] = np.maximum(seen_hi[chosen], x)
            settle(chosen)

    def is_open(cols):
        return not (settled["lo"][cols].all() and settled["hi"][cols].all())

    for k in share:
        cols = columns[k]
        if not is_open(cols):
            continue
        chosen, sub, rhs = restricted(k, helpers)
        weight = np.isin(chosen, cols).astype(float)
        for sign in (-1.0, 1.0):
            restriction(chosen, sub, rhs, sign * weight)
        rows = row_order[row_start[k] : row_start[k + 1]]
        relaxed = a_local[rows][:, cols]
        for i, col in enumerate(cols):
            for side, sign in (("lo", 1.0), ("hi", -1.0)):
                if settled[side][col]:
                    continue
                objective = np.zeros(cols.size)
                objective[i] = sign
                lps += 1
                value = sign * _lp(relaxed, b_local[rows], bounds[cols], objective)[0]
                if side == "lo":
                    lo[col] = max(lo[col], value)
                else:
                    hi[col] = min(hi[col], value)
                settle(cols[i : i + 1])
                if not settled[side][col]:
                    restriction(chosen, sub, rhs, sign * (chosen == col).astype(float))
    if WIDEN * helpers > helpers:
        for k in share:  # the sides still open: restrictions of WIDEN x helpers
            cols = columns[k]
            if not is_open(cols):
                continue
            chosen, sub, rhs = restricted(k, WIDEN * helpers)
            for col in cols:
                for side, sign in (("lo", 1.0), ("hi", -1.0)):
                    if not settled[side][col]:
                        restriction(chosen, sub, rhs, sign * (chosen == col).astype(float))
    state["lps"] = lps
    return state
