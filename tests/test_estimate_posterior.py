"""The noise-aware posterior of `dpcounts estimate` (issue #54, item 1b): a stratum's
likelihood against scipy's distributions, coverage of the 90% intervals on simulated tables
where the prior holds (releases drawn by the library), where the combining rules do not
cover, and the documented failures: strata above a truncated release's bounds, and a prior
far from the truth."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli as run
from scipy import stats

from dpcounts import calibrate, synthesize
from dpcounts.calibration import Calibration
from dpcounts.inference.combining import combine
from dpcounts.inference.posterior import (
    group_posteriors,
    log_likelihood,
    log_prior,
    summarise,
)
from dpcounts.release.estimate import estimate

LEVEL = 0.9


def _flat(values) -> np.ndarray:
    """Log values less their first: equal up to a constant when this is 0 throughout."""
    values = np.asarray(values, dtype=float)
    return values - values[..., :1]


def test_a_strata_likelihood_is_the_negative_binomial_of_its_sets():
    """pg: each set's count z_k is NB(y_k + a_k, p_k), p_k = n_k / (b_k + 2 n_k), so the
    log likelihood of y_k is the sum over the sets of scipy's nbinom.logpmf (size y + a,
    success probability 1 - p_k), up to a constant; with the normaliser's tilt, over its
    tilted sum, in closed form."""
    a, population, rate = np.array([3.0, 5.0]), np.array([100.0, 200.0]), np.array([0.05, 0.02])
    cal = Calibration("pg", "certified", 1.0, 12, a, a / rate, population, rate)
    sets, grid = np.array([[4, 8], [6, 6], [3, 9]]), np.arange(13)
    mine = log_likelihood(cal, sets, grid)
    p = population / (a / rate + 2 * population)
    for k in range(2):
        theirs = sum(stats.nbinom.logpmf(z, grid + a[k], 1 - p[k]) for z in sets[:, k])
        assert _flat(mine[k]) == pytest.approx(_flat(theirs), abs=1e-10)
    # with the normaliser's tilt phi: over the NB's sum of e^(phi x), ((1-p)/(1-p e^phi))^r
    phi = 0.2
    tilted = log_likelihood(cal, sets, grid, tilt=phi)
    for k in range(2):
        size = grid + a[k]
        norm = size * (np.log1p(-p[k]) - np.log1p(-p[k] * np.exp(phi)))
        theirs = sum(stats.nbinom.logpmf(z, size, 1 - p[k]) - norm for z in sets[:, k])
        assert _flat(tilted[k]) == pytest.approx(_flat(theirs), abs=1e-10)


def test_a_truncated_strata_likelihood_is_its_truncated_negative_binomial():
    """truncated: the NB of the clamped count, divided by its mass on [L, U] (scipy's cdf):
    flat where y lies outside the bounds."""
    a, population, rate = np.array([3.0, 5.0]), np.array([100.0, 200.0]), np.array([0.05, 0.02])
    lower, upper = np.array([2, 1]), np.array([9, 8])
    cal = Calibration("truncated", "certified", 1.0, 12, a, a / rate, population, rate,
                      lower, upper)  # fmt: skip
    sets, grid = np.array([[4, 8], [6, 6]]), np.arange(13)
    mine = log_likelihood(cal, sets, grid)
    p = population / (a / rate + 2 * population)
    for k in range(2):
        size = np.clip(grid, lower[k], upper[k]) + a[k]
        mass = stats.nbinom.cdf(upper[k], size, 1 - p[k]) - stats.nbinom.cdf(
            lower[k] - 1, size, 1 - p[k])  # fmt: skip
        theirs = sum(stats.nbinom.logpmf(z, size, 1 - p[k]) - np.log(mass) for z in sets[:, k])
        assert _flat(mine[k]) == pytest.approx(_flat(theirs), abs=1e-10)
        assert np.ptp(mine[k][grid >= upper[k]]) == pytest.approx(0, abs=1e-12)
    # with the normaliser's tilt phi: each truncated NB's mass weighted by e^(phi x)
    phi, support = 0.3, np.arange(13)
    tilted = log_likelihood(cal, sets, grid, tilt=phi)
    for k in range(2):
        size = np.clip(grid, lower[k], upper[k]) + a[k]
        inside = (support >= lower[k]) & (support <= upper[k])
        mass = [np.sum(stats.nbinom.pmf(support, r, 1 - p[k]) * np.exp(phi * support) * inside)
                for r in size]  # fmt: skip
        theirs = sum(stats.nbinom.logpmf(z, size, 1 - p[k]) - np.log(mass) for z in sets[:, k])
        assert _flat(tilted[k]) == pytest.approx(_flat(theirs), abs=1e-10)


def test_two_md_strata_give_the_beta_binomial_of_the_dirichlet_multinomial():
    """md with two strata: z_1 ~ BetaBinomial(y., y_1 + alpha, y. - y_1 + alpha), so the
    likelihood of y_1 (y_2 = y. - y_1) is scipy's betabinom.logpmf, up to a constant."""
    total, alpha = 20, np.array([4.0, 4.0])
    cal = Calibration("md", "paper", 1.0, total, alpha, population=np.array([50.0, 70.0]))
    sets, grid = np.array([[7, 13], [12, 8]]), np.arange(total + 1)
    ll = log_likelihood(cal, sets, grid)
    mine = ll[0] + ll[1][::-1]  # stratum 2 holds total - y_1
    theirs = sum(stats.betabinom.logpmf(z, total, grid + alpha[0], total - grid + alpha[1])
                 for z in sets[:, 0])  # fmt: skip
    assert _flat(mine) == pytest.approx(_flat(theirs), abs=1e-10)


def _enumerated(cal, sets, codes, log_set):
    """Each group's posterior law by brute force: every table y with the public total, its
    prior (:func:`log_prior`, shape 1) plus ``log_set(z, y)`` for each set z, summed by
    group."""
    from itertools import product

    from dpcounts.inference.posterior import log_prior

    grid = np.arange(cal.total + 1)
    prior = log_prior(cal, grid, 1.0)
    tables = [y for y in product(grid, repeat=cal.n_cells) if sum(y) == cal.total]
    weights = np.array([sum(prior[k, v] for k, v in enumerate(y)) +
                        sum(log_set(z, np.array(y)) for z in sets) for y in tables])  # fmt: skip
    weights = np.exp(weights - weights.max())
    laws = np.zeros((codes.max() + 1, cal.total + 1))
    for y, w in zip(tables, weights, strict=True):
        for g in range(codes.max() + 1):
            laws[g, np.sum(np.array(y)[codes == g])] += w
    return laws / laws.sum(axis=1, keepdims=True)


def _dense(law, total) -> np.ndarray:
    out = np.zeros(total + 1)
    out[law[0] : law[0] + law[1].size] = law[1]
    return out


def test_the_group_laws_equal_brute_force_where_the_likelihood_is_exact():
    """md (the Dirichlet-multinomial, scipy's own) and pg with one p_k in every stratum (the
    NBs over the NB of their sum): the group laws of :func:`group_posteriors` equal the
    enumeration of every table with the total, to 1e-9."""
    population, total, codes = np.array([40.0, 60.0, 100.0]), 12, np.array([0, 1, 1])
    sets = np.array([[3, 5, 4], [1, 4, 7]])
    md = Calibration("md", "paper", 1.0, total, np.full(3, 2.5), population=population)
    law = stats.dirichlet_multinomial
    exact = _enumerated(md, sets, codes, lambda z, y: law.logpmf(z, y + 2.5, total))
    found = group_posteriors(md, sets, codes)
    for g in range(2):
        assert _dense(found[g], total) == pytest.approx(exact[g], abs=1e-9)
    a = np.array([2.0, 3.0, 5.0])  # b_k / n_k the same: p_k = n / (b + 2 n) is one value
    pg = Calibration("pg", "certified", 1.0, total, a, 0.5 * population, population,
                     a / (0.5 * population))  # fmt: skip
    p = 1.0 / 2.5

    def nbs(z, y):
        return np.sum(stats.nbinom.logpmf(z, y + a, 1 - p)) - stats.nbinom.logpmf(
            total, np.sum(y + a), 1 - p)  # fmt: skip

    exact = _enumerated(pg, sets, codes, nbs)
    found = group_posteriors(pg, sets, codes)
    for g in range(2):
        assert _dense(found[g], total) == pytest.approx(exact[g], abs=1e-9)


def test_the_saddle_point_normaliser_is_near_brute_force_where_it_approximates():
    """pg with a p_k of each stratum's own, and truncated with tight bounds: the normaliser
    D(y) couples the strata and the posterior replaces it by its saddle-point form. Against
    the enumeration of every table with the total (the release's exact law q(z | y),
    ``dpcounts.sampling.enumeration``), on 4 strata and 5 sets, each group law is within a
    total variation of 0.01 (pg) and 0.06 (truncated; measured 0.010-0.038) of the exact."""
    from dpcounts.sampling.enumeration import compositions, log_pmf_table

    rng = np.random.default_rng(3)
    population, rate = np.array([50.0, 200.0, 400.0, 100.0]), np.array([0.02, 0.03, 0.01, 0.04])
    codes, a = np.array([0, 0, 1, 1]), np.array([3.0, 8.0, 2.0, 5.0])
    bounds = {"lower": np.array([0, 1, 0, 0]), "upper": np.array([4, 9, 8, 6]), "tail": 0.01}
    for mechanism, limit, extra in (("pg", 0.01, {}), ("truncated", 0.06, bounds)):
        for _ in range(3):
            y = rng.poisson(population * rate)
            cal = Calibration(mechanism, "certified", 1.0, int(y.sum()), a, a / rate,
                              population, rate, **extra)  # fmt: skip
            sets = synthesize(y, cal, SETS, rng)
            support = compositions(cal.total, *cal.bounds())
            row = {tuple(z): i for i, z in enumerate(support)}
            tables = compositions(cal.total, np.zeros(4, int), np.full(4, cal.total))
            log_q = log_pmf_table(cal, tables, support)  # every table y x every set z
            prior = log_prior(cal, np.arange(cal.total + 1))
            weight = prior[np.arange(4), tables].sum(axis=1) + sum(
                log_q[:, row[tuple(z)]] for z in sets)  # fmt: skip
            weight = np.exp(weight - weight.max())
            exact = np.zeros((2, cal.total + 1))
            for g in range(2):
                np.add.at(exact[g], tables[:, codes == g].sum(axis=1), weight)
            exact /= exact.sum(axis=1, keepdims=True)
            found = group_posteriors(cal, sets, codes)
            for g in range(2):
                distance = 0.5 * np.abs(_dense(found[g], cal.total) - exact[g]).sum()
                assert distance < limit, (mechanism, y, g, distance)


# --- coverage ------------------------------------------------------------------------------

#: 30 strata in 5 groups of 6; two prior rates (md publishes none: one rate everywhere).
STRATA, GROUPS, SETS = 30, 5, 5


def _truths(mechanism, epsilon, population, rate, prior_shape=1.0):
    """A function of a numpy Generator drawing a table's true counts from the posterior's
    own prior: gamma-Poisson of mean population x rate and shape ``prior_shape``; for a
    truncated release, thinned beyond its bounds to the design's tail (``log_prior``), drawn
    exactly on a grid (the bounds made with the expected total; the test checks that the
    release's, made with the drawn one, are the same)."""
    mean = population * rate
    if mechanism != "truncated":
        return lambda rng: rng.negative_binomial(prior_shape, prior_shape / (prior_shape + mean))
    guess = calibrate(mechanism, epsilon, int(mean.sum()), population, rate, method="certified")
    grid = np.arange(int(20 * guess.upper.max()) + 100)
    weights = np.exp(log_prior(guess, grid, prior_shape))
    cdf = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)

    def draw(rng):
        y = (cdf < rng.random((len(mean), 1))).sum(axis=1)
        same = calibrate(mechanism, epsilon, int(y.sum()), population, rate, method="certified")
        assert np.array_equal(same.upper, guess.upper), "the bounds moved with the total"
        return y

    return draw


