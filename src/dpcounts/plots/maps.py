"""Choropleth maps of area values, their one colour scale, and the projection a map is
drawn in.

Every map, of US counties (Study 1 and 2, the data maps), of Pennsylvania or of a study's
own geometry anywhere on Earth, is drawn as :func:`map_projection` says: a geometry in
longitude/latitude in an equal-area projection centred on it (so a single region such as
Pennsylvania is upright, not turned as in a projection centred elsewhere), a projected one
in its own CRS; its footnote names the projection (:func:`crs_description`). Every map's
colours follow one rule (:func:`rate_scale`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import numpy as np

from dpcounts.plots.style import RATE_CMAP, colourbar_plain, styled

log = logging.getLogger(__name__)

#: Conus Albers equal-area projection (NAD83), for a caller that asks for it.
CONUS_ALBERS = "EPSG:5070"

#: Where longitudes span more than this (degrees), a geometry is drawn on a world map.
HEMISPHERE = 180.0


def _longitude_span(west: np.ndarray, east: np.ndarray) -> tuple[float, float]:
    """(centre, width) in degrees of the shortest arc of longitudes that holds every
    interval [west, east] (one per polygon part): the circle less its largest uncovered
    gap, to a tenth of a degree, so that parts either side of the antimeridian (Fiji's,
    170E to 170W) centre on 180, not on 0. Width 360 when nothing is left uncovered."""
    bins = 3600
    first = np.floor(np.mod(west, 360.0) * 10).astype(int) % bins
    past = first + np.clip(np.ceil((east - west) * 10).astype(int), 1, bins)
    events = np.zeros(2 * bins + 1, dtype=int)
    np.add.at(events, first, 1)
    np.add.at(events, past, -1)
    depth = np.cumsum(events)[: 2 * bins]
    covered = (depth[:bins] + depth[bins:]) > 0  # an interval past 360 wraps to 0
    if covered.all():
        return 0.0, 360.0
    shift = int(np.argmax(covered))  # a covered bin first: every gap lies between two
    held = np.flatnonzero(np.roll(covered, -shift))
    gaps = np.diff(np.append(held, bins)) - 1
    k = int(np.argmax(gaps))
    start = (held[k] + gaps[k] + 1 + shift) % bins
    width = (bins - gaps[k]) / 10
    return float((start / 10 + width / 2 + 180.0) % 360.0 - 180.0), float(width)


def _degrees(value: float, positive: str, negative: str) -> str:
    return f"{abs(value):.1f}{positive if value >= 0 else negative}"


def _geographic_projection(frame):
    """``frame`` (longitude/latitude) in an equal-area projection centred on its extent."""
    import shapely

    bounds = shapely.bounds(shapely.get_parts(frame.geometry.to_numpy()))
    west, south, east, north = bounds[np.isfinite(bounds).all(axis=1)].T  # no empty parts
    centre_lon, width = _longitude_span(west, east)
    if width > HEMISPHERE:  # a world map: no azimuthal projection holds it
        crs = "+proj=eqearth +lon_0=0 +datum=WGS84 +units=m +no_defs"
        return frame.to_crs(crs), "Equal Earth (equal-area), centred on 0.0E"
    centre_lat = (np.nanmin(south) + np.nanmax(north)) / 2
    crs = (f"+proj=laea +lat_0={centre_lat:.4f} +lon_0={centre_lon:.4f} +datum=WGS84 "
           "+units=m +no_defs")  # fmt: skip
    where = f"{_degrees(centre_lat, 'N', 'S')}, {_degrees(centre_lon, 'E', 'W')}"
    return frame.to_crs(crs), f"Lambert azimuthal equal-area centred on {where}"


#: Short names (PROJ's) of the projection parameters a footnote gives, by EPSG
#: parameter code: the origin, standard parallels, scale factor and azimuths (false
#: eastings and northings only shift the map, and are left out).
_PARAMETERS = {8801: "lat_0", 8821: "lat_0", 8811: "lat_0", 8802: "lon_0", 8822: "lon_0",
               8812: "lon_0", 8823: "lat_1", 8824: "lat_2", 8805: "k_0", 8815: "k_0",
               8813: "alpha", 8814: "gamma"}  # fmt: skip


def _datum(crs) -> str:
    datum = crs.datum.name if crs.datum is not None else ""
    if not datum or datum.lower().startswith("unknown"):
        return f"{crs.ellipsoid.name} ellipsoid" if crs.ellipsoid is not None else ""
    return datum


def crs_description(crs) -> str:
    """A CRS (pyproj) in words for a map's footnote: ``EPSG:5070 (NAD83 / Conus Albers)``
    where it has a code and a name; a CRS without a name (a PROJ string, a shapefile's
    .prj of a custom grid) by its projection method and key parameters, e.g. ``Lambert
    Conic Conformal (2SP), lat_0 33.75, lon_0 -79, lat_1 34.33, lat_2 36.17, North
    American Datum 1983``, never ``unknown``."""
    import pyproj

    crs = pyproj.CRS.from_user_input(crs)
    named = crs.name and crs.name.lower() not in ("unknown", "unnamed", "undefined")
    code = crs.to_epsg() if named else None
    if named:
        return f"EPSG:{code} ({crs.name})" if code else crs.name
    datum = _datum(crs)
    if crs.is_geographic:
        return f"longitude/latitude on the {datum}" if datum else "longitude/latitude"
    operation = crs.coordinate_operation
    if operation is None:
        return "an unnamed CRS without a projection method"
    words = [operation.method_name]
    for parameter in operation.params:
        short = _PARAMETERS.get(int(parameter.code)) if str(parameter.code).isdigit() else None
        if short:
            digits = ".6g" if short == "k_0" else ".4g"  # a scale factor's digits matter
            words.append(f"{short} {parameter.value:{digits}}")
    if datum:
        words.append(datum)
    return ", ".join(words)


def _crs_name(crs) -> str:
    return crs_description(crs)


def map_projection(frame):
    """``frame`` (a GeoDataFrame) in the projection a study's map draws it in, and a
    description of it for the figure's footnote: ``(projected frame, description)``.

    * a projected CRS: its own CRS (a national grid or UTM zone is drawn as its makers
      meant, not turned or sheared into another);
    * a geographic CRS (EPSG:4326, 4269, ...): Lambert azimuthal equal-area centred on the
      middle of its extent (longitudes taken round the shorter way, so an extent across the
      antimeridian centres on it), right in shape near the centre and in area everywhere,
      at any latitude; an extent wider than a hemisphere is drawn in Equal Earth;
    * no CRS, and every coordinate within longitude [-180, 180] and latitude [-90, 90]:
      taken as longitude/latitude (EPSG:4326) with a warning on this module's logger
      (``logging``, which the workflow's scripts write to the job's log), then as above;
    * no CRS, other coordinates (planar, e.g. metres of an unnamed grid): as they are.
    """
    crs = frame.crs
    if frame.empty or not np.isfinite(frame.total_bounds).all():
        return frame, "no shapes"
    if crs is None:
        x0, y0, x1, y1 = frame.total_bounds
        if not (-180 <= x0 <= x1 <= 180 and -90 <= y0 <= y1 <= 90):
            return frame, "drawn as given (no CRS; the coordinates are not longitude/latitude)"
        log.warning(
            "the geometry has no CRS and its coordinates (x %g to %g, y %g to %g) lie within "
            "longitude/latitude: taken as EPSG:4326 (WGS 84); give the file a CRS if it is "
            "in another", x0, x1, y0, y1,
        )  # fmt: skip
        projected, described = _geographic_projection(frame.set_crs("EPSG:4326"))
        return projected, f"{described} (no CRS: taken as longitude/latitude, EPSG:4326)"
    if crs.is_geographic:
        projected, described = _geographic_projection(frame)
        return projected, f"{described}, from {_crs_name(crs)}"
    return frame, f"drawn in {_crs_name(crs)}, its own CRS"


@styled
def county_choropleth(
    frame,
    column: str,
    ax=None,
    *,
    title: str = "",
    cmap: str = RATE_CMAP,
    vmin: float | None = None,
    vmax: float | None = None,
    norm: mcolors.Normalize | str | None = None,
    legend_label: str | None = None,
    crs: str | None = None,
    edgecolor: str = "white",
    linewidth: float = 0.05,
    missing_color: str = "lightgrey",
    footnote: bool = True,
    values_name: str = "the values",
    scale: ColourScale | None = None,
):
    """Fill each polygon of ``frame`` (a GeoDataFrame with a CRS) by ``frame[column]``.

    The colour scale: by default the one rule of every map (:func:`rate_scale`: the 2nd
    to 98th percentile, log colours where that spans a decade, arrows on the colour bar
    where colours saturate); ``vmin``/``vmax`` fix a linear scale's limits instead, and
    ``norm`` is a matplotlib ``Normalize`` or ``"log"`` (a ``LogNorm`` from
    ``vmin``/``vmax``, defaulting to the positive data range; values must then be
    positive). Missing values are drawn in ``missing_color``. A colorbar labelled
    ``legend_label`` (default: the column name; plain numbers on a log scale) is added.
    The map is drawn in ``crs`` if given, else as :func:`map_projection` says (its own
    projection: a single region upright), named in a footnote (``footnote``) with the
    colour rule (``values_name``: what the values are, in its words). ``scale`` (a
    :class:`ColourScale`, e.g. one :func:`rate_scale` of several maps) replaces the rule's
    own scale, so that maps side by side share one. Returns the Figure.
    """
    if frame.crs is None:
        raise ValueError("frame has no CRS; cannot project it")
    if column not in frame.columns:
        raise KeyError(f"column {column!r} not in the frame; have {list(frame.columns)}")
    values = frame[column].to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    extend, rule = "neither", ""
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
    elif scale is not None or (norm is None and vmin is None and vmax is None):
        scale = scale if scale is not None else rate_scale(values)
        norm, extend, rule = scale.norm, scale.extend, scale.words(values_name)
    elif norm is None:
        norm = mcolors.Normalize(
            vmin=vmin if vmin is not None else finite.min(),
            vmax=vmax if vmax is not None else finite.max(),
        )

    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 5.6), layout="constrained")
    fig = ax.figure
    if crs is None:
        projected, projection = map_projection(frame)
    else:
        projected, projection = frame.to_crs(crs), f"drawn in {crs_description(crs)}"
    projected = projected.assign(**{column: _saturated(values, norm)})
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
    colorbar = fig.colorbar(mappable, ax=ax, shrink=0.7, pad=0.01, extend=extend)
    label = legend_label if legend_label is not None else column
    colorbar.set_label(f"{label} (log scale)" if rule and isinstance(norm, mcolors.LogNorm)
                       else label)  # fmt: skip
    colourbar_plain(colorbar)
    ax.set_axis_off()
    ax.set_aspect("equal")
    if title:
        ax.set_title(title)
    if footnote:
        notes = [rule] if rule else []
        if np.isnan(values).any():
            notes.append("light grey: no value")
        fig.supxlabel("\n".join(["; ".join(notes), f"map: {projection}"]).strip(), fontsize=8)
    return fig


def _saturated(values: np.ndarray, norm) -> np.ndarray:
    """``values`` held within ``norm``'s limits (missing values kept missing), so that a
    value beyond them takes the end colour (on a log scale, a zero too)."""
    if norm.vmin is None or norm.vmax is None:
        return values
    return np.where(np.isfinite(values), np.clip(values, norm.vmin, norm.vmax), np.nan)


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


@styled
def map_grid(frame, truth, rows, *, norm, label: str, outlines=None, cmap: str = RATE_CMAP,
             missing_color: str = "lightgrey", extend: str = "neither"):  # fmt: skip
    """The truth's map (left, spanning every row) beside a grid of maps on one colour scale,
    with one shared colour bar; every axes holds a map, none is left empty.

    ``frame``: a GeoDataFrame (projected, e.g. by :func:`map_projection`) holding every
    column drawn. ``truth``: (column, title). ``rows``: a list of (row label, cells), each
    cell a (column, title) pair, every row as long as the first. ``outlines``: a GeoSeries of
    boundaries (e.g. states) drawn over every map, or None. ``extend``: the colour bar's
    arrows (:class:`ColourScale`). Returns the Figure.
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

    shapes = area_paths(frame)  # once: every panel draws the same areas and lines
    lines = line_segments(outlines) if outlines is not None else None

    def draw(ax, column, title):
        fill_areas(ax, shapes, frame[column].to_numpy(dtype=float), cmap=cmap, norm=norm,
                   missing_color=missing_color)  # fmt: skip
        if lines is not None:
            draw_lines(ax, lines, color="white", lw=0.4)
        ax.set_aspect("equal")  # a panel's shape is the areas' shape in the projection
        hide_frame(ax)
        ax.set_title(title, fontsize=10)

    draw(axes["truth"], *truth)
    for row_label, cells in rows:
        for c, (column, title) in enumerate(cells):
            draw(axes[column], column, title)
            if c == 0 and row_label:
                axes[column].set_ylabel(row_label, fontsize=9)
    colorbar = fig.colorbar(
        plt.cm.ScalarMappable(norm=norm, cmap=cmap),
        ax=list(axes.values()),
        shrink=0.8 if len(rows) > 1 else 1.0,
        label=label,
        extend=extend,
    )
    colourbar_plain(colorbar)
    return fig


