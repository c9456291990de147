"""The no-privacy intervals (:mod:`dpcounts.studies.intervals`): the exact Poisson interval of
a rate and the Fay-Feuer interval of a directly age-adjusted rate.

In process: the Poisson interval's defining tail probabilities, its lower bound 0 at no
deaths, its coverage at or above the nominal level, the Fay-Feuer interval's reduction to
the Poisson interval with one age group, Fay and Feuer's (1997) Table 1 as epitools' help
page recreates it, and the errors. With a process (marked ``process``): the real R, on the
same tables, through epitools' ``ageadjust.direct`` and base R's ``poisson.test``, compared to
a relative 1e-10. ``tools/ensure_r.sh`` (run by ``make test``) installs Debian's R and
epitools when they are missing; without them that test is skipped, saying so.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpcounts.studies.intervals import age_adjusted_interval, poisson_rate_interval

STANDARD_2000 = Path(__file__).resolve().parents[1] / "data" / "us_standard_population_2000.csv"

#: epitools' help page for ageadjust.direct: Fleiss (1981, p. 249), births with Down's
#: syndrome by mother's age (rows: under 20, 20-24, 25-29, 30-34, 35-39, 40 and over) and
#: birth order (columns 1, 2, 3, 4, 5+); here one row a birth order, one column an age group.
FLEISS_POPULATION = np.array(
    [
        [230061, 329449, 114920, 39487, 14208, 3052],
        [72202, 326701, 208667, 83228, 28466, 5375],
        [15050, 175702, 207081, 117300, 45026, 8660],
        [2293, 68800, 132424, 98301, 46075, 9834],
        [327, 30666, 123419, 149919, 104088, 34392],
    ]
)
FLEISS_COUNT = np.array(
    [
        [107, 141, 60, 40, 39, 25],
        [25, 150, 110, 84, 82, 39],
        [3, 71, 114, 103, 108, 75],
        [1, 26, 64, 89, 137, 96],
        [0, 8, 63, 112, 262, 295],
    ]
)
#: The help page's standard: the mean population of each age group over the birth orders.
FLEISS_STANDARD = FLEISS_POPULATION.mean(axis=0)
#: Fay and Feuer (1997), Table 1, as the help page prints it: round(1e5 * result, 1), one
#: row a birth order: crude rate, adjusted rate, lower, upper, per 100,000.
FLEISS_TABLE_1 = np.array(
    [
        [56.3, 92.3, 80.4, 105.8],
        [67.6, 91.2, 82.4, 100.9],
        [83.3, 85.1, 77.2, 94.2],
        [115.5, 92.7, 80.0, 114.7],
        [167.1, 75.5, 67.7, 188.3],
    ]
)

RELATIVE = 1e-10


# --- the exact Poisson interval ---------------------------------------------------------


@pytest.mark.parametrize("level", [0.95, 0.9, 0.99])
def test_poisson_bounds_have_the_defining_tail_probabilities(level):
    """The Garwood bounds are the means at which y is on the edge: P(Y >= y | lower) and
    P(Y <= y | upper) are each alpha / 2."""
    alpha = 1 - level
    counts = np.array([1, 2, 5, 17, 120, 3000])
    estimate, lower, upper = poisson_rate_interval(counts, 1.0, level=level, per=1)
    np.testing.assert_allclose(estimate, counts)
    np.testing.assert_allclose(stats.poisson.sf(counts - 1, lower), alpha / 2, rtol=1e-9)
    np.testing.assert_allclose(stats.poisson.cdf(counts, upper), alpha / 2, rtol=1e-9)
    assert np.all(lower < counts) and np.all(counts < upper)


def test_poisson_no_deaths_has_lower_bound_zero():
    estimate, lower, upper = poisson_rate_interval(0, 2000, per=1)
    assert estimate == 0 and lower == 0
    # With y = 0 the upper bound solves P(Y = 0 | mu) = alpha / 2: mu = -log(0.025).
    assert upper == pytest.approx(-np.log(0.025) / 2000, rel=1e-12)


def test_poisson_interval_scales_with_per_and_population():
    _, lower, upper = poisson_rate_interval([4, 4], [1000, 2000])
    _, lower_1, upper_1 = poisson_rate_interval(4, 1, per=1)
    np.testing.assert_allclose(lower, [lower_1 * 100, lower_1 * 50], rtol=1e-14)
    np.testing.assert_allclose(upper, [upper_1 * 100, upper_1 * 50], rtol=1e-14)


def test_poisson_coverage_is_at_least_nominal():
    """The exact interval covers every true mean with probability >= level: the coverage at
    a mean mu, summed exactly over the counts y with P(y | mu), on means drawn at random."""
    rng = np.random.default_rng(20260054)
    means = np.concatenate([rng.uniform(0.05, 5, 40), rng.uniform(5, 60, 40)])
    counts = np.arange(0, 200)
    for level in (0.9, 0.95):
        _, lower, upper = poisson_rate_interval(counts, 1.0, level=level, per=1)
        for mu in means:
            covered = (lower <= mu) & (mu <= upper)
            coverage = stats.poisson.pmf(counts, mu)[covered].sum()
            assert coverage >= level - 1e-12, (level, mu, coverage)


# --- the Fay-Feuer interval -------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 3, 40, 875])
def test_fay_feuer_with_one_age_group_is_the_exact_poisson_interval(count):
    adjusted = age_adjusted_interval([count], [25000], [7])
    exact = poisson_rate_interval(count, 25000)
    assert adjusted.crude == pytest.approx(exact.estimate, rel=1e-14)
    assert adjusted.adjusted == pytest.approx(exact.estimate, rel=1e-14)
    assert adjusted.lower == pytest.approx(exact.lower, rel=1e-10, abs=0)
    assert adjusted.upper == pytest.approx(exact.upper, rel=1e-10)


def test_fay_feuer_table_1():
    """Fay and Feuer's Table 1 (Down's syndrome by birth order, adjusted for mother's age),
    the numbers epitools' help page prints, to their one decimal."""
    result = age_adjusted_interval(FLEISS_COUNT, FLEISS_POPULATION, FLEISS_STANDARD)
    table = np.column_stack([result.crude, result.adjusted, result.lower, result.upper])
    np.testing.assert_array_equal(np.round(table, 1), FLEISS_TABLE_1)