def _simulate(mechanism, epsilon, replicates, seed, prior_shape=1.0, rates=(0.004, 0.006),
              own_prior=True):  # fmt: skip
    """``replicates`` tables whose true counts are drawn from the posterior's own prior
    (gamma-Poisson of mean population x prior rate, shape ``prior_shape``; a truncated
    release's thinned beyond its bounds to the design's tail, unless ``own_prior`` is
    False: then the weak prior alone, which the bounds often miss), each released
    as SETS sets by the library (calibrate, then synthesize); per table and group: whether
    the posterior's and the combining rules' 90% intervals hold the true rate, and whether
    the group has a true count outside a truncated release's bounds."""
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(GROUPS), STRATA // GROUPS)
    population = rng.integers(1000, 5000, STRATA).astype(float)
    rate = np.asarray(rates)[np.arange(STRATA) % len(rates)]
    people = np.bincount(codes, weights=population)
    out = {"posterior": [], "combining": [], "outside": []}
    method = "paper" if mechanism == "md" else "certified"
    truths = _truths(mechanism if own_prior else "pg", epsilon, population, rate, prior_shape)
    for _ in range(replicates):
        y = truths(rng)
        cal = calibrate(mechanism, epsilon, int(y.sum()), population, rate, method=method)
        sets = synthesize(y, cal, SETS, rng)
        truth = np.bincount(codes, weights=y) / people * 1e5
        laws = group_posteriors(cal, sets, codes, prior_shape, cap=population)
        post = summarise(laws, people, 1e5, LEVEL)
        out["posterior"].append((post["lower"] <= truth) & (truth <= post["upper"]))
        pooled = np.vstack([np.bincount(codes, weights=row, minlength=GROUPS) for row in sets])
        comb = combine(pooled / people * 1e5, pooled / people**2 * 1e10, LEVEL)
        out["combining"].append((comb["lower"] <= truth) & (truth <= comb["upper"]))
        lower, upper = cal.bounds()
        out["outside"].append(np.bincount(codes, weights=(y < lower) | (y > upper)) > 0)
    return {name: np.array(rows) for name, rows in out.items()}


