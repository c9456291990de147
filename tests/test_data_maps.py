"""county_choropleth: colours follow the values, scales and errors behave."""

import geopandas as gpd
import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import numpy as np
import pytest
from shapely.geometry import box

from dpcounts.plots.maps import county_choropleth


def squares(values, crs="EPSG:4326"):
    # Four 1-degree squares in Kansas, side by side.
    geometry = [box(-100 + i, 38, -99 + i, 39) for i in range(len(values))]
    return gpd.GeoDataFrame({"value": values}, geometry=geometry, crs=crs)


def face_colors(fig):
    collection = fig.axes[0].collections[0]
    return collection.get_facecolors()[:, :3]


def test_colours_follow_the_values_on_a_log_scale():
    frame = squares([10.0, 100.0, 1000.0, 10000.0])
    fig = county_choropleth(frame, "value", norm="log", cmap="viridis", title="t")
    cmap = plt.get_cmap("viridis")
    expected = cmap(mcolors.LogNorm(10, 10000)(frame["value"]))[:, :3]
    np.testing.assert_allclose(face_colors(fig), expected, atol=1e-6)
    assert len(fig.axes) == 2  # map and colorbar
    assert fig.axes[0].get_title() == "t"
    plt.close(fig)


def test_draws_into_a_given_axes_with_fixed_limits():
    fig, ax = plt.subplots()
    out = county_choropleth(squares([1.0, 2.0]), "value", ax=ax, vmin=0, vmax=4, cmap="Greys")
    assert out is fig
    expected = plt.get_cmap("Greys")(np.array([0.25, 0.5]))[:, :3]
    np.testing.assert_allclose(face_colors(fig), expected, atol=1e-6)
    plt.close(fig)


def test_rejects_frames_without_crs_unknown_columns_and_bad_log_data():
    with pytest.raises(ValueError, match="no CRS"):
        county_choropleth(squares([1.0]).set_crs(None, allow_override=True), "value")
    with pytest.raises(KeyError, match="nope"):
        county_choropleth(squares([1.0]), "nope")
    with pytest.raises(ValueError, match="no positive values"):
        county_choropleth(squares([0.0, -1.0]), "value", norm="log")