def test_several_groups_at_once_equal_one_at_a_time():
    both = age_adjusted_interval(FLEISS_COUNT, FLEISS_POPULATION, FLEISS_STANDARD, level=0.9)
    for row in range(FLEISS_COUNT.shape[0]):
        one = age_adjusted_interval(
            FLEISS_COUNT[row], FLEISS_POPULATION[row], FLEISS_STANDARD, level=0.9
        )
        for field in one._fields:
            assert getattr(one, field) == getattr(both, field)[row]


def test_standard_scale_does_not_matter_and_no_deaths_gives_lower_zero():
    one = age_adjusted_interval([0, 2, 9], [500, 800, 900], [1, 2, 3])
    scaled = age_adjusted_interval([0, 2, 9], [500, 800, 900], [1000, 2000, 3000])
    assert one == pytest.approx(scaled, rel=1e-14)
    none = age_adjusted_interval([0, 0, 0], [500, 800, 900], [1, 2, 3])
    assert none.adjusted == 0 and none.lower == 0 and none.upper > 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: poisson_rate_interval(-1, 10), "count: expected non-negative"),
        (lambda: poisson_rate_interval(1, 0), "population: expected positive"),
        (lambda: poisson_rate_interval(np.nan, 10), "count: expected finite"),
        (lambda: poisson_rate_interval([1, 2], [3, 4, 5]), "broadcast"),
        (lambda: poisson_rate_interval(1, 10, level=95), "level: expected"),
        (lambda: poisson_rate_interval(1, 10, per=0), "per: expected"),
        (lambda: age_adjusted_interval(3, 10, [1]), "counts: expected an array"),
        (lambda: age_adjusted_interval([1, 2], [10, 20], [1, 2, 3]), r"standard: .*\(2,\)"),
        (lambda: age_adjusted_interval([1, 2], [10, 20], [0, 0]), "standard: expected a pos"),
        (lambda: age_adjusted_interval([1, 2], [10, 20], [1, -1]), "standard: expected non"),
        (lambda: age_adjusted_interval([1, 2], [10, 20, 30], [1, 1]), "populations: .*broadc"),
        (lambda: age_adjusted_interval([1, 2], [10, 0], [1, 1]), "populations: expected pos"),
        (lambda: age_adjusted_interval(["a"], [10], [1]), "counts: expected numbers"),
    ],
)
def test_errors_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- against the real R -----------------------------------------------------------------

R_SCRIPT = r"""
suppressPackageStartupMessages(library(epitools))
args <- commandArgs(trailingOnly = TRUE)
tables <- read.csv(args[1])
fmt <- function(x) sprintf("%.17g", x)
rows <- list()
for (key in unique(tables$table)) {
    t <- tables[tables$table == key, ]
    for (level in c(0.9, 0.95, 0.99)) {
        r <- ageadjust.direct(count = t$count, pop = t$pop, stdpop = t$stdpop,
                              conf.level = level)
        rows[[length(rows) + 1]] <- data.frame(table = key, level = fmt(level),
            crude = fmt(r[["crude.rate"]]), adjusted = fmt(r[["adj.rate"]]),
            lower = fmt(r[["lci"]]), upper = fmt(r[["uci"]]))
    }
}
write.csv(do.call(rbind, rows), args[2], row.names = FALSE)
rates <- read.csv(args[3])
out <- data.frame(y = rates$y, n = rates$n, level = rates$level, lower = NA, upper = NA)
for (i in seq_len(nrow(rates))) {
    # The interval does not depend on the null rate r; r near y / n keeps poisson.test's
    # two-sided p-value (a sum over counts around r n) short: with r = 1 it took seconds.
    ci <- poisson.test(rates$y[i], rates$n[i], r = (rates$y[i] + 1) / rates$n[i],
                       conf.level = rates$level[i])$conf.int
    out$lower[i] <- fmt(ci[1])
    out$upper[i] <- fmt(ci[2])
}
write.csv(out, args[4], row.names = FALSE)
"""


