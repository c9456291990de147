"""The study's maps figure: the truth once, then arms x map epsilons, every axes a map,
one colour bar (issue #13 review: the old grid left empty axes below the truth)."""

from __future__ import annotations

import geopandas as gpd
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import box

from dpcounts.arms import Arm
from dpcounts.plots.study import arm_title, figure_maps
from dpcounts.plots.style import RATE_CMAP

AREAS = [f"{k:05d}" for k in range(1, 9)]


def geometry(areas=AREAS, crs="EPSG:4326") -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(
        {"code": areas, "state": ["A"] * 4 + ["B"] * (len(areas) - 4)},
        geometry=[box(-100 + k, 35, -99 + k, 36) for k in range(len(areas))],
        crs=crs,
    )


def area_rates(arms, epsilons, rng, areas=AREAS) -> pd.DataFrame:
    rows = [("truth", np.nan, a, r) for a, r in zip(areas, rng.uniform(5, 50, len(areas)),
                                                    strict=True)]  # fmt: skip
    rows += [(arm, eps, a, rng.uniform(5, 50)) for arm in arms for eps in epsilons for a in areas]
    return pd.DataFrame(rows, columns=["arm", "epsilon", "area", "rate"]).assign(study="s")


def maps(fig):
    """The axes holding maps (every axes but the colour bar's)."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


@pytest.mark.parametrize(
    ("arms", "epsilons"),
    [([("md", "paper"), ("pg", "certified"), ("truncated", "certified")], [1.0, 10.0]),
     ([("pg", "certified")], [2.0]), ([("pg", "paper", "untruncated"), ("truncated", "exact")],
                                      [0.5, 1.0, 4.0])],
)  # fmt: skip
def test_every_axes_is_a_map_and_the_truth_appears_once(arms, epsilons):
    rng = np.random.default_rng(5)
    specs = [Arm(*fields) for fields in arms]
    arms = [spec.name for spec in specs]
    fig = figure_maps(geometry(), "code", area_rates(arms, epsilons, rng), specs, epsilons, "s",
                      outline="state")  # fmt: skip
    panels = maps(fig)
    assert len(panels) == 1 + len(arms) * len(epsilons)
    assert len(fig.axes) - len(panels) == 1  # one shared colour bar
    for ax in panels:
        assert ax.collections, f"an axes without a map: {ax.get_title()!r}"
        assert ax.get_xlabel() == "" and not ax.get_xticks().size
    titles = [ax.get_title() for ax in panels]
    assert titles.count("true rates") == 1
    assert sorted(t for t in titles if t.startswith("$\\varepsilon")) == sorted(
        f"$\\varepsilon = {e:g}$" for e in epsilons
    )
    # each row labelled by its arm (wrapped to the map's height)
    rows = sorted(ax.get_ylabel().replace("\n", " ") for ax in panels if ax.get_ylabel())
    assert rows == sorted(arm_title(spec) for spec in specs)
    # the truth's map is drawn with the true rates: its colours follow the rates' order
    truth = next(ax for ax in panels if ax.get_title() == "true rates")
    values = truth.collections[0].get_array()
    expected = area_rates(arms, epsilons, np.random.default_rng(5)).query("arm == 'truth'")
    assert np.argsort(values).tolist() == np.argsort(expected["rate"].to_numpy()).tolist()
    plt.close(fig)


def test_areas_without_a_shape_are_listed_in_the_footnote():
    rng = np.random.default_rng(6)
    rates = area_rates(["pg_certified"], [1.0], rng)
    fig = figure_maps(geometry(AREAS[:6]), "code", rates, [Arm("pg", "certified")], [1.0], "s")
    note = fig._supxlabel.get_text()
    assert "2 of 8 areas have no shape and are not drawn: 00007, 00008" in note
    plt.close(fig)
    many = [f"{k:05d}" for k in range(1, 21)]
    rates = area_rates(["pg_certified"], [1.0], rng, areas=many)
    fig = figure_maps(geometry(many[:8]), "code", rates, [Arm("pg", "certified")], [1.0], "s")
    note = fig._supxlabel.get_text()
    shown = ", ".join(many[8:16])
    assert f"12 of 20 areas have no shape and are not drawn: {shown} and 4 more" in note
    plt.close(fig)


def test_shapes_of_no_area_are_not_drawn():
    """Codes shifted by one (with ``geometry.missing: allow``): the shape coded 00009 is of
    no area and is not drawn, not even grey; each drawn shape has its own area's rate."""
    rng = np.random.default_rng(8)
    rates = area_rates(["pg_certified"], [1.0], rng)
    shifted = geometry([f"{k:05d}" for k in range(2, 10)])
    fig = figure_maps(shifted, "code", rates, [Arm("pg", "certified")], [1.0], "s",
                      outline="state")  # fmt: skip
    for ax in maps(fig):
        polygons = ax.collections[0]
        assert len(polygons.get_paths()) == 7  # 00002..00008; not 00009
        assert np.isfinite(polygons.get_array()).all()  # no grey shape
    truth = next(ax for ax in maps(fig) if ax.get_title() == "true rates")
    lefts = [path.vertices[:, 0].min() for path in truth.collections[0].get_paths()]
    true = rates.query("arm == 'truth'").set_index("area")["rate"]
    drawn = truth.collections[0].get_array()
    # the shapes coded 00002..00008 from west to east carry those areas' rates
    order = np.argsort(lefts)
    assert drawn[order].tolist() == pytest.approx(true.loc[AREAS[1:]].to_list())
    note = fig._supxlabel.get_text()
    assert "1 of 8 areas have no shape and are not drawn: 00001" in note
    assert "1 shape(s) whose key is no area of the strata: not drawn" in note
    plt.close(fig)


