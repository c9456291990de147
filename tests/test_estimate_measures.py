"""`estimate --measure age-adjusted|disparity` (issue #54, item 1): the combining rules on
each set's Fay-Feuer rate (age_adjusted_interval, set by set, by hand) and on a disparity's
log ratio (the delta method by hand); the posterior's age-adjusted intervals covering
within Monte Carlo error of nominal on simulated tables where its model holds; a
disparity's posterior interval against the exact law of a two-sided table; the refusals
(an age key the release lacks, ages off the standard's groups, a band without people)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli as run

from dpcounts import calibrate, synthesize
from dpcounts.data.standard_population import load_standard_population, standard_weights
from dpcounts.inference.combining import combine
from dpcounts.inference.posterior import group_posteriors, joint_draws
from dpcounts.release.estimate import COLUMNS, MEASURES, estimate
from dpcounts.release.request import ReleaseRequest
from dpcounts.release.sequence import build_release
from dpcounts.studies.intervals import age_adjusted_interval

REPO = Path(__file__).resolve().parents[1]
LEVEL = 0.9
#: The table's age labels and their ages (edges of the US 2000 standard's groups).
AGES = {"0-39": (0, 40), "40-59": (40, 60), "60-69": (60, 70), "70+": (70, None)}
RACES = ("A", "B")


def _us2000(bands=AGES) -> np.ndarray:
    """The US 2000 standard's weights of ``bands``, in their order (read here, by hand)."""
    table = load_standard_population(REPO / "data" / "us_standard_population_2000.csv")
    return standard_weights(table, bands)[list(bands)].to_numpy()


def _table(counties: int, seed: int) -> pd.DataFrame:
    """county x race x age strata, rates rising with age, counts Poisson around them."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(counties):
        for race in RACES:
            for k, age in enumerate(AGES):
                population = int(rng.integers(2000, 20000))
                rate = 0.0004 * (1 + k) ** 2 * (1.5 if race == "B" else 1.0)
                rows.append({"county": f"c{c}", "race": race, "age": age,
                             "population": population, "prior_rate": rate,
                             "count": int(rng.poisson(population * rate))})  # fmt: skip
    return pd.DataFrame(rows)


def _release(folder: Path, table: pd.DataFrame, sets: int, epsilon: float = 1.0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / "strata.csv", index=False)
    build_release(ReleaseRequest(
        input=folder / "strata.csv", out=folder / "out", epsilon=epsilon, mechanism="pg",
        dataset="test-data", keys=("county", "race", "age"), test_seed=5, progress=False,
        strata="input", prior_source="registry rates", sets=sets))  # fmt: skip
    return folder / "out"


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """A release of 6 counties x 2 races x 4 ages in 5 sets."""
    return _release(tmp_path_factory.mktemp("measures"), _table(6, seed=2), sets=5)


def _by_hand(folder: Path):
    """Each set's counts and the populations as (set, county, race, age) arrays."""
    sets = pd.read_parquet(folder / "synthetic.parquet")
    index = pd.MultiIndex.from_product([sorted(sets["set"].unique()), sorted(
        sets["county"].unique()), RACES, list(AGES)])  # fmt: skip
    frame = sets.set_index(["set", "county", "race", "age"]).reindex(index)
    shape = tuple(len(level) for level in index.levels)
    y = frame["count"].to_numpy(float).reshape(shape)
    n = frame["population"].to_numpy(float).reshape(shape)[0]
    return y, n


@pytest.mark.slow
def test_combining_age_adjusted_rates_are_the_rules_on_each_sets_fay_feuer_rate(released):
    """The combining age-adjusted rate of each county: the rules applied to
    age_adjusted_interval of each set (races pooled in each band, the US 2000 standard),
    each set's variance sum(w^2 y) (Fay and Feuer)."""
    table = estimate(released, ["county"], LEVEL, "combining", measure="age-adjusted",
                     age="age")  # fmt: skip
    assert list(table.columns) == ["county", *COLUMNS]
    assert set(table["measure"]) == {"age-adjusted"}
    y, n = _by_hand(released)
    y, n = y.sum(axis=2), n.sum(axis=1)  # races pooled: (set, county, age), (county, age)
    standard = _us2000()
    rates = age_adjusted_interval(y, n, standard, level=LEVEL).adjusted  # (set, county)
    weight = standard / standard.sum() / n * 1e5
    hand = combine(rates, (weight**2 * y).sum(axis=-1), LEVEL)
    assert table["estimate"].to_numpy() == pytest.approx(hand["estimate"], rel=1e-12)
    assert table["variance"].to_numpy() == pytest.approx(hand["variance"], rel=1e-12)
    assert table["upper"].to_numpy() == pytest.approx(hand["upper"], rel=1e-12)
    assert table["lower"].to_numpy() == pytest.approx(np.maximum(hand["lower"], 0), rel=1e-12)
    assert table["df"].to_numpy() == pytest.approx(hand["df"], rel=1e-12)


