"""The one style of every figure: its rcParams, the colour map of rates, log axes whose
tick labels never run into each other, the symbols (epsilon, Delta) in mathtext, and the
labels of the project's vocabulary (arms, mechanisms, calibration methods).

Every plotting module draws through :func:`styled` (its figure functions are decorated)
and takes its symbols and labels from here, so a figure never writes ``eps`` or a config
key where a reader expects a symbol or words.
"""

from __future__ import annotations

import functools
import re
from math import ceil, floor, log10

import matplotlib as mpl
import numpy as np
from matplotlib.ticker import Formatter, Locator, NullFormatter

import dpcounts.arms as _arms
from dpcounts.mechanisms import registry

#: The colour map of every rate (maps of rates, their colour bars): one map, so that the
#: same colour means a high rate in every figure. Perceptually uniform and print-safe.
RATE_CMAP = "viridis"

#: rcParams of every figure (:func:`styled`): one type size per role, mathtext in the body
#: font, no frame around legends, and tick labels as plain text (matplotlib's default
#: formatter otherwise writes every tick label as mathtext, ``$\mathdefault{0.2}$``, whose
#: parser took a third of a figure job's time for the same glyphs).
RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "figure.titlesize": 11,
    "mathtext.fontset": "dejavusans",
    "axes.formatter.use_mathtext": False,
    "image.cmap": RATE_CMAP,
}


def styled(function):
    """Decorator: build the figure under :data:`RC` (the values are read as artists are
    made, so the saved figure keeps them)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with mpl.rc_context(RC):
            return function(*args, **kwargs)

    return wrapper


# ---- symbols ------------------------------------------------------------------------------
EPSILON = r"$\varepsilon$"
#: Epsilon as a plain character (Greek small epsilon, in the body font): a figure whose
#: texts are all plain draws without mathtext's parser.
EPSILON_TEXT = "\N{GREEK SMALL LETTER EPSILON}"
DELTA = r"$\Delta$"
#: Delta as a plain character (Greek capital delta), as :data:`EPSILON_TEXT`.
DELTA_TEXT = "\N{GREEK CAPITAL LETTER DELTA}"
#: The privacy ratio's bounds, exp(+-epsilon).
EXP_PM_EPSILON = r"$\exp(\pm\varepsilon)$"


def eps_equals(value: float, fmt: str = "g", subscript: str = "", plain: bool = False) -> str:
    """``$\\varepsilon = 1$`` (or ``$\\varepsilon_{prior} = 0.5$`` with ``subscript``);
    ``plain``: the same in plain text, ``ε = 1`` (``ε prior = 0.5``), drawn without
    mathtext's parser (:data:`EPSILON_TEXT`)."""
    if plain:
        return f"{EPSILON_TEXT}{' ' + subscript if subscript else ''} = {value:{fmt}}"
    sub = f"_{{\\mathrm{{{subscript}}}}}" if subscript else ""
    return f"$\\varepsilon{sub} = {value:{fmt}}$"


def delta_equals(value: float, fmt: str = ".2f", plain: bool = False) -> str:
    """``$\\Delta = 3.54$``; ``plain``: ``Δ = 3.54`` (:data:`DELTA_TEXT`)."""
    if plain:
        return f"{DELTA_TEXT} = {value:{fmt}}"
    return f"$\\Delta = {value:{fmt}}$"


def math(text: str) -> str:
    """``text`` (a formula in TeX notation) as mathtext."""
    return f"${text}$"


# ---- the project's vocabulary -----------------------------------------------------------
# One vocabulary (dpcounts.arms), its epsilon written in mathtext here.
METHOD_LABELS = {key: words.format(epsilon=EPSILON) for key, words in _arms.METHOD_WORDS.items()}
human = _arms.human


def mechanism_title(mechanism: str, method: str | None) -> str:
    """``Truncated PG (certified)``, from a mechanism and calibration method
    (:func:`dpcounts.arms.mechanism_title`, epsilon in mathtext)."""
    return _arms.mechanism_title(mechanism, method, EPSILON)


