"""The compiled, parallel build of the release tree (:mod:`dpcounts.sampling.tree_build`)
stores bit for bit what a sequential node-by-node build stores (issue #27).

The reference below is the build as it was before #27: one Python iteration per leaf and per
internal node, ``leaf_walk``/``trim_dd`` per leaf and ``convolve_dd`` (a row-ordered loop,
each output entry summing its products in increasing order of the left index) per internal
node. The compiled build splits the work into chunks, runs on every core and orders the
loops for SIMD lanes; every entry must still come out the same double-double, so the
rounding bound, the cut bound, the tree and the draws are those the audits checked.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

from dpcounts import calibrate
from dpcounts.sampling import tree_draw as td
from dpcounts.sampling.release_mode import (
    RELEASE_CUTOFFS,
    ReleaseSampler,
    release_cutoffs,
    release_sampler,
)


def sequential_tree(sampler: ReleaseSampler, counts, cutoff: float, stop=None):
    """(values_hi, values_lo, offsets, rounding operations) of the release tree, built one
    node at a time as before the compiled build; the leaves walked to 2^-``stop`` of their
    largest entry (default the build's, :func:`~dpcounts.sampling.tree_draw.walk_stop_bits`)."""
    stop = td.walk_stop_bits(cutoff) if stop is None else stop
    cal = sampler.calibration
    total, n_cells = cal.total, cal.n_cells
    lower, upper = cal.bounds()
    tilt = math.exp(sampler.log_tilt)
    clamped = np.asarray(cal.clamp(counts), dtype=float)
    s_hi = clamped + cal.a
    s_back = s_hi - clamped
    s_lo = (clamped - (s_hi - s_back)) + (cal.a - s_back)
    md = cal.mechanism == "md"
    population = np.ones(n_cells) if md else np.asarray(cal.population, dtype=float)
    rates = np.zeros(n_cells) if md else np.asarray(cal.b, dtype=float)
    rho_hi, rho_lo = np.empty(n_cells), np.empty(n_cells)
    td.tilted_success(population, rates, tilt, md, rho_hi, rho_lo)
    if cal.truncated:
        lo_w, hi_w = lower.astype(np.int64), np.minimum(upper, total).astype(np.int64)
    else:
        lo_w, hi_w = np.zeros(n_cells, np.int64), np.full(n_cells, total, np.int64)
    his, los, offsets, ops = [], [], [], 0
    size = int(np.max(hi_w - lo_w)) + 1
    buf_hi, buf_lo, buf_exp = np.empty(size), np.empty(size), np.zeros(size, np.int64)
    for k in range(n_cells):
        n_walk, _ = td.leaf_walk(
            int(lo_w[k]), int(hi_w[k]), s_hi[k], s_lo[k], rho_hi[k], rho_lo[k],
            buf_hi, buf_lo, buf_exp, stop,
        )  # fmt: skip
        first, last, *_ = td.trim_dd(buf_hi, buf_lo, buf_exp, n_walk, cutoff, True)
        his.append(buf_hi[first : last + 1].copy())
        los.append(buf_lo[first : last + 1].copy())
        offsets.append(int(lo_w[k]) + first)
        ops += td.LEAF_OPS_PER_STEP * (n_walk - 1) + 1
    level = list(range(n_cells))
    while len(level) > 1:
        pairs = len(level) // 2
        parents = []
        for left, right in zip(level[0 : 2 * pairs : 2], level[1::2], strict=True):
            offset = offsets[left] + offsets[right]
            parents.append(len(his))
            if len(level) == 2:
                hi, lo = td.dot_dd(his[left], los[left], his[right], los[right], total - offset)
                shift = int(np.frexp(hi)[1])
                his.append(np.array([np.ldexp(hi, -shift)]))
                los.append(np.array([np.ldexp(lo, -shift)]))
                offsets.append(total)
                continue
            length = min(his[left].size + his[right].size - 1, total - offset + 1)
            conv_hi, conv_lo = np.empty(length), np.empty(length)
            td.convolve_dd(his[left], los[left], his[right], los[right], length, conv_hi, conv_lo)
            first, last, *_ = td.trim_dd(
                conv_hi, conv_lo, np.zeros(length, np.int64), length, cutoff, True
            )
            his.append(conv_hi[first : last + 1].copy())
            los.append(conv_lo[first : last + 1].copy())
            offsets.append(offset + first)
            ops += min(his[left].size, his[right].size) + 2
        level = parents + ([level[-1]] if len(level) % 2 else [])
    return np.concatenate(his), np.concatenate(los), np.array(offsets), ops


def national_like(mechanism: str, n_cells: int, seed: int):
    """Strata of very different sizes (a few large, many small), like a national table."""
    rng = np.random.default_rng(seed)
    population = np.round(np.exp(rng.normal(7.0, 1.8, n_cells))) + 1
    rate = np.exp(rng.normal(np.log(0.004), 0.8, n_cells))
    counts = rng.poisson(population * rate)
    counts[0] += 1  # a total of at least one
    prior = None if mechanism == "md" else rate
    cal = calibrate(mechanism, 1.0, int(counts.sum()), population, prior, method="certified")
    return counts, cal


@pytest.mark.parametrize("mechanism", ["truncated", "pg", "md"])
@pytest.mark.parametrize(
    "n_cells, seed", [(2, 1), (3, 2), (257, 3), pytest.param(2_001, 4, marks=pytest.mark.slow)]
)
@pytest.mark.parametrize("cutoff", [1e-16, 1e-3])
def test_compiled_build_stores_the_sequential_tree_bit_for_bit(mechanism, n_cells, seed, cutoff):
    counts, cal = national_like(mechanism, n_cells, seed)
    sampler = ReleaseSampler(counts, cal, cutoff=cutoff)
    values_hi, values_lo, offsets, ops = sequential_tree(sampler, counts, cutoff)
    assert np.array_equal(sampler._values, values_hi)
    assert np.array_equal(sampler._values_lo, values_lo)
    assert np.array_equal(sampler._offsets, offsets)
    splits = n_cells - 1
    expected = math.expm1(2.0 * -math.log1p(-td.DD_OP_ERROR) * (ops + 2 * splits)) * (1 + 1e-6)
    assert sampler.rounding_bound == pytest.approx(expected, rel=1e-12)
    # issue #36: the leaves' walks stop 64 bits below the tail they cut, not at 2^-440 as
    # before; what they stop short of is cut anyway, so the tree is the longer walks'
    values_hi, values_lo, offsets, full_ops = sequential_tree(sampler, counts, cutoff, td.STOP_BITS)
    assert np.array_equal(sampler._values, values_hi)
    assert np.array_equal(sampler._values_lo, values_lo)
    assert np.array_equal(sampler._offsets, offsets)
    assert full_ops >= ops


@pytest.mark.slow
def test_serial_and_parallel_builds_store_the_same_tree(monkeypatch):
    """Small tables are built in one thread, large ones on every core: the same tree."""
    from dpcounts.sampling import release_mode

    counts, cal = national_like("truncated", 5_000, 7)
    monkeypatch.setattr(release_mode, "_PARALLEL_CELLS", 10**9)
    serial = ReleaseSampler(counts, cal, cutoff=1e-16)
    monkeypatch.setattr(release_mode, "_PARALLEL_CELLS", 0)
    threads = numba.get_num_threads()
    builds = [ReleaseSampler(counts, cal, cutoff=1e-16)]
    try:
        numba.set_num_threads(1)
        builds.append(ReleaseSampler(counts, cal, cutoff=1e-16))
    finally:
        numba.set_num_threads(threads)
    for parallel in builds:
        assert np.array_equal(serial._values, parallel._values)
        assert np.array_equal(serial._values_lo, parallel._values_lo)
        assert (serial.cut_bound, serial.rounding_bound) == (
            parallel.cut_bound,
            parallel.rounding_bound,
        )
        rng_serial, rng_parallel = np.random.default_rng(3), np.random.default_rng(3)
        assert np.array_equal(serial.draw(4, rng_serial), parallel.draw(4, rng_parallel))


def test_progress_is_reported_from_zero_to_one():
    counts, cal = national_like("pg", 3_000, 8)
    seen = []
    release_sampler(counts, cal, 1e-14, progress=seen.append)
    assert seen[0] == 0.0 and seen[-1] == 1.0
    assert all(0.0 <= f <= 1.0 for f in seen)


def test_release_cutoffs_keep_the_floor_and_drop_only_hopeless_ones():
    assert release_cutoffs(2, 1, 1e-300)[-1] == 0.0
    assert release_cutoffs(10, 100, 1.0) == RELEASE_CUTOFFS
    # a national table: 1e-16 cannot bring ~1e6 nodes' cuts below 1e-14
    cutoffs = release_cutoffs(1_000_000, 3_000_000, 1e-14)
    assert 1e-16 not in cutoffs and cutoffs == tuple(t for t in RELEASE_CUTOFFS if t <= cutoffs[0])


def built_work(sampler: ReleaseSampler) -> float:
    """The multiply-adds the build's convolutions did: the product of the children's
    stored widths at every internal node but the root (which forms one value)."""
    lengths = sampler._lengths.astype(float)
    work = 0.0
    nodes = zip(sampler._parents, sampler._lefts, sampler._rights, strict=True)
    for parent, left, right in nodes:
        if right >= 0 and parent != sampler._root:
            work += lengths[left] * lengths[right]
    return work


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["truncated", "pg", "md"])
def test_the_public_forecast_follows_the_work_the_build_does(mechanism, monkeypatch):
    """Issue #27: the forecast (from public numbers only) was 20-40 times the work; it
    must now follow what the build really stores, convolves and walks (issue #36: the
    leaves' steps, a long leaf's walked twice)."""
    from dpcounts.release.cost import estimate_cost
    from dpcounts.sampling import tree_build

    steps = []
    build_leaves = tree_build.build_leaves

    def counted(*args):
        leaves = build_leaves(*args)
        lengths, walked = leaves[2], leaves[4]
        steps.append(walked.sum() + walked[lengths > tree_build.KEPT].sum())
        return leaves

    monkeypatch.setattr(tree_build, "build_leaves", counted)
    counts, cal = national_like(mechanism, 20_000, 9)
    target = 1e-13
    forecast = estimate_cost(cal, target)
    sampler = release_sampler(counts, cal, target)
    assert forecast.cutoff == sampler.cutoff
    assert 0.6 < forecast.entries / sampler._lengths.sum() < 1.6
    assert 0.6 < forecast.multiply_adds / built_work(sampler) < 1.6
    assert 0.8 < forecast.walked / sum(steps) < 1.25