@pytest.mark.slow
def test_combining_disparity_is_the_rules_on_each_sets_log_ratio(released):
    """A county's disparity of age-adjusted rates, race B over race A: the rules on each
    set's log ratio, its variance by the delta method (u_B / q_B^2 + u_A / q_A^2), the
    estimate and bounds exponentiated."""
    table = estimate(released, ["county"], LEVEL, "combining", measure="disparity",
                     age="age", numerator={"race": "B"}, denominator={"race": "A"})  # fmt: skip
    y, n = _by_hand(released)  # (set, county, race, age)
    standard = _us2000()
    weight = standard / standard.sum() / n * 1e5  # (county, race, age)
    q = (weight * y).sum(axis=-1)  # (set, county, race)
    u = (weight**2 * y).sum(axis=-1)
    logs = np.log(q[..., 1]) - np.log(q[..., 0])
    hand = combine(logs, u[..., 1] / q[..., 1] ** 2 + u[..., 0] / q[..., 0] ** 2, LEVEL)
    assert table["estimate"].to_numpy() == pytest.approx(np.exp(hand["estimate"]), rel=1e-12)
    assert table["variance"].to_numpy() == pytest.approx(hand["variance"], rel=1e-12)
    assert table["lower"].to_numpy() == pytest.approx(np.exp(hand["lower"]), rel=1e-10)
    assert table["upper"].to_numpy() == pytest.approx(np.exp(hand["upper"]), rel=1e-10)
    # the crude disparity (no --age-column): the same rules on each set's crude rates
    crude = estimate(released, ["county"], LEVEL, "combining", measure="disparity",
                     numerator={"race": "B"}, denominator={"race": "A"})  # fmt: skip
    rate = y.sum(axis=-1) / n.sum(axis=-1)  # (set, county, race)
    logs = np.log(rate[..., 1]) - np.log(rate[..., 0])
    spread = 1 / y.sum(axis=-1)[..., 1] + 1 / y.sum(axis=-1)[..., 0]
    assert crude["estimate"].to_numpy() == pytest.approx(
        np.exp(combine(logs, spread, LEVEL)["estimate"]), rel=1e-12)  # fmt: skip


@pytest.mark.slow
def test_posterior_age_adjusted_rate_is_the_mean_of_its_bands_draws(released):
    """`estimate`'s posterior age-adjusted rate of each county against the same posterior
    drawn here (other draws, another seed) with the pieces and weights built by hand:
    equal within 5 Monte Carlo standard errors."""
    table = estimate(released, ["county"], LEVEL, measure="age-adjusted", age="age",
                     draws=4000)  # fmt: skip
    assert set(table["method"]) == {"posterior"} and table["df"].isna().all()
    assert (table["lower"] < table["estimate"]).all()
    assert (table["estimate"] < table["upper"]).all()
    from dpcounts.release.estimate import _calibration

    manifest = pd.read_json(released / "manifest.json", typ="series")
    hyper = pd.read_parquet(released / "hyperparameters.parquet")
    sets = pd.read_parquet(released / "synthetic.parquet")
    counts = np.vstack([g["count"].to_numpy() for _, g in sets.groupby("set")])
    county = pd.factorize(hyper["county"], sort=True)[0]
    band = hyper["age"].map({age: k for k, age in enumerate(AGES)}).to_numpy()
    pieces = county * len(AGES) + band
    people = np.bincount(pieces, weights=hyper["population"].to_numpy(float))
    cal, cap = _calibration(manifest, hyper), hyper["population"].to_numpy(float)
    draws = joint_draws(cal, counts, pieces, 4000, np.random.default_rng(99), cap=cap)
    standard = np.tile(_us2000(), county.max() + 1)
    rates = (draws * standard / people * 1e5).reshape(4000, -1, len(AGES)).sum(axis=-1)
    error = rates.std(axis=0) / np.sqrt(4000) * np.sqrt(2)  # of the difference of two means
    assert (np.abs(table["estimate"].to_numpy() - rates.mean(axis=0)) < 5 * error).all()


