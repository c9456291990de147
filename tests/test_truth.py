"""Study 1's truth: the modelled rates on hand-made graphs and the smoothed observed rates."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.integrate
import scipy.linalg
import scipy.sparse
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from workflow_helpers import REPO, TEST_CONFIG, copy_project, schema_defaults, snakemake

from dpcounts.data import read_wonder
from dpcounts.data.counties import queen_adjacency
from dpcounts.data.truth import model as truth_model
from dpcounts.data.truth.model import (
    TruthModel,
    car_factor,
    model_truth,
    model_truth_related,
    modelled_total,
    proper_car_field,
)
from dpcounts.data.truth.observed import smooth_observed_rates, truth_from_wonder
from dpcounts.data.truth.summary import morans_i, truth_summary

#: The model of the default config (the schema holds its values).
DEFAULT_MODEL = TruthModel.from_config(schema_defaults()["truth"]["model"])

FIXTURES = REPO / "tests" / "fixtures" / "wonder"


def grid(side: int, islands: int = 0):
    """A side x side lattice with queen (8-neighbour) edges, four 'states', plus islands."""
    fips = [
        f"{10 + (r < side // 2) * 2 + (c < side // 2):02d}{r * side + c:03d}"
        for r in range(side)
        for c in range(side)
    ]
    edges = []
    for r in range(side):
        for c in range(side):
            for dr, dc in ((0, 1), (1, -1), (1, 0), (1, 1)):
                rr, cc = r + dr, c + dc
                if 0 <= rr < side and 0 <= cc < side:
                    edges.append((fips[r * side + c], fips[rr * side + cc]))
    fips += [f"20{i:03d}" for i in range(islands)]
    counties = pd.DataFrame({"fips": fips, "state_fips": [code[:2] for code in fips]})
    return counties, pd.DataFrame(edges, columns=["fips_a", "fips_b"])


def populations(counties, seed=0):
    rng = np.random.default_rng(seed)
    return pd.Series(rng.integers(200, 50_000, len(counties)), index=counties["fips"])


def morans_i_reference(values, counties, edges):
    """Moran's I with binary symmetric weights, written independently of the library."""
    position = {code: i for i, code in enumerate(counties["fips"])}
    a = edges["fips_a"].map(position).to_numpy()
    b = edges["fips_b"].map(position).to_numpy()
    z = np.asarray(values, float) - np.mean(values)
    s0 = 2 * len(a)
    return len(z) / s0 * (2 * np.sum(z[a] * z[b])) / np.sum(z * z)


def test_expected_deaths_sum_to_the_total():
    counties, edges = grid(12, islands=2)
    truth = model_truth(
        counties, edges, populations(counties), DEFAULT_MODEL, np.random.default_rng(1)
    )
    assert truth["expected"].sum() == pytest.approx(11364, rel=1e-10)
    assert np.allclose(truth["expected"], truth["population"] * truth["rate"])
    assert list(truth["fips"]) == list(counties["fips"])
    assert (truth["rate"] > 0).all()


@given(total=st.floats(1, 1e6), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=20, deadline=None)
def test_total_is_matched_for_any_total(total, seed):
    counties, edges = grid(5)
    params = replace(DEFAULT_MODEL, total_deaths=total, state_sd=0.5, spatial_sd=0.7, iid_sd=0.3)
    truth = model_truth(
        counties, edges, populations(counties, seed % 7), params, np.random.default_rng(seed)
    )
    assert truth["expected"].sum() == pytest.approx(total, rel=1e-9)


def log_rate_morans_i(params: TruthModel, seeds) -> list[float]:
    """Moran's I of the modelled log rates on a 15 x 15 grid, one per seed."""
    counties, edges = grid(15)
    sizes = populations(counties)
    return [
        morans_i_reference(
            np.log(
                model_truth(counties, edges, sizes, params, np.random.default_rng(seed))["rate"]
            ),
            counties,
            edges,
        )
        for seed in seeds
    ]


def test_strong_dependence_gives_positive_spatial_autocorrelation():
    params = replace(
        DEFAULT_MODEL, state_sd=0.0, iid_sd=0.0, spatial_sd=0.3, spatial_dependence=0.99
    )
    values = log_rate_morans_i(params, range(5))
    # under independence I is about 0 with sd about 0.03 on this graph
    assert min(values) > 0.15


