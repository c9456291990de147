"""Map of Study 1's true county rates per 100,000 (ages 35-44, 1980)."""

from __future__ import annotations

import logging

import pandas as pd
from matplotlib.figure import Figure

from dpcounts.plots.maps import county_choropleth

logger = logging.getLogger(__name__)

#: What the map's title calls the truth of each ``truth.source``.
SOURCE_LABELS = {"model": "modelled truth", "wonder": "smoothed observed rates"}


def truth_map(counties, truth: pd.DataFrame, source: str) -> Figure:
    """Choropleth of ``truth``'s ``rate_per_100k`` on ``counties`` (a GeoDataFrame with
    ``fips``; a county without a rate is drawn as missing), on every map's colour scale
    (:func:`~dpcounts.plots.maps.rate_scale`, as Study 1's maps of the same truth) in
    :data:`~dpcounts.plots.style.RATE_CMAP`; the title names the ``source``
    (``truth.source``: model or wonder)."""
    if source not in SOURCE_LABELS:
        raise ValueError(f"truth.source must be one of {list(SOURCE_LABELS)}, got {source!r}")
    frame = counties.merge(
        truth[["fips", "rate_per_100k"]], on="fips", how="left", validate="one_to_one"
    )
    logger.info("%d counties, %d without a rate", len(frame), frame["rate_per_100k"].isna().sum())
    fig = county_choropleth(
        frame,
        "rate_per_100k",
        title=f"True heart-disease death rates, ages 35-44, 1980 ({SOURCE_LABELS[source]})",
        legend_label="deaths per 100,000",
        values_name="the county rates",
    )
    return fig