def test_the_forecast_takes_the_build_at_the_parallel_rate_and_the_rest_at_the_serial():
    """The compiled build runs on every core, the work per stratum and set on one: a
    machine whose one core is busy (its parallel rate halved, its serial rate kept) must
    slow the build's share of the forecast only; its serial rate halved, the rest only."""
    from dpcounts.release.cost import _START_SECONDS, estimate_cost

    _, cal = national_like("pg", 2_000, 3)
    cost = estimate_cost(cal, 1e-13, sets=4)
    work = cost.seconds(1.0, 1.0) - _START_SECONDS  # both shares, in multiply-adds
    built = cost.seconds(1.0, math.inf) - _START_SECONDS
    rest = cost.seconds(math.inf, 1.0) - _START_SECONDS
    assert built > cost.multiply_adds and rest > cost.n_cells * cost.sets
    assert built + rest == pytest.approx(work, rel=1e-12)
    rate = 3e9
    base = cost.seconds(rate, rate / 2)
    assert cost.seconds(rate / 2, rate / 2) - base == pytest.approx(built / rate, rel=1e-9)
    assert cost.seconds(rate, rate / 4) - base == pytest.approx(2 * rest / rate, rel=1e-9)


@pytest.mark.parametrize("mechanism", ["truncated", "pg"])
def test_a_level_convolved_in_chunks_stores_the_sequential_tree(mechanism, monkeypatch):
    """Issue #36: a level's convolutions run in chunks of pairs (bounded memory); every
    entry is still the sequential build's."""
    from dpcounts.sampling import release_mode

    monkeypatch.setattr(release_mode, "_CONVOLVE_ENTRIES", 40)
    counts, cal = national_like(mechanism, 2_001, 4)
    sampler = ReleaseSampler(counts, cal, cutoff=1e-16)
    values_hi, values_lo, offsets, _ = sequential_tree(sampler, counts, 1e-16)
    assert np.array_equal(sampler._values, values_hi)
    assert np.array_equal(sampler._values_lo, values_lo)
    assert np.array_equal(sampler._offsets, offsets)


