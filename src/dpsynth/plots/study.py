"""Figures of a study on the analyst's own strata: its measures against epsilon, the
epsilon guide, and maps of the area rates."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpsynth.arms import Arm
from dpsynth.design import at_epsilon
from dpsynth.study.guide import CALIBRATION_METRICS

METHOD_LABELS = {"paper": "paper calibration, nominal eps", "exact": "exact bivariate",
                 "certified": "certified"}  # fmt: skip
MECHANISM_NAMES = {"md": "MD", "pg": "PG", "truncated": "Truncated PG"}


def arm_title(arm: Arm) -> str:
    """An arm's legend, from its fields: ``Truncated PG (certified)`` for the arm
    ``truncated`` / ``certified`` under its default name; an arm the config names otherwise
    (e.g. Study 2's ``untruncated``) keeps its name."""
    if arm.baseline or arm.name != Arm(arm.mechanism, arm.method).name:
        return arm.name
    if arm.mechanism == "md":
        return "MD (exact alpha)"  # Quick (2021), eq 5: paper and certified are one calibration
    return f"{MECHANISM_NAMES[arm.mechanism]} ({METHOD_LABELS[arm.method]})"


def _summary_titles(summary: pd.DataFrame) -> dict[str, str]:
    """The legend of each arm of a study's summary (its ``arm, mechanism, method`` rows)."""
    rows = summary[["arm", "mechanism", "method"]].drop_duplicates()
    return {r.arm: arm_title(Arm(r.mechanism, r.method, r.arm)) for r in rows.itertuples()}


def measure_title(measure: str) -> str:
    if measure == "rmse":
        return "rMSE of the strata rates (per 100,000)"
    if measure == "rank_correlation":
        return "rank correlation of the area rates"
    return f"disparity {measure.split(':', 1)[1]} (rate ratio)"


#: The study stage's palette: matplotlib's tab10.
TAB10 = tuple(plt.cm.tab10(k) for k in range(10))


def arm_colours(names, palette=TAB10) -> dict:
    """Each arm's colour by its place in ``names``: the palette's colour at that place
    (cycling). The study stage's figures place the arms in the order of their names,
    Study 2's (:mod:`dpsynth.plots.study2`) in the order of ``study2.arms``."""
    return {name: palette[k % len(palette)] for k, name in enumerate(names)}


def figure_measures(summary: pd.DataFrame, study: str, adjusted: bool):
    """Each measure against epsilon: median and 95% band over the datasets per arm, the
    truth dashed (rMSE: none, its truth is 0)."""
    draws = summary[~summary["metric"].isin(CALIBRATION_METRICS)]
    measures = list(dict.fromkeys(["rmse", "rank_correlation", *sorted(draws["metric"])]))
    measures = [m for m in measures if m in set(draws["metric"])]
    arms = sorted(draws["arm"].unique())
    colours, titles = arm_colours(arms), _summary_titles(draws)
    ncols = 2 if len(measures) == 4 else min(3, len(measures))
    nrows = -(-len(measures) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.6 * nrows + 0.9),
                             squeeze=False, layout="constrained")  # fmt: skip
    for ax, measure in zip(axes.flat, measures, strict=False):
        rows = draws[draws["metric"] == measure]
        for arm in arms:
            sel = rows[rows["arm"] == arm].sort_values("epsilon")
            ax.plot(sel["epsilon"], sel["median"], color=colours[arm], label=titles[arm])
            ax.fill_between(sel["epsilon"], sel["lower"], sel["upper"], color=colours[arm],
                            alpha=0.15, lw=0)  # fmt: skip
        if measure != "rmse":
            ax.axhline(rows["truth"].iloc[0], color="black", ls="--", lw=1, label="truth")
        else:
            ax.set_yscale("log")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon")
        ax.set_title(measure_title(measure), fontsize=10)
    for ax in list(axes.flat)[len(measures) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if "truth" not in labels and len(measures) > 1:
        extra = axes.flat[1].get_legend_handles_labels()
        handles, labels = handles + extra[0][-1:], labels + extra[1][-1:]
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(labels)),
               fontsize=9, frameon=False)  # fmt: skip
    kind = "age-adjusted" if adjusted else "crude"
    fig.suptitle(f"Study {study}: what the synthetic tables keep, against epsilon\n"
                 f"(median and 95% band over the datasets; area and group rates {kind})",
                 fontsize=11)  # fmt: skip
    return fig


