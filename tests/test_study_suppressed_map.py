"""The map of the suppressed table (issue #53, item 3): which areas the published table
cannot draw, which rest on completed counts, and the figure that draws them as such."""

from __future__ import annotations

import numpy as np
import pandas as pd
from shapely.geometry import box
from workflow_helpers import filled_definition

from dpcounts.studies.stage.measures import study_measures
from dpcounts.studies.stage.suppression import published_areas

#: area a0: 0 and 3 (nothing shown); a1: 12 and 3; a2: 12 and 40 (nothing hidden); a3: 5 and 7
COUNTS = [0, 3, 12, 3, 12, 40, 5, 7]


def study(tmp_path):
    import geopandas as gpd

    areas = [f"a{k}" for k in range(4)]
    shapes = gpd.GeoDataFrame({"code": areas},
                              geometry=[box(-100 + k, 35, -99 + k, 36) for k in range(4)],
                              crs="EPSG:4326")  # fmt: skip
    shapes.to_parquet(tmp_path / "shapes.parquet")
    strata = pd.DataFrame({"area": [a for a in areas for _ in range(2)], "group": ["x", "y"] * 4,
                           "y": COUNTS, "n": [10_000.0, 20_000.0] * 4,
                           "prior_rate": 4e-4})  # fmt: skip
    spec = {"table": "t.csv", "keys": ["area", "group"], "count": "y", "population": "n",
            "area": "area", "geometry": {"path": "shapes.parquet", "key": "code"},
            "map_epsilons": [1.0, 4.0], "arms": {"pg": ["certified"]},
            "suppression": {"enabled": True}}  # fmt: skip
    return filled_definition("s", spec, base=tmp_path), strata, shapes


def test_each_area_as_published_and_what_it_rests_on(tmp_path):
    d, strata, _ = study(tmp_path)
    areas = published_areas(d, strata, study_measures(d, strata)).set_index("area")
    assert areas["hidden"].tolist() == [1, 1, 0, 2]
    assert areas["shown"].tolist() == [0, 1, 2, 0]  # a shown zero shows nothing
    completed = np.array([0, 5, 12, 5, 12, 40, 5, 5])  # the midpoint of 1..9
    by_hand = completed.reshape(4, 2).sum(axis=1) / 30_000 * 1e5
    assert np.allclose(areas["rate"], by_hand)


def test_the_published_map_draws_the_suppressed_areas_grey_and_names_them(tmp_path):
    from dpcounts.plots.study import SUPPRESSED_HATCH, figure_suppressed_map

    d, strata, shapes = study(tmp_path)
    truth = strata.groupby("area")["y"].sum() / 30_000 * 1e5
    rates = pd.concat([
        pd.DataFrame({"arm": "truth", "epsilon": np.nan, "area": truth.index, "rate": truth}),
        pd.DataFrame({"arm": "pg_certified", "epsilon": 4.0, "area": truth.index,
                      "rate": truth * 1.1}),
    ])  # fmt: skip
    fig = figure_suppressed_map(d, strata, shapes, rates)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[:2] == ["true rates", "as published: counts 1-9 suppressed"]
    assert any("4" in t for t in titles[2:3])  # the synthetic panel at the largest epsilon
    published = fig.axes[1]
    grey = [
        c
        for c in published.collections
        if c.get_hatch() is None
        and len(c.get_facecolors())
        and np.allclose(c.get_facecolors()[0][:3], 0.62)
    ]
    hatched = [c for c in published.collections if c.get_hatch() == SUPPRESSED_HATCH]
    assert len(grey) == 1 and len(grey[0].get_paths()) == 2  # a0 and a3
    assert len(hatched) == 1 and len(hatched[0].get_paths()) == 1  # a1
    (legend,) = fig.legends
    assert legend.get_title().get_text() == "the published map"
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[0].startswith("suppressed (1-9): 2 areas")
    assert labels[1].startswith("rests on suppressed counts (1-9): 1 area,")