@pytest.mark.parametrize("mechanism", ["truncated", "pg"])
def test_a_spilled_tree_stores_and_draws_what_the_tree_in_memory_does(mechanism, tmp_path):
    """Issue #36: a large tree goes to an unlinked file and is drawn one level at a time:
    the same tree, the same bounds and the same draws from the same generator; nothing is
    left in the folder."""
    from dpcounts.sampling.spill import Spill

    counts, cal = national_like(mechanism, 3_001, 11)
    memory = ReleaseSampler(counts, cal, cutoff=1e-16)
    spilled = ReleaseSampler(counts, cal, cutoff=1e-16, spill=Spill(tmp_path / "spill", 0.0))
    assert memory._spilled is None and spilled._spilled is not None
    assert list((tmp_path / "spill").iterdir()) == []  # created unlinked
    assert np.array_equal(memory._values, spilled._values)
    assert np.array_equal(memory._values_lo, spilled._values_lo)
    assert np.array_equal(memory._offsets, spilled._offsets)
    assert (memory.cut_bound, memory.rounding_bound) == (spilled.cut_bound, spilled.rounding_bound)
    for seed in (1, 2):
        first, second = np.random.default_rng(seed), np.random.default_rng(seed)
        assert np.array_equal(memory.draw(3, first), spilled.draw(3, second))
        assert first.random() == second.random()  # the same numbers used
    big = ReleaseSampler(counts, cal, cutoff=1e-16, spill=Spill(tmp_path / "spill", 1e12))
    assert big._spilled is None  # a tree forecast below the limit stays in memory


