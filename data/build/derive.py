"""Derive the compact shipped files in ``data/`` from the raw inputs.

Each ``build_*`` function reads raw inputs, writes one or two files atomically and
returns their paths. Rows are sorted and Parquet is written with fixed settings, so the
output bytes depend only on the inputs and the pinned library versions.
"""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from dpcounts.data import age_groups as ages
from dpcounts.data import pennsylvania as pa
from dpcounts.data.counties import STATE_POSTAL
from dpcounts.io import atomic_path

#: Visvalingam-Whyatt tolerance (degrees) of the coverage simplification: keeps shared
#: borders shared (so queen adjacency survives, checked below) and shrinks the file ~3x.
SIMPLIFY_TOLERANCE_DEG = 0.02
#: Coordinates are snapped to this grid (degrees, about 10 m) so they compress well.
COORDINATE_GRID_DEG = 1e-4
#: The NAT shapefile declares no CRS; its GeoJSON twin in the same folder says CRS84,
#: i.e. longitude/latitude on WGS 84.
SOURCE_CRS = "EPSG:4326"


def write_parquet_deterministic(frame: pd.DataFrame, path: Path) -> None:
    """Parquet with zstd level 19 and no index; geopandas adds GeoParquet metadata."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False, compression="zstd", compression_level=19)


def write_csv_deterministic(frame: pd.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, lineterminator="\n")


def read_gal(path: Path) -> tuple[str, dict[str, list[str]]]:
    """Parse a GAL file: header line, then (id, n) lines each followed by n neighbour ids.

    Returns the header's key field (None if the header names none) and id -> neighbours.
    """
    lines = Path(path).read_text().splitlines()
    header = lines[0].split()
    # Old-style header: "n"; new-style: "0 n shapefile key_field".
    n_units = int(header[0]) if len(header) == 1 else int(header[1])
    key_field = header[3] if len(header) >= 4 else None
    neighbours: dict[str, list[str]] = {}
    position = 1
    while position < len(lines) and lines[position].strip():
        unit, n_neighbours = lines[position].split()
        tail = lines[position + 1].split()  # empty line for a unit without neighbours
        if len(tail) != int(n_neighbours):
            raise ValueError(
                f"{path}:{position + 2}: unit {unit} lists {len(tail)} neighbours, "
                f"says {n_neighbours}"
            )
        neighbours[unit] = tail
        position += 2
    if len(neighbours) != n_units:
        raise ValueError(f"{path}: header says {n_units} units, found {len(neighbours)}")
    return key_field, neighbours


def build_counties(nat_shp: Path, nat_gal: Path, nat_gal_by_row: Path, out_dir: Path) -> list[Path]:
    """County frame (GeoParquet) and queen edge list (CSV) from NCOVR NAT.

    ``nat_gal`` (keyed by FIPSNO) is the one shipped; ``nat_gal_by_row`` (the same
    relation keyed by 0-based row of the shapefile) must agree with it, which checks that
    both files and the shapefile's row order describe the same counties.
    """
    nat = gpd.read_file(nat_shp)
    if nat.crs is None:
        nat = nat.set_crs(SOURCE_CRS)
    fips = nat["FIPS"].astype(str)
    if not (fips == nat["STATE_FIPS"] + nat["CNTY_FIPS"]).all():
        raise ValueError(f"{nat_shp}: FIPS != STATE_FIPS + CNTY_FIPS for some rows")
    if not (fips.astype(int) == nat["FIPSNO"]).all():
        raise ValueError(f"{nat_shp}: FIPS and FIPSNO disagree")
    geometry = shapely.coverage_simplify(nat.geometry.values, SIMPLIFY_TOLERANCE_DEG)
    geometry = shapely.set_precision(geometry, COORDINATE_GRID_DEG)
    frame = gpd.GeoDataFrame(
        {
            "fips": fips,
            "state_fips": nat["STATE_FIPS"].astype(str),
            "state": nat["STATE_FIPS"].map(STATE_POSTAL),
            "name": nat["NAME"].astype(str),
            "population": nat["PO80"].astype("int64"),
            "median_age": nat["MA80"].astype("float64"),
            # DNL80 is ln(PO80 / land area); NAT's land areas are in square miles at a
            # resolution of 0.1 (Los Angeles County: 4,070.1), so round to that.
            "land_area": (nat["PO80"] / np.exp(nat["DNL80"])).round(1),
        },
        geometry=geometry,
        crs=nat.crs,
    )
    if frame["state"].isna().any():
        raise ValueError(f"{nat_shp}: state FIPS outside the contiguous US")
    frame = frame.sort_values("fips", kind="stable").reset_index(drop=True)

    key_field, neighbours = read_gal(nat_gal)
    # nat_queen.gal is keyed by FIPSNO (header field 4), not by row number; check that its
    # ids are exactly the shapefile's counties and that the relation is symmetric.
    if key_field != "FIPSNO":
        raise ValueError(f"{nat_gal}: expected ids keyed by FIPSNO, header says {key_field}")
    by_number = dict(zip(nat["FIPSNO"].astype(int).astype(str), fips, strict=True))
    if set(neighbours) != set(by_number):
        raise ValueError(f"{nat_gal}: ids do not match the FIPSNO of {nat_shp}")
    pairs = set()
    for unit, others in neighbours.items():
        for other in others:
            if unit not in neighbours[other]:
                raise ValueError(f"{nat_gal}: {unit} -> {other} is not symmetric")
            pairs.add(tuple(sorted((by_number[unit], by_number[other]))))
    edges = pd.DataFrame(sorted(pairs), columns=["fips_a", "fips_b"])

    _, by_row = read_gal(nat_gal_by_row)
    row_fips = fips.to_numpy()
    pairs_by_row = {
        tuple(sorted((row_fips[int(unit)], row_fips[int(other)])))
        for unit, others in by_row.items()
        for other in others
    }
    if pairs_by_row != pairs:
        raise ValueError(f"{nat_gal_by_row} (by row) and {nat_gal} (by FIPSNO) disagree")
    print(f"queen adjacency: {len(pairs)} pairs, same in both GAL files and on the map")

    # The simplified boundaries must give the same neighbours as the GAL file, so maps
    # and the adjacency agree.
    tree = shapely.STRtree(frame.geometry.values)
    left, right = tree.query(frame.geometry.values, predicate="intersects")
    keep = left < right
    touching = set(
        zip(
            frame["fips"].to_numpy()[left[keep]], frame["fips"].to_numpy()[right[keep]], strict=True
        )
    )
    if touching != pairs:
        raise ValueError(
            f"simplified boundaries disagree with {nat_gal}: "
            f"{len(touching - pairs)} extra, {len(pairs - touching)} missing pairs"
        )

    counties_path = out_dir / "counties_1980.parquet"
    edges_path = out_dir / "counties_1980_queen.csv"
    write_parquet_deterministic(frame, counties_path)
    write_csv_deterministic(edges, edges_path)
    return [counties_path, edges_path]


def build_age_groups(population_json: Path, counties_path: Path, out_dir: Path) -> list[Path]:
    """Modelled county populations by age group (see dpcounts.data.age_groups)."""
    counties = gpd.read_parquet(counties_path)
    national = ages.read_national_population(population_json, year=1980)
    table = ages.model_county_age_counts(national, counties["population"], counties["median_age"])
    lower, upper = ages.group_edges(national["age_start"])
    medians = np.array([ages.grouped_median(row, lower, upper) for row in table])
    shift = np.abs(medians - counties["median_age"].to_numpy())
    grouped = ages.aggregate_age_groups(table, national["age_start"])
    frame = ages.age_group_frame(counties["fips"], grouped)
    # Rounded to 1/100 person so the bytes do not hang on the last bits of the solver.
    frame["population_modelled"] = frame["population_modelled"].round(2)
    print(
        f"age model: national 1980 total {national['population'].sum():,.0f}, "
        f"frame total {counties['population'].sum():,}; |modelled - census median age| "
        f"after raking: mean {shift.mean():.2f}, max {shift.max():.2f} years; "
        f"counties with modelled 35+ over 50,000: {(grouped['35+'] > 50_000).sum()}"
    )
    path = out_dir / "county_age_groups_1980.parquet"
    write_parquet_deterministic(frame, path)
    return [path]


def county_key(name: str) -> str:
    """Join key for county names across sources: lower case, letters only."""
    return "".join(ch for ch in name.lower() if ch.isalpha())


def build_pennsylvania(pennlc_rda: Path, counties_path: Path, out_dir: Path) -> list[Path]:
    """pennLC strata (Parquet) and Pennsylvania's county map with FIPS and land area."""
    import warnings

    import rdata

    with warnings.catch_warnings():
        # rdata has no constructors for the sp classes; it returns their raw slots,
        # which is all we need.
        warnings.simplefilter("ignore", UserWarning)
        pennlc = rdata.read_rda(pennlc_rda)["pennLC"]
    strata = pa.pennlc_strata_frame(pennlc["data"])

    ids, rings = pa.polygon_rings(pennlc["spatial.polygon"])
    geometry = [
        shapely.set_precision(
            shapely.MultiPolygon([shapely.Polygon(r) for r in parts])
            if len(parts) > 1
            else shapely.Polygon(parts[0]),
            COORDINATE_GRID_DEG,
        )
        for parts in rings
    ]
    smoking = pennlc["smoking"].assign(county=lambda f: f["county"].astype(str))
    nat = gpd.read_parquet(counties_path)
    nat = nat[nat["state"] == "PA"].assign(key=lambda f: f["name"].map(county_key))
    frame = pd.DataFrame({"county": ids, "key": [county_key(i) for i in ids]})
    frame = frame.merge(nat[["key", "fips", "name", "land_area"]], on="key", how="left")
    frame = frame.merge(smoking, on="county", how="left")
    if frame[["fips", "smoking"]].isna().any().any() or len(frame) != 67:
        raise ValueError(f"{pennlc_rda}: could not match all 67 counties to NAT and smoking")
    if set(frame["county"]) != set(strata["county"]):
        raise ValueError(f"{pennlc_rda}: polygon IDs differ from the strata's counties")
    counties = gpd.GeoDataFrame(
        frame.drop(columns="key"), geometry=geometry, crs=SOURCE_CRS
    ).sort_values("county", kind="stable")

    strata_path = out_dir / "pennlc_strata.parquet"
    counties_out = out_dir / "pennsylvania_counties.parquet"
    write_parquet_deterministic(strata, strata_path)
    write_parquet_deterministic(counties.reset_index(drop=True), counties_out)
    print(
        f"pennLC: {len(strata)} strata, {strata['cases'].sum()} cases, "
        f"population {strata['population'].sum():,}"
    )
    return [strata_path, counties_out]