def test_no_spatial_component_gives_moran_near_zero():
    params = replace(DEFAULT_MODEL, state_sd=0.0, iid_sd=0.3, spatial_sd=0.0)
    values = log_rate_morans_i(params, range(10))
    # E[I] = -1/(n-1) under independence; one I has sd about 0.03, a mean of ten about 0.01
    assert abs(np.mean(values)) < 0.04


def test_reproducible_for_a_fixed_generator():
    counties, edges = grid(8, islands=1)
    sizes = populations(counties)
    first = model_truth(counties, edges, sizes, DEFAULT_MODEL, np.random.default_rng(42))
    again = model_truth(counties, edges, sizes, DEFAULT_MODEL, np.random.default_rng(42))
    other = model_truth(counties, edges, sizes, DEFAULT_MODEL, np.random.default_rng(43))
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["rate"], other["rate"])


def test_islands_get_finite_independent_effects():
    counties, edges = grid(6, islands=3)
    truth = model_truth(
        counties, edges, populations(counties), DEFAULT_MODEL, np.random.default_rng(5)
    )
    islands = truth[truth["fips"].str.startswith("20")]
    assert len(islands) == 3
    assert np.isfinite(islands["spatial_effect"]).all()
    assert (islands["spatial_effect"] != 0).all()


def test_only_islands():
    counties = pd.DataFrame({"fips": ["01001", "01002", "02001"], "state_fips": ["01", "01", "02"]})
    edges = pd.DataFrame({"fips_a": [], "fips_b": []}, dtype=str)
    sizes = pd.Series([100, 200, 300], index=counties["fips"])
    truth = model_truth(
        counties, edges, sizes, replace(DEFAULT_MODEL, total_deaths=6), np.random.default_rng(0)
    )
    assert truth["expected"].sum() == pytest.approx(6)


def test_state_effect_is_shared_within_a_state():
    counties, edges = grid(6)
    truth = model_truth(
        counties, edges, populations(counties), DEFAULT_MODEL, np.random.default_rng(3)
    )
    per_state = truth.groupby(counties["state_fips"])["state_effect"].nunique()
    assert (per_state == 1).all()
    assert truth.groupby(counties["state_fips"])["state_effect"].first().nunique() == 4


def test_car_marginal_variances_follow_the_precision():
    """Empirical variances of many draws match diag((D - rho W)^-1) / geometric mean."""
    counties, edges = grid(3, islands=1)
    n = len(counties)
    position = {code: i for i, code in enumerate(counties["fips"])}
    weights = np.zeros((n, n))
    for a, b in zip(edges["fips_a"], edges["fips_b"], strict=True):
        weights[position[a], position[b]] = weights[position[b], position[a]] = 1
    degree = weights.sum(axis=1)
    rho = 0.9
    covariance = np.linalg.inv(np.diag(np.where(degree > 0, degree, 1)) - rho * weights)
    expected = np.diag(covariance) / scipy.stats.gmean(np.diag(covariance))
    adjacency = scipy.sparse.csr_matrix(weights)
    rng = np.random.default_rng(11)
    draws = proper_car_field(adjacency, rho, rng, size=4000)
    assert np.allclose(draws.var(axis=0), expected, rtol=0.1)
    # neighbours are positively correlated
    assert np.corrcoef(draws[:, 0], draws[:, 1])[0, 1] > 0.2


def fresh_car_field(adjacency, dependence, rng, size=None):
    """proper_car_field as it was before its factor was memoised: every call factors."""
    weights = scipy.sparse.csr_matrix(adjacency, dtype=float)
    degree = np.asarray(weights.sum(axis=1)).ravel()
    count = len(degree)
    diagonal = np.where(degree > 0, degree, 1.0)
    precision = (scipy.sparse.diags(diagonal) - dependence * weights).toarray()
    lower = scipy.linalg.cholesky(precision, lower=True)
    normals = rng.standard_normal((count, 1 if size is None else size))
    draws = scipy.linalg.solve_triangular(lower.T, normals, lower=False).T
    inverse = scipy.linalg.solve_triangular(lower, np.eye(count), lower=True)
    marginal_variance = np.einsum("ij,ij->j", inverse, inverse)
    draws /= np.sqrt(np.exp(np.mean(np.log(marginal_variance))))
    return draws[0] if size is None else draws


