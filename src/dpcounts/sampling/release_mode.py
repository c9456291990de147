"""The release sampler: the tree of :mod:`dpcounts.sampling.conditioned` in double-double,
what a release draws from (:class:`ReleaseSampler`, built by :func:`release_sampler`).

Built to be audited: it draws *exactly* from weights it holds, and bounds rigorously the
total variation (TV) between its draws and the ideal q(z | y) of the calibration (the
conditioned product of :mod:`dpcounts.sampling.conditioned`, with the calibration's
doubles a, b, n taken as exact reals). Releases then satisfy (epsilon, delta)-DP, delta
from that bound (see "Guarantee").

*What is stored.* A double-double (dd) is a pair of doubles (hi, lo) standing for the
real hi + lo, with |lo| <= ulp(hi)/2. Leaf k: f(z + 1) = f(z) (z + s_k) rho_k / (z + 1)
from f(lo_k) = 1, with s_k = ~y_k + a_k (an exact dd) and rho_k = p_k c (one dd division;
p_k = n_k / (b_k + 2 n_k), 1 for md; c the tilt, a double), over lo_k..hi_k =
L_k..min(U_k, y.) (untruncated 0..y.), stopping early once the entries and a geometric
bound on everything beyond are below 2^-S of the largest (the ratio is monotone in z
with limit rho_k, so R = max(ratio at z, rho_k) bounds every later ratio), S =
``walk_stop_bits(cutoff)``: 440 with no tail cut, else 64 bits below ``cutoff`` (issue #36;
what the walk stops short of lies beyond the tail cut below, so the kept entries are
those of a walk to 2^-440, ``tests/test_release_tree_build.py``). Internal nodes:
direct dd convolutions of the stored children, capped at y. (no FFT; each entry adds its
products in increasing order of the left child's index, in compiled code on every core,
:mod:`dpcounts.sampling.tree_build`); the root only at y..
Every node is then cut: each tail of mass <= ``cutoff``, and every entry below 2^-400 times
the node's largest (so every stored entry is >= 2^-402 and every product >= 2^-804, in
the normal range), and rescaled by a power of two (exact).

*What is drawn.* A split of value t chooses k with probability exactly
W_k / sum_m W_m, W_k the dd product of the children's stored entries at k and t - k
(:func:`~dpcounts.sampling.tree_draw.exact_choice`: a uniform proposal, exact by
rejection from 53-bit integers, accepted by a Bernoulli(W_k / 2^E) decided by comparing
the binary expansion of the dyadic W_k / 2^E with fresh 53-bit integers).

*Bound, step by step.* u = 2^-53; delta_op = 16 u^2.

1. Each dd operation on non-negative normalised operands has relative error <= delta_op:
   Knuth's two-sum and the two-product (one FMA gives a product's rounding error exactly)
   are exact, and working the rounding of the remaining operations through gives
   multiply <= 8 u^2, add <= 3 u^2, divide <= 13 u^2 (each + O(u^3)); lo parts that fall
   below the normal range add less than 2^-270.
   (``tests/test_release_sampler.py`` checks these against exact rationals.)
2. Entries. A leaf entry j steps from its walk's start equals kappa_k g_k(z) (1 + e),
   g_k the tilted cell pmf, kappa_k a constant, |e| <= (1 + delta_op)^(6 j) - 1 (five
   operations per step, one more for rescalings). An internal entry that sums m products
   equals kappa_v F_v(s) (1 + e), F_v the exact convolution of the *stored* children,
   |e| <= (1 + delta_op)^(m + 2) - 1 (products, additions, rescaling).
3. Telescoping. For z in A (every node's value, leaves included, among its kept entries)
   P_impl(z) = prod_splits W(z_l, z_r) / sum_m W(m, t - m); with W = f_l f_r (1 + mu) and
   sum W = F_v(t) (1 + mu'), |mu|, |mu'| <= delta_op, each non-root F_v(t_v) cancels the
   f_v(t_v) = kappa_v F_v(t_v) (1 + e_v) of its parent's split. What is left is
   P_impl(z) = C prod_k g_k(z_k) E(z), C free of z, E the product of every (1 + e) and
   (1 + mu) / (1 + mu'): |log E| <= Lambda = N_ops * (-log(1 - delta_op)), N_ops =
   sum_leaves (6 j_k + 1) + sum_internal (m_v + 2) + 2 * splits. P_impl(z) = 0 off A.
   As prod g_k is proportional to q on A, P_impl = q_A E / E_qA[E], whence
   P_impl / q_A lies in [e^(-2 Lambda), e^(2 Lambda)] and
   TV(P_impl, q_A) <= e^(2 Lambda) - 1 =: ``rounding_bound``.
4. Cuts. q is the law of independent tilted cells Z given sum Z = y.; q_A is q restricted
   to A and TV(q_A, q) = q(not A). A z outside A has a lowest node v whose value was cut
   while its descendants' were kept; that event's probability is the mass node v cut
   (leaves: cut entries plus twice the unwalked tail's bound), so
   q(not A) <= (sum of cut masses) / P(sum Z = y., A) =: ``cut_bound``.
5. Bookkeeping. The masses of step 4 are evaluated in double from hi parts (relative
   error 2^-53 against the dd value), their logs summed along the tree; with sums of at
   most 10^4 positive terms and log-scales of moderate size the error is below 1e-9
   relative, plus Lambda and the unwalked tails (each leaf's below 2^-(S - 1) of its
   walked mass, S >= 118 for the release's cutoffs, at most 1e-16: below 1e-28 relative for
   10^7 leaves); both terms are multiplied by 1 + 1e-6 (``_BOOKKEEPING_SLACK``).
6. TV(P_impl, q) <= ``cut_bound`` + ``rounding_bound`` = ``tv_bound``.

In practice ``rounding_bound`` is about 1e-28 for a few cells and 5e-26 (truncated) to
4e-25 (untruncated pg) for pennLC (1,071 cells, y. = 10,279); ``cut_bound`` falls with
``cutoff`` (pennLC truncated: 6e-12 at 1e-16, 4e-20 at 1e-24).

*Guarantee.* If q(. | y) is epsilon-DP (a certified calibration), then for neighbours y,
x and every set S of outputs, P_y(S) <= q_y(S) + tv_y <= e^eps q_x(S) + tv_y <=
e^eps P_x(S) + (1 + e^eps) max(tv_y, tv_x) (tv_y = TV(P_y, q_y) <= ``tv_bound``): one set is
(epsilon, (1 + e^eps) tau)-DP when every dataset's sampler is built with ``tv_bound`` <=
tau, as :func:`release_sampler` ensures or raises. ``tv_bound`` itself depends on y and
must not be published (tau may be). Not covered: the build failing for some y and not
for a neighbour (the event "no release" is visible). Two such failures depend on y and are
closed off: the tilt is checked and found by bisection when the damped Newton steps
stop far from y. (:func:`~dpcounts.sampling.tilt.solve_tilt_bounded_checked`, in both
samplers; a failed tilt left the event sum = y. no mass for some y and not for their
neighbours), a cutoff whose cuts still leave that event no mass (the build raises) is
skipped by :func:`release_sampler` for the next, smaller cutoff, and a tau within reach of
the rounding term (which varies with y through the leaves' walks) is refused by the
release beforehand, from :func:`public_rounding_bound` (a function of the calibration
only). What remains needs a conditioning event of astronomically small probability. Also
not covered: timing (the number of random numbers used depends on y). k sets compose to
(k epsilon, k delta).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.mechanisms.registry import family
from dpcounts.sampling.bounds import check_feasible
from dpcounts.sampling.conditioned import CUTOFF, ConditionedSampler, close_level
from dpcounts.sampling.spill import Spill, Values, join_chunks
from dpcounts.sampling.tilt import solve_tilt_bounded_checked, solve_tilt_untruncated

#: Relative allowance on the release-mode bound for its double-precision bookkeeping of
#: masses (logs and sums of the node masses; their error is below 1e-9, module docstring).
_BOOKKEEPING_SLACK = 1e-6
#: Release trees of at least this many cells are built on every core numba has.
_PARALLEL_CELLS = 20_000
#: Cutoffs tried in turn by :func:`release_sampler`; 0 keeps every entry above the floor of
#: 2^-400 times its node's largest (``tree_draw.FLOOR_BITS``).
RELEASE_CUTOFFS = (1e-16, 1e-24, 1e-32, 1e-48, 1e-64, 1e-80, 1e-96, 0.0)


def _report(progress, fraction: float) -> None:
    if progress is not None:
        progress(fraction)


def _tree_work(leaf_lengths: np.ndarray, total: int) -> float:
    """A rough forecast of the multiply-adds of the release tree's convolutions, for
    progress only: widths add in quadrature up the tree (a sum's spread grows as the
    square root of its variance), capped at y. + 1."""
    widths = leaf_lengths.astype(float)
    work = 0.0
    while widths.size > 2:
        pairs = widths.size // 2
        left, right = widths[0 : 2 * pairs : 2], widths[1 : 2 * pairs : 2]
        work += float(np.sum(left * right))
        merged = np.minimum(np.sqrt(left**2 + right**2), total + 1.0)
        widths = np.concatenate([merged, widths[2 * pairs :]])
    return max(work, 1.0)


def _finite(log_masses: np.ndarray) -> np.ndarray:
    """The finite entries (a cut of zero mass is -inf and adds nothing to the bound)."""
    return log_masses[log_masses > -np.inf]


#: Output entries of one chunk of a level's convolutions (:func:`_convolve_pairs`): 2^24
#: double-doubles, 256 MiB, whatever the level's size.
_CONVOLVE_ENTRIES = 1 << 24


def _convolve_pairs(cur_hi, cur_lo, starts, cur_lengths, out_lengths, cutoff, parallel):
    """One level's convolutions (pairs 2p, 2p + 1 of the level's nodes), trimmed, in chunks
    of pairs of at most :data:`_CONVOLVE_ENTRIES` output entries (each pair's entries are
    computed and cut exactly as in one pass; only the peak memory changes). Returns
    (values_hi, values_lo, first kept entry, kept lengths, log cut, log rescale) per pair."""
    from dpcounts.sampling import tree_build as tb

    n_pairs = out_lengths.size
    ends = np.cumsum(out_lengths)
    bounds = [0]
    while bounds[-1] < n_pairs:  # each chunk: at least one pair
        limit = (ends[bounds[-1] - 1] if bounds[-1] else 0) + _CONVOLVE_ENTRIES
        bounds.append(max(bounds[-1] + 1, int(np.searchsorted(ends, limit, side="right"))))
    parts_hi, parts_lo, firsts, lengths, cuts, rescales = [], [], [], [], [], []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        lefts = np.arange(2 * a, 2 * b, 2, dtype=np.int64)
        rights = lefts + 1
        lengths_ab = out_lengths[a:b]
        out_starts = np.concatenate([[0], np.cumsum(lengths_ab)[:-1]]).astype(np.int64)
        conv_hi = np.empty(int(lengths_ab.sum()))
        conv_lo = np.empty(conv_hi.size)
        tb.convolve_level(
            cur_hi, cur_lo, starts, cur_lengths, lefts, rights,
            out_starts, lengths_ab, conv_hi, conv_lo, parallel,
        )  # fmt: skip
        cut_first, cut_last, node_cut, node_rescale = tb.trim_level(
            conv_hi, conv_lo, out_starts, lengths_ab, cutoff, True, parallel
        )
        kept = cut_last - cut_first + 1
        kept_starts = np.concatenate([[0], np.cumsum(kept)[:-1]]).astype(np.int64)
        part_hi = np.empty(int(kept.sum()))
        part_lo = np.empty(part_hi.size)
        tb.gather(conv_hi, conv_lo, out_starts + cut_first, kept,
                  part_hi, part_lo, kept_starts, parallel)  # fmt: skip
        del conv_hi, conv_lo
        parts_hi.append(part_hi)
        parts_lo.append(part_lo)
        firsts.append(cut_first)
        lengths.append(kept)
        cuts.append(node_cut)
        rescales.append(node_rescale)
    new_hi = parts_hi[0] if len(parts_hi) == 1 else join_chunks(parts_hi)
    new_lo = parts_lo[0] if len(parts_lo) == 1 else join_chunks(parts_lo)
    return (new_hi, new_lo, *(np.concatenate(x) for x in (firsts, lengths, cuts, rescales)))


#: Cells whose leaves are walked at once by the release build (an even number: a chunk's
#: pairs are its own), then convolved into their first level before the next chunk.
_LEAF_CHUNK = 1 << 19


def _pair_up(cur_hi, cur_lo, cur_lengths, cur_offsets, cur_scale, total, cutoff, parallel):
    """The convolutions of a level's pairs (nodes 2p, 2p + 1; an odd node out is the
    caller's): (values hi, lo, lengths, offsets, log scales of the new nodes, their finite
    log cut masses, the dd operations the bound counts, the multiply-adds done)."""
    n_pairs = cur_lengths.size // 2
    lefts = np.arange(0, 2 * n_pairs, 2, dtype=np.int64)  # positions in the level
    rights = lefts + 1
    starts = np.concatenate([[0], np.cumsum(cur_lengths)[:-1]]).astype(np.int64)
    offset = cur_offsets[lefts] + cur_offsets[rights]
    scale = cur_scale[lefts] + cur_scale[rights]
    out_lengths = np.minimum(cur_lengths[lefts] + cur_lengths[rights] - 1, total - offset + 1)
    if np.any(out_lengths <= 0):
        raise RuntimeError("a subtree cannot reach y. within its windows")
    new_hi, new_lo, cut_first, new_lengths, node_cut, node_rescale = _convolve_pairs(
        cur_hi, cur_lo, starts, cur_lengths, out_lengths, float(cutoff), parallel
    )
    ops = int(np.sum(np.minimum(cur_lengths[lefts], cur_lengths[rights]) + 2))
    done = float(np.sum(cur_lengths[lefts].astype(float) * cur_lengths[rights]))
    return (new_hi, new_lo, new_lengths, offset + cut_first, scale + node_rescale,
            _finite(scale + node_cut), ops, done)  # fmt: skip


class ReleaseSampler(ConditionedSampler):
    """Exact draws of z ~ prod_k w_k(z_k) | sum z = y. from stored double-double weights,
    for one calibration and dataset, with a rigorous :attr:`tv_bound` =
    :attr:`cut_bound` + :attr:`rounding_bound` (module docstring). A release builds it by
    :func:`release_sampler`, which picks the cutoff that meets its target.

    Parameters
    ----------
    y : the confidential counts (non-negative integers, one per cell, summing to cal.total)
    cal : the calibration; any mechanism (md, pg or truncated) is accepted
    cutoff : the largest tail mass cut from each side of every node's pmf (default 1e-16)
    progress : called with the fraction of the build done (0 to 1)
    spill : where the tree goes when it would be large (:class:`~dpcounts.sampling.spill.
        Spill`); None keeps it in memory
    """

    def __init__(
        self,
        y,
        cal: Calibration,
        *,
        cutoff: float = CUTOFF,
        progress=None,
        spill: Spill | None = None,
    ):
        self._spilled = None  # the spill file's maps, when the tree went there
        inputs = self._prepare(y, cal, cutoff)
        if inputs is None:
            return
        self._build(*inputs, cutoff, progress, spill)

    def _release_log_tilt(self, shape, log_p, lower, upper) -> float:
        """The study sampler's tilt, checked (any tilt leaves q unchanged), with the cells'
        moments streamed in compiled code (:func:`~dpcounts.sampling.tree_build.
        tilted_moments`): memory per cell, not per window entry (issue #36)."""
        from dpcounts.sampling import tree_build as tb

        if self.calibration.truncated:
            import numba

            parallel = self.n_cells >= _PARALLEL_CELLS and numba.get_num_threads() > 1
            moments = functools.partial(
                tb.tilted_moments,
                np.asarray(lower, np.int64),
                np.asarray(upper, np.int64),
                np.ascontiguousarray(shape, dtype=float),
                np.ascontiguousarray(log_p, dtype=float),
                parallel,
            )
            return solve_tilt_bounded_checked(moments, self.total)
        return solve_tilt_untruncated(shape, log_p, self.total)

    def _build(self, counts, shape, log_p, lower, upper, cutoff, progress, spill) -> None:
        """Leaves by exact-ratio recurrences and direct convolutions, all in double-double;
        see the module docstring for what is stored and what is bounded.
        The compiled work runs in :mod:`dpcounts.sampling.tree_build`, on every core numba
        has; ``progress`` (if given) is called with the fraction of the work done.

        Memory (issue #36): the tree is built level by level, and each level, once
        finished, goes to the value store (:class:`~dpcounts.sampling.spill.Values`): kept in
        memory, or written to ``spill``'s file when the tree would be large
        (:class:`~dpcounts.sampling.spill.Spill`). The leaves are
        walked in chunks of :data:`_LEAF_CHUNK` cells, each chunk's pairs convolved into
        the first level at once, so the leaves are never all held; above them, only the
        level being convolved and the one it makes are held, the convolution itself done in
        chunks of at most :data:`_CONVOLVE_ENTRIES` output entries, and everything the
        draw does not read (the leaves' walk results, the log scales, the cut masses as
        they are summed) is dropped as soon as it has been used."""
        import numba

        from dpcounts.sampling import tree_build as tb
        from dpcounts.sampling import tree_draw as td

        cal = self.calibration
        total, n_cells = self.total, self.n_cells
        if n_cells == 1:  # z = (y.) is the only vector: nothing to draw, nothing to bound
            self.log_tilt = self.log_event_probability = 0.0
            self.cut_bound = self.rounding_bound = self.tv_bound = 0.0
            self._store_flat(np.ones(1), np.zeros(1), np.ones(1), np.array([total]), [], 0)
            return
        tilt = float(np.exp(self._release_log_tilt(shape, log_p, lower, upper)))
        self.log_tilt = float(np.log(tilt))
        # s_k = ~y_k + a_k exactly, as a double-double (Knuth's two-sum, elementwise)
        clamped = np.asarray(cal.clamp(counts), dtype=float)
        s_hi = clamped + cal.a
        s_back = s_hi - clamped
        s_lo = (clamped - (s_hi - s_back)) + (cal.a - s_back)
        md = not family(cal.mechanism).uses_prior  # a Dirichlet's: no rates
        population = np.ones(n_cells) if md else np.asarray(cal.population, dtype=float)
        rates = np.zeros(n_cells) if md else np.asarray(cal.b, dtype=float)
        rho_hi, rho_lo = np.empty(n_cells), np.empty(n_cells)
        td.tilted_success(population, rates, tilt, md, rho_hi, rho_lo)
        if not np.allclose(np.log(rho_hi) - np.log(tilt), log_p, rtol=0.0, atol=1e-9):
            raise RuntimeError("the release sampler's p_k disagree with cal.log_success()")
        if cal.truncated:
            lo_w, hi_w = lower.astype(np.int64), upper.astype(np.int64)
        else:
            lo_w, hi_w = np.zeros(n_cells, np.int64), np.full(n_cells, total, np.int64)

        log2 = float(np.log(2.0))
        # every core for a large table; one thread for a small one, which would spend more
        # starting the threads (and loading their code) than they save
        parallel = n_cells >= _PARALLEL_CELLS and numba.get_num_threads() > 1
        # The leaves are walked in chunks of cells (:data:`_LEAF_CHUNK`), each chunk's leaves
        # sent to the store and, in the same pass, its pairs convolved into the first
        # level: all the leaves are never held at once (issue #36: at 10M strata they are
        # the largest level). Every pair's values and cuts are those of one pass.
        ops, log_cuts, done = 0, [], 0.0  # log_cuts: each node's cut mass, tilted measure
        fuse = n_cells > 2  # with two cells the first level is the root's value alone
        store = Values(spill)
        leaf_offsets, leaf_lengths, carried = [], [], []
        up: list[list[np.ndarray]] = [[], [], [], [], []]  # the first level's pieces
        for a in range(0, n_cells, _LEAF_CHUNK):
            b = min(a + _LEAF_CHUNK, n_cells)
            (leaf_hi, leaf_lo, lengths, first, n_walk, log_cut, log_total, log_rescale, best,
             remainder) = tb.build_leaves(
                lo_w[a:b], hi_w[a:b], s_hi[a:b], s_lo[a:b], rho_hi[a:b], rho_lo[a:b],
                float(cutoff), parallel,
            )  # fmt: skip
            # the unwalked tail counts twice its geometric bound
            unwalked = remainder > -np.inf
            log_cut = np.where(
                unwalked, np.logaddexp(log_cut, (remainder + best + 1.0) * log2), log_cut
            )
            # dd operations that touch a value used by the draw, along any z
            ops += int(np.sum(td.LEAF_OPS_PER_STEP * (n_walk - 1) + 1))
            # stored * exp(log_scale) = g_k, the tilted cell pmf (its mass outside the walk
            # is below 2^-(S - 1) of the walked mass: inside the bookkeeping slack)
            log_cuts.append(_finite(log_cut - log_total))
            offset, scale = lo_w[a:b] + first, log_rescale - log_total
            del first, n_walk, log_cut, log_total, log_rescale, best, remainder, unwalked
            leaf_offsets.append(offset)
            leaf_lengths.append(lengths)
            store.append(leaf_hi, leaf_lo, leaves=True)
            if not fuse:
                cur_hi, cur_lo, cur_lengths, cur_offsets, cur_scale = (
                    leaf_hi, leaf_lo, lengths, offset, scale
                )  # fmt: skip
                continue
            if b - a > 1:  # a last chunk of one cell has no pair
                *piece, cuts, piece_ops, piece_done = _pair_up(
                    leaf_hi, leaf_lo, lengths, offset, scale, total, cutoff, parallel
                )
                for part, values in zip(up, piece, strict=True):
                    part.append(values)
                log_cuts.append(cuts)
                ops += piece_ops
                done += piece_done
                del piece
            if (b - a) % 2:  # the odd leaf out (the last) is carried up unchanged
                at = int(np.sum(lengths[:-1]))
                carried = [leaf_hi[at:].copy(), leaf_lo[at:].copy(), lengths[-1:],
                           offset[-1:], scale[-1:]]  # fmt: skip
            del leaf_hi, leaf_lo, lengths, offset, scale
        del s_hi, s_lo, rho_hi, rho_lo, hi_w, lo_w, clamped
        # per node id: offsets, lengths; values level by level in id order (the store)
        offsets, node_lengths = [np.concatenate(leaf_offsets)], [np.concatenate(leaf_lengths)]
        del leaf_offsets, leaf_lengths
        # the current level: its node ids and, contiguous in level order, their values
        level = np.arange(n_cells, dtype=np.int64)
        levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        n_nodes, n_splits, log_event = n_cells, 0, 0.0
        work = _tree_work(node_lengths[0], total)
        _report(progress, 0.0)
        if fuse:
            n_pairs = n_cells // 2
            for part, values in zip(up, carried, strict=False):
                part.append(values)
            cur_hi, cur_lo = join_chunks(up[0]), join_chunks(up[1])  # each piece freed once copied
            cur_lengths, cur_offsets, cur_scale = (np.concatenate(part) for part in up[2:])
            del up, carried
            made = int(np.sum(cur_lengths[:n_pairs]))  # the new nodes' values (a view)
            store.append(cur_hi[:made], cur_lo[:made])
            offsets.append(cur_offsets[:n_pairs])
            node_lengths.append(cur_lengths[:n_pairs])
            parents = np.arange(n_nodes, n_nodes + n_pairs, dtype=np.int64)
            n_splits += n_pairs
            n_nodes += n_pairs
            lefts = np.arange(0, 2 * n_pairs, 2, dtype=np.int64)
            level = close_level(level, parents, level[lefts], level[lefts + 1], levels)
            _report(progress, min(done / work, 0.99))
        while level.size > 1:
            n_pairs = level.size // 2
            lefts = np.arange(0, 2 * n_pairs, 2, dtype=np.int64)  # positions in the level
            if level.size == 2:  # the root: only its value at y. is ever needed
                scale = cur_scale[:1] + cur_scale[1:]
                a = slice(0, cur_lengths[0])
                b = slice(cur_lengths[0], cur_lengths[0] + cur_lengths[1])
                value_hi, value_lo = td.dot_dd(
                    cur_hi[a], cur_lo[a], cur_hi[b], cur_lo[b],
                    total - int(cur_offsets[0] + cur_offsets[1]),
                )  # fmt: skip
                if not value_hi > 0.0:
                    raise RuntimeError(
                        "the conditioning event sum z = y. has no mass inside the kept "
                        "windows; the tilt failed (please report this calibration)"
                    )
                shift = int(np.frexp(value_hi)[1])
                new_hi = np.array([np.ldexp(value_hi, -shift)])
                new_lo = np.array([np.ldexp(value_lo, -shift)])
                new_lengths = np.ones(1, np.int64)
                new_offsets = np.array([total], np.int64)
                new_scale = scale + shift * log2
                log_event = float(scale[0]) + float(np.log(value_hi))
            else:
                new_hi, new_lo, new_lengths, new_offsets, new_scale, cuts, level_ops, level_done = (
                    _pair_up(
                        cur_hi, cur_lo, cur_lengths, cur_offsets, cur_scale, total, cutoff, parallel
                    )
                )
                log_cuts.append(cuts)
                ops += level_ops
                done += level_done
                _report(progress, min(done / work, 0.99))
            store.append(new_hi, new_lo)
            offsets.append(new_offsets)
            node_lengths.append(new_lengths)
            parents = np.arange(n_nodes, n_nodes + n_pairs, dtype=np.int64)
            n_splits += n_pairs
            n_nodes += n_pairs
            if level.size % 2:  # the odd node out is carried up unchanged, last
                tail_at = int(np.sum(cur_lengths[:-1]))
                cur_hi = np.concatenate([new_hi, cur_hi[tail_at:]])
                cur_lo = np.concatenate([new_lo, cur_lo[tail_at:]])
                cur_lengths = np.append(new_lengths, cur_lengths[-1])
                cur_offsets = np.append(new_offsets, cur_offsets[-1])
                cur_scale = np.append(new_scale, cur_scale[-1])
            else:
                cur_hi, cur_lo = new_hi, new_lo
                cur_lengths, cur_offsets, cur_scale = new_lengths, new_offsets, new_scale
            level = close_level(level, parents, level[lefts], level[lefts + 1], levels)
        _report(progress, 1.0)
        self.log_event_probability = float(log_event)
        # q(not A) <= (sum of cut masses) / P(sum = y., A); the slack covers the double
        # bookkeeping of the masses (module docstring, step 5)
        cut = math.fsum(np.exp(np.concatenate(log_cuts) - log_event).tolist())
        self.cut_bound = float(cut * (1.0 + _BOOKKEEPING_SLACK))
        log_ratio = -np.log1p(-td.DD_OP_ERROR) * (ops + 2 * n_splits)
        self.rounding_bound = float(np.expm1(2.0 * log_ratio) * (1.0 + _BOOKKEEPING_SLACK))
        self.tv_bound = self.cut_bound + self.rounding_bound
        del cur_hi, cur_lo, new_hi, new_lo, log_cuts
        values_hi, values_lo = store.finish()
        self._spilled = store.maps
        self._store_flat(
            values_hi,
            values_lo,
            np.concatenate(node_lengths),
            np.concatenate(offsets),
            levels,
            int(level[0]),
        )

    def _store_flat(self, values_hi, values_lo, lengths, offsets, levels, root) -> None:
        """The tree in the flat layout the compiled draws read, from flat arrays."""
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._lengths = np.asarray(lengths, dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(self._lengths)[:-1]]).astype(np.int64)
        self._values = values_hi
        self._values_lo = values_lo
        top_down = levels[::-1]
        empty = np.empty(0, np.int64)
        self._parents, self._lefts, self._rights = (
            np.concatenate([empty] + [level[part] for level in top_down]).astype(np.int64)
            for part in range(3)
        )
        # the levels (bottom-up) as views of the arrays above: one copy of the node ids
        ends = np.cumsum([0] + [level[0].size for level in top_down])
        self._levels = [
            tuple(part[a:b] for part in (self._parents, self._lefts, self._rights))
            for a, b in zip(ends[:-1], ends[1:], strict=True)
        ][::-1]
        del levels[:]
        self._pmfs = None  # marginal_pmfs reads the hi parts through _node_pmf
        self._root = root

    # --- drawing -----------------------------------------------------------------------
    def _draw(self, size: int, rng: np.random.Generator) -> np.ndarray:
        if self._spilled is not None:
            return self._draw_spilled(size, rng)
        # imported here: numba takes a third of a second to import, and only draws need it
        from dpcounts.sampling.tree_draw import draw_tree_exact

        return draw_tree_exact(*self._tree(size), self._values_lo, self.n_cells, rng)

    def _draw_spilled(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """:func:`~dpcounts.sampling.tree_draw.draw_tree_exact` of a tree in its spill file,
        one level of splits at a time (the same splits in the same order, so the same draws
        from the same ``rng``): after each level the map's pages are released, so the
        process holds one level of the tree at a time, not the file (:class:`Spill`)."""
        import mmap

        from dpcounts.sampling.tree_draw import draw_splits_exact

        out = np.empty((size, self.n_cells), dtype=np.int64)
        node_value = np.empty(self._offsets.size, dtype=np.int64)
        widest = int(self._lengths.max()) + 1
        w_hi, w_lo = np.empty(widest), np.empty(widest)
        ends = np.cumsum([0] + [level[0].size for level in self._levels[::-1]])
        arrays = (self._parents, self._lefts, self._rights, self._offsets, self._starts,
                  self._lengths, self._values, self._values_lo)  # fmt: skip
        for d in range(size):
            node_value[self._root] = self.total
            for a, b in zip(ends[:-1], ends[1:], strict=True):
                draw_splits_exact(int(a), int(b), node_value, *arrays, w_hi, w_lo, rng)
                for values in self._spilled:  # the pages stay in the file, not in us
                    values._mmap.madvise(mmap.MADV_DONTNEED)
            out[d] = node_value[: self.n_cells]
        return out


def public_rounding_bound(cal: Calibration) -> float:
    """An upper bound on the :attr:`~ReleaseSampler.rounding_bound` of *every*
    release sampler of ``cal``, whatever the counts: a function of the calibration only.

    The rounding term counts the double-double operations along the tree (module docstring,
    step 3): per leaf ``LEAF_OPS_PER_STEP * (walked - 1) + 1``, per non-root internal node
    ``min(len(left), len(right)) + 2``, and two per split. The counts enter only through
    how far a leaf's walk goes (it may stop early) and where the tails are cut, both of which
    only *shorten* the pmfs; the full public windows (``[L_k, min(U_k, y.)]``, untruncated
    ``[0, y.]``) and the uncut convolution lengths (capped at y. + 1) give the most
    operations any dataset can need. A target below this bound can be missed for some
    counts and met for a neighbour (a data-dependent refusal), so a release checks it
    first (:meth:`dpcounts.release.design.Design.check_tv_target`).
    """
    total, n_cells = int(cal.total), cal.n_cells
    if n_cells == 1 or total == 0:
        return 0.0
    lower, upper = check_feasible(cal)
    if cal.truncated:
        widths = (upper - lower + 1).astype(np.int64)
    else:
        widths = np.full(n_cells, total + 1, dtype=np.int64)
    return _rounding_bound_of(widths, total)


def largest_epsilon(delta_per_set: float, floor: float) -> float:
    """The largest epsilon per set whose sampler target, ``delta_per_set / (1 +
    e^epsilon)``, is at least twice ``floor`` (a rounding bound: :func:`least_rounding_bound`
    for any calibration of a table); -inf where no epsilon >= 0 is, inf where the floor is 0.
    A release refuses an epsilon above it (:meth:`dpcounts.release.design.Design.tv_fix`
    says so in numbers); a study's guide names no epsilon above it."""
    if floor <= 0.0:
        return math.inf
    ratio = delta_per_set / (2.0 * floor)
    return math.log(ratio - 1.0) if ratio > 2.0 else -math.inf


def window_rounding_bound(total: int, lower=None, upper=None, n_cells: int = 0) -> float:
    """:func:`public_rounding_bound` from a calibration's public windows alone: the bounds
    ``lower`` and ``upper`` of a truncated one, or (None) the full windows ``[0, total]``
    of ``n_cells`` untruncated strata. For a study, which keeps its calibrations as tables."""
    if lower is None:
        if n_cells <= 1 or total <= 0:
            return 0.0
        return _rounding_bound_of(np.full(n_cells, total + 1, dtype=np.int64), int(total))
    lower = np.asarray(lower, dtype=np.int64)
    if lower.size <= 1 or total <= 0:
        return 0.0
    upper = np.minimum(np.asarray(upper, dtype=np.int64), int(total))
    return _rounding_bound_of(upper - lower + 1, int(total))


def least_rounding_bound(n_cells: int, total: int) -> float:
    """A lower bound on :func:`public_rounding_bound` over every calibration of ``n_cells``
    strata and ``total``, whatever the prior: every window one value wide (the fewest
    operations a tree of that many leaves does). A sampler's target below twice it is
    refused for any prior, so a release with a sanitised prior checks it before drawing
    the prior (:meth:`dpcounts.release.design.Design.check_without_prior`)."""
    if n_cells <= 1 or total <= 0:
        return 0.0
    return _rounding_bound_of(np.ones(n_cells, dtype=np.int64), int(total))


def _rounding_bound_of(widths, total: int) -> float:
    """The rounding bound of a tree whose leaves have these ``widths`` (vectorised, in exact
    integers: the same operations counted as the build's loop over pairs)."""
    from dpcounts.sampling import tree_draw as td

    level = np.asarray(widths, dtype=np.int64)
    ops = int(np.sum(td.LEAF_OPS_PER_STEP * (level - 1) + 1))
    splits = 0
    while level.size > 1:
        n_pairs = level.size // 2
        left, right = level[0 : 2 * n_pairs : 2], level[1 : 2 * n_pairs : 2]
        if level.size > 2:  # the root forms only its value at y.: no convolution counted
            ops += int(np.sum(np.minimum(left, right) + 2))
        merged = np.minimum(left + right - 1, total + 1)
        if level.size % 2:
            merged = np.append(merged, level[-1])
        splits += n_pairs
        level = merged
    log_ratio = -np.log1p(-td.DD_OP_ERROR) * (ops + 2 * splits)
    return float(np.expm1(2.0 * log_ratio) * (1.0 + _BOOKKEEPING_SLACK))


def release_cutoffs(n_cells: int, total: int, tv_target: float) -> tuple[float, ...]:
    """The cutoffs :func:`release_sampler` tries, in order: :data:`RELEASE_CUTOFFS` without
    those too large to meet ``tv_target`` for any table of this size, by two orders of
    magnitude.

    A tree of n cells has 2n - 1 nodes, each cutting at most twice ``cutoff`` of its mass,
    and the conditioning event has probability about 1 / sqrt(2 pi Var), Var of the order
    of y.; so the cut bound is of the order of 4 n cutoff sqrt(2 pi y.) (what a build
    measures is smaller, as most cuts are). A cutoff whose forecast exceeds the target a
    hundredfold is not built (each build of a national table costs seconds). The choice
    uses public numbers only, and any cutoff gives a sampler within the target or none, so
    which cutoffs are tried changes the cost, not the guarantee.
    """
    forecast = 4.0 * max(n_cells, 1) * math.sqrt(2.0 * math.pi * max(total, 1))
    kept = tuple(t for t in RELEASE_CUTOFFS if forecast * t <= 100.0 * tv_target)
    return kept or RELEASE_CUTOFFS[-1:]


def release_sampler(
    y, cal: Calibration, tv_target: float, progress=None, spill: Spill | None = None
) -> ReleaseSampler:
    """A release sampler whose :attr:`~ReleaseSampler.tv_bound` is at most ``tv_target``.

    Builds ``ReleaseSampler(y, cal, cutoff=t)`` for t in
    :func:`release_cutoffs` (from :data:`RELEASE_CUTOFFS`: 1e-16, then ever smaller, down to 0:
    only the 2^-400 floor) and returns the first whose rigorous total-variation bound meets
    the target. ``progress`` is passed to each build. A cutoff whose
    cuts leave the conditioning event no mass (the build raises ``RuntimeError``; where that
    happens depends on the counts, through the tilt and the cells' shapes) is skipped like
    one whose bound is too large: the next, smaller cutoff keeps more of every node. Raises
    ValueError when no cutoff does (the bound's floor is set by the rounding term, the
    2^-400 cuts and the conditioning event's probability; see the module docstring).
    """
    target = float(tv_target)
    if not (np.isfinite(target) and target > 0.0):
        raise ValueError(f"tv_target must be a finite number > 0, got {tv_target!r}")
    reached, last, failure = [], None, None
    for cutoff in release_cutoffs(cal.n_cells, cal.total, target):
        try:  # a tree built before (a larger cutoff) was freed: one tree in memory at a time
            sampler = ReleaseSampler(y, cal, cutoff=cutoff, progress=progress, spill=spill)
        except RuntimeError as err:  # the cuts removed the whole conditioning event: cut less
            failure = err
            continue
        if sampler.tv_bound <= target:
            return sampler
        reached.append(sampler.tv_bound)
        last = (sampler.rounding_bound, sampler.cut_bound, sampler.log_event_probability)
        del sampler
    if last is None:
        raise ValueError(
            f"release_sampler: no cutoff in {RELEASE_CUTOFFS} gives a sampler ({failure}); "
            "please report this calibration"
        )
    raise ValueError(
        f"release_sampler: no cutoff in {RELEASE_CUTOFFS} brings the total-variation bound to "
        f"tv_target={target:.3g}; the smallest bound reached is {min(reached):.3g} "
        f"(rounding term {last[0]:.3g}, cut term {last[1]:.3g}, "
        f"log P(sum = y.) = {last[2]:.3g}). Ask for a larger target."
    )