def arm_title(arm) -> str:
    """An arm's legend (an :class:`~dpcounts.arms.Arm`): :func:`dpcounts.arms.arm_title`,
    the label the guide's table gives it too, epsilon in mathtext: its config ``title``
    where it has one; else its mechanism and method (``Truncated PG (certified)``); an arm
    the config named otherwise without a title reads as its name in words, then what it is
    (``untruncated: PG (paper calibration, nominal eps)``), so no legend is a config key."""
    return _arms.arm_title(arm, EPSILON)


# ---- each arm's colour, line and marker ---------------------------------------------------
#: Line style and marker by calibration method: paper solid with circles, exact bivariate
#: dash-dot with squares, certified dashed with triangles; a baseline (no calibration)
#: dash-dot with diamonds. The colours are the registry's (each family's ``colours``,
#: :mod:`dpcounts.privacy.families`).
METHOD_LINES = {"paper": ("-", "o"), "exact": ("-.", "s"), "certified": ("--", "^"),
                None: ("-.", "D")}  # fmt: skip
#: A method registered beyond these three: dotted with down triangles.
OTHER_METHOD_LINE = (":", "v")


def arm_style(arm) -> dict:
    """The colour, line style and marker of an arm (an :class:`~dpcounts.arms.Arm`) in every
    figure (``dict(color=..., linestyle=..., marker=...)``), from its family's record in the
    registry: the same arm looks the same in Study 1, Study 2 and every study's figures."""
    if arm.baseline:
        colour, method = registry.baseline(arm.mechanism).colour, None
    else:
        family = registry.family(arm.mechanism)
        variant = None if family.colour_by is None else getattr(arm, family.colour_by)
        colour = family.colours.get(variant, family.colours.get(None, "tab:cyan"))
        method = family.line_method or arm.method
    linestyle, marker = METHOD_LINES.get(method, OTHER_METHOD_LINE)
    return {"color": colour, "linestyle": linestyle, "marker": marker}


def arm_colours(arms) -> dict:
    """Each arm's colour (:func:`arm_style`), by its name."""
    return {arm.name: arm_style(arm)["color"] for arm in arms}


# ---- log axes -----------------------------------------------------------------------------
#: Mantissas tried within each decade, sparsest first.
_MANTISSAS = ((1,), (1, 3), (1, 2, 5), (1, 2, 3, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9))
#: Room a label needs along its axis, beyond its own extent (in font sizes).
_GAP = 0.8


def panel_legend(fig, axes, ncols: int) -> None:
    """One legend under ``fig`` for all its panels, every label once, in the order the
    panels first drew it (whichever panel drew it)."""
    legend = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    fig.legend(legend.values(), legend.keys(), loc="outside lower center", ncols=ncols,
               fontsize=8, frameon=False)  # fmt: skip


def power_of_ten(value: float) -> str:
    """``value`` as a power of ten in mathtext: ``$10^{6}$``, ``$2 \\times 10^{7}$``."""
    if value == 0 or not np.isfinite(value):
        return f"{value:g}"
    mantissa, exponent = f"{value:.3e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    power = f"10^{{{int(exponent)}}}"
    if mantissa in ("1", "-1"):
        return f"${mantissa[:-1]}{power}$"
    return f"${mantissa} \\times {power}$"


def plain_number(value: float) -> str:
    """A tick value as a plain number, at most 4 significant digits: 0.01, 2, 1.15, 1000,
    100000; from a million up, a power of ten in mathtext (``$10^{6}$``,
    ``$2 \\times 10^{7}$``), as a journal prints it, never ``1e+06``."""
    if value == 0 or not np.isfinite(value):
        return f"{value:g}"
    if abs(value) >= 1e6:
        return power_of_ten(value)
    return f"{float(f'{value:.4g}'):f}".rstrip("0").rstrip(".")


def tick_labels(values) -> list[str]:
    """The labels of one axis's ticks, in one style: plain numbers (:func:`plain_number`)
    when every tick is below a million, else every tick as a power of ten
    (:func:`power_of_ten`), so that ``100000`` never stands beside ``10^6``."""
    values = [float(v) for v in values]
    if any(abs(v) >= 1e6 for v in values if np.isfinite(v)):
        return [power_of_ten(v) for v in values]
    return [plain_number(v) for v in values]


