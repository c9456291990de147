"""Exact sampler for independent (truncated) negative binomials conditioned on their sum.

Every mechanism in dpsynth releases z with pmf

    q(z | y) proportional to prod_k w_k(z_k),   sum_k z_k = y.,   L_k <= z_k <= U_k,
    w_k(z) = Gamma(z + ~y_k + a_k) / z! * p_k^z,

with ~y = ``cal.clamp(y)``, ``(L, U) = cal.bounds()`` and ``log p = cal.log_success()``
(md: p_k constant, the Dirichlet-multinomial; pg: posterior predictive NBs; truncated:
truncated NBs). :class:`ConditionedSampler` draws from q exactly by a binary tree of cell
pmfs: the leaves are the cells' pmfs, each internal node the convolution of its children
capped at y.; a draw fixes the root at y. and walks down, splitting a node's value t between
its children with probability proportional to left(k) * right(t - k).

Numerical devices (none changes the target distribution beyond the stated tail error):

* Tilting. Multiplying every p_k by one constant c multiplies q by c^(y.), which cancels
  on conditioning. c is chosen (1-D root find) so that the tilted cells' expected total is
  y.; the conditioning event is then typical and every pmf is concentrated.
* Tail truncation. Each node's tilted pmf (leaf or internal) is cut where its tail mass on
  either side is below ``tail`` = 1e-16 (untruncated cells are first restricted to an
  NB quantile window holding all but 1e-17 on each side). Draws are then exactly q
  restricted to the set A of z whose cells and subtree sums all stay inside the kept
  windows, and the total-variation distance to q is at most
  q(not A) <= (sum of the cut masses) / P_tilted(sum = y.), with P_tilted the product of
  the tilted cell pmfs on [L_k, min(U_k, y.)]. The bound is computed at build time
  (:attr:`ConditionedSampler.tv_bound`; ``benchmarks/mechanisms.py`` prints it).
* Every node is stored normalised with its log scale kept; long convolutions use FFT
  (negative round-off clipped to zero), short ones are direct.

Drawing walks the tree top-down in compiled code (:mod:`dpsynth.sampling.tree_draw`): one
short loop per split, and no random number where a node's value leaves its children no
choice, which is most nodes near the leaves of a sparse table.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp

from dpsynth.calibration import Calibration

#: Tail mass cut from each side of every node's pmf.
TAIL = 1e-16
#: Convolutions whose inputs are at most this long are done directly, batched by width.
_DIRECT_CONVOLVE = 128


def check_counts(y, cal: Calibration) -> np.ndarray:
    """``y`` as int64 after checking it is a vector of non-negative integers summing to y."""
    if not isinstance(cal, Calibration):
        raise TypeError(f"cal must be a dpsynth.calibration.Calibration, got {type(cal)}")
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.size != cal.n_cells:
        raise ValueError(f"y must be a vector of {cal.n_cells} counts, got shape {arr.shape}")
    if arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)):
        raise ValueError(f"y must hold finite numbers, got dtype {arr.dtype}")
    counts = arr.astype(np.int64)
    if np.any(counts != arr) or np.any(counts < 0):
        raise ValueError("y must hold non-negative integers")
    if counts.sum() != cal.total:
        raise ValueError(f"y sums to {counts.sum()}, but the calibration's total is {cal.total}")
    return counts


def check_feasible(cal: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """The bounds capped at y.; ValueError when no vector within them sums to y."""
    lower, upper = cal.bounds()
    upper = np.minimum(upper, cal.total)
    if np.any(lower < 0) or np.any(upper < lower):
        raise ValueError("cal bounds must satisfy 0 <= lower <= upper in every cell")
    if lower.sum() > cal.total or upper.sum() < cal.total:
        raise ValueError(
            f"infeasible bounds: no vector within them sums to y.={cal.total} "
            f"(sum of lower bounds {lower.sum()}, sum of upper bounds capped at y. "
            f"{upper.sum()})"
        )
    return lower, upper


class _PaddedRows:
    """Cells' pmfs on integer windows, held as 2-D arrays grouped by window width.

    Grouping widths by powers of two keeps padding below half while letting every
    operation run on whole arrays.
    """

    def __init__(self, start: np.ndarray, width: np.ndarray):
        self.groups = []
        exponent = np.ceil(np.log2(np.maximum(width, 1))).astype(int)
        for e in np.unique(exponent):
            rows = np.nonzero(exponent == e)[0]
            columns = np.arange(2**e)
            valid = columns[None, :] < width[rows, None]
            values = start[rows, None] + columns[None, :]
            self.groups.append((rows, values, valid))


def _solve_tilt_untruncated(shape: np.ndarray, log_p: np.ndarray, total: int) -> float:
    """log c with sum_k E[NB_k] = total, E = s q / (1 - q), q = p c < 1."""
    top = -float(np.max(log_p))  # q_k < 1 for all k needs log c < top

    def excess(log_c: float) -> float:
        q = np.exp(log_p + log_c)
        return float(np.sum(shape * q / (1.0 - q))) - total

    low = top - 1.0
    while excess(low) > 0:
        low = top - 2.0 * (top - low)
    high = top - 1e-12
    if excess(high) < 0:  # only if the shapes are tiny: take the largest admissible tilt
        return high
    return brentq(excess, low, high, xtol=1e-10, rtol=1e-10)


def _solve_tilt_bounded(rows: _PaddedRows, base: list[np.ndarray], total: int) -> float:
    """log c with sum_k E[tilted cell k on its bounded window] close to total.

    Damped Newton (the derivative of the mean in log c is the variance). Any c gives the
    same conditioned distribution, so a rough solution suffices.
    """
    log_c = 0.0
    for _ in range(60):
        mean = var = 0.0
        for (_, values, _), logw in zip(rows.groups, base, strict=True):
            tilted = logw + log_c * values
            prob = np.exp(tilted - logsumexp(tilted, axis=1, keepdims=True))
            cell_mean = np.sum(prob * values, axis=1)
            mean += float(cell_mean.sum())
            var += float(np.sum(prob * values**2) - np.sum(cell_mean**2))
        excess = mean - total
        if abs(excess) < 0.05 * max(1.0, np.sqrt(var)):
            break
        # var -> 0 only when total is an end of the feasible range: lean towards it
        step = -excess / var if var > 1e-12 else -np.sign(excess) * 2.0
        log_c += float(np.clip(step, -2.0, 2.0))
    return log_c


def _pad_rows(arrays: list[np.ndarray], width: int) -> np.ndarray:
    """Stack 1-D arrays (each at most ``width`` long) into a zero-padded 2-D array."""
    lengths = np.array([arr.size for arr in arrays])
    out = np.zeros((len(arrays), width))
    out[np.arange(width)[None, :] < lengths[:, None]] = np.concatenate(arrays)
    return out


def _trim_rows(prob: np.ndarray, tail: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of normalised, zero-padded pmfs: the first and last kept column after cutting
    each tail whose mass is at most ``tail``, and the mass cut."""
    width = prob.shape[1]
    rows = np.arange(prob.shape[0])
    left = np.cumsum(prob, axis=1)
    right = np.cumsum(prob[:, ::-1], axis=1)[:, ::-1]
    first = np.argmax(left > tail, axis=1)
    last = width - 1 - np.argmax((right > tail)[:, ::-1], axis=1)
    cut = np.where(first > 0, left[rows, np.maximum(first - 1, 0)], 0.0)
    cut += np.where(last + 1 < width, right[rows, np.minimum(last + 1, width - 1)], 0.0)
    return first, last, cut