def test_car_factor_is_computed_once_per_graph_and_draws_what_a_fresh_one_draws(monkeypatch):
    """Fields drawn on one graph, built anew each time (as each age group's truth builds
    it), factor its precision once; the draws, and the generator's state after them, are
    those of a fresh factor, bit for bit. Another graph or dependence factors again."""
    counties, edges = grid(7, islands=2)
    fips = counties["fips"]
    factorisations = []
    cholesky = scipy.linalg.cholesky

    def counted_cholesky(*args, **kwargs):
        factorisations.append(args[0].shape)
        return cholesky(*args, **kwargs)

    monkeypatch.setattr(scipy.linalg, "cholesky", counted_cholesky)
    truth_model._memoised_car_factor.cache_clear()
    for seed, size in [(1, None), (2, 5), (3, None)]:
        memo_rng, fresh_rng = np.random.default_rng(seed), np.random.default_rng(seed)
        memo = proper_car_field(queen_adjacency(edges, fips), 0.95, memo_rng, size)
        fresh = fresh_car_field(queen_adjacency(edges, fips), 0.95, fresh_rng, size)
        assert memo.shape == fresh.shape and memo.tobytes() == fresh.tobytes()
        assert memo_rng.bit_generator.state == fresh_rng.bit_generator.state
    # three memoised fields, one factorisation (the other three are the fresh reference's)
    assert len(factorisations) == 1 + 3
    assert truth_model._memoised_car_factor.cache_info().hits == 2
    factor = car_factor(queen_adjacency(edges, fips), 0.95)
    assert not factor.lower.flags.writeable
    assert len(factorisations) == 4
    car_factor(queen_adjacency(edges, fips), 0.5)
    small_counties, small_edges = grid(4)
    car_factor(queen_adjacency(small_edges, small_counties["fips"]), 0.95)
    assert len(factorisations) == 6


@pytest.mark.parametrize(
    "kwargs",
    [{"spatial_dependence": 1.0}, {"state_sd": -0.1}, {"total_deaths": 0}, {"iid_sd": np.nan}],
)
def test_bad_parameters_rejected(kwargs):
    with pytest.raises(ValueError):
        replace(DEFAULT_MODEL, **kwargs)


def test_from_config_reads_keys_and_rejects_unknown():
    section = {**DEFAULT_MODEL.__dict__, "total_deaths": 100, "spatial_sd": 0.5}
    params = TruthModel.from_config(section)
    assert params.total_deaths == 100 and params.spatial_sd == 0.5
    with pytest.raises(ValueError, match="unknown key"):
        TruthModel.from_config({**section, "spatial_sigma": 0.5})
    with pytest.raises(ValueError, match=r"missing key\(s\) \['iid_sd'\]"):
        TruthModel.from_config({k: v for k, v in section.items() if k != "iid_sd"})


def test_population_must_cover_every_county():
    counties, edges = grid(3)
    sizes = populations(counties).iloc[1:]
    with pytest.raises(ValueError, match="no size for 1 county"):
        model_truth(counties, edges, sizes, DEFAULT_MODEL, np.random.default_rng(0))
    zero = populations(counties)
    zero.iloc[2] = 0
    with pytest.raises(ValueError, match="non-positive"):
        model_truth(counties, edges, zero, DEFAULT_MODEL, np.random.default_rng(0))


# ---- older age groups (Study 1's Appendix C) ------------------------------------------


def related(counties, edges, correlation, seed, total=5000.0, params=None, reference=None):
    params = params or DEFAULT_MODEL
    if reference is None:
        reference = model_truth(
            counties, edges, populations(counties), params, np.random.default_rng(seed + 1000)
        )
    sizes = populations(counties, seed=3)
    older = model_truth_related(
        counties,
        edges,
        sizes,
        reference,
        TruthModel(**{**params.__dict__, "total_deaths": total}),
        correlation,
        np.random.default_rng(seed),
    )
    return reference, older


def test_modelled_total_is_the_rounded_rate_times_the_population():
    assert modelled_total(180.2, [1_000_000, 500_000.0]) == round(180.2e-5 * 1_500_000)
    assert modelled_total(7777.1, [1234.5]) == 96  # 96.008...
    # the brief's sanity check: 44.6 per 100,000 on 25.4 M people is close to 11,364
    assert abs(modelled_total(44.6, [25_421_865.28]) - 11364) < 30
    for rate in (0, -1, np.nan, np.inf):
        with pytest.raises(ValueError, match="rate_per_100k"):
            modelled_total(rate, [100.0])
    for sizes in ([], [0.0, 0.0], [10.0, -1.0], [np.nan]):
        with pytest.raises(ValueError, match="population"):
            modelled_total(100.0, sizes)
    with pytest.raises(ValueError, match="no deaths"):
        modelled_total(1.0, [10.0])


