"""Exact samplers for independent (truncated) negative binomials conditioned on their sum.

Every mechanism in dpcounts releases z with pmf

    q(z | y) proportional to prod_k w_k(z_k),   sum_k z_k = y.,   L_k <= z_k <= U_k,
    w_k(z) = Gamma(z + ~y_k + a_k) / z! * p_k^z,

with ~y = ``cal.clamp(y)``, ``(L, U) = cal.bounds()`` and ``log p = cal.log_success()``
(md: p_k constant, the Dirichlet-multinomial; pg: posterior predictive NBs; truncated:
truncated NBs). Both samplers draw from q by a binary tree of cell pmfs: the leaves are the
cells' pmfs, each internal node the convolution of its children capped at y.; a draw fixes
the root at y. and walks down, splitting a node's value t between its children with
probability proportional to left(k) * right(t - k). Both first tilt the cells
(:mod:`dpcounts.sampling.tilt`): multiplying every p_k by one constant c multiplies q by
c^(y.), which cancels on conditioning; c is chosen (1-D root find) so that the tilted cells'
expected total is y., the conditioning event is then typical and every pmf concentrated.

Two samplers, one class each, sharing this module's :class:`ConditionedSampler` (the
checks of their inputs, the draw's checks, the tree's exact marginals):

* :class:`~dpcounts.sampling.study_mode.StudySampler`, what the simulation studies use:
  double-precision pmfs, FFT convolutions, 53-bit inverse-CDF splits and a ``tv_bound``
  that covers the tail cuts only (not pure epsilon-DP as implemented; its module says why).
* :class:`~dpcounts.sampling.release_mode.ReleaseSampler`, what a release uses (built by
  :func:`~dpcounts.sampling.release_mode.release_sampler`): double-double entries, direct
  convolutions, exact splits and a rigorous ``tv_bound`` (the proof is its module's
  docstring), its tree in memory or spilled to an unlinked file
  (:mod:`dpcounts.sampling.spill`).

Drawing walks the tree top-down in compiled code (:mod:`dpcounts.sampling.tree_draw`): one
short loop per split, and no random number where a node's value leaves its children no
choice, which is most nodes near the leaves of a sparse table.
"""

from __future__ import annotations

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.sampling.bounds import check_counts, check_feasible
from dpcounts.sampling.convolution import DIRECT_CONVOLVE

#: The sampler's cutoff: the largest tail mass cut from each side of every node's pmf
#: (not the truncation's ``tail``, a mechanism's setting).
CUTOFF = 1e-16


def close_level(level, parents, lefts, rights, levels):
    """Record one level of the tree (an odd node out is carried up as its own parent, with
    right child -1) and return the next level's node ids (int64 arrays throughout)."""
    parents, lefts, rights = (np.asarray(x, dtype=np.int64) for x in (parents, lefts, rights))
    if len(level) % 2:
        parents = np.append(parents, level[-1])
        lefts = np.append(lefts, level[-1])
        rights = np.append(rights, -1)
    levels.append((parents, lefts, rights))
    return parents


class ConditionedSampler:
    """What both samplers share: exact draws of z ~ prod_k w_k(z_k) | sum z = y. for one
    calibration and dataset, from a tree built once (a few convolutions per cell); call
    :meth:`draw` as often as needed. Not built itself: build a
    :class:`~dpcounts.sampling.study_mode.StudySampler` or a
    :class:`~dpcounts.sampling.release_mode.ReleaseSampler`, whose constructors check their
    inputs with :meth:`_prepare` and build the tree. :attr:`tv_bound` bounds the total
    variation between the draws and q (what it covers depends on the sampler)."""

    def _prepare(self, y, cal: Calibration, cutoff: float):
        """Check the inputs and set the attributes both samplers have; return (counts,
        shape, log_p, lower, upper) for the build, or None when y. = 0 (the only vector is
        zero: nothing to build, the bounds are 0)."""
        # scipy.stats and scipy.signal are imported by the methods that need them: they
        # take over a second to import, which every workflow job would otherwise pay.
        counts = check_counts(y, cal)
        lower, upper = check_feasible(cal)
        if not np.all(np.isfinite(cal.a)) or np.any(cal.a <= 0):
            raise ValueError("cal.a must be finite and positive in every cell")
        if not 0.0 <= cutoff < 0.01:
            raise ValueError(f"cutoff must be in [0, 0.01), got {cutoff}")
        self.calibration = cal
        self.total = cal.total
        self.n_cells = cal.n_cells
        self.cutoff = float(cutoff)
        shape = (cal.clamp(counts) + cal.a).astype(float)
        log_p = np.asarray(cal.log_success(), dtype=float)
        if not np.all(np.isfinite(log_p)):
            raise ValueError("cal.log_success() must be finite (check population and b)")
        if self.total == 0:  # the only vector is zero (feasibility forced lower = 0)
            self.log_tilt, self.log_event_probability, self.tv_bound = 0.0, 0.0, 0.0
            self.cut_bound = self.rounding_bound = 0.0
            self._levels = []
            return None
        return counts, shape, log_p, lower, upper

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
        return self._draw(size, rng)

    def _draw(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """The sampler's own draws (y. > 0, arguments checked)."""
        raise NotImplementedError

    def _tree(self, size: int) -> tuple:
        """The leading arguments of :mod:`~dpcounts.sampling.tree_draw`'s draws: the size,
        the total and the tree in its flat layout."""
        return (
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
        root_weight = np.zeros(self._node_pmf(self._root).size)
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
            joint = self._node_pmf(cell) * outside[cell]
            result.append((int(self._offsets[cell]), joint / joint.sum()))
        return result

    def _node_pmf(self, node: int) -> np.ndarray:
        """Node's stored pmf (release mode: the hi parts of its double-doubles)."""
        if self._pmfs is not None:
            return self._pmfs[node]
        start = self._starts[node]
        return self._values[start : start + self._lengths[node]]

    def _outside(self, weight, parent, sibling, child) -> np.ndarray:
        """outside(child)(k) = sum_r outside(parent)(k + r) * sibling(r), on child's window."""
        from scipy.signal import fftconvolve

        reversed_sibling = self._node_pmf(sibling)[::-1]
        if min(weight.size, reversed_sibling.size) <= DIRECT_CONVOLVE:
            corr = np.convolve(weight, reversed_sibling)
        else:
            corr = np.clip(fftconvolve(weight, reversed_sibling), 0.0, None)
        # corr[m] belongs to k = off_parent - off_sibling - (len_sibling - 1) + m
        first_k = self._offsets[parent] - self._offsets[sibling] - (reversed_sibling.size - 1)
        shift = self._offsets[child] - first_k
        out = np.zeros(self._node_pmf(child).size)
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
