"""The study stage on real public-health tables that are not in the repository.

The PyPI sdist ``pysal==1.14.4``, which ``make data`` already fetches for NCOVR's NAT
(``data/build/sources.py``), also holds:

* ``examples/sids2``: North Carolina's 100 counties, sudden infant deaths (SIDS) and live
  births in 1974-78 and 1979-84 (Cressie 1993), with a shapefile that declares no CRS;
* ``examples/stl``: homicides and person-years of the 78 counties around St Louis
  (Illinois and Missouri) in 1979-84, 1984-88 and 1988-93 (NCOVR), as a CSV whose
  geometry is a WKT column; two states share county names (Pike, Marion, ...).

Each test fetches the sdist with the project's own code into the data builder's
git-ignored download cache (``data/raw/``; a failed download fails the test), checks its
SHA-256 against ``data/README.md``, and does what an analyst would: a long table written
with pandas, a study config as docs/your-study.md shows, and
``snakemake --cores 2 --configfile my_study.yaml -- studies`` in a throw-away copy of the
project. Expected values are computed here from the raw files, never from the pipeline.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import sources  # the data builder's fetch code, data/build/ (pytest pythonpath)
from matplotlib import image as mpimg
from workflow_helpers import REPO, copy_project, filled_definition, run_study

from dpcounts.studies.stage.guide import VERDICTS
from dpcounts.studies.stage.table import StudyDataError, load_study_table

RAW = (REPO / "data" / "raw").resolve()  # the data builder's download cache, git-ignored
EXAMPLES = f"PySAL-{sources.PYSAL_VERSION}/pysal/examples"
#: Per 100,000, as the study reports rates.
PER = 1e5


def recorded_sha256() -> str:
    """The sdist's SHA-256 as ``make data`` recorded it in data/README.md."""
    text = (REPO / "data" / "README.md").read_text()
    sums = [re.search(r"`([0-9a-f]{64})`", row) for row in text.splitlines()
            if f"pysal=={sources.PYSAL_VERSION}" in row]  # fmt: skip
    found = [m.group(1) for m in sums if m]
    assert len(found) == 1, "data/README.md records one SHA-256 of the pysal sdist"
    return found[0]


@pytest.fixture(scope="module")
def sdist() -> Path:
    RAW.mkdir(parents=True, exist_ok=True)
    path = sources.fetch_pysal(RAW)  # pip download; raises (test fails) when it cannot
    assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded_sha256()
    return path


