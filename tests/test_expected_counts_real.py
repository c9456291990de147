"""Expected counts as the denominator on a real table from outside the repository: lip
cancer in the 56 districts of Scotland, 1975-80 (Clayton and Kaldor 1987), as Debian's
``r-cran-epir`` ships it (``epiR/data/epi.SClip.RData``: district, cases, person-years at
risk, percent employed in agriculture, fishing and forestry).

The file holds no ages, so the expected counts are made the one way its public columns
allow, indirect standardisation with a single stratum: E_i = person-years_i x the
Scotland-wide rate (total cases / total person-years). Both factors are public (the
person-years, and the total that every release publishes), so E is public as the study
declares it; the overall SMR is then 1 ("as expected").

The test fetches the package with the data builder's own kind of download (``apt-get
download``, into its git-ignored cache ``data/raw/``; a failed download fails the test),
reads the R data file with ``rdata`` (as ``make data`` reads pennLC), writes the observed
vs expected table an analyst would, runs ``snakemake ... studies`` on a study with
``denominator: expected`` in a throw-away copy of the project, then releases the table
with ``dpcounts synthesize --expected-column`` and with ``--study``. Every SMR is checked
against a recomputation from the raw file, never from the pipeline.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import REPO, copy_project, dpcounts_cli, fetch_debian, run_study

from dpcounts.studies.stage.guide import VERDICTS

RAW = (REPO / "data" / "raw").resolve()  # the data builder's download cache, git-ignored
PACKAGE, VERSION = "r-cran-epir", "2.0.57+dfsg-1"
RDATA = "usr/lib/R/site-library/epiR/data/epi.SClip.RData"
STUDY = "lips"


def raw_table() -> pd.DataFrame:
    import rdata

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Unknown encoding. Assumed ASCII."
        frame = rdata.read_rda(fetch_debian(PACKAGE, VERSION, RAW) / RDATA)["epi.SClip"]
    return pd.DataFrame(
        {
            "district": frame["id"].astype(int).to_numpy(),
            "name": frame["district"].astype(str).to_numpy(),
            "cases": frame["cases"].astype(int).to_numpy(),
            "person_years": frame["population"].astype(float).to_numpy(),
            "outdoor": np.where(frame["prop.ag"].astype(int) >= 10, "high", "low"),
        }
    )


def observed_expected(raw: pd.DataFrame) -> pd.DataFrame:
    """The analyst's table: district, observed, expected (one-stratum indirect
    standardisation on the Scotland-wide rate) and the outdoor-work attribute."""
    rate = raw["cases"].sum() / raw["person_years"].sum()
    return pd.DataFrame(
        {
            "district": raw["district"],
            "observed": raw["cases"],
            "expected": raw["person_years"] * rate,
            "outdoor": raw["outdoor"],
        }
    )


@pytest.fixture(scope="module")
def lips_run(tmp_path_factory):
    raw = raw_table()
    work = copy_project(tmp_path_factory.mktemp("lips_work"))
    table = observed_expected(raw)
    table.to_csv(work / "lips.csv", index=False, float_format="%.17g")
    study = {
        "table": "lips.csv",
        "keys": ["district"],
        "count": "observed",
        "population": "expected",
        "denominator": "expected",
        "attributes": ["outdoor"],
        "area": "district",
        "arms": {"pg": ["certified"], "truncated": ["certified"]},
        "epsilons": [1.0, 10.0],
        "sets": 10,
        "sets_per_job": 10,
        "epsilons_per_job": 2,
        "batch": 10,
        "disparities": [
            {
                "name": "outdoor",
                "numerator": {"outdoor": "high"},
                "denominator": {"outdoor": "low"},
            }
        ],  # fmt: skip
    }
    run_study(work, STUDY, study, timeout=1200)
    return work, raw


@pytest.mark.process  # fetches and unpacks the Debian package
def test_the_table_is_what_its_source_says():
    raw = raw_table()
    # Clayton and Kaldor (1987): 56 districts, 536 cases
    assert len(raw) == 56 and raw["district"].is_unique and raw["cases"].sum() == 536
    table = observed_expected(raw)
    assert (table["observed"] > table["expected"]).sum() > 10  # many above expected
    assert table["expected"].sum() == pytest.approx(536)


@pytest.mark.slow
@pytest.mark.process
def test_a_study_of_observed_vs_expected_reports_smrs(lips_run):
    work, raw = lips_run
    results = work / "results/studies" / STUDY
    smr = raw["cases"] / (raw["person_years"] * raw["cases"].sum() / raw["person_years"].sum())
    want = pd.Series(smr.to_numpy(), index=raw["district"].astype(str))

    table = json.loads((results / "table.json").read_text())
    assert table["denominator"] == "expected" and table["strata"] == 56 and table["total"] == 536
    area_rates = pd.read_parquet(results / "area_rates.parquet")
    truth = area_rates[area_rates["arm"] == "truth"].set_index("area")["rate"]
    assert sorted(truth.index) == sorted(want.index)
    assert truth.to_numpy() == pytest.approx(want.loc[truth.index].to_numpy(), rel=1e-9)
    assert truth.max() > 4 and truth.min() == 0  # ratios, not per 100,000

    summary = pd.read_parquet(results / "summary.parquet")
    high = raw["outdoor"] == "high"
    expected = raw["person_years"] * raw["cases"].sum() / raw["person_years"].sum()
    ratio = (raw.loc[high, "cases"].sum() / expected[high].sum()) / (
        raw.loc[~high, "cases"].sum() / expected[~high].sum()
    )
    disparity = summary[summary["metric"] == "disparity:outdoor"]
    assert disparity["truth"].to_numpy() == pytest.approx(ratio, rel=1e-9)
    rmse = summary[summary["metric"] == "rmse"]
    assert (rmse["median"] > 0).all() and (rmse["median"] < 10).all()  # SMR units

    guide = pd.read_csv(results / "guide.csv")
    # two arms x the rMSE, the relative error, the ranking, the key's margin, the disparity
    measures = {"rmse", "relative_error", "rank_correlation", "margin:district",
                "disparity:outdoor"}  # fmt: skip
    assert set(guide["verdict"]) <= set(VERDICTS) and len(guide) == 2 * len(measures)
    assert set(guide["measure"]) == measures
    for stem in ("measures", "guide"):
        assert (work / "figures/studies" / STUDY / f"{stem}.png").stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.process
def test_releases_of_observed_vs_expected(lips_run, tmp_path):
    work, raw = lips_run
    run = dpcounts_cli(work, tmp_path / "home")

    # the bare command line: the table's own columns
    (work / "bare.csv").write_text(
        pd.read_csv(work / "lips.csv").drop(columns="outdoor").to_csv(index=False)
    )
    bare = run("synthesize", "--input", "bare.csv", "--keys", "district", "--count-column",
               "observed", "--expected-column", "expected", "--strata", "input",
               "--mechanism", "truncated", "--sanitised-prior-by", "--epsilon", "10",
               "--sets", "2", "--dataset", "scotland-lip", "--budget", "30",
               "--out", "bare_release", "--quiet")  # fmt: skip
    assert bare.returncode == 0, bare.stderr
    # the same table given as populations is refused, naming the option
    refused = run("synthesize", "--input", "bare.csv", "--keys", "district", "--count-column",
                  "observed", "--population-column", "expected", "--strata", "input",
                  "--mechanism", "pg", "--sanitised-prior-by", "--epsilon", "1",
                  "--dataset", "scotland-lip", "--out", "refused", "--quiet")  # fmt: skip
    assert refused.returncode != 0 and "--expected-column" in refused.stderr
    # from the study
    studied = run("synthesize", "--study", f"my_study.yaml:{STUDY}", "--mechanism", "pg",
                  "--epsilon", "10", "--strata", "input", "--dataset", "scotland-lip",
                  "--out", "study_release", "--quiet")  # fmt: skip
    assert studied.returncode == 0, studied.stderr

    expected = raw["person_years"] * raw["cases"].sum() / raw["person_years"].sum()
    order = raw["district"].sort_values().index
    for folder in ("bare_release", "study_release"):
        out = work / folder
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["denominator"]["kind"] == "expected"
        assert manifest["population_column"] == "expected" and manifest["total"] == 536
        hyper = pd.read_parquet(out / "hyperparameters.parquet")
        assert hyper["district"].astype(int).tolist() == raw.loc[order, "district"].tolist()
        assert hyper["population"].to_numpy() == pytest.approx(expected[order].to_numpy())
        assert hyper["prior_rate"].to_numpy() == pytest.approx(1.0)  # the overall SMR
        sets = pd.read_parquet(out / "synthetic.parquet")
        assert (sets.groupby("set")["count"].sum() == 536).all()
        check = run("verify", folder)
        assert check.returncode == 0, check.stdout

    private = tmp_path / "home" / "dpcounts" / "private"
    texts = [path.read_text() for path in sorted(private.glob("*/utility.md"))]
    assert len(texts) == 2
    for text in texts:
        assert "per 100,000" not in text and "the overall rate (1)" in text
    # the study's report: each measure's truth as recomputed from the raw file
    (study_text,) = [t for t in texts if "the guide:" in t]
    high = raw["outdoor"] == "high"
    ratio = (raw.loc[high, "cases"].sum() / expected[high].sum()) / (
        raw.loc[~high, "cases"].sum() / expected[~high].sum()
    )
    assert f"(truth {ratio:.3g})" in study_text