def figure_guide(guide: pd.DataFrame, epsilons, study: str, arms=()):
    """For each measure and arm, the smallest epsilon from which the median (filled) and
    the 95% band (open) stay within tolerance; arrows at the right: not in the grid.
    ``arms`` (:class:`~dpsynth.arms.Arm` values, the study's) give the legends."""
    measures = list(dict.fromkeys(guide["measure"]))
    titles = {spec.name: arm_title(spec) for spec in arms}
    arms = sorted(guide["arm"].unique())
    colours = arm_colours(arms)
    top = max(epsilons) * 2.2
    fig, ax = plt.subplots(figsize=(8.5, 1.0 + 0.55 * len(measures) * len(arms) ** 0.5 + 1.2),
                           layout="constrained")  # fmt: skip
    offsets = np.linspace(-0.25, 0.25, len(arms)) if len(arms) > 1 else [0.0]
    for k, measure in enumerate(measures):
        for arm, dy in zip(arms, offsets, strict=True):
            # the band's ring first, the median's dot on top: both at one epsilon read as
            # a dot in a ring
            for criterion, fill, size in (("95% band", False, 11), ("median", True, 5)):
                row = guide[(guide["measure"] == measure) & (guide["arm"] == arm)
                            & (guide["criterion"] == criterion)]  # fmt: skip
                eps = float(row["epsilon"].iloc[0]) if len(row) else np.nan
                x, marker = (eps, "o") if np.isfinite(eps) else (top, ">")
                ax.plot(x, k + dy, marker=marker, ms=size, color=colours[arm],
                        mfc=colours[arm] if fill else "none", ls="none")  # fmt: skip
    for arm in arms:
        ax.plot([], [], "o", color=colours[arm], label=titles.get(arm, arm))
    ax.plot([], [], "o", ms=5, color="grey", label="median within tolerance (dot)")
    ax.plot(
        [],
        [],
        "o",
        ms=11,
        color="grey",
        mfc="none",
        label="95% band within the wider tolerance (ring)",
    )
    ax.plot([], [], ">", color="grey", label="not within the grid")
    tol = guide.groupby("criterion")["tolerance"].first()
    ax.set_yticks(range(len(measures)), [measure_title(m) for m in measures], fontsize=9)
    ax.set_ylim(len(measures) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.set_xlim(min(epsilons) / 1.5, top * 1.5)
    ax.axvline(max(epsilons), color="grey", lw=0.5, ls=":")
    ax.set_xlabel("smallest epsilon of the grid from which the measure stays within tolerance")
    ax.grid(axis="x", which="major", lw=0.3)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    ax.set_title(f"Epsilon guide, study {study}: tolerance {tol.get('median', np.nan):g} "
                 f"(median), {tol.get('95% band', np.nan):g} (band)", fontsize=11)  # fmt: skip
    return fig


def figure_maps(geometry, key: str, area_rates: pd.DataFrame, arms, epsilons, study: str,
                outline: str | None = None):  # fmt: skip
    """The true area rates (left, once), then the mean synthetic rates of each arm (rows;
    :class:`~dpsynth.arms.Arm` values) at each map epsilon (columns), on one colour scale
    (the truth's 1-99% range) with one colour bar; every axes holds a map, drawn as
    :func:`~dpsynth.plots.maps.map_projection` says (named in the footnote). Only the
    shapes of the strata's areas are drawn; a shape without a rate is light grey, and areas
    without a shape (``geometry.missing: allow``) are listed in the footnote."""
    from dpsynth.plots.maps import boundaries, map_grid, map_projection, truth_scale

    frame = geometry[[key, *([outline] if outline else []), "geometry"]].copy()
    frame[key] = frame[key].astype(str)
    areas = set(area_rates.loc[area_rates["arm"] == "truth", "area"].astype(str))
    drawn = frame[key].isin(areas)
    if not drawn.any():
        raise ValueError(f"no shape's {key!r} is an area of the strata; nothing to map")
    unused = int((~drawn).sum())
    frame, projection = map_projection(frame[drawn].copy())

    def lookup(selection):  # each shape's rate, by its key
        return frame[key].map(selection.set_index("area")["rate"])

    truth = area_rates[area_rates["arm"] == "truth"]
    frame["truth"] = lookup(truth)
    rows = []
    for r, spec in enumerate(arms):
        arm, cells = spec.name, []
        for eps in epsilons:
            sel = area_rates[(area_rates["arm"] == arm) & at_epsilon(area_rates["epsilon"], eps)]
            frame[f"{arm}|{eps:g}"] = lookup(sel)
            cells.append((f"{arm}|{eps:g}", f"epsilon = {eps:g}" if r == 0 else ""))
        rows.append((arm_title(spec), cells))
    fig = map_grid(
        frame,
        ("truth", "true rates"),
        rows,
        norm=truth_scale(frame["truth"]),
        label="rate per 100,000",
        outlines=boundaries(frame, outline) if outline else None,
    )
    notes = ["rows: arms; columns: epsilon", "colours saturate outside the truth's 1-99% range",
             "light grey: a shape without a rate"]  # fmt: skip
    if unused:
        notes.append(f"{unused} shape(s) whose key is no area of the strata: not drawn")
    unmapped = sorted(areas - set(frame[key]))
    if unmapped:
        more = f" and {len(unmapped) - 8} more" if len(unmapped) > 8 else ""
        notes.append(f"{len(unmapped)} of {len(areas)} areas have no shape and are not drawn: "
                     f"{', '.join(unmapped[:8])}{more}")  # fmt: skip
    lines = ["; ".join(notes[:2]), "; ".join(notes[2:]), f"map: {projection}"]
    fig.supxlabel("\n".join(lines), fontsize=8)
    fig.suptitle(f"Study {study}: true area rates and mean synthetic rates over the datasets",
                 fontsize=11)  # fmt: skip
    return fig
