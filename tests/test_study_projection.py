"""A study's maps are right for any geometry, anywhere on Earth (issue #25, item 4): a
projected CRS is kept, longitude/latitude is drawn in an equal-area projection centred on
its extent (a CRS-less geometry in degrees too, with a warning), planar coordinates without
a CRS as they are; and every panel's shape is the areas' shape in that projection.

Each geometry is drawn by the study's own ``figure_maps``; the expected aspect is computed
here from the geometry (its own coordinates, or reprojected with pyproj to the projection
named in the footnote), never read back from the map code."""

from __future__ import annotations

import logging

import geopandas as gpd
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import box

from dpcounts.arms import Arm
from dpcounts.plots.study import figure_maps

ARMS = [Arm("pg", "certified")]
EPSILONS = [1.0]


def grid(x0: float, y0: float, dx: float, dy: float, crs, columns: int = 4, rows: int = 2):
    """``columns`` x ``rows`` boxes of ``dx`` x ``dy`` from (x0, y0), coded a00, a01, ..."""
    shapes = [box(x0 + i * dx, y0 + j * dy, x0 + (i + 1) * dx, y0 + (j + 1) * dy)
              for j in range(rows) for i in range(columns)]  # fmt: skip
    codes = [f"a{k:02d}" for k in range(len(shapes))]
    return gpd.GeoDataFrame({"code": codes}, geometry=shapes, crs=crs)


def rates(codes) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    rows = [("truth", np.nan, c, rng.uniform(5, 50)) for c in codes]
    rows += [(a.name, e, c, rng.uniform(5, 50)) for a in ARMS for e in EPSILONS for c in codes]
    return pd.DataFrame(rows, columns=["arm", "epsilon", "area", "rate"]).assign(study="s")


def draw(frame):
    """The study's maps of ``frame``: (the figure, its truth panel, its footnote)."""
    fig = figure_maps(frame, "code", rates(frame["code"]), ARMS, EPSILONS, "s")
    fig.canvas.draw()
    truth = next(ax for ax in fig.axes if ax.get_title() == "true rates")
    return fig, truth, fig._supxlabel.get_text()