@pytest.mark.slow
@pytest.mark.parametrize("mechanism, method", [("pg", "certified"), ("md", "paper"),
                                               ("truncated", "certified")])  # fmt: skip
def test_joint_draws_have_the_exact_laws_of_each_group(mechanism, method):
    """Three groups of four strata making the whole table: each group's drawn totals
    follow group_posteriors' exact law (the largest gap between the empirical and exact
    cdf below the Kolmogorov-Smirnov bound 1.95 / sqrt(draws), at 0.999), and every draw
    adds up to the public total."""
    rng = np.random.default_rng(8)
    population = rng.integers(1000, 5000, 12).astype(float)
    rate = np.full(12, 0.005)
    y = rng.poisson(population * rate)
    cal = calibrate(mechanism, 0.5, int(y.sum()), population, rate, method=method)
    sets = synthesize(y, cal, 3, rng)
    codes, draws = np.repeat(np.arange(3), 4), 20_000
    drawn = joint_draws(cal, sets, codes, draws, rng, cap=population)
    assert (drawn.sum(axis=1) == cal.total).all()
    for g, (offset, pmf) in enumerate(group_posteriors(cal, sets, codes, cap=population)):
        values = offset + np.arange(pmf.size)
        empirical = np.searchsorted(np.sort(drawn[:, g]), values, side="right") / draws
        assert np.abs(empirical - np.cumsum(pmf)).max() < 1.95 / np.sqrt(draws), g


#: Simulated tables of the coverage test: 4 groups x 2 races x 4 ages, 5 sets.
GROUPS, SETS = 4, 5


@pytest.mark.slow
def test_posterior_age_adjusted_intervals_cover_where_the_model_holds():
    """Tables whose true counts are drawn from the posterior's own prior (gamma-Poisson,
    shape 1, mean population x prior rate), released as 5 pg sets at epsilon 0.5 a set:
    over 100 tables x 4 groups the 90% posterior intervals of the groups' age-adjusted
    rates (2,000 draws each, the quantiles' Monte Carlo error about 0.005 in probability)
    cover within 3 standard errors of 0.9."""
    rng = np.random.default_rng(17)
    strata = GROUPS * len(RACES) * len(AGES)
    group = np.repeat(np.arange(GROUPS), len(RACES) * len(AGES))
    band = np.tile(np.arange(len(AGES)), GROUPS * len(RACES))
    pieces = group * len(AGES) + band
    population = rng.integers(2000, 10000, strata).astype(float)
    rate = 0.0005 * (1 + band) ** 2
    mean = population * rate
    people = np.bincount(pieces, weights=population)
    weight = np.tile(_us2000(), GROUPS) / people * 1e5  # one event's weight in each piece
    covered = []
    for _ in range(100):
        y = rng.negative_binomial(1.0, 1.0 / (1.0 + mean))
        cal = calibrate("pg", 0.5, int(y.sum()), population, rate, method="certified")
        sets = synthesize(y, cal, SETS, rng)
        draws = joint_draws(cal, sets, pieces, 2000, rng, cap=population)
        adjusted = (draws * weight).reshape(2000, GROUPS, len(AGES)).sum(axis=-1)
        lower, upper = np.quantile(adjusted, [0.05, 0.95], axis=0)
        truth = (np.bincount(pieces, weights=y) * weight).reshape(GROUPS, -1).sum(axis=-1)
        covered.append((lower <= truth) & (truth <= upper))
    covered = np.array(covered)
    band_ = 3 * max(np.sqrt(LEVEL * (1 - LEVEL) / covered.size),
                    covered.mean(axis=1).std(ddof=1) / np.sqrt(len(covered)))  # fmt: skip
    assert abs(covered.mean() - LEVEL) <= band_, (covered.mean(), band_)