def _label_length(text: str) -> float:
    """About how many characters wide ``text`` is drawn (mathtext's markup not counted)."""
    if text.startswith("$"):
        return len(re.sub(r"\\times|[${}^]", "", text)) + 0.6 * text.count("^")
    return len(text)


def _axis_room(axis) -> tuple[float, float, bool]:
    """(``axis``'s length in points, its tick labels' font size in points, whether the
    labels lie along the axis: the x axis); 300 and 8 points for an axis without a figure."""
    along = axis is None or axis.axis_name == "x"
    axes = getattr(axis, "axes", None)
    if axes is None or axes.figure is None:
        return 300.0, 8.0, along
    box = axes.get_position()
    width, height = axes.figure.get_size_inches()
    length = (box.width * width if along else box.height * height) * 72
    size = axis.majorTicks[0].label1.get_fontsize()
    return float(length), float(size), along


class PlainLogFormatter(Formatter):
    """Log-axis tick labels as plain numbers (0.01, 2, 10), never 2 x 10^0; on an axis
    that reaches a million, every label a power of ten (:func:`tick_labels`): one style
    per axis."""

    def __init__(self):
        self._powers = False

    def set_locs(self, locs):
        super().set_locs(locs)
        shown = np.asarray(locs, dtype=float)
        if self.axis is not None:  # the ticks drawn: those within the view
            low, high = sorted(self.axis.get_view_interval())
            shown = shown[(shown >= low * (1 - 1e-9)) & (shown <= high * (1 + 1e-9))]
        self._powers = bool((np.abs(shown[np.isfinite(shown)]) >= 1e6).any())

    def __call__(self, value, pos=None):
        return power_of_ten(value) if self._powers else plain_number(value)


class PlainLogLocator(Locator):
    """Major ticks of a log axis, as many as fit: over a decade or more, 1-2-5 style values
    (the densest of 1; 1, 3; 1, 2, 5; 1, 2, 3, 5; 1 to 9 per decade, else every other
    decade); within less than a decade, evenly spaced round values (0.8, 1, 1.2, 1.4 on a
    ratio axis). A set fits when every two neighbouring labels, at the axis's tick label
    size and at their places on the log scale, leave a gap between them; so labels never
    run into each other."""

    def __init__(self, minimum: int = 2):
        self.minimum = minimum
        self._last = None  # (view and room, ticks): the last choice, asked again and again

    def __call__(self):
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(vmin, vmax)

    def _room(self) -> tuple[float, float, bool]:
        """(axis length in points, label font size in points, whether labels lie along the
        axis: the x axis)."""
        return _axis_room(self.axis)

    @staticmethod
    def _fits(ticks, vmin, vmax, room) -> bool:
        """Whether neighbouring labels of ``ticks`` keep a gap at their places."""
        length, size, along = room
        if len(ticks) < 2:
            return True
        places = length * (np.log(ticks) - np.log(vmin)) / (np.log(vmax) - np.log(vmin))
        if along:  # half of each neighbour's width
            extent = np.array([0.62 * _label_length(label) * size for label in tick_labels(ticks)])
            need = (extent[1:] + extent[:-1]) / 2 + _GAP * size
        else:  # one line of text
            need = np.full(len(ticks) - 1, (1.2 + _GAP) * size)
        return bool(np.all(np.diff(places) >= need))

    def tick_values(self, vmin, vmax):
        vmin, vmax = sorted((float(vmin), float(vmax)))
        if not (np.isfinite(vmin) and np.isfinite(vmax)) or vmax <= 0:
            return np.array([1.0, 10.0])
        vmin = max(vmin, vmax * 1e-12)
        if vmax <= vmin * (1 + 1e-9):
            return np.array([vmin])
        room = self._room()
        key = (vmin, vmax, room)
        if self._last is not None and self._last[0] == key:  # drawing asks many times
            return self._last[1].copy()
        ticks = self._choose(vmin, vmax, room)
        self._last = (key, ticks)
        return ticks.copy()

    def _choose(self, vmin, vmax, room) -> np.ndarray:
        """The ticks of :meth:`tick_values` for a view and the room its labels have."""
        if log10(vmax / vmin) >= 1:
            low, high = floor(log10(vmin)), ceil(log10(vmax))
            candidates = [[m * 10.0**k for k in range(low, high + 1) for m in mantissas]
                          for mantissas in _MANTISSAS]  # fmt: skip
        else:
            candidates = [self._linear(vmin, vmax, nbins) for nbins in (1, 2, 3, 4, 5, 7, 9)]
        candidates = [[t for t in ticks if vmin * (1 - 1e-9) <= t <= vmax * (1 + 1e-9)]
                      for ticks in candidates]  # fmt: skip
        best = next((c for c in candidates if len(c) >= self.minimum), candidates[-1])
        for ticks in candidates:  # sparsest first: the densest that fits
            if len(ticks) >= max(self.minimum, len(best)) and self._fits(ticks, vmin, vmax, room):
                best = ticks
        while len(best) > 2 and not self._fits(best, vmin, vmax, room):
            best = best[::2]  # many decades on a short axis: every other one
        return np.array(best)

    @staticmethod
    def _linear(vmin, vmax, nbins):
        from matplotlib.ticker import MaxNLocator

        ticks = MaxNLocator(nbins, steps=[1, 2, 5, 10]).tick_values(vmin, vmax)
        return [float(f"{t:.12g}") for t in ticks if t > 0]