def area_paths(frame) -> list:
    """Each area's polygon(s) of ``frame`` as one matplotlib Path (holes and parts kept, as
    shapely draws them), None for an empty or missing geometry: made once per figure, so
    that a grid of maps does not rebuild thousands of patches for every panel."""
    from shapely.plotting import patch_from_polygon

    return [None if g is None or g.is_empty else patch_from_polygon(g).get_path()
            for g in frame.geometry]  # fmt: skip


def fill_areas(ax, paths, values, *, cmap, norm, missing_color: str) -> None:
    """Fill each area (``paths``, from :func:`area_paths`) by its value on ``norm``'s colour
    scale, areas without a finite value in ``missing_color``, with no edges; the view
    fits the areas."""
    from matplotlib.collections import PathCollection

    drawn = np.array([p is not None for p in paths], dtype=bool)
    finite = np.isfinite(values) & drawn
    missing = ~np.isfinite(values) & drawn
    if finite.any():  # first: the panel's first collection holds its values
        # beyond the limits: the end colours (also a value a log scale cannot place)
        colours = plt.get_cmap(cmap)
        colours = colours.with_extremes(bad=colours(0.0))
        filled = PathCollection([paths[i] for i in np.flatnonzero(finite)], cmap=colours,
                                norm=norm, linewidths=0)  # fmt: skip
        filled.set_array(values[finite])
        ax.add_collection(filled)
    if missing.any():
        ax.add_collection(PathCollection([paths[i] for i in np.flatnonzero(missing)],
                                         facecolors=missing_color, linewidths=0))  # fmt: skip
    ax.autoscale_view()


