"""A study's geometry is checked with its table, before any job: the key and outline
columns exist, one shape per area, and every area of the strata has a shape (or, with
``geometry.missing: allow``, some areas may have none)."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import box
from workflow_helpers import filled_definition

from dpcounts.studies.stage.table import StudyDataError, load_study_table

TRACTS = [f"{k:05d}" for k in range(1, 7)]


@pytest.fixture
def strata_csv(tmp_path):
    rng = np.random.default_rng(7)
    frame = pd.DataFrame([(t, p) for t in TRACTS for p in ("early", "late")],
                         columns=["tract", "period"])  # fmt: skip
    frame["pop"] = rng.integers(1000, 5000, len(frame))
    frame["deaths"] = rng.poisson(frame["pop"] * 0.004)
    frame.to_csv(tmp_path / "strata.csv", index=False)
    return tmp_path / "strata.csv"


def shapes(tracts=TRACTS, **columns) -> gpd.GeoDataFrame:
    frame = gpd.GeoDataFrame(
        {"code": list(tracts), "region": ["north"] * 3 + ["south"] * (len(tracts) - 3)},
        geometry=[box(k, 0, k + 1, 1) for k in range(len(tracts))],
        crs="EPSG:4326",
    )
    return frame.assign(**columns)


def definition(tmp_path, geometry: dict):
    spec = {"table": "strata.csv", "keys": ["tract", "period"], "count": "deaths",
            "population": "pop", "area": "tract", "arms": {"pg": ["certified"]},
            "epsilons": [1.0], "sets": 2, "sets_per_job": 2, "epsilons_per_job": 1,
            "geometry": geometry}  # fmt: skip
    return filled_definition("s", spec, base=tmp_path)


@pytest.mark.parametrize("suffix", [".parquet", ".geojson", ".gpkg"])
def test_a_geometry_whose_key_holds_the_areas_passes(strata_csv, tmp_path, suffix):
    path = tmp_path / f"areas{suffix}"
    frame = shapes()
    frame.to_parquet(path) if suffix == ".parquet" else frame.to_file(path)
    strata = load_study_table(definition(tmp_path, {"path": path.name, "key": "code",
                                                    "outline": "region"}))  # fmt: skip
    assert len(strata) == 12


@pytest.mark.parametrize(
    ("geometry", "frame", "expected"),
    [
        ({"path": "none.gpkg", "key": "code"}, None,
         "config key studies.s.geometry.path: none.gpkg not found"),
        ({"path": "areas.gpkg", "key": "fips"}, shapes(),
         "config key studies.s.geometry.key: no column 'fips' in areas.gpkg; columns are "
         "['code', 'region']"),
        ({"path": "areas.gpkg", "key": "code", "outline": "state"}, shapes(),
         "config key studies.s.geometry.outline: no column 'state'"),
        ({"path": "areas.gpkg", "key": "region"}, shapes(),
         "'region' takes the same value on more than one shape of areas.gpkg: 'north', "
         "'south'; expected one shape per area"),
        # codes that lost their leading zeros (read as numbers somewhere): nothing matches
        ({"path": "areas.gpkg", "key": "code"}, shapes([str(int(t)) for t in TRACTS]),
         "none of the areas of 'tract' ('00001', '00002',"),
    ],
)  # fmt: skip
def test_a_geometry_that_cannot_map_the_areas_stops_the_study(
    strata_csv, tmp_path, geometry, frame, expected
):
    if frame is not None:
        frame.to_file(tmp_path / "areas.gpkg")
    with pytest.raises(StudyDataError) as error:
        load_study_table(definition(tmp_path, geometry))
    assert expected in str(error.value).replace(str(tmp_path) + "/", "")


def test_codes_shifted_by_one_stop_the_study_naming_the_areas_without_a_shape(strata_csv, tmp_path):
    """Shapes coded 00002..00007 for tracts 00001..00006: five areas match, but each on
    its neighbour's polygon. The one area without a shape stops the study before any job,
    naming it, the key's values and the shape of no area."""
    shapes([f"{k:05d}" for k in range(2, 8)]).to_file(tmp_path / "areas.gpkg")
    with pytest.raises(StudyDataError) as error:
        load_study_table(definition(tmp_path, {"path": "areas.gpkg", "key": "code"}))
    message = str(error.value).replace(str(tmp_path) + "/", "")
    first, *rest = message.splitlines()
    assert first == ("config key studies.s.geometry.key: 1 of 6 areas of 'tract' have no "
                     "shape in areas.gpkg: '00001'")  # fmt: skip
    holds = "'code' of areas.gpkg holds '00002', '00003', '00004', '00005', '00006', '00007'"
    assert holds in message
    assert "1 shape(s) match no area: '00007'" in message
    assert "studies.s.geometry.missing: allow" in rest[-1]
    assert len(rest) == 3


def test_many_areas_without_a_shape_are_shown_eight_and_counted(tmp_path):
    tracts = [f"{k:05d}" for k in range(1, 13)]
    frame = pd.DataFrame({"tract": tracts, "period": "early", "pop": 1000, "deaths": 3})
    frame.to_csv(tmp_path / "strata.csv", index=False)
    shapes(tracts[:3]).to_file(tmp_path / "areas.gpkg")
    with pytest.raises(StudyDataError) as error:
        load_study_table(definition(tmp_path, {"path": "areas.gpkg", "key": "code"}))
    shown = ", ".join(repr(t) for t in tracts[3:11])
    assert "9 of 12 areas of 'tract' have no shape in" in str(error.value)
    assert f": {shown} and 1 more\n" in str(error.value)


def test_missing_allow_lets_areas_without_a_shape_through(strata_csv, tmp_path):
    shapes([f"{k:05d}" for k in range(2, 8)]).to_file(tmp_path / "areas.gpkg")
    spec = {"path": "areas.gpkg", "key": "code", "missing": "allow"}
    d = definition(tmp_path, spec)
    assert d.geometry_missing == "allow"
    assert sorted(load_study_table(d)["tract"].unique()) == TRACTS
    # allowed or not, a geometry that matches no area at all maps nothing: refused
    shapes([str(int(t)) for t in TRACTS]).to_file(tmp_path / "areas.gpkg")
    with pytest.raises(StudyDataError, match="none of the areas of 'tract'"):
        load_study_table(definition(tmp_path, spec))


def test_missing_defaults_to_refuse_and_takes_refuse_or_allow(tmp_path):
    from dpcounts.studies.stage.definition import StudyConfigError

    assert definition(tmp_path, {"path": "a.gpkg"}).geometry_missing == "refuse"
    with pytest.raises(StudyConfigError) as error:
        definition(tmp_path, {"path": "a.gpkg", "missing": "skip"})
    assert str(error.value) == ("config key studies.s.geometry.missing: got 'skip'; expected "
                                "['refuse', 'allow']")  # fmt: skip