def extract(sdist: Path, example: str, dest: Path) -> Path:
    """The files of ``examples/<example>/`` into ``dest`` (flat), as an analyst unpacks them."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers()
                   if m.isfile() and m.name.startswith(f"{EXAMPLES}/{example}/")]  # fmt: skip
        assert members, f"{example} is not in {sdist.name}"
        for member in members:
            (dest / Path(member.name).name).write_bytes(tar.extractfile(member).read())
    return dest


def check_run(work: Path, name: str, study: dict, expected: dict) -> dict:
    """What every study run must show, with ``expected``: truth per measure (``rmse``,
    ``rank_correlation``, ``disparity:*``) and ``areas`` (true rate per area)."""
    results, figures = work / "results/studies" / name, work / "figures/studies" / name
    arms = {f"{m}_{method}" for m, methods in study["arms"].items() for method in methods}
    # the strata's relative error and each key's margin (issue #52): a truth of 0
    errors = {"relative_error", *(f"margin:{key}" for key in study["keys"])}
    expected = {**dict.fromkeys(errors, 0.0), **expected}
    measures = {m for m in expected if m != "areas"}
    epsilons = sorted({*study["epsilons"], *study.get("map_epsilons", [])})

    # the guide: one row per arm x measure, a verdict and a reason each; a met epsilon is
    # one of the grid plus the prior's budget
    guide = pd.read_csv(results / "guide.csv")
    assert len(guide) == len(arms) * len(measures)
    assert set(zip(guide["arm"], guide["measure"], strict=True)) == {
        (a, m) for a in arms for m in measures
    }
    assert set(guide["verdict"]) <= set(VERDICTS) and guide["reason"].str.len().gt(20).all()
    met = guide[guide["verdict"] == "met"]
    assert (met["epsilon"] - met["epsilon_prior"]).isin(epsilons).all()
    assert guide.loc[guide["verdict"] != "met", "epsilon"].isna().all()

    # the summary: the truth of every measure as computed here from the raw file
    summary = pd.read_parquet(results / "summary.parquet")
    draws = summary[summary["metric"].isin(measures)]
    assert set(draws["arm"]) == arms
    assert sorted(draws["epsilon"].unique()) == pytest.approx(epsilons)
    for measure in measures:
        truth = draws.loc[draws["metric"] == measure, "truth"].to_numpy()
        assert truth == pytest.approx(expected[measure], rel=1e-9, abs=1e-12), measure
    assert (draws["lower"] <= draws["median"]).all() and (draws["median"] <= draws["upper"]).all()
    rank = draws[draws["metric"] == "rank_correlation"]
    assert rank[["lower", "upper"]].abs().le(1 + 1e-12).all().all()
    rmse = draws[draws["metric"] == "rmse"]
    assert (rmse["lower"] > 0).all()
    disparities = draws[draws["metric"].str.startswith("disparity:")]
    assert np.isfinite(disparities["median"]).all() and (disparities["median"] > 0).all()
    share = summary[summary["metric"] == "outside_bounds_share"]
    assert share["median"].between(0, 1).all()

    # the guide's disparity rows follow from the summary: met exactly where, from its
    # epsilon on, the median's confidence interval lies within 10% of the reference
    for row in guide.itertuples(index=False):
        arm, measure = row.arm, row.measure
        judged = ("met", "more_sets", "shape_floor", "truncation_stalls", "beyond_grid")
        if not measure.startswith("disparity:") or row.verdict not in judged:
            continue
        rows = disparities[(disparities["arm"] == arm) & (disparities["metric"] == measure)]
        rows = rows.sort_values("epsilon")
        ref = rows["reference"].to_numpy()
        within = ((rows["median_lower"] / ref - 1).abs() <= 0.1) & (
            (rows["median_upper"] / ref - 1).abs() <= 0.1
        )
        held = [e for k, e in enumerate(rows["epsilon"]) if within.to_numpy()[k:].all()]
        if row.verdict == "met":
            assert row.epsilon == pytest.approx(min(held) + row.epsilon_prior)
        else:
            assert not held

    # the true area rates behind the maps
    area_rates = pd.read_parquet(results / "area_rates.parquet")
    truth = area_rates[area_rates["arm"] == "truth"].set_index("area")["rate"]
    want = expected["areas"]
    assert sorted(truth.index) == sorted(want.index.astype(str))
    assert truth.to_numpy() == pytest.approx(want.loc[truth.index].to_numpy(), rel=1e-9)
    mapped = area_rates[area_rates["arm"].isin(arms)]
    assert set(mapped["epsilon"]) == set(study["map_epsilons"])
    assert (mapped.groupby(["arm", "epsilon"]).size() == len(want)).all()
    assert (mapped["rate"] >= 0).all()

    # the figures exist and are images of a reasonable size
    for stem in ("measures", "guide", "maps"):
        for suffix in ("png", "pdf"):
            assert (figures / f"{stem}.{suffix}").stat().st_size > 1000
        image = mpimg.imread(figures / f"{stem}.png")
        assert image.shape[0] > 300 and image.shape[1] > 500
    return {"summary": summary, "guide": guide}


# --- North Carolina SIDS: county x period, a shapefile without a CRS ------------------------
def sids_long_table(shapefile: Path) -> pd.DataFrame:
    """The analyst's table: one row per county and period, SIDS deaths over live births."""
    counties = gpd.read_file(shapefile)
    periods = {"1974-78": ("SID74", "BIR74", "NWBIR74"), "1979-84": ("SID79", "BIR79", "NWBIR79")}
    parts = []
    for period, (deaths, births, nonwhite) in periods.items():
        parts.append(pd.DataFrame({
            "fips": counties["FIPS"], "county": counties["NAME"], "period": period,
            "sids": counties[deaths], "births": counties[births],
            "nonwhite_share": counties[nonwhite] / counties[births],
        }))  # fmt: skip
    table = pd.concat(parts, ignore_index=True)
    median = table["nonwhite_share"].median()
    table["nonwhite"] = np.where(table["nonwhite_share"] >= median, "high", "low")
    return table.drop(columns="nonwhite_share")


SIDS_STUDY = {
    "table": "mine/sids.csv",
    "keys": ["fips", "period"],
    "count": "sids",
    "population": "births",
    "attributes": ["county", "nonwhite"],
    "area": "fips",
    "geometry": {"path": "mine/sids2/sids2.shp", "key": "FIPS"},
    "prior": {"source": "sanitised", "by": ["period"], "epsilon": 0.1},
    "arms": {"md": ["paper"], "truncated": ["certified"]},
    "epsilons": [0.1, 10.0],
    "map_epsilons": [1.0],
    "sets": 5,
    "disparities": [
        {
            "name": "nonwhite_high_vs_low",
            "numerator": {"nonwhite": "high"},
            "denominator": {"nonwhite": "low"},
        },
        {
            "name": "later_vs_earlier",
            "numerator": {"period": "1979-84"},
            "denominator": {"period": "1974-78"},
        },
    ],
}