def line_segments(lines) -> list[np.ndarray]:
    """The (x, y) vertices of each part of a GeoSeries of (multi)lines (e.g.
    :func:`boundaries`), the segments geopandas' ``GeoSeries.plot`` draws; made once per
    figure."""
    import shapely

    # normalised first, as geopandas draws them (the same vertices from the same start)
    parts = shapely.get_parts(shapely.normalize(np.asarray(lines.values)))
    parts = parts[~shapely.is_empty(parts)]
    return [np.array(part.coords)[:, :2] for part in parts]


def draw_lines(ax, segments, **style) -> None:
    """The lines of :func:`line_segments` as one collection, what ``GeoSeries.plot(ax=ax,
    **style)`` draws of lines, without its redraw of the whole figure per call."""
    from matplotlib.collections import LineCollection

    ax.add_collection(LineCollection(segments, **style), autolim=True)
    ax.autoscale_view()


#: The colour scale's limits: these quantiles of the values it is made from, taken at
#: values that occur (the lower limit rounds up, the upper down), so that one outlier
#: among a few areas saturates instead of stretching the scale.
SCALE_QUANTILES = (0.02, 0.98)
#: A scale is logarithmic where its limits are positive and span at least this ratio
#: (a decade): skewed values (rates of small areas, populations) spread over the colours.
LOG_SPAN = 10.0