@pytest.mark.parametrize("mechanism", ["truncated", "pg"])
@pytest.mark.parametrize("chunk", [2, 6, 64])
def test_leaves_walked_in_chunks_store_and_draw_the_sequential_tree(
    mechanism, chunk, monkeypatch, tmp_path
):
    """Issue #36: the leaves are walked in chunks of cells, each chunk's pairs convolved
    into the first level at once (the leaves are never all held), in memory or spilled
    (the store moves to the file at the chunk that calls for it): the sequential build's
    tree, its bounds, and the same draws, for an odd number of cells too."""
    from dpcounts.sampling import release_mode
    from dpcounts.sampling.spill import Spill

    for n, seed in ((3, 1), (201, 2), (256, 3)):
        counts, cal = national_like(mechanism, n, seed)
        whole = ReleaseSampler(counts, cal, cutoff=1e-16)
        with monkeypatch.context() as patch:
            patch.setattr(release_mode, "_LEAF_CHUNK", chunk)
            chunked = ReleaseSampler(counts, cal, cutoff=1e-16)
            spilled = ReleaseSampler(counts, cal, cutoff=1e-16, spill=Spill(tmp_path / "s", 1.0))
        values_hi, values_lo, offsets, _ = sequential_tree(chunked, counts, 1e-16)
        assert spilled._spilled is not None and chunked._spilled is None
        for built in (chunked, spilled):
            assert np.array_equal(built._values, values_hi)
            assert np.array_equal(built._values_lo, values_lo)
            assert np.array_equal(built._offsets, offsets)
            assert np.array_equal(built._lengths, whole._lengths)
            for part in ("_parents", "_lefts", "_rights"):
                assert np.array_equal(getattr(built, part), getattr(whole, part))
            assert (built.cut_bound, built.rounding_bound, built.log_event_probability) == (
                whole.cut_bound, whole.rounding_bound, whole.log_event_probability
            )  # fmt: skip
            first, second = np.random.default_rng(n), np.random.default_rng(n)
            assert np.array_equal(whole.draw(4, first), built.draw(4, second))


@pytest.mark.slow
def test_streamed_tilt_moments_match_thewindow_weights():
    """The release tilt's moments, streamed per cell in compiled code (issue #36: no
    window-by-entry arrays), agree with the study sampler's padded window weights, from
    point masses through windows thousands wide, shapes below and above 1 and tilts
    far beyond the ratio walk's range (where lgamma takes over)."""
    from dpcounts.sampling import tree_build as tb
    from dpcounts.sampling.tilt import _tilted_moments, window_weights

    rng = np.random.default_rng(36)
    for trial in range(200):
        n = int(rng.integers(1, 40))
        lo = rng.integers(0, 50, n)
        hi = lo + rng.integers(1, (2, 10, 200, 3000)[trial % 4], n) - 1
        shape = np.exp(rng.normal(0.0, 2.0, n))
        log_p = rng.normal(-1.0, 1.0, n) - np.log(2.0)
        rows, base = window_weights(shape, log_p, lo, hi)
        for log_c in (0.0, float(rng.normal(0.0, 3.0)), -50.0, 30.0, 400.0, -2000.0):
            mean, var = _tilted_moments(rows, base, log_c)
            for parallel in (False, True):
                streamed = tb.tilted_moments(lo, hi, shape, log_p, parallel, log_c)
                assert streamed[0] == pytest.approx(mean, rel=1e-11, abs=1e-9)
                # the padded arrays' variance cancels to 1e-4 (even below 0) where a
                # cell sits at a bound; the streamed one is measured from the window's start
                scale = 1e-11 * float(np.sum(hi.astype(float) ** 2)) + 1e-9
                assert streamed[1] >= 0.0
                assert streamed[1] == pytest.approx(var, rel=1e-9, abs=scale)


def test_streamed_tilt_moments_do_not_depend_on_the_cores():
    from dpcounts.sampling import tree_build as tb

    rng = np.random.default_rng(7)
    n = 3 * tb.MOMENT_BLOCK + 17
    lo = rng.integers(0, 5, n)
    hi = lo + rng.integers(0, 30, n)
    shape = rng.uniform(0.5, 20.0, n)
    log_p = np.log(rng.uniform(0.05, 0.6, n))
    serial = tb.tilted_moments(lo, hi, shape, log_p, False, 0.3)
    assert tb.tilted_moments(lo, hi, shape, log_p, True, 0.3) == serial
