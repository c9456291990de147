"""Compiled top-down draws from the convolution tree of :class:`ConditionedSampler`.

A draw fixes the root at y. and walks down the tree, splitting each node's value t
between its children with probability proportional to left(k) * right(t - k) (both
children's pmfs are stored normalised, so the products are the exact conditional
weights up to one constant per split). Each split is a short loop over k, and most nodes
near the leaves carry t = their minimum and need no random number at all, so a compiled
loop per node is far cheaper than vectorised NumPy, which must touch every node of every
level for every draw several times over.

Compiled with numba (``cache=True``: later processes load the machine code from
``__pycache__`` instead of compiling again). The generator is passed in and advanced in
place, so the stream is that of the caller's ``rng``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def draw_tree(
    n_draws: int,
    total: int,
    root: int,
    parents: np.ndarray,
    lefts: np.ndarray,
    rights: np.ndarray,
    offsets: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    values: np.ndarray,
    n_cells: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``n_draws`` vectors of leaf values (int64, shape (n_draws, n_cells)).

    ``parents[j], lefts[j], rights[j]`` list the internal nodes top-down (a parent before
    its children); ``rights[j] < 0`` marks a node carried up unchanged (its left child is
    itself). Node ``v`` has pmf ``values[starts[v] : starts[v] + lengths[v]]`` over the
    integers from ``offsets[v]``; leaves are nodes ``0 .. n_cells - 1``.
    """
    out = np.empty((n_draws, n_cells), dtype=np.int64)
    node_value = np.empty(offsets.size, dtype=np.int64)
    weights = np.empty(lengths.max(), dtype=np.float64)
    for d in range(n_draws):
        node_value[root] = total
        for j in range(parents.size):
            t = node_value[parents[j]]
            left = lefts[j]
            right = rights[j]
            if right < 0:
                node_value[left] = t
                continue
            off_l = offsets[left]
            off_r = offsets[right]
            k_min = max(off_l, t - (off_r + lengths[right] - 1))
            k_max = min(off_l + lengths[left] - 1, t - off_r)
            k = k_min
            if k_max > k_min:
                width = k_max - k_min + 1
                left_at = starts[left] - off_l
                right_at = starts[right] - off_r + t
                mass = 0.0
                for m in range(width):
                    kk = k_min + m
                    w = values[left_at + kk] * values[right_at - kk]
                    weights[m] = w
                    mass += w
                target = rng.random() * mass
                cumulative = 0.0
                chosen = -1
                last_positive = 0
                for m in range(width):
                    if weights[m] > 0.0:
                        last_positive = m
                    cumulative += weights[m]
                    if cumulative > target:
                        chosen = m
                        break
                if chosen < 0:  # round-off left target at the top: the last possible k
                    chosen = last_positive
                k = k_min + chosen
            node_value[left] = k
            node_value[right] = t - k
        for c in range(n_cells):
            out[d, c] = node_value[c]
    return out
