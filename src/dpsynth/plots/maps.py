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


#: Width of one map panel of a grid, inches; its height follows the areas' aspect ratio.
MAP_WIDTH = 3.6


def hide_frame(ax) -> None:
    """No ticks, spines or coordinate labels; a y label set afterwards (a row's name)
    shows and takes layout room, which ``set_axis_off`` would drop."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("")
    ax.set_ylabel("")
    for spine in ax.spines.values():
        spine.set_visible(False)


def map_grid(frame, truth, rows, *, norm, label: str, outlines=None, cmap: str = "viridis",
             missing_color: str = "lightgrey"):  # fmt: skip
    """The truth's map (left, spanning every row) beside a grid of maps on one colour scale,
    with one shared colour bar; every axes holds a map, none is left empty.

    ``frame``: a GeoDataFrame (projected, e.g. to :data:`CONUS_ALBERS`) holding every
    column drawn. ``truth``: (column, title). ``rows``: a list of (row label, cells), each
    cell a (column, title) pair, every row as long as the first. ``outlines``: a GeoSeries of
    boundaries (e.g. states) drawn over every map, or None. Returns the Figure.
    """
    ncols = len(rows[0][1])
    if any(len(cells) != ncols for _, cells in rows):
        raise ValueError("every row of a map grid needs the same number of cells")
    mosaic = [["truth", *[column for column, _ in cells]] for _, cells in rows]
    x0, y0, x1, y1 = frame.total_bounds
    aspect = (y1 - y0) / (x1 - x0) if x1 > x0 else 1.0
    height = MAP_WIDTH * min(max(aspect, 0.25), 2.0) + 0.45  # a title per row
    fig, axes = plt.subplot_mosaic(
        mosaic,
        figsize=(MAP_WIDTH * (1 + ncols) + 1.6, height * len(rows) + 1.1),
        layout="constrained",
    )

    def draw(ax, column, title):
        frame.plot(column=column, ax=ax, cmap=cmap, norm=norm, lw=0,
                   missing_kwds={"color": missing_color})  # fmt: skip
        if outlines is not None:
            outlines.plot(ax=ax, color="white", lw=0.4)
        hide_frame(ax)
        ax.set_title(title, fontsize=10)

    draw(axes["truth"], *truth)
    for row_label, cells in rows:
        for c, (column, title) in enumerate(cells):
            draw(axes[column], column, title)
            if c == 0 and row_label:
                axes[column].set_ylabel(row_label, fontsize=9)
    fig.colorbar(
        plt.cm.ScalarMappable(norm=norm, cmap=cmap),
        ax=list(axes.values()),
        shrink=0.8 if len(rows) > 1 else 1.0,
        label=label,
    )
    return fig


def truth_scale(truth) -> mcolors.Normalize:
    """The colour scale of a map grid that compares with the truth: the truth's 1st to
    99th percentile (missing values ignored), clipped, so that synthetic values outside
    it saturate, which is what the eye should catch."""
    lo, hi = np.nanquantile(truth, [0.01, 0.99])
    return mcolors.Normalize(vmin=lo, vmax=hi, clip=True)


def boundaries(frame, by: str):
    """The outlines of the groups of ``frame``'s polygons (e.g. states from counties)."""
    return frame[[by, "geometry"]].dissolve(by).boundary
