"""The steward's utility report (issue #25, item 6): utility.md, .csv and .png in the
private folder, never in the release; its numbers against the input, the published sets
and sums computed here; the privacy loss told apart from synthesis noise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcounts.release import ReleaseRequest, build_release
from dpcounts.release.report.utility import (
    AREA_MIN_VALUES,
    CSV_COLUMNS,
    FILES,
    REFERENCE_MIN_TABLES,
    area_column,
    reference_tables,
    utility_report,
)

KEYS = ("region", "age")
NCOVR = Path(__file__).resolve().parents[1] / "data" / "ncovr_homicides.csv"


def table(seed: int = 7) -> pd.DataFrame:
    """5 regions x 8 age groups, rates varying around 1 per 1,000, the prior the true rate."""
    rng = np.random.default_rng(seed)
    keys = pd.MultiIndex.from_product(
        [[f"r{i}" for i in range(5)], [f"a{j}" for j in range(8)]], names=list(KEYS)
    ).to_frame(index=False)
    population = rng.integers(5_000, 50_000, len(keys))
    rate = 1e-3 * np.exp(rng.normal(0, 0.7, len(keys)))
    return keys.assign(count=rng.poisson(population * rate), population=population,
                       prior_rate=rate)  # fmt: skip


@pytest.fixture
def counts_csv(tmp_path):
    path = tmp_path / "counts.csv"
    table().to_csv(path, index=False)
    return path


def release(path, out, **changes):
    """Build a release of ``path``; return (manifest, its private folder)."""
    fields = dict(input=path, out=out, epsilon=4.0, sets=4, mechanism="pg", keys=KEYS,
                  dataset="test-data",
                  strata="cross-product", test_seed=1, progress=False)  # fmt: skip
    fields |= changes
    if fields["mechanism"] != "md" and not {"sanitised_prior_by", "prior_file"} & set(fields):
        fields.setdefault("prior_source", "the tests' public rates")  # one rate a stratum
    request = ReleaseRequest(**fields)
    info = build_release(request)
    return info, request.private_folder(info["seed_commitment"])


def synthetic_sets(out: Path, info: dict) -> pd.DataFrame:
    path = out / info["files"]["synthetic"]["path"]
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)


# --- where it goes ------------------------------------------------------------------------
@pytest.mark.parametrize("changes", [pytest.param(dict(mechanism="md"), marks=pytest.mark.slow),
                                     dict(mechanism="pg"),
                                     pytest.param(dict(mechanism="truncated"),
                                                  marks=pytest.mark.slow),
                                     pytest.param(dict(mechanism="pg", output_format="csv"),
                                                  marks=pytest.mark.slow)],
                         ids=["md", "pg", "truncated", "pg-csv"])  # fmt: skip
def test_the_report_is_private_and_its_totals_are_the_input_and_the_sets(
    counts_csv, tmp_path, changes
):
    out = tmp_path / "release"
    info, private = release(counts_csv, out, **changes)
    # private only: in the private folder and its provenance, nowhere in the release
    assert set(FILES) <= {p.name for p in private.iterdir()}
    assert set(FILES) <= set(json.loads((private / "provenance.json").read_text())["files"])
    listed = {entry["path"] for entry in info["files"].values()} | {"manifest.json"}
    assert {p.name for p in out.iterdir()} == listed
    for path in out.iterdir():
        assert b"utility" not in path.read_bytes()

    report = pd.read_csv(private / "utility.csv", keep_default_na=False)
    assert tuple(report.columns) == CSV_COLUMNS
    input_ = table()
    sets = synthetic_sets(out, info)
    assert sets["set"].nunique() == 4
    totals = report[report["measure"] == "total"]
    for key in KEYS:
        rows = totals[totals["key"] == key].set_index("group")
        truth = input_.groupby(key)["count"].sum()
        assert rows["truth"].astype(float).to_dict() == truth.astype(float).to_dict()
        per_set = sets.groupby(["set", key])["count"].sum().unstack(key)
        for stat in ("mean", "min", "max"):
            expected = getattr(per_set, stat)(axis=0)
            np.testing.assert_allclose(
                rows.loc[expected.index, f"synthetic_{stat}"].astype(float), expected
            )
        # the reference keeps the grand total: its mean totals over the key's groups add up
        assert rows["reference_mean"].astype(float).sum() == pytest.approx(input_["count"].sum())
        assert (rows["reference_min"].astype(float) <= rows["reference_max"].astype(float)).all()
    measures = set(report["measure"])
    assert {"total", "rmse"} <= measures
    assert ("outside_bounds" in measures) == (changes["mechanism"] == "truncated")

    text = (private / "utility.md").read_text()
    assert "Never publish" in text and "## Totals by `region`" in text
    assert "## Totals by `age`" in text  # every key, not only the first
    assert f"{REFERENCE_MIN_TABLES} tables of the **no-privacy reference**" in text
    assert "that of synthesis with no privacy" in text
    assert (private / "utility.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_a_test_seeded_release_reports_the_same_numbers(counts_csv, tmp_path):
    _, first = release(counts_csv, tmp_path / "a")
    _, second = release(counts_csv, tmp_path / "b")
    assert (first / "utility.csv").read_bytes() == (second / "utility.csv").read_bytes()
    assert (first / "utility.md").read_text() == (second / "utility.md").read_text()


# --- the privacy loss apart from synthesis noise ---------------------------------------------
def rmse_ratio(private: Path) -> float:
    report = pd.read_csv(private / "utility.csv", keep_default_na=False)
    row = report[report["measure"] == "rmse"].iloc[0]
    return float(row["synthetic_median"]) / float(row["reference_median"])


@pytest.mark.slow
def test_rmse_is_near_the_reference_at_a_huge_epsilon_and_far_above_at_a_tiny_one(
    counts_csv, tmp_path
):
    """md keeps no prior: at epsilon 20 per set its sets are as good as synthesis with no
    privacy; at 0.01 per set they are spread over the strata (about 4.5x the error)."""
    _, huge = release(counts_csv, tmp_path / "huge", mechanism="md", sets=20, epsilon=400.0)
    _, tiny = release(counts_csv, tmp_path / "tiny", mechanism="md", sets=20, epsilon=0.2)
    assert 0.75 < rmse_ratio(huge) < 1.33
    assert rmse_ratio(tiny) > 2.5
    assert "within the range of the 20 no-privacy tables" in (huge / "utility.md").read_text()
    assert "outside the range of the 20 no-privacy tables" in (tiny / "utility.md").read_text()


@pytest.mark.slow
def test_sets_no_better_than_the_prior_alone_get_a_word(counts_csv, tmp_path):
    """Issue #26 (6): sets further from the truth than the prior alone, with no word. At 0.01
    per set md's sets are no closer to the true strata rates than its own prior (the total
    spread evenly), and the report says so; at 20 per set they are, and it says nothing."""
    _, tiny = release(counts_csv, tmp_path / "tiny", mechanism="md", sets=20, epsilon=0.2)
    _, huge = release(counts_csv, tmp_path / "huge", mechanism="md", sets=20, epsilon=400.0)
    words = "no better than the prior alone"
    assert words in (tiny / "utility.md").read_text()
    assert words not in (huge / "utility.md").read_text()


@pytest.mark.slow
def test_truncated_reports_the_share_of_true_counts_outside_the_bounds(tmp_path):
    """Counts far above their prior fall above U: the report's share is the one computed
    here from the published bounds (rows of hyperparameters in key order)."""
    frame = table()
    frame.loc[[3, 17, 30], "prior_rate"] /= 20  # a prior far below these strata's rates
    frame.to_csv(tmp_path / "c.csv", index=False)
    out = tmp_path / "release"
    _, private = release(tmp_path / "c.csv", out, mechanism="truncated")
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    counts = frame.sort_values(list(KEYS))["count"].to_numpy()
    assert np.array_equal(hyper[list(KEYS)].to_numpy(), frame.sort_values(list(KEYS))[list(KEYS)])
    outside = (counts < hyper["lower"].to_numpy()) | (counts > hyper["upper"].to_numpy())
    assert outside.sum() >= 3  # the three raised counts at least
    report = pd.read_csv(private / "utility.csv", keep_default_na=False)
    share = float(report.loc[report["measure"] == "outside_bounds", "truth"].iloc[0])
    assert share == pytest.approx(outside.mean())
    text = (private / "utility.md").read_text()
    assert f"{outside.sum()} of {len(frame)} strata" in text


# --- the library function -------------------------------------------------------------------
def test_utility_report_counts_directly():
    """Totals per key and per table are the sums of the tables; every reference table
    keeps the total; without an area there is no rank correlation."""
    from dpcounts.privacy.calibrate import calibrate

    frame = table().sort_values(list(KEYS)).reset_index(drop=True)
    y = frame["count"].to_numpy()
    cal = calibrate("md", 1.0, int(y.sum()), frame["population"], None, method="certified")
    rng = np.random.default_rng(3)
    synthetic = rng.multinomial(y.sum(), np.full(y.size, 1 / y.size), size=3)
    report = utility_report(frame[list(KEYS)], y, frame["population"], synthetic, cal,
                            np.random.default_rng(4))  # fmt: skip
    assert report.reference_tables == REFERENCE_MIN_TABLES and report.outside is None
    assert report.rank_correlation is None
    for totals in report.totals:
        codes = pd.factorize(frame[totals.key], sort=True)[0]
        assert np.array_equal(totals.truth, np.bincount(codes, weights=y))
        assert np.array_equal(totals.synthetic[1], np.bincount(codes, weights=synthetic[1]))
        assert np.all(totals.reference.sum(axis=1) == y.sum())
    rates = synthetic / frame["population"].to_numpy() - y / frame["population"].to_numpy()
    np.testing.assert_allclose(report.rmse.synthetic, np.sqrt((rates**2).mean(axis=1)) * 1e5)
    with pytest.raises(ValueError, match=r"expected \(sets, 40\)"):
        utility_report(frame[list(KEYS)], y, frame["population"], synthetic[:, :5], cal,
                       np.random.default_rng(4))  # fmt: skip


def test_a_mostly_empty_tables_reference_is_scored_at_its_events_as_in_full():
    """A national table is mostly empty: its no-privacy tables are zero where it is, and
    the report scores them at its events only; every total and rank correlation is the
    one of the whole tables to the bit, the rMSE to rounding."""
    from dpcounts.privacy.calibrate import calibrate
    from dpcounts.sampling.reference import reference_batches
    from dpcounts.studies.stage.measures import MEASURES, Measures
    from dpcounts.studies.stage.rates import GroupRates

    frame = table().sort_values(list(KEYS)).reset_index(drop=True)
    rng = np.random.default_rng(5)
    y = frame["count"].to_numpy() * (rng.random(len(frame)) < 0.3)
    population = frame["population"].to_numpy()
    cal = calibrate("md", 1.0, int(y.sum()), population, None, method="certified")
    synthetic = rng.multinomial(y.sum(), np.full(y.size, 1 / y.size), size=2)
    report = utility_report(frame[list(KEYS)], y, population, synthetic, cal,
                            np.random.default_rng(4), area="region")  # fmt: skip
    tables = np.vstack(list(reference_batches(y, report.reference_tables,
                                              np.random.default_rng(4))))  # fmt: skip
    codes, values = pd.factorize(frame["region"], sort=True)
    rates = GroupRates.partition(population, codes, [f"area:{v}" for v in values])
    whole = Measures(rates, population, tuple(values), MEASURES).values(tables, y)
    np.testing.assert_array_equal(report.rank_correlation.reference, whole["rank_correlation"])
    np.testing.assert_allclose(report.rmse.reference, whole["rmse"], rtol=1e-13)
    for totals in report.totals:
        codes = pd.factorize(frame[totals.key], sort=True)[0]
        expected = np.stack([np.bincount(codes, weights=t, minlength=totals.groups.size)
                             for t in tables])  # fmt: skip
        np.testing.assert_array_equal(totals.reference, expected)


def test_the_area_rule_and_the_reference_size():
    keys = pd.DataFrame({"sex": ["f", "m"] * 6, "age": list(range(6)) * 2,
                         "county": [f"{k:05d}" for k in range(12)]})  # fmt: skip
    assert area_column(keys, "county", "sex")[0] == "county"  # FIPS first
    assert area_column(keys, None, "county")[0] == "county"
    assert area_column(keys, None, None)[0] == "county"  # the most values (12 against 6)
    assert area_column(keys[["sex", "age"]], None, None)[0] == "age"  # more than 5 values
    nested = pd.DataFrame({"pref": [f"p{k // 40}" for k in range(240)],
                           "town": [f"t{k}" for k in range(240)]})  # fmt: skip
    assert area_column(nested, None, None)[0] == "town"  # the finer of nested keys
    assert AREA_MIN_VALUES == 5
    name, why = area_column(keys, None, "sex")
    assert name is None and "fewer than 3 values" in why
    assert area_column(keys[["sex"]], None, None)[0] is None
    assert reference_tables(4, 100) == REFERENCE_MIN_TABLES
    assert reference_tables(200, 100) == 200  # one per set
    assert reference_tables(200, 1_000_000) == REFERENCE_MIN_TABLES  # capped for big tables


# --- a real public table ------------------------------------------------------------------
@pytest.mark.slow
def test_a_real_table_ranks_its_counties(tmp_path):
    """NCOVR homicides (public) of Pennsylvania's 67 counties by decade: the FIPS column
    is the area; the sets' rank correlation and the reference's are reported."""
    frame = pd.read_csv(NCOVR, dtype={"fips": str})
    frame = frame[frame["state"] == "PA"].drop(columns=["state", "south"])
    frame = frame.rename(columns={"homicides": "count", "person_years": "population"})
    frame["prior_rate"] = frame["count"].sum() / frame["population"].sum()
    frame.to_csv(tmp_path / "pa.csv", index=False)
    _, private = release(tmp_path / "pa.csv", tmp_path / "release", keys=("fips", "decade"),
                         epsilon=8.0)  # fmt: skip
    report = pd.read_csv(private / "utility.csv", keep_default_na=False, dtype={"group": str})
    rank = report[report["measure"] == "rank_correlation"].iloc[0]
    assert rank["key"] == "fips"
    assert 0 < float(rank["synthetic_median"]) <= 1 and 0 < float(rank["reference_median"]) <= 1
    totals = report[(report["measure"] == "total") & (report["key"] == "fips")]
    assert len(totals) == 67
    text = (private / "utility.md").read_text()
    assert "the county FIPS column" in text and "and 37 more" in text


# --- one name per number (issue #52, item 5) ------------------------------------------------
REPO = Path(__file__).resolve().parents[1]
PENNSYLVANIA = REPO / "data" / "pennsylvania_counties.parquet"
STANDARD = REPO / "data" / "us_standard_population_2000.csv"


def age_study_release(tmp_path):
    """A release of an age-adjusted study with a geometry (Pennsylvania's 67 counties x 4
    age bands, rates rising with age, older counties elsewhere), built from its entry as
    ``synthesize --study`` builds it; returns its private folder."""
    import yaml

    from dpcounts.release.study_source import load_study

    rng = np.random.default_rng(11)
    counties = sorted(pd.read_parquet(PENNSYLVANIA, columns=["county"])["county"])
    ages = {"Under.40": 2e-5, "40.59": 2e-4, "60.69": 8e-4, "70+": 2e-3}
    frame = pd.MultiIndex.from_product([counties, list(ages)], names=["county", "age"])
    frame = frame.to_frame(index=False)
    old = rng.uniform(0.3, 3.0, len(counties))  # each county's share of older people
    share = np.where(frame["age"].isin(["60.69", "70+"]), old[frame.index // 4], 1.0)
    frame["population"] = (rng.integers(20_000, 80_000, len(frame)) * share).astype(int)
    frame["cases"] = rng.poisson(frame["population"] * frame["age"].map(ages))
    frame.to_csv(tmp_path / "ages.csv", index=False)
    entry = {
        "table": str(tmp_path / "ages.csv"), "keys": ["county", "age"], "count": "cases",
        "population": "population", "area": "county",
        "geometry": {"path": str(PENNSYLVANIA), "key": "county"},
        "age": {"column": "age", "standard_population": str(STANDARD)},
        "prior": {"source": "sanitised", "by": ["age"], "epsilon": 0.2},
        "arms": {"pg": ["certified"]}, "epsilons": [1.0], "sets": 2,
    }  # fmt: skip
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"studies": {"ages": entry}}))
    study = load_study(f"{tmp_path / 'study.yaml'}:ages")
    request = ReleaseRequest(
        out=tmp_path / "release", epsilon=4.0, sets=2, mechanism="pg", method="certified",
        dataset="ages", strata="cross-product", test_seed=1, progress=False,
        **study.request_fields("pg"), study=study,
        release_without_guide=True,  # the study's guide, if any, is the test's own
    )  # fmt: skip
    info = build_release(request)
    return request.private_folder(info["seed_commitment"])


@pytest.mark.slow
def test_the_crude_and_the_age_adjusted_rank_correlations_are_named_apart(tmp_path, monkeypatch):
    """The report's top rows rank the areas' crude rates, the guide's section the study's
    age-adjusted ones: each row says which, in the words of the guide's measure title; and
    the summary points to the study's map it drew, with no "No map" beside it."""
    from dpcounts.release.report.utility import crude_rank_title
    from dpcounts.studies.stage.measures import MEASURES

    monkeypatch.chdir(REPO)  # a study is read from its workflow checkout
    private = age_study_release(tmp_path)
    text = (private / "utility.md").read_text()
    general, _ = text.split("## What the study's guide promised")
    title = crude_rank_title()
    assert title == "rank correlation of the crude area rates"
    assert (
        next(m.title for m in MEASURES if m.name == "rank_correlation")
        .lower()
        .replace("area rates", "crude area rates")
        == title
    )  # the guide's words, crude
    (row,) = [line for line in general.splitlines() if line.startswith("| rank correlation")]
    assert row.startswith("| rank correlation of the crude area rates (`county`) |")
    assert f"- **{title}**:" in general
    assert "age-adjusted" not in row
    assert "the true crude rates" in general.split("## Measures")[0]  # the verdict too

    assert (private / "utility_map.png").is_file()
    summary = (private / "summary.md").read_text()
    assert "No map" not in summary
    assert "](utility_map.png)" in summary


@pytest.mark.slow
def test_the_guides_section_names_its_rank_correlation_age_adjusted(tmp_path, monkeypatch):
    """The guide's section of the same report ranks the study's age-adjusted area rates,
    under the guide's title that says so (never a bare "area rates" beside the crude row)."""
    monkeypatch.chdir(REPO)
    text = (age_study_release(tmp_path) / "utility.md").read_text()
    _, guide = text.split("## What the study's guide promised")
    (line,) = [line for line in guide.splitlines() if "(`rank_correlation`)" in line]
    assert line.startswith("- **Rank correlation of the age-adjusted area rates** ("), line


@pytest.mark.slow
def test_a_release_without_a_map_says_why(counts_csv, tmp_path):
    _, private = release(counts_csv, tmp_path / "release")
    summary = (private / "summary.md").read_text()
    assert "No map: no key column of 5-digit county FIPS codes" in summary
    assert "utility_map.png" not in summary
