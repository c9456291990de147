"""The study sampler: the tree of :mod:`dpcounts.sampling.conditioned` in double
precision, what the simulation studies draw from (:class:`StudySampler`).

Numerical devices (none changes the target distribution beyond the stated tail error):

* Tilting (:mod:`dpcounts.sampling.tilt`): truncated cells by damped Newton steps on their
  windows' moments, checked, untruncated cells by a root find on their NB means.
* Tail truncation. Each node's tilted pmf (leaf or internal) is cut where its tail mass on
  either side is below ``cutoff`` = 1e-16 (untruncated cells are first restricted to an
  NB quantile window holding all but 1e-17 on each side). Draws are then exactly q
  restricted to the set A of z whose cells and subtree sums all stay inside the kept
  windows, and the total-variation distance to q is at most
  q(not A) <= (sum of the cut masses) / P_tilted(sum = y.), with P_tilted the product of
  the tilted cell pmfs on [L_k, min(U_k, y.)]. The bound is computed at build time
  (:attr:`StudySampler.tv_bound`; ``benchmarks/mechanisms.py`` prints it).
* Every node is stored normalised with its log scale kept; long convolutions use FFT
  (negative round-off clipped to zero, :mod:`dpcounts.sampling.convolution`), short ones
  are direct.

As implemented the study sampler is *not* pure epsilon-DP, and its ``tv_bound`` is not
rigorous: the cuts sit at y-dependent places, a split is a 53-bit inverse CDF
(``rng.random() * mass`` against float cumulative sums, so an outcome of probability below
about 2^-53 is unreachable or drawn at the wrong rate), and FFT round-off is absolute, so
small entries have unbounded relative error. Some outputs then have probability 0 under y
and > 0 under a neighbour. :func:`dpcounts.sampling.implemented.implemented_pmf` computes
what it really draws; a release draws from
:class:`~dpcounts.sampling.release_mode.ReleaseSampler` instead.
"""

from __future__ import annotations

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.sampling.conditioned import CUTOFF, ConditionedSampler, close_level
from dpcounts.sampling.convolution import DIRECT_CONVOLVE, fft_convolve_rows, pad_rows
from dpcounts.sampling.tilt import (
    nbinom_window,
    solve_tilt_bounded_checked,
    solve_tilt_untruncated,
    tilted_probabilities,
    window_moments,
    window_weights,
)