def _band(covered) -> float:
    """Three standard errors of a coverage share over tables x groups: the binomial one, or
    the spread of the tables' own shares where that is larger (a table's groups share its
    total, so they are not independent)."""
    binomial = np.sqrt(LEVEL * (1 - LEVEL) / covered.size)
    clustered = covered.mean(axis=1).std(ddof=1) / np.sqrt(len(covered))
    return 3 * max(binomial, clustered)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism, epsilon", [("pg", 0.5), ("md", 0.5), ("truncated", 1.0)])
def test_posterior_intervals_cover_where_the_combining_rules_do_not(mechanism, epsilon):
    """5 sets at a small epsilon a set, 150 tables x 5 groups = 750 intervals: the
    posterior's cover within 3 standard errors (about 0.035) of 0.9, the combining rules'
    lie further than that from it (pg and md about 0.6: the sets are shrunk towards the
    prior alike, so they agree with each other, not with the truth). md publishes no prior
    rate, so its table has one rate everywhere (the prior's mean is the overall rate). The
    truncated release's truths are drawn from its posterior's prior, which beyond the
    bounds holds the design's tail; its sets stay within the bounds near the truth, so the
    combining rules come near 0.9 too (0.876)."""
    rates = (0.005,) if mechanism == "md" else (0.004, 0.006)
    found = _simulate(mechanism, epsilon, 150, seed=11, rates=rates)
    band = _band(found["posterior"])
    posterior, combining = found["posterior"].mean(), found["combining"].mean()
    assert abs(posterior - LEVEL) <= band, (posterior, band)
    if mechanism != "truncated":  # truncated's bounds keep the sets near the truth: 0.876
        assert abs(combining - LEVEL) > band, (combining, band)