def log_axis(axis, minor: bool = True) -> None:
    """A log axis (``ax.xaxis`` or ``ax.yaxis``; the scale set to log if it is not) with
    :class:`PlainLogLocator` ticks labelled by :class:`PlainLogFormatter` and unlabelled
    minor ticks (none with ``minor=False``: a figure of many panels draws each tick):
    plain numbers that never collide."""
    from matplotlib.ticker import LogLocator, NullLocator

    if axis.get_scale() != "log":
        axis.axes.set_xscale("log") if axis.axis_name == "x" else axis.axes.set_yscale("log")
    axis.set_major_locator(PlainLogLocator())
    axis.set_major_formatter(PlainLogFormatter())
    axis.set_minor_locator(LogLocator(subs="auto") if minor else NullLocator())
    axis.set_minor_formatter(NullFormatter())


class PlainSymlogLocator(Locator):
    """Major ticks of a symlog axis whose linear part is 0 to 1 (totals that reach 0): 0,
    then :class:`PlainLogLocator`'s ticks from 1 up."""

    def __init__(self):
        self._log = PlainLogLocator()

    def set_axis(self, axis):
        super().set_axis(axis)
        self._log.set_axis(axis)

    def __call__(self):
        vmin, vmax = sorted(self.axis.get_view_interval())
        ticks = [t for t in self._log.tick_values(1.0, vmax) if t >= 1] if vmax > 1 else []
        return np.array(([0.0] if vmin <= 0 <= vmax else []) + ticks)


def symlog_axis(axis, minor: bool = True) -> None:
    """A symlog axis (linear from 0 to 1, set by the caller) with plain-number ticks: 0, 1,
    10, 100 (:class:`PlainSymlogLocator`), never 10^x; unlabelled minor ticks (the scale's
    own; none with ``minor=False``)."""
    from matplotlib.ticker import NullLocator

    axis.set_major_locator(PlainSymlogLocator())
    axis.set_major_formatter(PlainLogFormatter())
    if not minor:
        axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


# ---- linear axes -------------------------------------------------------------------------
#: Steps between a linear axis's ticks, times a power of ten (matplotlib's own).
_LINEAR_STEPS = (1, 2, 2.5, 5, 10)
#: Most intervals tried on a linear axis, densest first.
_LINEAR_BINS = (9, 7, 5, 4, 3, 2, 1)