@dataclass(frozen=True)
class ColourScale:
    """One map's (or one grid's) colour scale: ``norm``, and ``extend`` (``"neither"``,
    ``"min"``, ``"max"`` or ``"both"``: the colour bar's arrows, where values lie beyond
    the limits and their colour saturates)."""

    norm: mcolors.Normalize
    extend: str

    @property
    def log(self) -> bool:
        return isinstance(self.norm, mcolors.LogNorm)

    def words(self, of: str = "the values") -> str:
        """The rule in words, for a footnote: ``log colours from the 2nd to the 98th
        percentile of the true rates; arrows: values beyond, saturated``."""
        kind = "log colours" if self.log else "linear colours"
        arrows = ("; beyond them colours saturate (the colour bar's arrows)"
                  if self.extend != "neither" else "")  # fmt: skip
        return f"{kind} from the 2nd to the 98th percentile of {of}{arrows}"


def rate_scale(*values) -> ColourScale:
    """The colour scale of every map of rates (and counts): the one rule, so that no
    outlier can flatten a map and the same values get the same scale in every figure.

    Limits: the 2nd and 98th percentiles (:data:`SCALE_QUANTILES`) of ``values`` (arrays;
    pooled; missing values ignored), each at a value that occurs; values beyond them
    saturate, and the colour bar draws an arrow at that end. Scale: logarithmic where the
    limits are positive and span a decade or more (:data:`LOG_SPAN`), else linear. Where
    the limits coincide (too few distinct values), the range of the values."""
    pooled = np.concatenate([np.asarray(v, dtype=float).ravel() for v in values])
    finite = pooled[np.isfinite(pooled)]
    if finite.size == 0:
        return ColourScale(mcolors.Normalize(0.0, 1.0), "neither")
    low = float(np.quantile(finite, SCALE_QUANTILES[0], method="higher"))
    high = float(np.quantile(finite, SCALE_QUANTILES[1], method="lower"))
    if not high > low:
        low, high = float(finite.min()), float(finite.max())
    if not high > low:  # one value: a scale around it
        low, high = (low - 1.0, high + 1.0) if low == 0 else (low * 0.9, high * 1.1)
        low, high = min(low, high), max(low, high)
    norm = (mcolors.LogNorm(low, high) if low > 0 and high / low >= LOG_SPAN
            else mcolors.Normalize(low, high))  # fmt: skip
    return ColourScale(norm, extend_of(norm, finite))