@pytest.mark.slow
def test_truths_the_bounds_often_miss_under_cover_a_truncated_release():
    """The documented failure of the design's tail (``dpcounts.inference.posterior``,
    ``_design_tail``): where the truths vary about their prior rates with a coefficient of
    variation of 1 (the weak prior alone), most groups hold a count beyond the bounds,
    which the posterior, holding the design's word that few do, does not expect: its 90%
    intervals cover well below 0.9 (asserted: more than 3 standard errors below)."""
    found = _simulate("truncated", 1.0, 150, seed=11, own_prior=False)
    band = _band(found["posterior"])
    assert found["outside"].mean() > 0.5  # most groups hold a count outside the bounds
    assert found["posterior"].mean() < LEVEL - band, (found["posterior"].mean(), band)


def _fixed(mechanism, epsilon, replicates, seed, set_counts, codes):
    """Coverage of the posterior's 90% intervals of the groups ``codes`` over
    ``replicates`` tables drawn from the prior (shape 1) and then changed by
    ``set_counts(y, mean)`` (the truth the prior does not foresee), each released as SETS
    sets: a (tables x groups) array of whether each interval holds the true rate."""
    rng = np.random.default_rng(seed)
    population = rng.integers(1000, 5000, STRATA).astype(float)
    rate = np.where(np.arange(STRATA) % 2, 0.006, 0.004)
    mean, people = population * rate, np.bincount(codes, weights=population)
    covered, truths = [], _truths(mechanism, epsilon, population, rate)
    for _ in range(replicates):
        y = set_counts(truths(rng), mean)
        cal = calibrate(mechanism, epsilon, int(y.sum()), population, rate, method="certified")
        sets = synthesize(y, cal, SETS, rng)
        post = summarise(group_posteriors(cal, sets, codes, cap=population), people, 1e5, LEVEL)
        truth = np.bincount(codes, weights=y) / people * 1e5
        covered.append((post["lower"] <= truth) & (truth <= post["upper"]))
    return np.array(covered)