def test_study1_maps_share_one_colour_bar_and_draw_state_outlines():
    """Study 1's county maps go through the same grid: the truth once, MD and PG-state at
    each map epsilon, every axes a map, one colour bar, and the state outlines drawn."""
    from dpcounts.plots.study1 import figure_maps as study1_maps

    counties = geometry().rename(columns={"code": "fips"})
    rng = np.random.default_rng(3)
    scenario = pd.DataFrame({"fips": AREAS, "rate": rng.uniform(1e-4, 5e-4, len(AREAS))})
    epsilons = [1.0, 10.0]
    means = pd.DataFrame(
        [(4, mech, eps, county, rng.uniform(1e-4, 5e-4))
         for mech in ("md", "pg_state") for eps in epsilons for county in range(len(AREAS))],
        columns=["scenario", "arm", "epsilon", "county", "rate"],
    )  # fmt: skip
    fig = study1_maps(counties, scenario, means, epsilons)
    axes = maps(fig)
    assert len(axes) == 1 + 2 * len(epsilons)
    assert all(ax.get_visible() and ax.collections for ax in axes)
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 1
    # two states, each outline one line collection drawn over every map
    assert all(len(ax.collections) == 2 for ax in axes)
    plt.close(fig)


def test_arm_titles_come_from_the_arm_fields_not_its_name():
    assert arm_title(Arm("truncated", "certified")) == "Truncated PG (certified)"
    assert arm_title(Arm("md", "certified")) == "MD (exact alpha)"
    # a name the config chose, without a title: the name in words, then what the arm is
    assert arm_title(Arm("pg", "paper", "untruncated")) == (
        "untruncated: PG (paper calibration, nominal $\\varepsilon$)"
    )
    # a name that reads like another arm's is not parsed: the fields say what it is
    assert arm_title(Arm("truncated", "exact", "pg_paper")) == (
        "pg paper: Truncated PG (exact bivariate)"
    )
    assert arm_title(Arm("pg", "paper", "untruncated", title="Plain PG")) == "Plain PG"