def _trim_rows(prob: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of normalised, zero-padded pmfs: the first and last kept column after cutting
    each tail whose mass is at most ``cutoff``, and the mass cut (compiled:
    :func:`dpcounts.sampling.tree_steps.trim_rows`, the bits of the running sums
    ``np.cumsum`` forms from each end)."""
    from dpcounts.sampling.tree_steps import trim_rows

    return trim_rows(np.ascontiguousarray(prob, dtype=float), float(cutoff))


def _rows_to_list(prob: np.ndarray, first: np.ndarray, last: np.ndarray) -> list[np.ndarray]:
    """Columns first..last of each row, renormalised, as a list of 1-D arrays."""
    columns = np.arange(prob.shape[1])[None, :]
    keep = (columns >= first[:, None]) & (columns <= last[:, None])
    kept = np.where(keep, prob, 0.0)
    kept /= kept.sum(axis=1, keepdims=True)
    flat = kept[keep]
    ends = np.cumsum(last - first + 1).tolist()
    # slices of one array, as np.split gives, without its per-piece cost (thousands a tree)
    return [flat[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True)]


class StudySampler(ConditionedSampler):
    """Exact draws of z ~ prod_k w_k(z_k) | sum z = y. restricted to the kept windows, for
    one calibration and dataset (module docstring): double-precision pmfs, FFT
    convolutions, 53-bit inverse-CDF splits. Same draws for the same ``rng`` as the
    simulation studies have always had.

    Parameters
    ----------
    y : the confidential counts (non-negative integers, one per cell, summing to cal.total)
    cal : the calibration; any mechanism (md, pg or truncated) is accepted
    cutoff : the largest tail mass cut from each side of every node's pmf (default 1e-16);
        ``tv_bound`` covers these cuts only
    """

    def __init__(self, y, cal: Calibration, *, cutoff: float = CUTOFF):
        inputs = self._prepare(y, cal, cutoff)
        if inputs is None:
            return
        _, shape, log_p, lower, upper = inputs
        self._build_leaves(shape, log_p, lower, upper, cutoff)
        self._build_tree(cutoff)

    # --- construction --------------------------------------------------------------
    def _build_leaves(self, shape, log_p, lower, upper, cutoff) -> None:
        total = self.total
        window_cut = 0.0
        if self.calibration.truncated:
            start, stop = lower, upper
            rows, base = window_weights(shape, log_p, start, stop)
            moments = window_moments(rows, base)
            log_c = solve_tilt_bounded_checked(moments, total)
            probs = moments.probabilities(log_c)  # formed by the tilt's last step
        else:
            log_c = solve_tilt_untruncated(shape, log_p, total)
            success = 1.0 - np.exp(log_p + log_c)  # scipy's nbinom counts failures
            start, stop, below_total = nbinom_window(cutoff / 10, shape, success, total)
            start = np.nan_to_num(start, nan=0.0)
            stop = np.nan_to_num(stop, nan=total)
            start = np.minimum(start, total).astype(np.int64)
            stop = np.clip(stop, start, total).astype(np.int64)
            # the cut is measured against each cell's tilted pmf on [0, y.] (larger values
            # cannot occur given the sum), which holds a share F_k(y.) of the NB's mass
            # (below_total: F_k(y.))
            window_cut = 2 * (cutoff / 10) * float(np.sum(1.0 / below_total))
            rows, base = window_weights(shape, log_p, start, stop)
            probs = tilted_probabilities(rows, base, log_c)
        self.log_tilt = float(log_c)
        offsets = np.zeros(self.n_cells, np.int64)
        pmfs: list[np.ndarray | None] = [None] * self.n_cells
        for (cells, values, _), prob in zip(rows.groups, probs, strict=True):
            first, last, cut = _trim_rows(prob, cutoff)
            window_cut += float(cut.sum())
            offsets[cells] = values[np.arange(cells.size), first]
            for cell, pmf in zip(cells, _rows_to_list(prob, first, last), strict=True):
                pmfs[cell] = pmf
        self._leaf_offsets = offsets
        self._leaf_pmfs = pmfs
        self._cut_mass = window_cut

    def _build_tree(self, cutoff: float) -> None:
        from dpcounts.sampling.tree_steps import direct_convolve

        total = self.total
        offsets = list(self._leaf_offsets.tolist())
        pmfs = list(self._leaf_pmfs)
        log_scale = [0.0] * self.n_cells
        level = list(range(self.n_cells))  # node ids of the current level
        # levels[i] = (node ids, left child ids, right child ids; -1 = carried unchanged)
        levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        cut_mass = self._cut_mass
        while len(level) > 1:
            n_pairs = len(level) // 2
            lefts, rights = np.array(level[0 : 2 * n_pairs : 2]), np.array(level[1::2])
            parents = np.arange(len(pmfs), len(pmfs) + n_pairs)
            trim = len(level) > 2  # the root is never trimmed: it must keep y.
            longest = np.maximum(
                [pmfs[i].size for i in lefts.tolist()], [pmfs[i].size for i in rights.tolist()]
            )
            pairs = []  # (positions among this level's pairs, their convolutions as rows)
            # short pairs: one batched direct convolution per padded width
            exponent = np.ceil(np.log2(longest)).astype(int)
            for e in np.unique(exponent[longest <= DIRECT_CONVOLVE]):
                pick = np.nonzero((exponent == e) & (longest <= DIRECT_CONVOLVE))[0]
                width = 2**e
                left_rows = pad_rows([pmfs[i] for i in lefts[pick].tolist()], width)
                right_rows = pad_rows([pmfs[i] for i in rights[pick].tolist()], width)
                conv = np.zeros((pick.size, 2 * width - 1))
                direct_convolve(left_rows, right_rows, conv)  # the numpy loop's bits
                pairs.append((pick, conv))
            # long pairs (near the root): FFT convolutions, batched by transform length
            pick = np.nonzero(longest > DIRECT_CONVOLVE)[0]
            if pick.size:
                conv = fft_convolve_rows(
                    [pmfs[i] for i in lefts[pick].tolist()],
                    [pmfs[i] for i in rights[pick].tolist()],
                )
                pairs.append((pick, conv))
            new_pmfs: list[np.ndarray | None] = [None] * n_pairs
            new_offsets = np.zeros(n_pairs, np.int64)
            new_scales = np.zeros(n_pairs)
            child_offsets, child_scales = np.array(offsets), np.array(log_scale)
            for pick, conv in pairs:
                left, right = lefts[pick], rights[pick]
                offset = child_offsets[left] + child_offsets[right]
                scale = child_scales[left] + child_scales[right]
                rows, new_offsets[pick], new_scales[pick], cut = self._finish(
                    conv, offset, scale, trim, cutoff
                )
                cut_mass += cut
                for pos, pmf in zip(pick.tolist(), rows, strict=True):
                    new_pmfs[pos] = pmf
            pmfs.extend(new_pmfs)
            offsets.extend(new_offsets.tolist())
            log_scale.extend(new_scales.tolist())
            level = close_level(level, list(parents), list(lefts), list(rights), levels)
        root = level[0]
        where = total - offsets[root]
        if not 0 <= where < pmfs[root].size or not pmfs[root][where] > 0:
            raise RuntimeError(
                "the conditioning event sum z = y. has no mass inside the kept windows; "
                "the tilt failed (please report this calibration)"
            )
        self.log_event_probability = float(log_scale[root] + np.log(pmfs[root][where]))
        self.tv_bound = float(cut_mass * np.exp(-self.log_event_probability))
        self._levels = levels
        self._offsets = np.array(offsets, dtype=np.int64)
        self._lengths = np.array([p.size for p in pmfs], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(self._lengths)[:-1]]).astype(np.int64)
        self._values = np.concatenate(pmfs)
        # internal nodes top-down (root level first), as the compiled draw wants them
        top_down = levels[::-1]
        empty = np.empty(0, np.int64)  # one cell: no internal nodes
        self._parents, self._lefts, self._rights = (
            np.concatenate([empty] + [level[part] for level in top_down]).astype(np.int64)
            for part in range(3)
        )
        self._pmfs = pmfs
        self._root = root

    def _finish(self, conv, offset, scale, trim: bool, cutoff: float):
        """Cap convolution rows at y., normalise and trim them.

        ``offset`` is each row's smallest value and ``scale`` its log mass so far. Returns
        the rows as pmfs, their new offsets and log scales, and the absolute mass cut.
        """
        columns = np.arange(conv.shape[1])
        conv[offset[:, None] + columns[None, :] > self.total] = 0.0  # sums above y. cannot occur
        mass = conv.sum(axis=1)
        if not np.all(mass > 0):
            raise RuntimeError("a subtree cannot reach y. within its windows")
        conv /= mass[:, None]
        scale = scale + np.log(mass)
        if trim:
            first, last, cut = _trim_rows(conv, cutoff)
        else:
            first = np.zeros(offset.size, np.int64)
            last = np.minimum(conv.shape[1] - 1, self.total - offset)
            cut = np.zeros(offset.size)
        rows = _rows_to_list(conv, first, last)
        cut_mass = float(np.sum(cut * np.exp(scale)))
        return rows, offset + first, scale + np.log1p(-cut), cut_mass

    def _draw(self, size: int, rng: np.random.Generator) -> np.ndarray:
        # imported here: numba takes a third of a second to import, and only draws need it
        from dpcounts.sampling.tree_draw import draw_tree

        return draw_tree(*self._tree(size), self.n_cells, rng)
