"""The steward's whole path on real tables from outside the repository (issue #33): from a
study config alone, run the study, pick an arm and an epsilon from its guide, release
with ``--study``, verify, and read the utility report measure by measure.

Three tables, each with a property the shipped ones lack, from Debian's R packages
(``apt-get download``, the pinned version, else the current one, into the data builder's
git-ignored download cache ``data/raw/``; a failed download fails the test):

* **shared populations**: ``r-cran-epi``'s ``DMepi`` (the Danish diabetes register
  1996-2016 by sex, single year of age and year: new diagnoses ``X`` and deaths ``D.nD``
  among people without diabetes, both over their person-years ``Y.nD``), as sex x age
  band x period x event, both events over the same person-years (``population_keys``);
* **single-year ages**: ``r-cran-epi``'s ``testisDK`` (testis cancer in Denmark by single
  year of age 0-89 and year 1943-1996), age-adjusted with ``bands: single-years``;
* **a non-US geometry**: ``r-cran-spdata``'s ``auckland`` shapefile (167 census area
  units of Auckland, New Zealand: infant deaths 1977-85 and the under-5 population of
  1981), whose shapefile declares no CRS, on a planar grid of its own.

Expected values are computed here from the raw files, never from the pipeline.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from matplotlib import image as mpimg
from workflow_helpers import (
    REPO,
    copy_project,
    dpcounts_cli,
    fetch_debian,
    filled_definition,
    run_studies,
)

from dpcounts.release.design import Design
from dpcounts.release.request import Budget
from dpcounts.studies.stage.guide import VERDICTS
from dpcounts.studies.stage.measures import overall_rate, study_measures

RAW = (REPO / "data" / "raw").resolve()  # the data builder's download cache, git-ignored
EPI = ("r-cran-epi", "2.47-1", "usr/lib/R/site-library/Epi/data")
SPDATA = ("r-cran-spdata", "2.2.1-1", "usr/lib/R/site-library/spData/shapes")
STANDARD = "data/us_standard_population_2000.csv"
#: The conclusions the report may draw for a measure (dpcounts.release.report.promise.Kept).
CONCLUSIONS = (
    "kept, as the guide promised",
    "not within the tolerance, but as one table varies",
    "NOT kept, though promised",
    "not promised at this epsilon",
    "not promised",
)
PER = 1e5


def read_rda(name: str) -> pd.DataFrame:
    import rdata

    package, version, folder = EPI
    path = fetch_debian(package, version, RAW) / folder / f"{name}.rda"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Unknown encoding. Assumed ASCII."
        return pd.DataFrame(rdata.read_rda(path)[name])


# --- the steward's path, shared by the three tables -----------------------------------------
def pick(guide: pd.DataFrame) -> tuple[str, float, list[str]]:
    """The arm and total epsilon a steward picks from guide.csv (docs/release.md): the arm
    that meets the most measures, at the grid's point where all of them are met; with the
    measures it promises."""
    met = guide[guide["verdict"] == "met"]
    assert not met.empty, guide[["arm", "measure", "verdict", "reason"]].to_string()
    counts = met.groupby("arm")["measure"].count()
    arm = counts.idxmax()
    mine = met[met["arm"] == arm]
    return arm, float(mine["epsilon"].max()), sorted(mine["measure"])


@pytest.fixture(scope="module")
def studied(tmp_path_factory) -> tuple[Path, float]:
    """The three studies, as one analyst's config, run once (one Snakemake run): the
    work folder and the wall time."""
    work = copy_project(tmp_path_factory.mktemp("studies"))
    mine = work / "mine"
    mine.mkdir()
    dm_table(read_rda("DMepi")).to_csv(mine / "dm.csv", index=False)
    analyst_testis_table(read_rda("testisDK")).to_csv(mine / "testis.csv", index=False)
    auckland_files(auckland(), mine)
    studies = {"dm": DM_STUDY, "testis": TESTIS_STUDY, "auckland": AUCKLAND_STUDY}
    return work, run_studies(work, studies, timeout=900)


def release(studied, home: Path, name: str, strata: str) -> dict:
    """Pick from the study's guide, release with --study, verify; return what each step
    left."""
    work, seconds = studied
    guide = pd.read_csv(work / "results/studies" / name / "guide.csv")
    arm, epsilon, promised = pick(guide)
    mechanism, method = arm.split("_")
    run = dpcounts_cli(work, home)
    released = run("synthesize", "--study", f"my_study.yaml:{name}", "--mechanism", mechanism,
                   "--method", method, "--epsilon", f"{epsilon:.6g}", "--strata", strata,
                   "--dataset", name, "--out", f"released_{name}")  # fmt: skip
    verified = run("verify", f"released_{name}")
    (utility,) = (home / "dpcounts" / "private").glob("*/utility.md")
    return dict(work=work, guide=guide, arm=arm, epsilon=epsilon, promised=promised,
                released=released, verified=verified, utility=utility, seconds=seconds,
                text=utility.read_text())  # fmt: skip


def report_lines(text: str) -> dict[str, str]:
    """The study section of utility.md: measure name -> its line."""
    return {re.search(r"\(`([^`]+)`\)", line).group(1): line for line in text.splitlines()
            if line.startswith("- **") and "the guide:" in line}  # fmt: skip


def stated_overall_rate(text: str) -> float:
    """The overall rate utility.md states."""
    return float(re.search(r"the overall rate \(([\d,.e+]+)\)", text).group(1).replace(",", ""))


def with_errors(study: dict, *names: str) -> set[str]:
    """The measures of ``study``: the rMSE and the strata's relative error, each key's
    margin (issue #52), and ``names``."""
    return {"rmse", "relative_error", *(f"margin:{key}" for key in study["keys"]), *names}


def check_steward(out: dict, measures: set[str], truths: dict[str, float]) -> None:
    """What every release from a study must show a steward."""
    for step in ("released", "verified"):
        done = out[step]
        assert done.returncode == 0, f"{step}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stdout + done.stderr, step
    assert out["verified"].stdout.strip().splitlines()[-1].startswith("PASSED")
    guide = out["guide"]
    assert set(guide["measure"]) == measures and set(guide["verdict"]) <= set(VERDICTS)
    text = out["text"]
    assert f"arm `{out['arm']}`" in text and "Traceback" not in text
    lines = report_lines(text)
    assert set(lines) == measures, text  # every measure of the study
    mine = guide[guide["arm"] == out["arm"]].set_index("measure")
    for measure, line in lines.items():
        assert f"the guide: {mine.loc[measure, 'verdict_text']}" in line, line
        conclusion = re.search(r"against \S+%\): (.*)$", line).group(1)
        assert conclusion.startswith(CONCLUSIONS), line
        # promised exactly where the guide met it, at the epsilon picked from the guide
        assert conclusion.startswith("not promised") != (measure in out["promised"]), line
        if measure in truths:
            assert f"(truth {truths[measure]:.3g})" in line, (measure, line)
    print(f"the three studies took {out['seconds']:.0f} s (wall, not asserted: timing)")
    for log in (out["work"] / "logs").rglob("*.log"):
        assert "Traceback" not in log.read_text(errors="replace"), log


# --- 1. shared populations: DMepi, two events over the same person-years ----------------------
DM_PERIODS = {"1997-2001": range(1997, 2002), "2012-2016": range(2012, 2017)}


def dm_band(age: pd.Series) -> pd.Series:
    first = (age // 5 * 5).astype(int)
    return first.astype(str) + "-" + (first + 4).astype(str)


def dm_table(dm: pd.DataFrame) -> pd.DataFrame:
    """The analyst's table: sex x 5-year age band x period x event (diagnosis of diabetes,
    death without it), both events over the person-years without diabetes."""
    years = {year: period for period, span in DM_PERIODS.items() for year in span}
    dm = dm[dm["P"].isin(list(years))].assign(
        sex=dm["sex"].astype(str), age=dm_band(dm["A"]), period=dm["P"].map(years)
    )
    sums = dm.groupby(["sex", "age", "period"], as_index=False)[["X", "D.nD", "Y.nD"]].sum()
    parts = [
        sums.assign(event=event, events=sums[column].round().astype(int))
        for event, column in (("diagnosis", "X"), ("death", "D.nD"))
    ]
    table = pd.concat(parts, ignore_index=True).rename(columns={"Y.nD": "person_years"})
    return table[["sex", "age", "period", "event", "events", "person_years"]]


DM_STUDY = {
    "table": "mine/dm.csv",
    "keys": ["sex", "age", "period", "event"],
    "population_keys": ["sex", "age", "period"],
    "count": "events",
    "population": "person_years",
    "age": {"column": "age", "standard_population": STANDARD},
    "prior": {"source": "sanitised", "by": ["event", "age"], "epsilon": 0.1},
    "arms": {"pg": ["certified"], "truncated": ["certified"]},
    "epsilons": [2.0, 8.0, 20.0],
    "sets": 10,
    "sets_per_job": 10,
    "epsilons_per_job": 3,
    "batch": 10,
    "disparities": [
        {
            "name": "diagnosis_men_vs_women",
            "label": "Diabetes diagnoses, men / women",
            "where": {"event": "diagnosis"},
            "numerator": {"sex": "M"},
            "denominator": {"sex": "F"},
        },
        {
            "name": "deaths_later_vs_earlier",
            "label": "Deaths without diabetes, 2012-16 / 1997-2001",
            "where": {"event": "death"},
            "numerator": {"period": "2012-2016"},
            "denominator": {"period": "1997-2001"},
        },
    ],
}


@pytest.fixture(scope="module")
def dm_release(studied, tmp_path_factory):
    return release(studied, tmp_path_factory.mktemp("dm_home"), "dm", "cross-product")


@pytest.mark.process  # fetches and unpacks the Debian package
def test_dmepi_is_what_its_source_says():
    """The columns: sex, age A and period P in single years, diagnoses X and deaths D.nD
    of people without diabetes over their person-years Y.nD, all whole counts."""
    dm = read_rda("DMepi")
    assert {"sex", "A", "P", "X", "D.nD", "Y.nD"} <= set(dm.columns)
    assert len(dm) == 2 * 100 * 21 and not dm.duplicated(["sex", "A", "P"]).any()
    assert (dm[["X", "D.nD"]] % 1 == 0).all().all() and (dm["Y.nD"] > 0).all()
    table = dm_table(dm)
    assert len(table) == 2 * 20 * 2 * 2 and (table["events"] <= table["person_years"]).all()


@pytest.mark.slow
@pytest.mark.process
def test_dmepi_released_with_shared_person_years(dm_release):
    dm = read_rda("DMepi")
    dm = dm[dm["P"].isin([y for span in DM_PERIODS.values() for y in span])]
    events = dm["X"].sum() + dm["D.nD"].sum()
    out = dm_release
    measures = with_errors(DM_STUDY, *(f"disparity:{d['name']}" for d in DM_STUDY["disparities"]))
    check_steward(out, measures, {})
    # the overall rate counts each person-year once, whatever the events sharing it
    overall = events / dm["Y.nD"].sum() * PER
    assert stated_overall_rate(out["text"]) == pytest.approx(overall, rel=5e-3)
    assert stated_overall_rate(out["text"]) != pytest.approx(
        events / dm["Y.nD"].sum() / 2 * PER, rel=0.1
    )
    # the study names no area: the report ranks none (not the key with the most values)
    assert "no area: study `dm` names none" in out["text"] and "rank the" not in out["text"]
    table = json.loads((out["work"] / "results/studies/dm/table.json").read_text())
    assert table["strata"] == 160 and table["total"] == events


# --- 2. single-year ages: testisDK, a later period against an earlier one --------------------
TESTIS_PERIODS = {"1955-59": range(1955, 1960), "1990-94": range(1990, 1995)}


def analyst_testis_table(testis: pd.DataFrame) -> pd.DataFrame:
    """The analyst's table: single year of age x period (two five-year periods, their
    years summed), cases over person-years."""
    years = {year: period for period, span in TESTIS_PERIODS.items() for year in span}
    rows = testis[testis["P"].isin(list(years))].assign(period=testis["P"].map(years))
    rows = rows.groupby([rows["A"].astype(int), "period"], as_index=False)[["D", "Y"]].sum()
    return pd.DataFrame({"age": rows["A"], "period": rows["period"],
                         "cases": rows["D"].astype(int), "person_years": rows["Y"]})  # fmt: skip


TESTIS_STUDY = {
    "table": "mine/testis.csv",
    "keys": ["age", "period"],
    "count": "cases",
    "population": "person_years",
    "age": {"column": "age", "standard_population": STANDARD, "bands": "single-years"},
    "prior": {"source": "overall"},
    "arms": {"pg": ["certified"], "truncated": ["certified"]},
    "epsilons": [2.0, 8.0, 20.0],
    # 40: at 20 the guide judged its ratios by what they keep of the departure from parity
    # (issue #52) said "more datasets would decide: about 21", nothing met to release at
    "sets": 40,
    "sets_per_job": 40,
    "epsilons_per_job": 3,
    "batch": 20,
    "disparities": [
        {
            "name": "later_vs_earlier",
            "label": "1990-94 / 1955-59",
            "numerator": {"period": "1990-94"},
            "denominator": {"period": "1955-59"},
        },
        {
            "name": "young_vs_older",
            "label": "ages 20-34 / 35-54, 1990-94",
            "where": {"period": "1990-94"},
            "numerator": {"age": list(range(20, 35))},
            "denominator": {"age": list(range(35, 55))},
        },
    ],
}


@pytest.fixture(scope="module")
def testis_release(studied, tmp_path_factory):
    return release(studied, tmp_path_factory.mktemp("testis_home"), "testis", "cross-product")


def adjusted(cases: pd.Series, years: pd.Series, ages: pd.Series, weights: pd.Series) -> float:
    """The directly adjusted rate per 100,000 over single years (85+ pooled)."""
    band = ages.clip(upper=85)
    by = pd.DataFrame({"d": cases.to_numpy(), "y": years.to_numpy(), "b": band.to_numpy()})
    by = by.groupby("b")[["d", "y"]].sum()
    w = weights.loc[by.index] / weights.loc[by.index].sum()
    return float((by["d"] / by["y"] * w).sum() * PER)


def single_year_weights() -> pd.Series:
    """The US 2000 standard spread evenly over single years of age, 85+ as one group."""
    std = pd.read_csv(REPO / STANDARD)
    out = {}
    for row in std.itertuples(index=False):
        if pd.isna(row.age_end):
            out[int(row.age_start)] = row.population
        else:
            for age in range(int(row.age_start), int(row.age_end) + 1):
                out[age] = row.population / (row.age_end - row.age_start + 1)
    return pd.Series(out)


@pytest.mark.process  # fetches and unpacks the Debian package
def test_testisdk_is_what_its_source_says():
    testis = read_rda("testisDK")
    assert list(testis.columns) == ["A", "P", "D", "Y"]
    assert set(testis["A"]) == set(range(90)) and set(testis["P"]) == set(range(1943, 1997))
    assert (testis["D"] % 1 == 0).all() and (testis["Y"] > 0).all()
    assert len(analyst_testis_table(testis)) == 90 * 2


@pytest.mark.slow
@pytest.mark.process
def test_testisdk_released_age_adjusted_by_single_years(testis_release):
    testis = analyst_testis_table(read_rda("testisDK"))
    weights = single_year_weights()
    later, earlier = (testis[testis["period"] == p] for p in ("1990-94", "1955-59"))
    ratio = adjusted(later["cases"], later["person_years"], later["age"], weights) / adjusted(
        earlier["cases"], earlier["person_years"], earlier["age"], weights
    )
    young, older = later[later["age"].between(20, 34)], later[later["age"].between(35, 54)]
    ages = adjusted(young["cases"], young["person_years"], young["age"], weights) / adjusted(
        older["cases"], older["person_years"], older["age"], weights
    )
    measures = with_errors(TESTIS_STUDY, "disparity:later_vs_earlier", "disparity:young_vs_older")
    truths = {"disparity:later_vs_earlier": ratio, "disparity:young_vs_older": ages}
    check_steward(testis_release, measures, truths)
    overall = testis["cases"].sum() / testis["person_years"].sum() * PER
    assert stated_overall_rate(testis_release["text"]) == pytest.approx(overall, rel=5e-3)


# --- 3. a non-US geometry without a CRS: Auckland's census area units ------------------------
def auckland() -> gpd.GeoDataFrame:
    package, version, folder = SPDATA
    return gpd.read_file(fetch_debian(package, version, RAW) / folder / "auckland.shp")


def auckland_files(shapes: gpd.GeoDataFrame, mine: Path) -> pd.DataFrame:
    """The analyst's files: the shapefile with a code per area unit (it has none: its
    row number, 1-167), still without a CRS, and the table by area unit, east or west of
    the median easting as a public attribute."""
    mine.mkdir(parents=True, exist_ok=True)
    shapes = shapes.assign(unit=np.arange(1, len(shapes) + 1))
    shapes.to_file(mine / "auckland.shp")
    east = np.where(shapes["Easting"] > shapes["Easting"].median(), "east", "west")
    table = pd.DataFrame({"unit": shapes["unit"], "side": east,
                          "deaths": shapes["M77_85"].astype(int),
                          "under5": shapes["Und5_81"].astype(int)})  # fmt: skip
    table.to_csv(mine / "auckland.csv", index=False)
    return table


AUCKLAND_STUDY = {
    "table": "mine/auckland.csv",
    "keys": ["unit"],
    "count": "deaths",
    "population": "under5",
    "attributes": ["side"],
    "area": "unit",
    "geometry": {"path": "mine/auckland.shp", "key": "unit"},
    "prior": {"source": "overall"},
    "arms": {"pg": ["certified"], "truncated": ["certified"]},
    # a true 1.17 east / west, 1.21 with no privacy: 21% of its log departure off, lost at
    # the default 10% (ratios judged by what they keep of the departure from parity, issue
    # #52); at 60% (about 9% either side) kept from an epsilon above 8, where the median
    # has left the prior's side
    "epsilons": [0.5, 2.0, 8.0, 20.0],
    "map_epsilons": [2.0],
    "guide": {"tolerance": 0.6},
    "sets": 10,
    "sets_per_job": 10,
    "epsilons_per_job": 4,
    "batch": 10,
    "disparities": [
        {
            "name": "east_vs_west",
            "label": "East / west of the median easting",
            "numerator": {"side": "east"},
            "denominator": {"side": "west"},
        },
    ],
}


@pytest.fixture(scope="module")
def auckland_release(studied, tmp_path_factory):
    table = pd.read_csv(studied[0] / "mine" / "auckland.csv")
    return table, release(studied, tmp_path_factory.mktemp("auckland_home"), "auckland", "input")


@pytest.mark.process  # fetches and unpacks the Debian package
def test_auckland_is_what_its_source_says():
    shapes = auckland()
    assert len(shapes) == 167 and shapes.crs is None
    assert {"M77_85", "Und5_81", "Easting", "Northing"} <= set(shapes.columns)
    assert (shapes["M77_85"] <= shapes["Und5_81"]).all()
    # planar: y reaches past 90, so not latitudes; north is up (y grows with Northing)
    assert shapes.total_bounds[3] > 90
    assert np.corrcoef(shapes.centroid.y, shapes["Northing"])[0, 1] > 0.99


@pytest.mark.slow
@pytest.mark.process
def test_auckland_released_on_its_own_map(auckland_release):
    table, out = auckland_release
    east = table["side"] == "east"
    ratio = (table.loc[east, "deaths"].sum() / table.loc[east, "under5"].sum()) / (
        table.loc[~east, "deaths"].sum() / table.loc[~east, "under5"].sum()
    )
    check_steward(out, with_errors(AUCKLAND_STUDY, "rank_correlation", "disparity:east_vs_west"),
                  {"disparity:east_vs_west": ratio, "rank_correlation": 1.0})  # fmt: skip
    overall = table["deaths"].sum() / table["under5"].sum() * PER
    assert stated_overall_rate(out["text"]) == pytest.approx(overall, rel=5e-3)
    figure = out["utility"].parent / "utility_map.png"
    assert "(utility_map.png)" in out["text"]
    image = mpimg.imread(figure)
    assert image.shape[0] > 300 and image.shape[1] > 500


# --- the fixes these tables led to, in small ---------------------------------------------------
def test_the_overall_rate_counts_a_shared_population_once():
    """Two events over the same person-years: the overall rate is all events over the
    person-years counted once (the guide's and the report's scale of an error), as the
    study's own rates count them."""
    strata = pd.DataFrame({"sex": ["F", "F", "M", "M"], "event": ["dx", "death"] * 2,
                           "events": [3, 5, 4, 8], "py": [1e3, 1e3, 2e3, 2e3]})  # fmt: skip
    spec = {"table": "t.csv", "keys": ["sex", "event"], "count": "events", "population": "py",
            "population_keys": ["sex"], "arms": {"pg": ["certified"]}}  # fmt: skip
    definition = filled_definition("shared", spec)
    assert overall_rate(definition, strata) == pytest.approx(20 / 3000 * PER)
    measures = study_measures(definition, strata)
    assert measures.rates.rates(strata["events"].to_numpy())[-1] == pytest.approx(20 / 3000 * PER)
    alone = filled_definition("alone", {**spec, "population_keys": None})
    assert overall_rate(alone, strata) == pytest.approx(20 / 6000 * PER)


def test_a_refused_sampler_target_names_the_epsilon_and_delta_that_work():
    """The release at the top of a study's grid: the refusal says the largest epsilon at
    this delta, and the delta this epsilon needs, or that no delta can."""
    floor = 2.75e-22
    design = Design("pg", "certified", Budget(64.1, 1e-12, 0.1, 1))
    assert design.tv_target < 2 * floor
    text = design.tv_fix(floor)
    assert "No delta below 1 allows epsilon 64" in text
    assert "at most 21.3 (a total --epsilon of 21.4, with the prior's 0.1)" in text
    text = Design("pg", "certified", Budget(24.1, 1e-12, 0.1, 1)).tv_fix(floor)
    assert text.startswith("Use a smaller epsilon") and "--delta 1.5e-11 or more" in text
    assert "--sets" not in text
    text = Design("pg", "certified", Budget(48.1, 1e-12, 0.1, 2)).tv_fix(floor)
    assert "with the prior's 0.1 and 2 sets" in text and "fewer --sets" in text