@pytest.mark.parametrize("correlation", [0.0, 0.5, 0.7, 1.0])
def test_related_truth_matches_its_total(correlation):
    counties, edges = grid(9, islands=1)
    reference, older = related(counties, edges, correlation, seed=2, total=123456)
    assert older["expected"].sum() == pytest.approx(123456, rel=1e-10)
    assert np.allclose(older["expected"], older["population"] * older["rate"])
    assert list(older["fips"]) == list(counties["fips"])
    assert older["population"].tolist() == populations(counties, seed=3).tolist()
    parts = older[["reference_effect", "state_effect", "spatial_effect", "iid_effect"]]
    assert np.allclose(np.log(older["rate"]), older["log_national"] + parts.sum(axis=1))


@pytest.mark.slow
def test_related_truth_correlates_with_the_reference_on_the_log_scale():
    counties, edges = grid(12)
    params = replace(
        DEFAULT_MODEL, state_sd=0.1, spatial_sd=0.2, spatial_dependence=0.9, iid_sd=0.15
    )
    for rho in (0.3, 0.7, 0.9):
        values, spread, ref_spread = [], [], []
        for seed in range(20):
            reference, older = related(counties, edges, rho, seed, params=params)
            log_ref, log_older = np.log(reference["rate"]), np.log(older["rate"])
            values.append(np.corrcoef(log_ref, log_older)[0, 1])
            spread.append(np.std(log_older))
            ref_spread.append(np.std(log_ref))
        # over draws the correlation is rho; one draw on 144 counties scatters around it
        assert np.mean(values) == pytest.approx(rho, abs=0.06)
        # the older group's log rates spread like the reference's (same model)
        assert np.mean(spread) == pytest.approx(np.mean(ref_spread), rel=0.15)


def test_related_truth_edge_correlations():
    counties, edges = grid(8)
    reference, same = related(counties, edges, 1.0, seed=4)
    # rho = 1: the reference's map, rescaled to the new total
    ratio = same["rate"] / reference["rate"]
    assert np.allclose(ratio, ratio.iloc[0])
    assert np.allclose(same[["state_effect", "spatial_effect", "iid_effect"]], 0.0)
    _, negative = related(counties, edges, -1.0, seed=4)
    assert np.corrcoef(np.log(reference["rate"]), np.log(negative["rate"]))[0, 1] == (
        pytest.approx(-1.0)
    )


def test_related_truth_is_reproducible_and_uses_its_generator():
    counties, edges = grid(7, islands=1)
    reference, first = related(counties, edges, 0.7, seed=5)
    _, again = related(counties, edges, 0.7, seed=5, reference=reference)
    _, other = related(counties, edges, 0.7, seed=6, reference=reference)
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["rate"], other["rate"])


def test_related_truth_rejects_bad_input():
    counties, edges = grid(4)
    reference = model_truth(
        counties, edges, populations(counties), DEFAULT_MODEL, np.random.default_rng(0)
    )
    sizes = populations(counties)

    def run(ref=reference, correlation=0.7, size=sizes):
        return model_truth_related(
            counties, edges, size, ref, DEFAULT_MODEL, correlation, np.random.default_rng(0)
        )

    for bad in (1.2, -1.01, np.nan):
        with pytest.raises(ValueError, match="correlation"):
            run(correlation=bad)
    with pytest.raises(ValueError, match="no rate for 1 county"):
        run(ref=reference.iloc[1:])
    with pytest.raises(ValueError, match="missing column 'rate'"):
        run(ref=reference.drop(columns="rate"))
    with pytest.raises(ValueError, match="more than once"):
        run(ref=pd.concat([reference, reference.iloc[:1]]))
    zero = reference.copy()
    zero.loc[3, "rate"] = 0.0
    with pytest.raises(ValueError, match="finite and > 0"):
        run(ref=zero)
    with pytest.raises(ValueError, match="no size for 1 county"):
        run(size=sizes.iloc[1:])


# ---- smoothed observed rates ---------------------------------------------------------