@pytest.mark.slow
def test_a_two_sided_disparity_is_the_exact_law_of_its_numerator(tmp_path):
    """One county, two races of one age: the whole table's total is public, so the
    disparity (B's rate over A's) is a monotone function of B's total, whose exact
    posterior law is group_posteriors'. The Monte Carlo interval's bounds sit at the exact
    law's 5% and 95% points within 4 Monte Carlo standard errors, and its estimate at the
    median."""
    table = pd.DataFrame({"county": "c0", "race": list(RACES), "age": "40-59",
                          "population": [300000, 200000], "prior_rate": [0.002, 0.003],
                          "count": [550, 700]})  # fmt: skip
    folder = _release(tmp_path, table, sets=3, epsilon=2.0)
    draws = 20_000
    out = estimate(folder, [], LEVEL, measure="disparity", numerator={"race": "B"},
                   denominator={"race": "A"}, draws=draws)  # fmt: skip
    assert list(out.columns) == list(COLUMNS) and len(out) == 1
    from dpcounts.release.estimate import _calibration

    manifest = pd.read_json(folder / "manifest.json", typ="series")
    hyper = pd.read_parquet(folder / "hyperparameters.parquet")
    sets = pd.read_parquet(folder / "synthetic.parquet")
    counts = np.vstack([g["count"].to_numpy() for _, g in sets.groupby("set")])
    cal = _calibration(manifest, hyper)
    b = (hyper["race"] == "B").to_numpy()
    (offset, pmf), _ = group_posteriors(cal, counts, np.where(b, 0, 1),
                                        cap=hyper["population"].to_numpy(float))  # fmt: skip
    x = offset + np.arange(pmf.size)  # B's total; A's is the public total less it
    n_b, n_a = hyper.loc[b, "population"].sum(), hyper.loc[~b, "population"].sum()
    with np.errstate(divide="ignore"):
        ratio = (x / n_b) / ((cal.total - x) / n_a)  # increasing in x

    def cdf(r):
        return pmf[ratio <= r].sum()

    for bound, p in (("lower", 0.05), ("upper", 0.95), ("estimate", 0.5)):
        r = float(out[bound].iloc[0])
        tolerance = 4 * np.sqrt(p * (1 - p) / draws)
        below = pmf[ratio < r].sum()  # P(R < r) <= p <= P(R <= r), to Monte Carlo error
        assert below <= p + tolerance and cdf(r) >= p - tolerance, (bound, below, cdf(r))
    # its variance: that of the log ratio, from the same law
    logs = np.log(ratio[(x > 0) & (x < cal.total)])
    inner = pmf[(x > 0) & (x < cal.total)]
    exact = inner @ (logs - inner @ logs / inner.sum()) ** 2 / inner.sum()
    assert out["variance"].iloc[0] == pytest.approx(exact, rel=8 / np.sqrt(draws))


@pytest.mark.slow
def test_refusals_name_the_option_and_the_fix(released, tmp_path):
    """An age key the release lacks, an age key in --by, ages off a standard's groups, a
    group without people in a band, overlapping sides, and a missing side."""
    with pytest.raises(ValueError, match=r"--age-column 'years': not one of the release's keys"):
        estimate(released, ["county"], measure="age-adjusted", age="years")
    with pytest.raises(ValueError, match="is a column of --by"):
        estimate(released, ["age"], measure="age-adjusted", age="age")
    coarse = tmp_path / "coarse.csv"  # a standard of two groups: 0-49 and 50+
    pd.DataFrame({"age_start": [0, 50], "age_end": [49, None],
                  "population": [600, 400]}).to_csv(coarse, index=False)  # fmt: skip
    with pytest.raises(ValueError, match=r"--standard .*coarse.csv: band '0-39' \(ages 0-39\) "
                       "of column 'age' does not fall on the groups of the standard "
                       r"population .* \(ages 0-49, 50\+\): age 40 .* give --standard a "
                       "standard with groups"):  # fmt: skip
        estimate(released, ["county"], measure="age-adjusted", age="age", standard=str(coarse))
    with pytest.raises(ValueError, match="expected one of \\['us2000'\\] or a CSV"):
        estimate(released, ["county"], measure="age-adjusted", age="age", standard="eu2013")
    with pytest.raises(ValueError, match="share strata"):
        estimate(released, ["county"], measure="disparity", numerator={"race": ["A", "B"]},
                 denominator={"race": "A"})  # fmt: skip
    with pytest.raises(ValueError, match="needs both sides"):
        estimate(released, ["county"], measure="disparity", numerator={"race": "B"})
    with pytest.raises(ValueError, match=r"--numerator.race: value\(s\) \['C'\] not in "
                       "the release's strata; 'race' holds 'A', 'B'"):  # fmt: skip
        estimate(released, ["county"], measure="disparity", numerator={"race": "C"},
                 denominator={"race": "A"})  # fmt: skip
    # a county whose strata of one band are all left out of a release: no people there
    table = _table(2, seed=4)
    table = table[~((table["county"] == "c1") & (table["age"] == "70+"))]
    folder = _release(tmp_path / "gap", table, sets=2)
    with pytest.raises(ValueError, match=r"group county=c1: no population in age band '70\+'"):
        estimate(folder, ["county"], method="combining", measure="age-adjusted", age="age")


