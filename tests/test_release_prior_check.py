"""A prior that cannot be the data (issue #26, finding 3): prior rates computed from the
counts are refused before anything is spent or written; real public priors pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli as run

from dpcounts.data.pennsylvania import load_pennlc
from dpcounts.data.pennsylvania_standin import StandinModel, standin_strata
from dpcounts.data.standard_population import load_standard_population
from dpcounts.release import ReleaseError, ReleaseRequest, load_strata
from dpcounts.release.prior_check import OVERRIDE, prior_reproduces_counts

REPO = Path(__file__).resolve().parents[1]
KEYS = ("county", "race", "sex", "age")


@pytest.fixture(scope="module")
def pennlc() -> pd.DataFrame:
    """pennLC's real 2002 lung-cancer cases, the strata with people."""
    table = load_pennlc(REPO / "data/pennlc_strata.parquet")
    table = table[table["population"] > 0].reset_index(drop=True)
    return table.rename(columns={"cases": "count"})[[*KEYS, "count", "population"]]


def rates(table: pd.DataFrame, kind: str) -> np.ndarray:
    y, n = table["count"].to_numpy(float), table["population"].to_numpy(float)
    if kind == "derived":  # the finding: (count + 0.5) / population
        return (y + 0.5) / n
    if kind == "overall":
        return np.full(y.size, y.sum() / n.sum())
    groups = table.groupby(["race", "sex", "age"], observed=True)  # statewide group rates
    return (groups["count"].transform("sum") / groups["population"].transform("sum")).to_numpy()


@pytest.mark.parametrize("where", ["column", "file"])
def test_a_prior_computed_from_the_counts_is_refused_before_anything(
    tmp_path, pennlc, private_ledger, where
):
    table = pennlc.assign(prior_rate=rates(pennlc, "derived"))
    source = tmp_path / "in.csv"
    prior = []
    if where == "file":
        table.drop(columns="prior_rate").to_csv(source, index=False)
        table[[*KEYS, "prior_rate"]].to_csv(tmp_path / "rates.csv", index=False)
        prior = ["--prior", str(tmp_path / "rates.csv")]
    else:
        table.to_csv(source, index=False)
    code, stdout, stderr = run(
        "synthesize", "--input", str(source), "--keys", *KEYS, "--strata", "input",
        "--dataset", "pennlc", "--epsilon", "1", "--mechanism", "pg",
        "--out", str(tmp_path / "out"), *prior, "--prior-source", "a declared source",
    )  # fmt: skip
    assert code == 2 and not stdout
    assert len(stderr.strip().splitlines()) == 1
    # declared, such rates meet the second line: the count-fit check
    assert "look computed from these counts" in stderr and OVERRIDE in stderr
    assert not (tmp_path / "out").exists() and not private_ledger.exists()


def test_the_override_is_the_stewards_explicit_word(tmp_path, pennlc):
    table = pennlc.assign(prior_rate=rates(pennlc, "derived"))
    table.to_csv(tmp_path / "in.csv", index=False)
    fields = dict(input=tmp_path / "in.csv", out=tmp_path / "out", epsilon=1.0,
                  mechanism="pg", keys=KEYS, strata="input", dataset="pennlc",
                  prior_source="a declared source")  # fmt: skip
    with pytest.raises(ReleaseError, match="look computed from these counts"):
        load_strata(ReleaseRequest(**fields))
    strata = load_strata(ReleaseRequest(**fields, prior_is_public_i_am_sure=True))
    assert strata.prior_rate is not None and strata.counts.size == len(pennlc)


@pytest.mark.parametrize("kind", ["overall", "group"])
def test_public_priors_of_a_real_table_pass(pennlc, kind):
    y, n = pennlc["count"].to_numpy(), pennlc["population"].to_numpy(float)
    assert prior_reproduces_counts(y, n, rates(pennlc, kind)) is None


def test_national_age_specific_rates_pass_and_shrinkage_towards_the_counts_does_not():
    """Study 2's stand-in: 47,034 strata whose prior is national rates, as in Quick (2022)."""
    pennlc = load_pennlc(REPO / "data/pennlc_strata.parquet")
    standard = load_standard_population(REPO / "data/us_standard_population_2000.csv")
    counties = sorted(pennlc["county"].unique())
    urban = pd.Series([k % 3 == 0 for k in range(len(counties))], index=counties)
    table = standin_strata(pennlc, standard, urban, np.random.default_rng(1), StandinModel(26116))
    y, n = table["cases"].to_numpy(), table["population"].to_numpy(float)
    national = table["national_rate"].to_numpy(float)
    assert prior_reproduces_counts(y, n, national) is None
    assert prior_reproduces_counts(y, n, table["true_rate"].to_numpy(float)) is None
    # an empirical-Bayes-like estimate, a third the counts' own rate: it is the data
    shrunk = (y + 2 * n * national) / (3 * n)
    assert "deviance" in prior_reproduces_counts(y, n, shrunk)


def test_draws_around_the_prior_pass_and_the_prior_of_their_counts_does_not():
    rng = np.random.default_rng(7)
    n = rng.integers(100, 100_000, 2000).astype(float)
    rate = rng.uniform(1e-4, 2e-3, n.size)
    y = rng.binomial(n.astype(np.int64), rate)
    assert prior_reproduces_counts(y, n, rate) is None
    assert "within 1 of the count" in prior_reproduces_counts(y, n, (y + 0.5) / n)
    assert "within 1 of the count" in prior_reproduces_counts(y, n, (y + 1) / n)


def test_a_zero_prior_rate_names_the_safe_ways_out(tmp_path, pennlc):
    table = pennlc.assign(prior_rate=rates(pennlc, "overall"))
    table.loc[3, "prior_rate"] = 0.0
    table.to_csv(tmp_path / "in.csv", index=False)
    request = ReleaseRequest(input=tmp_path / "in.csv", out=tmp_path / "out", epsilon=1.0,
                             mechanism="pg", keys=KEYS, strata="input",
                             dataset="pennlc")  # fmt: skip
    with pytest.raises(ReleaseError) as err:
        load_strata(request)
    message = str(err.value)
    assert "floor" in message and "coarser" in message and "--sanitised-prior-by" in message
    assert "Do not smooth it with the counts" in message


def test_the_public_refusals_come_before_the_count_fit_check(tmp_path, pennlc, private_ledger):
    """A release its limits refuse is refused for them, whatever the counts (#36 item 2): the
    forecast and limits are decided before the check that reads the counts."""
    table = pennlc.assign(prior_rate=rates(pennlc, "derived"))
    table.to_csv(tmp_path / "in.csv", index=False)
    code, stdout, stderr = run(
        "synthesize", "--input", str(tmp_path / "in.csv"), "--keys", *KEYS, "--strata",
        "input", "--dataset", "pennlc", "--epsilon", "1", "--mechanism", "pg",
        "--out", str(tmp_path / "out"), "--prior-source", "a declared source",
        "--max-memory", "0.001",
    )  # fmt: skip
    assert code == 2 and not stdout
    assert "--max-memory" in stderr and "look computed from these counts" not in stderr
    assert not (tmp_path / "out").exists() and not private_ledger.exists()
