"""Expected counts as the denominator (issue #33 item 6): observed vs expected tables
(indirect standardisation), ``studies.<name>.denominator: expected`` and ``dpcounts
synthesize --expected-column``. Rates are SMRs (observed / expected, ratios), no count is
bounded by its expected count, expected counts must be finite and > 0, and the prior's
count-fit check takes a Poisson null."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import run_cli as run
from workflow_helpers import REPO, filled_definition

from dpcounts.config_check import ConfigError
from dpcounts.data.validation import validate_strata
from dpcounts.release import prior_check
from dpcounts.studies.stage.definition import StudyConfigError
from dpcounts.studies.stage.measures import study_measures
from dpcounts.studies.stage.table import load_study_table

#: Eight districts: several above their expected count (SMR > 1), one with none observed.
OBSERVED = [3, 9, 0, 12, 5, 1, 7, 4]
EXPECTED = [2.5, 4.1, 1.2, 6.0, 5.5, 0.8, 3.3, 4.4]


def frame() -> pd.DataFrame:
    return pd.DataFrame({"district": [f"d{k}" for k in range(8)], "obs": OBSERVED, "E": EXPECTED})


def write(tmp_path, data=None) -> str:
    path = tmp_path / "lips.csv"
    (frame() if data is None else data).to_csv(path, index=False)
    return str(path)


def entry(path, **changes) -> dict:
    return {
        "table": path,
        "keys": ["district"],
        "count": "obs",
        "population": "E",
        "denominator": "expected",
        "area": "district",
        "arms": {"pg": ["certified"], "truncated": ["certified"]},
        "epsilons": [1.0],
        "sets": 2,
        "sets_per_job": 2,
        "epsilons_per_job": 1,
    } | changes


# ---- the check of the strata ----------------------------------------------------------
def test_counts_above_their_expected_count_are_accepted_with_expected_counts():
    data = frame()
    assert validate_strata(data, count="obs", population="E", keys=["district"],
                           denominator="expected") is data  # fmt: skip


def test_counts_above_a_population_are_refused_with_a_hint_at_expected_counts():
    with pytest.raises(ValueError, match="at most one event per person") as error:
        validate_strata(frame(), count="obs", population="E", keys=["district"])
    assert "--expected-column" in str(error.value) and "denominator: expected" in str(error.value)


@pytest.mark.parametrize(
    ("value", "words"),
    [(0.0, "'E' <= 0"), (-1.5, "'E' <= 0"), (np.inf, "infinite 'E'"), (np.nan, "missing 'E'")],
)
def test_an_expected_count_not_finite_and_positive_is_refused(value, words):
    data = frame()
    data.loc[3, "E"] = value
    with pytest.raises(ValueError, match=words) as error:
        validate_strata(data, count="obs", population="E", keys=["district"],
                        denominator="expected")  # fmt: skip
    assert "district='d3'" in str(error.value) and "expected count" in str(error.value)


# ---- the study ------------------------------------------------------------------------
def test_the_denominator_defaults_to_populations(tmp_path):
    definition = filled_definition("lips", entry(write(tmp_path), denominator="population"))
    assert definition.denominator == "population" and definition.per == 1e5
    plain = entry(write(tmp_path))
    del plain["denominator"]
    assert filled_definition("lips", plain).denominator == "population"


def test_an_unknown_denominator_is_refused_naming_its_key(tmp_path):
    with pytest.raises((ConfigError, StudyConfigError), match="denominator"):
        filled_definition("lips", entry(write(tmp_path), denominator="people"))


def test_a_study_of_expected_counts_reports_smrs(tmp_path):
    definition = filled_definition("lips", entry(write(tmp_path)))
    assert definition.rate_unit == "SMR (observed / expected)" and definition.per == 1.0
    strata = load_study_table(definition)
    y = strata["obs"].to_numpy(float)
    smr = y / strata["E"].to_numpy(float)
    measures = study_measures(definition, strata)
    assert measures.area_rates(y)[0] == pytest.approx(smr, rel=1e-12)
    other = y[::-1].copy()
    rmse = measures.values(other, y)["rmse"].iloc[0]
    assert rmse == pytest.approx(np.sqrt(np.mean((other / strata["E"] - smr) ** 2)), rel=1e-12)
    rmse_measure = next(m for m in measures.measures if m.name == "rmse")
    assert "SMR" in rmse_measure.title and "100,000" not in rmse_measure.unit


def test_the_same_table_as_populations_is_refused_before_any_job(tmp_path):
    definition = filled_definition("lips", entry(write(tmp_path), denominator="population"))
    with pytest.raises(ValueError, match="'obs' above 'E'"):
        load_study_table(definition)


def test_the_overall_prior_is_the_overall_smr(tmp_path):
    from dpcounts.studies.stage.prior import prior_rates

    definition = filled_definition("lips", entry(write(tmp_path)))
    strata = load_study_table(definition)
    rates, spent = prior_rates(definition, strata, np.random.default_rng(0))
    assert spent == 0 and rates == pytest.approx(np.full(8, sum(OBSERVED) / sum(EXPECTED)))


# ---- the prior's count-fit check --------------------------------------------------------
def test_the_count_fit_null_is_poisson_with_expected_counts():
    population = np.array([40.0, 60.0, 80.0])  # whole and rates < 1: binomial otherwise
    rate = np.array([0.5, 0.5, 0.5])
    assert prior_check._null(population, rate)[1] is not None
    mu, trials = prior_check._null(population, rate, poisson=True)
    assert trials is None and mu == pytest.approx([20.0, 30.0, 40.0])


def test_a_prior_made_from_the_counts_is_refused_with_expected_counts():
    rng = np.random.default_rng(5)
    expected = rng.uniform(2, 40, size=400).round()  # whole, as some tables round E
    counts = rng.poisson(expected * rng.gamma(4, 0.25, size=400))  # many above E
    assert (counts > expected).any()
    fitted = (counts + 0.5) / expected
    assert prior_check.prior_reproduces_counts(counts, expected, fitted, poisson=True)
    public = np.full(400, counts.sum() / expected.sum())
    assert prior_check.prior_reproduces_counts(counts, expected, public, poisson=True) is None


# ---- the release ------------------------------------------------------------------------
def synthesize(tmp_path, *extra, data=None, out="out", mechanism="truncated"):
    return run(
        "synthesize", "--input", write(tmp_path, data), "--keys", "district",
        "--count-column", "obs", "--strata", "input", "--epsilon", "4", "--sets", "2",
        "--mechanism", mechanism, "--sanitised-prior-by", "--dataset", "lips", "--budget",
        "20", "--out", str(tmp_path / out), "--insecure-test-seed", "7", "--quiet", *extra,
    )  # fmt: skip


@pytest.mark.slow  # a whole release and its verify (about 13 s)
def test_a_release_with_expected_counts_says_so_and_verifies(tmp_path, private_area):
    code, _, stderr = synthesize(tmp_path, "--expected-column", "E")
    assert code == 0, stderr
    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["population_column"] == "E"
    assert manifest["denominator"]["kind"] == "expected"
    assert "no count is bounded" in manifest["denominator"]["statement"]
    assert any(line.startswith("the expected counts") for line in manifest["public"])
    assert "the populations" not in manifest["public"]
    assert "overall SMR" in manifest["prior"]["description"]
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    smr = sum(OBSERVED) / sum(EXPECTED)
    assert hyper["population"].to_numpy() == pytest.approx(EXPECTED)
    assert hyper["prior_rate"].to_numpy() == pytest.approx(np.full(8, smr))
    # truncation bounds: Poisson quantiles of E x overall SMR, public, not capped by E
    assert (hyper["upper"] > hyper["population"]).all()
    sets = pd.read_parquet(out / "synthetic.parquet")
    assert (sets.groupby("set")["count"].sum() == sum(OBSERVED)).all()
    assert sets["E"].to_numpy() == pytest.approx(np.tile(EXPECTED, 2))
    code, stdout, _ = run("verify", str(out))
    assert code == 0, stdout
    assert "'E' holds expected counts (SMRs)" in stdout
    (utility,) = private_area.glob("*/utility.md")
    text = utility.read_text()
    assert f"the overall rate ({smr:.3g})" in text and "| rMSE SMR |" in text
    assert "per 100,000" not in text


def test_a_release_of_populations_keeps_its_manifest_words(tmp_path, private_area):
    data = frame().assign(E=lambda f: f["E"] * 1000)
    code, _, stderr = synthesize(tmp_path, "--population-column", "E", data=data)
    assert code == 0, stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (
        manifest["denominator"]["kind"] == "population" and "the populations" in manifest["public"]
    )


def test_expected_counts_given_as_populations_are_refused_naming_the_option(tmp_path):
    code, _, stderr = synthesize(tmp_path, "--population-column", "E")
    assert code != 0 and "'obs' above 'E'" in stderr and "--expected-column" in stderr


def test_both_denominator_options_are_a_usage_error(tmp_path):
    code, _, stderr = synthesize(tmp_path, "--expected-column", "E", "--population-column", "E")
    assert code == 2 and "not both" in stderr


def test_a_zero_expected_count_is_refused_before_anything_is_spent(tmp_path):
    data = frame()
    data.loc[2, "E"] = 0.0
    code, _, stderr = synthesize(tmp_path, "--expected-column", "E", data=data)
    assert code != 0 and "'E' <= 0" in stderr and "expected counts > 0" in stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_calibrate_takes_expected_counts(tmp_path):
    code, stdout, stderr = run(
        "calibrate", "--input", write(tmp_path), "--keys", "district", "--count-column", "obs",
        "--expected-column", "E", "--strata", "input", "--epsilon", "2", "--mechanism", "pg",
        "--sanitised-prior-by",
    )  # fmt: skip
    assert code == 0, stderr
    assert "certified" in stdout


# ---- the release from a study -----------------------------------------------------------
@pytest.fixture
def in_checkout(monkeypatch):
    monkeypatch.chdir(REPO)  # where snakemake runs: the config's paths are relative to it


@pytest.mark.slow
def test_the_study_s_denominator_reaches_the_release(tmp_path, in_checkout, private_area):
    config = {"studies": {"lips": entry(write(tmp_path))}}
    (tmp_path / "my_study.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    spec = f"{tmp_path / 'my_study.yaml'}:lips"
    common = ("--mechanism", "pg", "--epsilon", "4", "--strata", "input", "--dataset",
              "lips", "--budget", "20", "--quiet", "--release-without-guide")  # fmt: skip
    code, _, stderr = run("synthesize", "--study", spec, "--out", str(tmp_path / "out"), *common)
    assert code == 0, stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["denominator"]["kind"] == "expected"
    assert manifest["population_column"] == "E"
    (utility,) = private_area.glob("*/utility.md")
    assert "per 100,000" not in utility.read_text()
    code, _, stderr = run(
        "synthesize", "--study", spec, "--expected-column", "E", "--out",
        str(tmp_path / "again"), *common,
    )  # fmt: skip
    assert code == 2 and "--expected-column (studies.NAME.denominator)" in stderr
