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

from dpsynth.data.counties import STATE_POSTAL
from dpsynth.io import atomic_path

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
    """Parse a GAL file: header line, then (id, n) lines each followed by n neighbour ids."""
    lines = [line.split() for line in Path(path).read_text().splitlines() if line.strip()]
    header = lines[0]
    key_field = header[3] if len(header) >= 4 else None
    neighbours: dict[str, list[str]] = {}
    for head, tail in zip(lines[1::2], lines[2::2], strict=True):
        unit, count = head
        if len(tail) != int(count):
            raise ValueError(f"{path}: unit {unit} lists {len(tail)} neighbours, says {count}")
        neighbours[unit] = tail
    if len(neighbours) != int(header[1]):
        raise ValueError(f"{path}: header says {header[1]} units, found {len(neighbours)}")
    return key_field, neighbours


def build_counties(nat_shp: Path, nat_gal: Path, out_dir: Path) -> list[Path]:
    """County frame (GeoParquet) and queen edge list (CSV) from NCOVR NAT."""
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


def build_all(raw, out_dir: Path) -> list[Path]:
    """Every derived file, in the order they are listed in data/README.md."""
    written = []
    written += build_counties(raw.nat_shp, raw.nat_gal, out_dir)
    return written