def sids_expected(dbf: pd.DataFrame) -> dict:
    """The truths, from the shapefile's own columns (not from the analyst's table)."""
    deaths = dbf["SID74"] + dbf["SID79"]
    births = dbf["BIR74"] + dbf["BIR79"]

    def rate(d, n):
        return d.sum() / n.sum()

    shares = pd.concat([dbf["NWBIR74"] / dbf["BIR74"], dbf["NWBIR79"] / dbf["BIR79"]])
    high74 = dbf["NWBIR74"] / dbf["BIR74"] >= shares.median()
    high79 = dbf["NWBIR79"] / dbf["BIR79"] >= shares.median()
    high = rate(pd.concat([dbf["SID74"][high74], dbf["SID79"][high79]]),
                pd.concat([dbf["BIR74"][high74], dbf["BIR79"][high79]]))  # fmt: skip
    low = rate(pd.concat([dbf["SID74"][~high74], dbf["SID79"][~high79]]),
               pd.concat([dbf["BIR74"][~high74], dbf["BIR79"][~high79]]))  # fmt: skip
    return {
        "rmse": 0.0,
        "rank_correlation": 1.0,
        "disparity:nonwhite_high_vs_low": high / low,
        "disparity:later_vs_earlier": rate(dbf["SID79"], dbf["BIR79"])
        / rate(dbf["SID74"], dbf["BIR74"]),
        "areas": pd.Series((deaths / births * PER).to_numpy(), index=dbf["FIPS"].astype(str)),
    }


def attributes(shapefile: Path) -> pd.DataFrame:
    return pd.DataFrame(gpd.read_file(shapefile).drop(columns="geometry"))


@pytest.fixture(scope="module")
def sids_folder(sdist, tmp_path_factory):
    return extract(sdist, "sids2", tmp_path_factory.mktemp("sids_raw"))


@pytest.fixture(scope="module")
def sids_run(sids_folder, tmp_path_factory):
    work = copy_project(tmp_path_factory.mktemp("sids"))
    shutil.copytree(sids_folder, work / "mine" / "sids2")
    sids_long_table(sids_folder / "sids2.shp").to_csv(work / "mine" / "sids.csv", index=False)
    seconds = run_study(work, "sids", SIDS_STUDY)
    return work, attributes(sids_folder / "sids2.shp"), seconds


@pytest.mark.slow
def test_the_sids_source_is_what_its_metadata_says(sids_folder):
    """The columns mean what sids2.html says: SIDR74/79 are SID/BIR per 1,000."""
    dbf = attributes(sids_folder / "sids2.shp")
    assert len(dbf) == 100 and dbf["FIPS"].is_unique
    for period in ("74", "79"):
        rate = dbf[f"SID{period}"] / dbf[f"BIR{period}"] * 1000
        assert rate.to_numpy() == pytest.approx(dbf[f"SIDR{period}"].to_numpy(), abs=1e-5)


@pytest.mark.slow
def test_sids_study_end_to_end(sids_run):
    work, dbf, seconds = sids_run
    out = check_run(work, "sids", SIDS_STUDY, sids_expected(dbf))
    summary = out["summary"]
    strata = pd.read_parquet(work / "results/studies/sids/strata.parquet")
    assert len(strata) == 200
    assert strata["sids"].sum() == dbf["SID74"].sum() + dbf["SID79"].sum()
    # MD keeps the ranking of the counties far better with 100 times the budget
    rank = summary[(summary["metric"] == "rank_correlation") & (summary["arm"] == "md_paper")]
    by_eps = rank.set_index("epsilon")["median"]
    assert by_eps[10.0] > by_eps[0.1] + 0.3
    print(f"the SIDS study took {seconds:.0f} s (wall, not asserted: timing)")