def test_a_grid_draws_each_panels_areas_once_and_those_without_a_value_grey():
    """map_grid builds the areas' paths once for every panel: a panel fills the areas with
    a value on the shared scale (its first collection, holes and parts kept) and draws an
    area without one in light grey."""
    from matplotlib.collections import PathCollection
    from matplotlib.colors import Normalize, to_rgba
    from shapely.geometry import MultiPolygon

    from dpcounts.plots.maps import map_grid

    holed = box(0, 0, 3, 3).difference(box(1, 1, 2, 2))  # a polygon with a hole
    parts = MultiPolygon([box(4, 0, 5, 1), box(6, 0, 7, 1)])  # one area in two parts
    frame = gpd.GeoDataFrame({"a": [1.0, np.nan, 3.0], "b": [2.0, 2.5, np.nan]},
                             geometry=[holed, parts, box(8, 0, 9, 1)],
                             crs="EPSG:3857")  # fmt: skip
    fig = map_grid(frame, ("a", "truth"), [("row", [("b", "B")])], norm=Normalize(0, 4),
                   label="rate")  # fmt: skip
    panels = {ax.get_title(): ax for ax in maps(fig)}
    for title, values in (("truth", [1.0, np.nan, 3.0]), ("B", [2.0, 2.5, np.nan])):
        filled, grey = panels[title].collections[:2]
        shown = np.isfinite(values)
        assert filled.get_array().tolist() == np.asarray(values)[shown].tolist()
        assert len(grey.get_paths()) == 1
        assert tuple(grey.get_facecolor()[0]) == to_rgba("lightgrey")
    # the hole stays a hole: two rings, and filling the path leaves the inner square empty
    holed_path = panels["B"].collections[0].get_paths()[0]
    assert (holed_path.codes == holed_path.MOVETO).sum() == 2
    alone, ax = plt.subplots(figsize=(3, 3), dpi=100)
    ax.set_position([0, 0, 1, 1])
    ax.set_axis_off()
    ax.add_collection(PathCollection([holed_path], facecolors="black", linewidths=0))
    ax.set(xlim=(0, 3), ylim=(0, 3))
    alone.canvas.draw()
    pixels = np.asarray(alone.canvas.buffer_rgba())[:, :, :3]
    assert pixels[150, 150].tolist() == [255, 255, 255] and pixels[50, 50].tolist() == [0, 0, 0]
    plt.close(alone)
    plt.close(fig)


def test_one_outlier_saturates_with_an_arrow_while_the_others_spread_over_the_colours():
    """The colour rule of every map (dpcounts.plots.maps.rate_scale): among ten districts
    whose rates are 10 to 19 per 100,000 and one at 1,000, the outlier takes the top colour
    and the colour bar an arrow at its end, while the ten others spread over the colour
    map (a linear scale to 1,000 would give them all one colour)."""
    import matplotlib.colors as mcolors

    codes = [f"{k:05d}" for k in range(11)]
    frame = gpd.GeoDataFrame({"code": codes, "state": "A"},
                             geometry=[box(k, 0, k + 1, 1) for k in range(11)],
                             crs="EPSG:4326")  # fmt: skip
    true = [10.0 + k for k in range(10)] + [1000.0]
    rates = pd.DataFrame({"arm": "truth", "epsilon": np.nan, "area": codes, "rate": true})
    synthetic = rates.assign(arm="md_paper", epsilon=1.0)
    fig = figure_maps(frame, "code", pd.concat([rates, synthetic]), [Arm("md", "paper")],
                      [1.0], "s")  # fmt: skip
    truth = next(ax for ax in maps(fig) if ax.get_title() == "true rates")
    fig.canvas.draw()
    collection = truth.collections[0]
    colours = collection.get_facecolors()
    west = [path.get_extents().x0 for path in collection.get_paths()]
    assert len(west) == len(colours) == 11
    colours = colours[np.argsort(west)]  # west to east: the districts in code order
    cmap = plt.get_cmap(RATE_CMAP)
    assert np.allclose(colours[-1], cmap(1.0))  # the outlier saturates at the top colour
    assert np.allclose(colours[-2], cmap(1.0))  # the 98th percentile's district ends the bar
    others = colours[:-1]
    assert len({tuple(np.round(c, 3)) for c in others}) >= 8  # spread, not one colour
    # the others span the colour map: the lowest-but-one and the highest-but-one far apart
    assert np.abs(others[1] - others[-2]).max() > 0.4
    colorbar = next(ax for ax in fig.axes if ax.get_label() == "<colorbar>")
    assert colorbar._colorbar.extend == "both"  # 10 (below the 2nd pct) and 1,000 beyond
    norm = collection.norm
    assert not isinstance(norm, mcolors.LogNorm) and (norm.vmin, norm.vmax) == (11.0, 19.0)
    assert "2nd to the 98th percentile" in fig._supxlabel.get_text()
    plt.close(fig)