def _rows_to_list(prob: np.ndarray, first: np.ndarray, last: np.ndarray) -> list[np.ndarray]:
    """Columns first..last of each row, renormalised, as a list of 1-D arrays."""
    columns = np.arange(prob.shape[1])[None, :]
    keep = (columns >= first[:, None]) & (columns <= last[:, None])
    kept = np.where(keep, prob, 0.0)
    kept /= kept.sum(axis=1, keepdims=True)
    return np.split(kept[keep], np.cumsum(last - first + 1)[:-1])


class ConditionedSampler:
    """Exact draws of z ~ prod_k w_k(z_k) | sum z = y. for one calibration and dataset.

    Build once (the tree costs a few convolutions per cell), then call :meth:`draw` as often
    as needed. See the module docstring for the distribution, the tilt and the 1e-16 tail
    truncation of every node's pmf; :attr:`tv_bound` bounds the resulting total-variation
    error.

    Parameters
    ----------
    y : the confidential counts (non-negative integers, one per cell, summing to cal.total)
    cal : the calibration; any mechanism (md, pg or truncated) is accepted
    tail : tail mass cut from each side of every node's pmf (default 1e-16)
    """

    def __init__(self, y, cal: Calibration, *, tail: float = TAIL):
        # scipy.stats and scipy.signal are imported by the methods that need them: they
        # take over a second to import, which every workflow job would otherwise pay.
        counts = check_counts(y, cal)
        lower, upper = check_feasible(cal)
        if not np.all(np.isfinite(cal.a)) or np.any(cal.a <= 0):
            raise ValueError("cal.a must be finite and positive in every cell")
        if not 0.0 <= tail < 0.01:
            raise ValueError(f"tail must be in [0, 0.01), got {tail}")
        self.calibration = cal
        self.total = cal.total
        self.n_cells = cal.n_cells
        shape = (cal.clamp(counts) + cal.a).astype(float)
        log_p = np.asarray(cal.log_success(), dtype=float)
        if not np.all(np.isfinite(log_p)):
            raise ValueError("cal.log_success() must be finite (check population and b)")
        if self.total == 0:  # the only vector is zero (feasibility forced lower = 0)
            self.log_tilt, self.log_event_probability, self.tv_bound = 0.0, 0.0, 0.0
            self._levels = []
            return
        self._build_leaves(shape, log_p, lower, upper, tail)
        self._build_tree(tail)

    # --- construction --------------------------------------------------------------
    def _build_leaves(self, shape, log_p, lower, upper, tail) -> None:
        from scipy.stats import nbinom

        total = self.total
        window_cut = 0.0
        if self.calibration.truncated:
            start, stop = lower, upper
            rows = _PaddedRows(start, stop - start + 1)
            base = [
                np.where(valid, gammaln(v + shape[r, None]) - gammaln(v + 1.0), -np.inf)
                + v * log_p[r, None]
                for r, v, valid in rows.groups
            ]
            log_c = _solve_tilt_bounded(rows, base, total)
        else:
            log_c = _solve_tilt_untruncated(shape, log_p, total)
            success = 1.0 - np.exp(log_p + log_c)  # scipy's nbinom counts failures
            start = np.nan_to_num(nbinom.ppf(tail / 10, shape, success), nan=0.0)
            stop = np.nan_to_num(nbinom.isf(tail / 10, shape, success), nan=total)
            start = np.minimum(start, total).astype(np.int64)
            stop = np.clip(stop, start, total).astype(np.int64)
            # the cut is measured against each cell's tilted pmf on [0, y.] (larger values
            # cannot occur given the sum), which holds a share F_k(y.) of the NB's mass
            below_total = nbinom.cdf(total, shape, success)
            window_cut = 2 * (tail / 10) * float(np.sum(1.0 / below_total))
            rows = _PaddedRows(start, stop - start + 1)
            base = [
                np.where(valid, gammaln(v + shape[r, None]) - gammaln(v + 1.0), -np.inf)
                + v * log_p[r, None]
                for r, v, valid in rows.groups
            ]
        self.log_tilt = float(log_c)
        offsets = np.zeros(self.n_cells, np.int64)
        pmfs: list[np.ndarray | None] = [None] * self.n_cells
        for (cells, values, _), logw in zip(rows.groups, base, strict=True):
            tilted = logw + log_c * values
            prob = np.exp(tilted - logsumexp(tilted, axis=1, keepdims=True))
            first, last, cut = _trim_rows(prob, tail)
            window_cut += float(cut.sum())
            offsets[cells] = values[np.arange(cells.size), first]
            for cell, pmf in zip(cells, _rows_to_list(prob, first, last), strict=True):
                pmfs[cell] = pmf
        self._leaf_offsets = offsets
        self._leaf_pmfs = pmfs
        self._cut_mass = window_cut

    def _build_tree(self, tail: float) -> None:
        from scipy.signal import fftconvolve

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
            for e in np.unique(exponent[longest <= _DIRECT_CONVOLVE]):
                pick = np.nonzero((exponent == e) & (longest <= _DIRECT_CONVOLVE))[0]
                width = 2**e
                left_rows = _pad_rows([pmfs[i] for i in lefts[pick].tolist()], width)
                right_rows = _pad_rows([pmfs[i] for i in rights[pick].tolist()], width)
                conv = np.zeros((pick.size, 2 * width - 1))
                for j in range(width):
                    conv[:, j : j + width] += left_rows * right_rows[:, j : j + 1]
                pairs.append((pick, conv))
            # long pairs (few, near the root): one FFT convolution each, finished together
            pick = np.nonzero(longest > _DIRECT_CONVOLVE)[0]
            if pick.size:
                convs = [
                    np.clip(fftconvolve(pmfs[lefts[pos]], pmfs[rights[pos]]), 0.0, None)
                    for pos in pick.tolist()
                ]
                conv = _pad_rows(convs, max(c.size for c in convs))
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
                    conv, offset, scale, trim, tail
                )
                cut_mass += cut
                for pos, pmf in zip(pick.tolist(), rows, strict=True):
                    new_pmfs[pos] = pmf
            pmfs.extend(new_pmfs)
            offsets.extend(new_offsets.tolist())
            log_scale.extend(new_scales.tolist())
            parents, lefts, rights = parents.tolist(), lefts.tolist(), rights.tolist()
            if len(level) % 2:  # odd node out: carried up as its own parent
                parents.append(level[-1])
                lefts.append(level[-1])
                rights.append(-1)
            levels.append((np.array(parents), np.array(lefts), np.array(rights)))
            level = parents
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

    def _finish(self, conv, offset, scale, trim: bool, tail: float):
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
            first, last, cut = _trim_rows(conv, tail)
        else:
            first = np.zeros(offset.size, np.int64)
            last = np.minimum(conv.shape[1] - 1, self.total - offset)
            cut = np.zeros(offset.size)
        rows = _rows_to_list(conv, first, last)
        cut_mass = float(np.sum(cut * np.exp(scale)))
        return rows, offset + first, scale + np.log1p(-cut), cut_mass

    # --- drawing -----------------------------------------------------------------------
    def draw(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` exact draws of z: int64 array (size, I), every row summing to y."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng)}")
        if int(size) != size or size < 0:
            raise ValueError(f"size must be a non-negative integer, got {size}")
        size = int(size)
        if self.total == 0:
            return np.zeros((size, self.n_cells), dtype=np.int64)
        # imported here: numba takes a third of a second to import, and only draws need it
        from dpsynth.sampling.tree_draw import draw_tree

        return draw_tree(
            size,
            self.total,
            self._root,
            self._parents,
            self._lefts,
            self._rights,
            self._offsets,
            self._starts,
            self._lengths,
            self._values,
            self.n_cells,
            rng,
        )

    # --- exact summaries ---------------------------------------------------------------
    def marginal_pmfs(self) -> list[tuple[int, np.ndarray]]:
        """Each cell's exact marginal pmf under the tree's distribution: (offset, pmf).

        Computed by the downward (outside) pass: outside(child) = outside(parent)
        correlated with the sibling's pmf, starting from a point mass at y. at the root.
        """
        if self.total == 0:
            return [(0, np.ones(1)) for _ in range(self.n_cells)]
        outside: dict[int, np.ndarray] = {}
        root_weight = np.zeros(self._pmfs[self._root].size)
        root_weight[self.total - self._offsets[self._root]] = 1.0
        outside[self._root] = root_weight
        for parents, lefts, rights in reversed(self._levels):
            for parent, left, right in zip(parents, lefts, rights, strict=True):
                weight = outside.pop(parent)
                if right < 0:
                    outside[left] = weight
                    continue
                outside[left] = self._outside(weight, parent, right, left)
                outside[right] = self._outside(weight, parent, left, right)
        result = []
        for cell in range(self.n_cells):
            joint = self._pmfs[cell] * outside[cell]
            result.append((int(self._offsets[cell]), joint / joint.sum()))
        return result

    def _outside(self, weight, parent, sibling, child) -> np.ndarray:
        from scipy.signal import fftconvolve

        """outside(child)(k) = sum_r outside(parent)(k + r) * sibling(r), on child's window."""
        reversed_sibling = self._pmfs[sibling][::-1]
        if min(weight.size, reversed_sibling.size) <= _DIRECT_CONVOLVE:
            corr = np.convolve(weight, reversed_sibling)
        else:
            corr = np.clip(fftconvolve(weight, reversed_sibling), 0.0, None)
        # corr[m] belongs to k = off_parent - off_sibling - (len_sibling - 1) + m
        first_k = self._offsets[parent] - self._offsets[sibling] - (reversed_sibling.size - 1)
        shift = self._offsets[child] - first_k
        out = np.zeros(self._pmfs[child].size)
        lo, hi = max(0, -shift), min(out.size, corr.size - shift)
        if hi > lo:
            out[lo:hi] = corr[shift + lo : shift + hi]
        peak = out.max()
        return out / peak if peak > 0 else out

    def marginal_means(self) -> np.ndarray:
        """Each cell's exact expected synthetic count E[z_k] under the tree's distribution."""
        return np.array(
            [np.dot(off + np.arange(pmf.size), pmf) for off, pmf in self.marginal_pmfs()]
        )