# --- St Louis homicides: three periods, rows selected, GeoJSON from WKT, outlines ----------
def stl_long_table(csv: Path) -> tuple[pd.DataFrame, gpd.GeoDataFrame]:
    """The analyst's table (county x period, homicides over person-years) and boundaries
    made from the CSV's WKT column (lon/lat, as stl_hom.html says)."""
    raw = pd.read_csv(csv, dtype={"FIPS": str})
    periods = {"1979-84": "7984", "1984-88": "8488", "1988-93": "8893"}
    table = pd.concat(
        [pd.DataFrame({"fips": raw["FIPS"], "state": raw["STATE_NAME"], "period": period,
                       "homicides": raw[f"HC{code}"], "person_years": raw[f"PO{code}"]})
         for period, code in periods.items()],
        ignore_index=True,
    )  # fmt: skip
    shapes = gpd.GeoDataFrame(
        raw[["FIPSNO", "NAME", "STATE_NAME"]],
        geometry=gpd.GeoSeries.from_wkt(raw["WKT"]),
        crs="EPSG:4326",
    )
    return table, shapes


STL_STUDY = {
    "table": "mine/stl.csv",
    "rows": {"period": ["1984-88", "1988-93"]},
    "keys": ["fips", "period"],
    "count": "homicides",
    "population": "person_years",
    "attributes": ["state"],
    "area": "fips",
    # an integer key in the GeoJSON, text codes in the table: joined as text
    "geometry": {"path": "mine/stl.geojson", "key": "FIPSNO", "outline": "STATE_NAME"},
    "prior": {"source": "overall"},
    "arms": {"pg": ["certified"], "truncated": ["certified"]},
    "epsilons": [0.5, 5.0],
    "map_epsilons": [5.0],
    "sets": 5,
    "disparities": [
        {
            "name": "missouri_vs_illinois",
            "numerator": {"state": "Missouri"},
            "denominator": {"state": "Illinois"},
        },
        {
            "name": "missouri_rise",
            "numerator": {"period": "1988-93"},
            "denominator": {"period": "1984-88"},
            "where": {"state": "Missouri"},
        },
    ],
}


def stl_expected(dbf: pd.DataFrame) -> dict:
    """The truths of the two selected periods, from the shapefile's attribute table."""
    deaths = dbf["HC8488"] + dbf["HC8893"]
    years = dbf["PO8488"] + dbf["PO8893"]
    mo = dbf["STATE_NAME"] == "Missouri"
    return {
        "rmse": 0.0,
        "rank_correlation": 1.0,
        "disparity:missouri_vs_illinois": (deaths[mo].sum() / years[mo].sum())
        / (deaths[~mo].sum() / years[~mo].sum()),
        "disparity:missouri_rise": (dbf["HC8893"][mo].sum() / dbf["PO8893"][mo].sum())
        / (dbf["HC8488"][mo].sum() / dbf["PO8488"][mo].sum()),
        "areas": pd.Series((deaths / years * PER).to_numpy(), index=dbf["FIPS"].astype(str)),
    }


@pytest.fixture(scope="module")
def stl_folder(sdist, tmp_path_factory):
    return extract(sdist, "stl", tmp_path_factory.mktemp("stl_raw"))


@pytest.fixture(scope="module")
def stl_run(stl_folder, tmp_path_factory):
    work = copy_project(tmp_path_factory.mktemp("stl"))
    table, shapes = stl_long_table(stl_folder / "stl_hom.csv")
    (work / "mine").mkdir()
    table.to_csv(work / "mine" / "stl.csv", index=False)
    shapes.to_file(work / "mine" / "stl.geojson", driver="GeoJSON")
    seconds = run_study(work, "stl", STL_STUDY)
    return work, attributes(stl_folder / "stl_hom.shp"), seconds


@pytest.mark.slow
def test_the_stl_csv_and_shapefile_agree(stl_folder):
    """The CSV the analyst uses holds the shapefile's counts, and HR = HC / PO x 100,000."""
    table, _ = stl_long_table(stl_folder / "stl_hom.csv")
    dbf = gpd.read_file(stl_folder / "stl_hom.shp").set_index("FIPS")
    for period, code in {"1979-84": "7984", "1984-88": "8488", "1988-93": "8893"}.items():
        rows = table[table["period"] == period].set_index("fips")
        assert (rows["homicides"] == dbf.loc[rows.index, f"HC{code}"]).all()
        rate = dbf[f"HC{code}"] / dbf[f"PO{code}"] * PER
        assert rate.to_numpy() == pytest.approx(dbf[f"HR{code}"].to_numpy(), abs=1e-5)


@pytest.mark.slow
def test_stl_study_end_to_end(stl_run):
    work, dbf, seconds = stl_run
    check_run(work, "stl", STL_STUDY, stl_expected(dbf))
    strata = pd.read_parquet(work / "results/studies/stl/strata.parquet")
    assert len(strata) == 2 * 78 and set(strata["period"]) == {"1984-88", "1988-93"}
    assert strata["homicides"].sum() == dbf["HC8488"].sum() + dbf["HC8893"].sum()
    print(f"the St Louis study took {seconds:.0f} s (wall, not asserted: timing)")