def test_skewed_rates_spanning_a_decade_get_log_colours():
    from dpcounts.plots.maps import rate_scale

    scale = rate_scale(np.geomspace(1, 1000, 50))
    assert scale.log and scale.extend == "both"
    assert rate_scale(np.linspace(40, 90, 50)).log is False
    assert rate_scale([0.0, 1.0, 50.0, 100.0] * 10).log is False  # zeros: no log


def test_a_custom_projection_is_footnoted_by_its_parameters():
    """A geometry in an unnamed CRS (a PROJ string, as a shapefile's .prj of a custom
    grid gives) is drawn in it and footnoted by its projection method and key parameters,
    never "drawn in unknown"."""
    from dpcounts.plots.maps import crs_description

    lcc = ("+proj=lcc +lat_1=34.3 +lat_2=36.2 +lat_0=33.75 +lon_0=-79 +x_0=609601.22 "
           "+y_0=0 +datum=NAD83 +units=m +no_defs")  # fmt: skip
    described = crs_description(lcc)
    assert described.startswith("Lambert Conic Conformal (2SP)")
    for part in ("lat_1 34.3", "lat_2 36.2", "lon_0 -79", "lat_0 33.75",
                 "North American Datum 1983"):  # fmt: skip
        assert part in described
    assert "unknown" not in described.lower()
    frame = geometry().to_crs(lcc)
    fig = figure_maps(frame, "code", area_rates(["md_paper"], [1.0], np.random.default_rng(2)),
                      [Arm("md", "paper")], [1.0], "s")  # fmt: skip
    note = fig._supxlabel.get_text()
    assert "map: drawn in Lambert Conic Conformal (2SP), lat_0 33.75, lon_0 -79, lat_1 34.3" in (
        note
    )
    assert "unknown" not in note
    assert crs_description("EPSG:5070") == "EPSG:5070 (NAD83 / Conus Albers)"
    plt.close(fig)


@pytest.mark.slow
def test_outlines_are_the_lines_geopandas_draws():
    """The maps' outlines (one collection made once per figure) are, segment for segment
    and style for style, what ``GeoSeries.plot`` draws of the same boundaries (which also
    redraws the whole figure on every call)."""
    from shapely.geometry import GeometryCollection, LineString, MultiLineString

    from dpcounts.plots.maps import boundaries, draw_lines, line_segments

    lines = boundaries(geometry(), "state")
    extra = gpd.GeoSeries([MultiLineString([[(0, 0), (1, 1)], [(2, 2), (3, 1), (4, 4)]]),
                           LineString(), None, GeometryCollection()], crs=lines.crs)  # fmt: skip
    for series in (lines, pd.concat([lines, extra])):
        fig, (ours, theirs) = plt.subplots(1, 2)
        draw_lines(ours, line_segments(series), color="white", lw=0.4)
        series.plot(ax=theirs, color="white", lw=0.4)
        (a,), (b,) = ours.collections, theirs.collections
        assert len(a.get_segments()) == len(b.get_segments()) > 0
        for x, y in zip(a.get_segments(), b.get_segments(), strict=True):
            assert np.array_equal(x, y)
        assert np.array_equal(a.get_colors(), b.get_colors())
        assert np.array_equal(a.get_linewidths(), b.get_linewidths())
        assert ours.dataLim.bounds == theirs.dataLim.bounds
        plt.close(fig)