@pytest.fixture(scope="module")
def rscript():
    """Rscript with epitools, or a skip saying how to install them."""
    how = "run `bash tools/ensure_r.sh` as root on Debian (r-base-core, r-cran-epitools)"
    path = shutil.which("Rscript")
    if path is None:
        pytest.skip(f"no Rscript on PATH: the epitools comparison is skipped; {how}")
    loads = subprocess.run(
        [path, "-e", "suppressPackageStartupMessages(library(epitools))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if loads.returncode != 0:
        pytest.skip(f"R has no epitools package: the epitools comparison is skipped; {how}")
    return path


def _tables() -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Name -> (counts, populations, standard): Fleiss's five birth orders, and tables on
    the US 2000 standard population (19 age groups) with counts and populations from a
    fixed seed: county-sized, one with zero counts in several groups, one with no deaths."""
    tables = {
        f"fleiss_order_{row + 1}": (FLEISS_COUNT[row], FLEISS_POPULATION[row], FLEISS_STANDARD)
        for row in range(FLEISS_COUNT.shape[0])
    }
    standard = pd.read_csv(STANDARD_2000)["population"].to_numpy(dtype=float)
    # Death rates rising with age, about 1e-4 at the youngest to 0.15 at 85 and over.
    rate = np.geomspace(1e-4, 0.15, standard.size)
    rng = np.random.default_rng(54)
    for name, scale in (("county_small", 0.0005), ("county_mid", 0.005), ("state", 0.5)):
        population = np.maximum(1, np.round(standard * scale * rng.uniform(0.5, 1.5, 19)))
        counts = rng.poisson(rate * population)
        tables[f"us2000_{name}"] = (counts, population, standard)
    counts, population, _ = tables["us2000_county_small"]
    assert np.any(counts == 0)  # the small county has age groups with no deaths
    tables["us2000_one_death"] = (np.eye(19, dtype=int)[18], population, standard)
    tables["us2000_no_deaths"] = (np.zeros(19, dtype=int), population, standard)
    return tables


RATES = [(0, 100), (1, 250.5), (3, 1e4), (17, 3000), (250, 1.2e6), (4321, 9.9e7)]


@pytest.mark.process
def test_against_r_epitools_and_poisson_test(rscript, tmp_path):
    tables = _tables()
    long = pd.concat(
        pd.DataFrame({"table": key, "count": c, "pop": p, "stdpop": s})
        for key, (c, p, s) in tables.items()
    )
    long.to_csv(tmp_path / "tables.csv", index=False, float_format="%.17g")
    levels = (0.9, 0.95, 0.99)
    rates = pd.DataFrame(
        [(y, n, level) for y, n in RATES for level in levels], columns=["y", "n", "level"]
    )
    rates.to_csv(tmp_path / "rates.csv", index=False, float_format="%.17g")
    (tmp_path / "compare.R").write_text(R_SCRIPT)
    files = [tmp_path / name for name in ("tables.csv", "adjusted.csv", "rates.csv", "ci.csv")]
    run = subprocess.run(
        [rscript, str(tmp_path / "compare.R"), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr

    r_adjusted = pd.read_csv(files[1], na_values=["NaN", "NA"])
    assert len(r_adjusted) == len(tables) * len(levels)
    for row in r_adjusted.itertuples():
        counts, population, standard = tables[row.table]
        ours = age_adjusted_interval(counts, population, standard, level=row.level, per=1)
        for field in ("crude", "adjusted", "upper"):
            assert getattr(ours, field) == pytest.approx(getattr(row, field), rel=RELATIVE), (
                row.table,
                row.level,
                field,
            )
        if row.table == "us2000_no_deaths":
            # epitools' lower bound is a gamma of shape 0 / 0 there: NaN; ours is its limit 0.
            assert np.isnan(row.lower) and ours.lower == 0
        else:
            assert ours.lower == pytest.approx(row.lower, rel=RELATIVE), (row.table, row.level)

    r_ci = pd.read_csv(files[3])
    assert len(r_ci) == len(RATES) * len(levels)
    for row in r_ci.itertuples():
        _, lower, upper = poisson_rate_interval(row.y, row.n, level=row.level, per=1)
        assert lower == pytest.approx(row.lower, rel=RELATIVE, abs=0), (row.y, row.n)
        assert upper == pytest.approx(row.upper, rel=RELATIVE), (row.y, row.n)