def shape_of(bounds) -> float:
    """Width over height of a bounding box (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = bounds
    return (x1 - x0) / (y1 - y0)


def drawn_shape(ax) -> float:
    """Width over height of the panel's box on the page, checking that a unit of x and a
    unit of y take the same length there (equal aspect)."""
    extent = ax.get_window_extent()
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    x_scale, y_scale = extent.width / (x1 - x0), extent.height / (y1 - y0)
    assert x_scale == pytest.approx(y_scale, rel=0.01), "the panel's aspect is not equal"
    return extent.width / extent.height


def laea(lat: float, lon: float) -> str:
    return f"+proj=laea +lat_0={lat} +lon_0={lon} +datum=WGS84 +units=m +no_defs"


def test_a_projected_geometry_outside_the_us_keeps_its_own_crs():
    """Boxes in ETRS89-LAEA Europe (EPSG:3035), 40 km x 60 km each, around Germany:
    Conus Albers would turn and shear them; their own CRS draws them as they are."""
    frame = grid(4.2e6, 2.9e6, 4e4, 6e4, "EPSG:3035")
    fig, truth, note = draw(frame)
    assert "drawn in EPSG:3035" in note and "its own CRS" in note
    assert drawn_shape(truth) == pytest.approx(shape_of(frame.total_bounds), rel=0.03)
    # the shapes are drawn in their own coordinates
    x0, y0, x1, y1 = frame.total_bounds
    (left, right), (bottom, top) = truth.get_xlim(), truth.get_ylim()
    assert left <= x0 < x1 <= right and bottom <= y0 < y1 <= top
    assert right - left < 1.2 * (x1 - x0)
    plt.close(fig)


def test_a_utm_geometry_keeps_its_crs():
    """A UTM zone (18N, the north-east US): drawn in it, not turned into Conus Albers."""
    frame = grid(3.0e5, 4.5e6, 2e4, 1e4, "EPSG:32618", columns=3, rows=5)
    fig, truth, note = draw(frame)
    assert "EPSG:32618" in note and "its own CRS" in note
    assert drawn_shape(truth) == pytest.approx(shape_of(frame.total_bounds), rel=0.03)
    plt.close(fig)


def test_a_geometry_in_degrees_without_a_crs_is_taken_as_wgs84_with_a_warning(caplog):
    """Boxes from 8E to 12E and 59N to 61N, no CRS: longitude/latitude is assumed (a
    warning says so) and they are drawn in Lambert azimuthal equal-area centred on 60N, 10E,
    not in raw degrees (which would make them twice as wide as they are)."""
    frame = grid(8.0, 59.0, 1.0, 1.0, None)
    with caplog.at_level(logging.WARNING, logger="dpcounts.plots.maps"):
        fig, truth, note = draw(frame)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("no CRS" in m and "EPSG:4326" in m for m in warned), warned
    assert "Lambert azimuthal equal-area centred on 60.0N, 10.0E" in note
    assert "no CRS: taken as longitude/latitude" in note
    expected = shape_of(frame.set_crs("EPSG:4326").to_crs(laea(60, 10)).total_bounds)
    assert drawn_shape(truth) == pytest.approx(expected, rel=0.03)
    raw = shape_of(frame.total_bounds)  # 4 degrees by 2: 2.0
    assert abs(drawn_shape(truth) / raw - 1) > 0.3
    plt.close(fig)


def test_planar_coordinates_without_a_crs_are_drawn_as_they_are(caplog):
    """Metres of an unnamed grid (no CRS, far outside longitude/latitude): no warning, no
    reprojection."""
    frame = grid(512_000.0, 4_100_000.0, 3_000.0, 1_000.0, None, columns=2, rows=6)
    with caplog.at_level(logging.WARNING, logger="dpcounts.plots.maps"):
        fig, truth, note = draw(frame)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "drawn as given (no CRS" in note
    assert drawn_shape(truth) == pytest.approx(shape_of(frame.total_bounds), rel=0.03)
    (left, right), _ = truth.get_xlim(), truth.get_ylim()
    assert left <= 512_000 and 518_000 <= right < 520_000
    plt.close(fig)


def test_a_high_latitude_geometry_is_not_drawn_in_raw_degrees():
    """EPSG:4326 from 0E to 20E and 60N to 70N: in degrees twice as wide as high, but a
    degree of longitude there is under half a degree of latitude on the ground. The map is
    drawn in Lambert azimuthal equal-area centred on 65N, 10E: the panel has that shape."""
    frame = grid(0.0, 60.0, 5.0, 5.0, "EPSG:4326")
    fig, truth, note = draw(frame)
    assert "Lambert azimuthal equal-area centred on 65.0N, 10.0E" in note
    assert "from EPSG:4326" in note
    expected = shape_of(frame.to_crs(laea(65, 10)).total_bounds)
    assert drawn_shape(truth) == pytest.approx(expected, rel=0.03)
    assert shape_of(frame.total_bounds) == pytest.approx(2.0)
    assert drawn_shape(truth) < 1.2  # not the raw degrees' 2.0
    plt.close(fig)


def test_nad83_in_the_southern_us_centres_on_its_extent():
    """EPSG:4269 (NAD83, geographic) is projected like WGS 84: centred on its extent."""
    frame = grid(-100.0, 30.0, 2.0, 1.0, "EPSG:4269")
    fig, truth, note = draw(frame)
    assert "centred on 31.0N, 96.0W" in note and "from EPSG:4269" in note
    expected = shape_of(frame.to_crs(laea(31, -96)).total_bounds)
    assert drawn_shape(truth) == pytest.approx(expected, rel=0.03)
    plt.close(fig)


def test_islands_across_the_antimeridian_centre_on_it():
    """Parts at 176E-180E and 180W-178W (as Fiji's are stored): centred on 180, not on 0
    where the map would be a sliver across half the globe."""
    east = grid(176.0, -18.0, 1.0, 1.0, "EPSG:4326", columns=4, rows=2)
    west = grid(-180.0, -18.0, 1.0, 1.0, "EPSG:4326", columns=2, rows=2)
    west["code"] = [f"b{k:02d}" for k in range(len(west))]
    frame = pd.concat([east, west], ignore_index=True)
    fig, truth, note = draw(frame)
    assert "centred on 17.0S, 179.0E" in note
    expected = shape_of(frame.to_crs(laea(-17, 179)).total_bounds)
    assert expected == pytest.approx(3.0, rel=0.05)  # 6 degrees by 2 near the equator
    assert drawn_shape(truth) == pytest.approx(expected, rel=0.03)
    plt.close(fig)


def test_a_world_geometry_is_drawn_on_an_equal_area_world_map():
    """Longitudes all round the globe: no azimuthal projection holds them (the antipode of
    the centre goes to infinity); Equal Earth does."""
    frame = grid(-180.0, -60.0, 45.0, 70.0, "EPSG:4326", columns=8, rows=2)
    fig, truth, note = draw(frame)
    assert "Equal Earth" in note
    (left, right), (bottom, top) = truth.get_xlim(), truth.get_ylim()
    assert np.isfinite([left, right, bottom, top]).all()
    assert drawn_shape(truth) == pytest.approx((right - left) / (top - bottom), rel=0.03)
    plt.close(fig)