def build_standard_population(out_dir: Path) -> list[Path]:
    """The US 2000 standard population, 19 age groups, as a CSV."""
    from standard_population_2000 import US_2000_STANDARD_19

    frame = pd.DataFrame(US_2000_STANDARD_19, columns=["age_start", "age_end", "population"])
    frame["age_end"] = frame["age_end"].astype("Int64")
    path = out_dir / "us_standard_population_2000.csv"
    write_csv_deterministic(frame, path)
    return [path]


#: NCOVR's census decades: HC<yy> is the homicide count averaged over the three years
#: centred on 19<yy> (e.g. 1979-81), PO<yy> the county population of the census year.
HOMICIDE_DECADES = (60, 70, 80, 90)


def homicide_table(nat: pd.DataFrame) -> pd.DataFrame:
    """County x decade homicides of NCOVR NAT as whole counts over person-years.

    NAT's ``HC<yy>`` is a three-year average (in thirds), so ``3 x HC<yy>`` is the whole
    number of homicides of the three years; the matching exposure is ``3 x PO<yy>``
    person-years, and ``homicides / person_years x 100,000`` is NAT's ``HR<yy>``.
    Raises when a tripled average is not a whole number.
    """
    rows = []
    fips = nat["FIPS"].astype(str)
    for yy in HOMICIDE_DECADES:
        tripled = 3 * nat[f"HC{yy}"].to_numpy(dtype=float)
        counts = np.round(tripled)
        if np.abs(tripled - counts).max() > 1e-6:
            raise ValueError(f"NAT: 3 x HC{yy} is not a whole number for some counties")
        rows.append(
            pd.DataFrame(
                {
                    "fips": fips,
                    "state": nat["STATE_FIPS"].map(STATE_POSTAL),
                    "south": nat["SOUTH"].astype("int64"),
                    "decade": 1900 + yy,
                    "homicides": counts.astype("int64"),
                    "person_years": 3 * nat[f"PO{yy}"].astype("int64"),
                }
            )
        )
    frame = pd.concat(rows, ignore_index=True)
    return frame.sort_values(["fips", "decade"], kind="stable").reset_index(drop=True)


def build_homicides(nat_shp: Path, out_dir: Path) -> list[Path]:
    """``ncovr_homicides.csv``: the real county homicide counts of NCOVR NAT (a CSV, as
    an analyst's own table would arrive)."""
    path = out_dir / "ncovr_homicides.csv"
    write_csv_deterministic(homicide_table(gpd.read_file(nat_shp)), path)
    return [path]


def build_all(raw, out_dir: Path) -> list[Path]:
    """Every derived file, in the order they are listed in data/README.md."""
    written = []
    written += build_counties(raw.nat_shp, raw.nat_gal, raw.nat_gal_by_row, out_dir)
    written += build_age_groups(raw.population_json, out_dir / "counties_1980.parquet", out_dir)
    written += build_pennsylvania(raw.pennlc_rda, out_dir / "counties_1980.parquet", out_dir)
    written += build_standard_population(out_dir)
    written += build_homicides(raw.nat_shp, out_dir)
    return written