def marshall_prior(deaths, population):
    m = deaths.sum() / population.sum()
    s2 = np.sum(population * (deaths / population - m) ** 2) / population.sum()
    return m, max(0.0, s2 - m / population.mean())


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(100, 10**6)), min_size=2, max_size=40))
@settings(max_examples=50, deadline=None)
def test_smoothed_rates_lie_between_crude_and_group_rate(rows):
    deaths = np.array([d for d, _ in rows], float)
    population = np.array([n for _, n in rows], float)
    rates = smooth_observed_rates(deaths, population)
    crude = deaths / population
    m = deaths.sum() / population.sum()
    low, high = np.minimum(crude, m), np.maximum(crude, m)
    assert np.all(rates >= low - 1e-12) and np.all(rates <= high + 1e-12)


def test_homogeneous_counties_shrink_fully():
    population = np.array([1000.0, 2000.0, 4000.0, 8000.0])
    deaths = population * 0.01  # identical crude rates: no excess variance
    assert np.allclose(smooth_observed_rates(deaths, population), 0.01)


def test_big_counties_shrink_less():
    population = np.array([1e3, 1e6, 1e3, 1e6])
    deaths = np.array([5.0, 5000.0, 1.0, 1000.0])  # counties 0, 1 share crude rate 0.005
    rates = smooth_observed_rates(deaths, population)
    m = deaths.sum() / population.sum()
    assert abs(rates[1] - 0.005) < abs(rates[0] - 0.005)
    assert abs(rates[0] - m) < abs(rates[1] - m)


def test_groups_shrink_toward_their_own_rate():
    population = np.full(6, 10_000.0)
    deaths = np.array([10.0, 12, 14, 50, 55, 60])
    groups = ["a", "a", "a", "b", "b", "b"]
    rates = smooth_observed_rates(deaths, population, groups)
    assert rates[:3].max() < 15 / 10_000 < rates[3:].min()


def test_missing_count_without_suppression_flag_is_an_error():
    with pytest.raises(ValueError, match="without a suppression flag"):
        smooth_observed_rates([1.0, np.nan, 3.0], [100.0, 100.0, 100.0])


def test_fixture_with_suppressed_cell():
    frame = read_wonder(FIXTURES / "smoothing.txt")
    counties = pd.DataFrame(
        {"fips": ["01001", "01003", "01005", "01007", "02001", "02003", "02005"]}
    )
    truth = truth_from_wonder(frame, counties, age_group_code="35-44", source="smoothing.txt")
    assert list(truth["fips"]) == list(counties["fips"])
    assert np.isfinite(truth["rate"]).all() and (truth["rate"] > 0).all()

    # the suppressed county: posterior mean of the rate given 1 <= y <= 9, computed here
    # by integrating over the gamma prior (independently of the library's sum)
    state = frame[(frame["age_group_code"] == "35-44") & frame["county_code"].str.startswith("01")]
    seen = state[~state["suppressed"]]
    m, a_var = marshall_prior(seen["deaths"].to_numpy(float), seen["population"].to_numpy(float))
    shape, rate = m**2 / a_var, m / a_var
    n = 5000.0

    def weight(lam):
        in_range = scipy.stats.poisson.cdf(9, n * lam) - scipy.stats.poisson.cdf(0, n * lam)
        return scipy.stats.gamma.pdf(lam, shape, scale=1 / rate) * in_range

    upper = scipy.stats.gamma.ppf(1 - 1e-12, shape, scale=1 / rate)
    numerator = scipy.integrate.quad(lambda lam: lam * weight(lam), 0, upper, limit=200)[0]
    denominator = scipy.integrate.quad(weight, 0, upper, limit=200)[0]
    suppressed_rate = truth.set_index("fips").loc["01005", "rate"]
    assert suppressed_rate == pytest.approx(numerator / denominator, rel=1e-6)

    # unsuppressed counties: (y + a) / (n + b) with the state's prior
    alpha = truth.set_index("fips").loc["01001", "rate"]
    assert alpha == pytest.approx((40 + shape) / (60000 + rate), rel=1e-12)


def test_truth_from_wonder_needs_every_county():
    frame = read_wonder(FIXTURES / "smoothing.txt")
    counties = pd.DataFrame(
        {"fips": ["01001", "01003", "01005", "01007", "02001", "02003", "02005", "02007"]}
    )
    with pytest.raises(ValueError, match=r"1 county\(ies\) of the frame have no row.*02007"):
        truth_from_wonder(frame, counties, age_group_code="35-44")
    with pytest.raises(ValueError, match="more than once"):
        truth_from_wonder(frame, counties)