def _decimals(values) -> int:
    """The fewest decimals that write every one of ``values`` exactly (at most 12)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    scale = float(np.abs(values).max()) if values.size else 0.0
    for decimals in range(13):
        if np.all(np.abs(np.round(values, decimals) - values) <= 1e-9 * max(scale, 1e-12)):
            return decimals
    return 12


def thousands(value: float, decimals: int = 0) -> str:
    """A linear axis's tick value in plain words: thousands separated (147,500), ``decimals``
    places (0.25), a minus sign, never an offset or a power of ten."""
    if not np.isfinite(value):
        return f"{value:g}"
    text = f"{value:,.{decimals}f}"
    if text.lstrip("-").strip("0.,") == "":  # -0 and -0.00
        text = text.lstrip("-")
    return text.replace("-", "\N{MINUS SIGN}") if mpl.rcParams["axes.unicode_minus"] else text


class PlainLinearFormatter(Formatter):
    """Linear-axis tick labels as plain numbers (:func:`thousands`): 147,500 and 148,000,
    0.2 and 0.4 (as many decimals as the ticks need), no mathtext, no offset."""

    def __init__(self):
        self._decimals = 0

    def set_locs(self, locs):
        super().set_locs(locs)
        self._decimals = _decimals(locs)

    def __call__(self, value, pos=None):
        return thousands(value, self._decimals)


class PlainLinearLocator(Locator):
    """Major ticks of a linear axis, round values (1, 2, 2.5 or 5 times a power of ten
    apart), as many as fit: the densest set (of at most 9 intervals) whose neighbouring
    labels, written by :class:`PlainLinearFormatter` at the axis's tick label size, leave a
    gap between them; so big numbers over a narrow range never run into each other."""

    def __init__(self):
        self._last = None  # (view and room, ticks): the last choice, asked again and again

    def __call__(self):
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(vmin, vmax)

    def tick_values(self, vmin, vmax):
        from matplotlib.ticker import MaxNLocator

        vmin, vmax = sorted((float(vmin), float(vmax)))
        if not (np.isfinite(vmin) and np.isfinite(vmax)):
            return np.array([0.0, 1.0])
        room = _axis_room(self.axis)
        key = (vmin, vmax, room)
        if self._last is not None and self._last[0] == key:
            return self._last[1].copy()
        best = None
        for nbins in _LINEAR_BINS:  # densest first: the first that fits
            ticks = MaxNLocator(nbins, steps=list(_LINEAR_STEPS)).tick_values(vmin, vmax)
            span = (vmax - vmin) * 1e-9
            shown = ticks[(ticks >= vmin - span) & (ticks <= vmax + span)]
            best = ticks
            if self._fits(shown, vmin, vmax, room):
                break
        self._last = (key, best)
        return best.copy()

    @staticmethod
    def _fits(ticks, vmin, vmax, room) -> bool:
        """Whether neighbouring labels of ``ticks`` keep a gap at their places."""
        length, size, along = room
        if len(ticks) < 2 or vmax <= vmin:
            return True
        places = length * (np.asarray(ticks) - vmin) / (vmax - vmin)
        if along:  # half of each neighbour's width
            decimals = _decimals(ticks)
            extent = np.array([0.62 * len(thousands(t, decimals)) * size for t in ticks])
            need = (extent[1:] + extent[:-1]) / 2 + _GAP * size
        else:  # one line of text
            need = np.full(len(ticks) - 1, (1.2 + _GAP) * size)
        return bool(np.all(np.diff(places) >= need))


def linear_axis(axis) -> None:
    """A linear axis (``ax.xaxis`` or ``ax.yaxis``) with :class:`PlainLinearLocator` ticks
    labelled by :class:`PlainLinearFormatter`: plain numbers, thousands separated, that
    never collide, however big and close together (totals of 147,250 to 149,000)."""
    axis.set_major_locator(PlainLinearLocator())
    axis.set_major_formatter(PlainLinearFormatter())


#: The former name of :func:`log_axis`.
plain_log_ticks = log_axis


def colourbar_plain(colorbar) -> None:
    """A colour bar on a log scale labelled with plain numbers that do not collide."""
    axis = colorbar.ax.yaxis if colorbar.orientation == "vertical" else colorbar.ax.xaxis
    if axis.get_scale() == "log":
        log_axis(axis)