@pytest.mark.slow
def test_the_command_offers_the_measures(released):
    """`--help` lists the measures and the standard that ships; the command's table is the
    library's."""
    code, stdout, _ = run("estimate", "--help")
    assert code == 0
    text = " ".join(stdout.split())
    assert "{" + ",".join(MEASURES) + "}" in text and "us2000" in text
    options = ("--measure", "disparity", "--numerator", "race=B", "--denominator", "race=A",
               "--age-column", "age", "--method", "combining")  # fmt: skip
    code, stdout, stderr = run("estimate", str(released), "--by", "county", *options)
    assert code == 0, stderr
    shown = pd.read_csv(io.StringIO(stdout))
    mine = estimate(released, ["county"], method="combining", measure="disparity", age="age",
                    numerator={"race": "B"}, denominator={"race": "A"})  # fmt: skip
    assert shown["estimate"].to_numpy() == pytest.approx(mine["estimate"].to_numpy(), rel=1e-5)
    code, _, stderr = run("estimate", str(released), "--by", "county", "--measure",
                          "disparity", "--numerator", "race", "--denominator",
                          "race=A")  # fmt: skip
    assert code == 2 and "expected COLUMN=VALUE" in stderr


def test_the_tails_monte_carlo_error_is_what_the_docs_say():
    """The docs' "each tail's probability within about 0.0015" at 20,000 draws: the
    binomial standard error of a 5% tail."""
    from dpcounts.release.estimate import DRAWS

    assert np.sqrt(0.05 * 0.95 / DRAWS) == pytest.approx(0.0015, abs=0.00005)


def _hyper(folder: Path) -> pd.DataFrame:
    import json

    manifest = json.loads((folder / "manifest.json").read_text())
    return pd.read_parquet(folder / manifest["files"]["hyperparameters"]["path"])


@pytest.mark.slow
def test_the_prior_column_is_the_releases_own_value_of_the_measure(released):
    """``prior``: the measure of the expected counts population x published prior rate."""
    hyper = _hyper(released)
    mu, people = hyper["population"] * hyper["prior_rate"], hyper["population"]
    for method in ("posterior", "combining"):
        rates = estimate(released, ["race"], LEVEL, method).set_index("race")
        for race in RACES:
            side = hyper["race"] == race
            assert rates.loc[race, "prior"] == pytest.approx(
                1e5 * mu[side].sum() / people[side].sum(), rel=1e-12
            )
    ratios = estimate(released, ["county"], LEVEL, measure="disparity",
                      numerator={"race": ("B",)}, denominator={"race": ("A",)})  # fmt: skip
    for county, prior in zip(ratios["county"], ratios["prior"], strict=True):
        b, a = (hyper["county"] == county) & (hyper["race"] == "B"), (
            hyper["county"] == county) & (hyper["race"] == "A")  # fmt: skip
        by_hand = (mu[b].sum() / people[b].sum()) / (mu[a].sum() / people[a].sum())
        assert prior == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.slow
def test_a_disparity_the_prior_cannot_tell_apart_is_said_to_lean_to_parity(tmp_path, released):
    """Race B's rate is 1.5x A's, but a prior of the same rate for both (and the same
    people in each age band, so the prior's crude rates are equal too): at a small epsilon
    the posterior's county intervals hold parity, and estimate says they may lean to it;
    with the prior that tells the races apart (``released``) it says nothing."""
    table = _table(6, seed=3)
    table["prior_rate"] /= np.where(table["race"] == "B", 1.5, 1.0)
    table["population"] = table.groupby(["county", "age"])["population"].transform("first")
    blind = _release(tmp_path, table, sets=5, epsilon=0.5)
    sides = ["--measure", "disparity", "--numerator", "race=B", "--denominator", "race=A"]
    code, out, err = run("estimate", str(blind), "--by", "county", *sides)
    assert code == 0, err
    rows = pd.read_csv(io.StringIO(out))
    holding = int(((rows["lower"] <= 1) & (rows["upper"] >= 1)).sum())
    assert holding >= 1 and np.allclose(rows["prior"], 1.0)
    assert f"note: {holding} of 6 disparity intervals hold parity" in err
    assert "may lean to parity" in err and "docs/analyse.md" in err
    code, _, err = run("estimate", str(released), "--by", "county", *sides)
    assert code == 0 and "lean to parity" not in err