def test_truth_summary_reports_totals_and_spread():
    truth = pd.DataFrame(
        {"fips": ["a", "b"], "population": [1e5, 3e5], "rate": [1e-4, 3e-4]}
    ).assign(expected=lambda f: f["population"] * f["rate"])
    summary = truth_summary(truth)
    assert summary["counties"] == 2
    assert summary["expected_deaths"] == pytest.approx(100.0)
    assert summary["national_rate_per_100k"] == pytest.approx(25.0)
    assert summary["rate_per_100k_quantiles"]["0"] == pytest.approx(10.0)
    assert summary["rate_per_100k_quantiles"]["1"] == pytest.approx(30.0)


def made_up_export(path: Path, seed: int = 2):
    """A WONDER-layout export for every shipped county; deaths 1-9 written as Suppressed."""
    counties = pd.read_parquet(REPO / "data" / "counties_1980.parquet", columns=["fips"])
    rng = np.random.default_rng(seed)
    population = rng.integers(500, 200_000, len(counties))
    true_rate = 4e-4 * np.exp(0.3 * rng.standard_normal(len(counties)))
    deaths = rng.poisson(population * true_rate)
    lines = ['"Notes"\t"County"\t"County Code"\tDeaths\tPopulation\tCrude Rate']
    for code, n, y in zip(counties["fips"], population, deaths, strict=True):
        shown = "Suppressed" if 1 <= y <= 9 else str(y)
        lines.append(f'\t"County {code}"\t"{code}"\t{shown}\t{n}\t{shown}')
    lines += ['"---"', '"Dataset: made up for a test"']
    path.write_text("\n".join(lines) + "\n")
    return counties, population, true_rate, deaths


def test_wonder_export_of_every_county_round_trips(tmp_path):
    """A made-up export of all shipped counties (deaths 1-9 suppressed) gives usable rates."""
    export = tmp_path / "all_counties.txt"
    counties, population, true_rate, deaths = made_up_export(export)
    frame = read_wonder(export)
    assert frame["suppressed"].sum() == np.sum((deaths >= 1) & (deaths <= 9))
    truth = truth_from_wonder(frame, counties, source=str(export))
    assert np.isfinite(truth["rate"]).all() and (truth["rate"] > 0).all()
    # smoothing beats the crude rates at recovering the truth (it is what it is for)
    crude = deaths / population
    assert np.mean((truth["rate"] - true_rate) ** 2) < np.mean((crude - true_rate) ** 2)


@pytest.mark.slow
def test_workflow_builds_the_truth_from_a_wonder_export(tmp_path):
    work = copy_project(tmp_path / "proj")
    # the rules name a conda environment file; snakemake records it even without --sdm conda
    shutil.copy2(REPO / "environment.yml", work / "environment.yml")
    made_up_export(work / "export.txt")
    (work / "wonder.yaml").write_text(
        "truth:\n  source: wonder\n  wonder:\n    path: export.txt\n    age_group_code: null\n"
    )
    target = "results/data/truth_35_44.parquet"
    args = [target, "--cores", "1", "--configfile", TEST_CONFIG, "wonder.yaml"]
    result = snakemake(work, *args)
    assert result.returncode == 0, result.stderr[-3000:]
    truth = pd.read_parquet(work / target)
    frame = read_wonder(work / "export.txt")
    assert list(truth["fips"]) == list(frame["county_code"])
    assert np.allclose(truth["rate_per_100k"], truth["rate"] * 1e5)
    summary = json.loads((work / "results/data/truth_35_44_summary.json").read_text())
    assert summary["source"] == "wonder"


def test_config_schema_requires_an_export_for_the_wonder_source():
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    schema = str(REPO / "workflow" / "schemas" / "config.schema.yaml")
    config = {"seed": 1, "figure_formats": ["png"], "truth": {"source": "wonder"}}
    with pytest.raises(WorkflowError, match="wonder"):
        validate(config, schema)
    config = {"seed": 1, "figure_formats": ["png"]}
    validate(config, schema)
    assert config["truth"]["source"] == "model"
    assert TruthModel.from_config(config["truth"]["model"]) == DEFAULT_MODEL


def test_library_morans_i_matches_the_tests_own():
    counties, edges = grid(7, islands=1)
    values = np.random.default_rng(4).standard_normal(len(counties)).cumsum()
    adjacency = queen_adjacency(edges, counties["fips"])
    assert morans_i(values, adjacency) == pytest.approx(morans_i_reference(values, counties, edges))
    assert morans_i(np.ones(len(counties)), adjacency) == 0.0