def extend_of(norm, *values) -> str:
    """The colour bar's arrows for ``values`` (arrays, pooled) on ``norm``: ``"min"``,
    ``"max"``, ``"both"`` where some lie beyond its limits, else ``"neither"``."""
    pooled = np.concatenate([np.asarray(v, dtype=float).ravel() for v in values])
    pooled = pooled[np.isfinite(pooled)]
    below, above = bool((pooled < norm.vmin).any()), bool((pooled > norm.vmax).any())
    return {(False, False): "neither", (True, False): "min", (False, True): "max",
            (True, True): "both"}[(below, above)]  # fmt: skip


def truth_scale(truth, *synthetic) -> ColourScale:
    """The colour scale of a map grid that compares with the truth: :func:`rate_scale`'s
    limits from the truth alone (so that a noisy arm cannot flatten the truth's map), its
    arrows wherever the truth or a synthetic map (``synthetic``) goes beyond them: those
    areas saturate, which is what the eye should catch."""
    scale = rate_scale(truth)
    return ColourScale(scale.norm, extend_of(scale.norm, truth, *synthetic))


def boundaries(frame, by: str):
    """The outlines of the groups of ``frame``'s polygons (e.g. states from counties)."""
    return frame[[by, "geometry"]].dissolve(by).boundary