@pytest.mark.slow
def test_how_the_excess_above_a_truncated_release_s_bounds_is_spread_is_unknown():
    """The documented failure of a truncated release. Every stratum of the first group
    lies above its upper bound U_k (a Poisson quantile of the prior expected count, tail
    1/(2I)), the first at 4 U_k, the others at U_k + 1: every set draws each of them
    within its bounds, so nothing in the release tells which holds the excess. The
    public total says how large it is, and the posterior spreads it by its prior (beyond
    the bounds, the design's tail, alike for every stratum): over 40 tables the first
    stratum's 90% interval holds its true rate in about half (0.55; asserted more than 3
    standard errors below 0.9), while the other groups' strata stay near 0.9."""
    from dpcounts.mechanisms.truncation import default_tail, poisson_quantile

    def above(y, mean):
        upper = poisson_quantile(1 - default_tail(STRATA) / 2, mean).astype(np.int64)
        y[:6] = upper[:6] + 1
        y[0] = 4 * upper[0]
        return y

    covered = _fixed("truncated", 1.0, 40, 3, above, np.arange(STRATA))
    first = covered[:, 0].mean()
    assert first < LEVEL - 3 * np.sqrt(LEVEL * (1 - LEVEL) / len(covered)), first
    others = covered[:, 6:]
    assert abs(others.mean() - LEVEL) <= 3 * np.sqrt(LEVEL * (1 - LEVEL) / others.size)


@pytest.mark.slow
def test_a_prior_far_from_the_truth_under_covers():
    """The other documented failure: at a small epsilon the sets carry little, so the
    posterior is nearly its prior (conditioned on the total). With the first group's true
    counts four times their prior expected counts in every table, its 90% interval holds
    its true rate in few of 60 pg releases at epsilon 0.5 a set (asserted below 0.5)."""

    def four_times(y, mean):
        y[:6] = np.round(4 * mean[:6])
        return y

    covered = _fixed("pg", 0.5, 60, 7, four_times, np.repeat(np.arange(GROUPS), STRATA // GROUPS))
    assert covered[:, 0].mean() < 0.5, covered[:, 0].mean()


# --- the release folder --------------------------------------------------------------------


@pytest.mark.slow
def test_estimate_of_a_folder_is_the_posterior_of_its_published_calibration(tmp_path):
    """`estimate` (its default method) on a real release of one set, from the folder alone:
    the posterior of the calibration the folder publishes, each group's interval around its
    estimate, the whole table's total known exactly (the public total)."""
    from test_release_verify import read, release

    out = release(tmp_path, sets=1, epsilon=0.5)
    table = estimate(out, ["region"])
    assert set(table["method"]) == {"posterior"} and set(table["sets"]) == {1}
    assert (table["lower"] <= table["estimate"]).all()
    assert (table["estimate"] <= table["upper"]).all()
    assert table["df"].isna().all() and not table["adjusted"].any()
    hyper, synthetic = read(out, "hyperparameters"), read(out, "synthetic")
    regions, codes = np.unique(hyper["region"].astype(str), return_inverse=True)
    cal = Calibration("pg", "certified", 0.5, int(synthetic["count"].sum()),
                      hyper["a"], hyper["b"], hyper["population"], hyper["prior_rate"])  # fmt: skip
    people = np.bincount(codes, weights=hyper["population"])
    laws = group_posteriors(cal, synthetic["count"].to_numpy()[None, :], codes,
                            cap=hyper["population"])  # fmt: skip
    expected = summarise(laws, people, 1e5, LEVEL)
    assert table["estimate"].to_numpy() == pytest.approx(expected["estimate"])
    assert table["upper"].to_numpy() == pytest.approx(expected["upper"])
    everything = group_posteriors(cal, synthetic["count"].to_numpy()[None, :],
                                  np.zeros(len(hyper), int), cap=hyper["population"])  # fmt: skip
    assert everything[0][0] == cal.total and everything[0][1].tolist() == [1.0]
    with pytest.raises(ValueError, match="prior_shape must be at least 1"):
        estimate(out, ["region"], prior_shape=0.5)
    # the command: posterior by default, its prior's shape an option, combining refused
    code, stdout, stderr = run("estimate", str(out), "--by", "region", "--prior-shape", "4")
    assert code == 0, stderr
    shown = pd.read_csv(io.StringIO(stdout))
    assert set(shown["method"]) == {"posterior"}
    narrower = estimate(out, ["region"], prior_shape=4.0)
    assert shown["upper"].to_numpy() == pytest.approx(narrower["upper"].to_numpy(), rel=1e-5)
    assert (narrower["upper"] - narrower["lower"] < table["upper"] - table["lower"]).all()
    code, _, stderr = run("estimate", str(out), "--by", "region", "--method", "combining")
    assert code == 2 and "a release of 1 set" in stderr
