"""Choropleth maps of county values on an equal-area projection.

Counties are drawn in Conus Albers (EPSG:5070) by default, the usual equal-area projection
of the contiguous US, so a county's ink is proportional to its land area.
"""

from __future__ import annotations

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import numpy as np

#: Conus Albers equal-area projection (NAD83).
CONUS_ALBERS = "EPSG:5070"


def county_choropleth(
    frame,
    column: str,
    ax=None,
    *,
    title: str = "",
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    norm: mcolors.Normalize | str | None = None,
    legend_label: str | None = None,
    crs: str = CONUS_ALBERS,
    edgecolor: str = "white",
    linewidth: float = 0.05,
    missing_color: str = "lightgrey",
):
    """Fill each polygon of ``frame`` (a GeoDataFrame with a CRS) by ``frame[column]``.

    ``norm`` is a matplotlib ``Normalize`` or ``"log"`` (a ``LogNorm`` from ``vmin``/``vmax``,
    defaulting to the positive data range; values must then be positive). Missing values
    are drawn in ``missing_color``. A colorbar labelled ``legend_label`` (default: the
    column name) is added. Returns the Figure.
    """
    if frame.crs is None:
        raise ValueError("frame has no CRS; cannot project it")
    if column not in frame.columns:
        raise KeyError(f"column {column!r} not in the frame; have {list(frame.columns)}")
    values = frame[column].to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    if isinstance(norm, str):
        if norm != "log":
            raise ValueError(f"norm must be a Normalize or 'log', got {norm!r}")
        positive = finite[finite > 0]
        if positive.size == 0:
            raise ValueError(f"column {column!r} has no positive values for a log scale")
        norm = mcolors.LogNorm(
            vmin=vmin if vmin is not None else positive.min(),
            vmax=vmax if vmax is not None else positive.max(),
        )
    elif norm is None:
        norm = mcolors.Normalize(
            vmin=vmin if vmin is not None else finite.min(),
            vmax=vmax if vmax is not None else finite.max(),
        )

    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 5.6), layout="constrained")
    fig = ax.figure
    projected = frame.to_crs(crs)
    projected.plot(
        column=column,
        ax=ax,
        cmap=cmap,
        norm=norm,
        edgecolor=edgecolor,
        linewidth=linewidth,
        missing_kwds={"color": missing_color, "label": "missing"},
    )
    mappable = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    colorbar = fig.colorbar(mappable, ax=ax, shrink=0.7, pad=0.01)
    colorbar.set_label(legend_label if legend_label is not None else column)
    ax.set_axis_off()
    ax.set_aspect("equal")
    if title:
        ax.set_title(title)
    return fig