@pytest.mark.slow  # its fixture downloads and unpacks the package (about 14 s)
def test_stl_keyed_by_county_name_stops_naming_the_shared_names(stl_folder, tmp_path):
    """Counties of one name in both states (Pike, Marion, ...): keyed by name, the table
    has duplicate strata; mapped by name, the boundaries do. Both stop before any job."""
    table, shapes = stl_long_table(stl_folder / "stl_hom.csv")
    shared = sorted(set(shapes["NAME"][shapes["NAME"].duplicated()]))
    assert shared  # the real quirk this test is about
    table = table.merge(shapes[["FIPSNO", "NAME"]].assign(fips=shapes["FIPSNO"].astype(str)))
    table.drop(columns=["FIPSNO"]).rename(columns={"NAME": "county"}).to_csv(
        tmp_path / "stl.csv", index=False
    )
    shapes.to_file(tmp_path / "stl.geojson", driver="GeoJSON")
    entry = {**STL_STUDY, "table": "stl.csv", "sets_per_job": 5, "epsilons_per_job": 2,
             "geometry": {"path": "stl.geojson", "key": "NAME"}}  # fmt: skip

    by_name = {**entry, "keys": ["county", "period"], "area": "county", "attributes": ["state"]}
    with pytest.raises(ValueError, match="duplicate key") as error:
        load_study_table(filled_definition("stl", by_name, base=tmp_path))
    named = re.findall(r"county='([^']*)'", str(error.value))
    assert named and set(named) <= set(shared), named

    # keyed by state and name, the strata are unique, but a map by name is not
    both = {**by_name, "keys": ["state", "county", "period"], "attributes": []}
    with pytest.raises(StudyDataError, match="takes the same value on more than one") as error:
        load_study_table(filled_definition("stl", both, base=tmp_path))
    message = str(error.value)
    assert "studies.stl.geometry.key" in message and repr(shared[0]) in message
    assert "unique code such as FIPS" in message


@pytest.mark.slow
@pytest.mark.process
def test_sids_released_from_its_study_says_what_the_guide_promised(sids_run, tmp_path):
    """The steward's path on a real table from outside the repository: the study ran, and
    the release takes everything from its entry (a prior by period, attributes, the
    geometry's areas) and reports each of the study's measures against the guide."""
    work, dbf, _ = sids_run
    dpcounts = Path(sys.executable).parent / "dpcounts"
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "home"),
               DPCOUNTS_LEDGER=str(tmp_path / "ledger.jsonl"))  # fmt: skip
    release = subprocess.run(
        [str(dpcounts), "synthesize", "--study", "my_study.yaml:sids", "--mechanism",
         "truncated", "--epsilon", "10.1", "--strata", "cross-product", "--dataset",
         "nc-sids", "--out", "released", "--quiet"],
        cwd=work, capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert release.returncode == 0, release.stderr
    manifest = json.loads((work / "released" / "manifest.json").read_text())
    assert manifest["prior"]["kind"] == "sanitised" and manifest["prior"]["groups"] == ["period"]
    assert manifest["prior"]["epsilon"] == pytest.approx(0.1) and manifest["keys"] == [
        "fips",
        "period",
    ]
    (utility,) = (tmp_path / "home" / "dpcounts" / "private").glob("*/utility.md")
    text = utility.read_text()
    assert "arm `truncated_certified`" in text
    # the release on the study's own map (its shapefile declares no CRS)
    assert "(utility_map.png)" in text and (utility.parent / "utility_map.png").is_file()
    guide = pd.read_csv(work / "results/studies/sids/guide.csv")
    guide = guide[guide["arm"] == "truncated_certified"].set_index("measure")
    lines = {line.split("(`")[1].split("`)")[0]: line for line in text.splitlines()
             if line.startswith("- **") and "the guide:" in line}  # fmt: skip
    assert set(lines) == set(guide.index)  # every measure of the study, disparities too
    for measure, line in lines.items():
        assert f"the guide: {guide.loc[measure, 'verdict_text']}" in line
        truth = sids_expected(dbf).get(measure, 0.0)  # an error's (margins too): 0
        assert f"(truth {truth:.3g})" in line
    check = subprocess.run([str(dpcounts), "verify", "released"], cwd=work,
                           capture_output=True, text=True, env=env)  # fmt: skip
    assert check.returncode == 0, check.stdout
