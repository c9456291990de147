"""Figures of a study on the analyst's own strata: its measures against epsilon, the
epsilon guide, maps of the area rates, the map of the suppressed table, and the coverage of
intervals from a release's sets."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpcounts.plots.style as _style
from dpcounts.arms import Arm
from dpcounts.design import at_epsilon
from dpcounts.mechanisms import registry
from dpcounts.plots.style import (
    EPSILON,
    METHOD_LABELS,
    arm_title,
    eps_equals,
    human,
    log_axis,
    panel_legend,
    plain_log_ticks,
    styled,
)
from dpcounts.studies.stage.guide import CALIBRATION_METRICS

__all__ = ["METHOD_LABELS", "arm_title", "arm_colours", "figure_attack", "figure_measures",
           "figure_guide", "figure_maps", "figure_suppressed_map", "plain_log_ticks",
           "figure_coverage"]  # fmt: skip


def _summary_titles(summary: pd.DataFrame) -> dict[str, str]:
    """The legend of each arm of a study's summary (its ``arm, mechanism, method`` rows)."""
    rows = summary[["arm", "mechanism", "method"]].drop_duplicates()
    return {r.arm: arm_title(Arm(r.mechanism, r.method, r.arm)) for r in rows.itertuples()}


def arm_colours(arms) -> dict:
    """Each arm's colour by its name (:func:`dpcounts.plots.style.arm_style`: by what the
    arm is, the same in every figure, never by its place in a list)."""
    return _style.arm_colours(arms)


def study_heading(study: str) -> str:
    """A study's name for a figure's title: its config ``title`` as given; a name that is
    a config key (``homicide_1980``) in words, as a title (``Homicide 1980``)."""
    if " " in study:
        return study
    words = human(study)
    return words[:1].upper() + words[1:]


def _wrapped(text: str, width: int = 26) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def _verdict_line(row) -> str:
    """The guide's verdict in its own words (guide.csv's ``verdict_text``,
    :func:`dpcounts.studies.stage.guide.verdict_text`): the figures say what the table says."""
    return row.verdict_text


#: The legend's words for the suppression arm's line.
SUPPRESSION_LABEL = "suppression (small counts not shown, completed)"


def _bounded(arm: Arm) -> bool:
    """Whether the arm's mechanism has truncation bounds (the registry's word)."""
    return not arm.baseline and registry.family(arm.mechanism).bounded


def _error_limits(rows: pd.DataFrame, verdicts: pd.DataFrame) -> tuple[float, float] | None:
    """An error's log axis over what its row draws, not the tolerance's shading from 0 (its
    truth): from below the smallest band, reference or prior value to above the largest
    or the shading's top (None: nothing positive to draw)."""
    values = np.concatenate([rows[c].to_numpy(float) for c in
                             ("lower", "median", "upper", "reference", "prior")]
                            + [verdicts["within_high"].to_numpy(float)])  # fmt: skip
    values = values[np.isfinite(values) & (values > 0)]
    if not values.size:
        return None
    return float(values.min()) / 1.5, float(values.max()) * 1.5


@styled
def figure_measures(summary: pd.DataFrame, guide: pd.DataFrame, measures, arms, study: str,
                    adjusted: bool, headline=()):  # fmt: skip
    """Each measure (rows; :class:`~dpcounts.studies.stage.measures.Measure` values, in order) for
    each arm (columns; :class:`~dpcounts.arms.Arm` values) against epsilon: the arm's median
    and 95% band over the sets, the no-privacy reference (grey) with the values within
    tolerance of it (shaded), the truth (dashed; not for errors, whose truth is 0), the
    prior alone (dash-dot), suppression's value where the study has a suppression arm
    (dotted, gold: the table as an agency publishes it today), and the guide's verdict in
    the corner. A truncated arm's panel says what share of the true counts lies outside its
    bounds. ``headline``: the guide's comparison with suppression, a line each, under the
    title (:func:`dpcounts.studies.stage.suppression.headline`)."""
    draws = summary[~summary["metric"].isin(CALIBRATION_METRICS)]
    measures = [m for m in measures if m.name in set(draws["metric"])]
    arms = [a for a in arms if a.name in set(draws["arm"])]
    colours = arm_colours(arms)
    nrows, ncols = len(measures), len(arms)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.9 * ncols + 1.3, 2.1 * nrows + 1.3),
                             squeeze=False, sharex=True, sharey="row",
                             layout="constrained")  # fmt: skip
    for r, measure in enumerate(measures):
        rows = draws[draws["metric"] == measure.name]
        limits = None  # an error's (0 is its truth, off a log axis): the row's data
        if measure.kind.log_scale and not measure.kind.truth_line:
            limits = _error_limits(rows, guide[guide["measure"] == measure.name])
        for c, arm in enumerate(arms):
            ax = axes[r, c]
            sel = rows[rows["arm"] == arm.name].sort_values("epsilon")
            verdict = guide[(guide["measure"] == measure.name) & (guide["arm"] == arm.name)]
            if len(verdict):
                v = verdict.iloc[0]
                # hatched grey, edged: told apart from the arm's coloured band over it
                ax.axhspan(v.within_low, v.within_high, facecolor="0.94", edgecolor="0.6",
                           hatch="////", lw=0.6, zorder=0,
                           label="within tolerance of the reference")  # fmt: skip
            if len(sel):
                ref = sel.iloc[0]
                ax.axhline(ref["reference"], color="0.45", lw=1.2,
                           label="no privacy (reference)")  # fmt: skip
                if measure.kind.truth_line:
                    ax.axhline(ref["truth"], color="black", ls="--", lw=1, label="truth")
                ax.axhline(ref["prior"], color="#8c564b", ls="-.", lw=1, label="prior alone")
                if len(verdict) and np.isfinite(v.get("suppression", np.nan)):
                    ax.axhline(v.suppression, color="#b8860b", ls=":", lw=1.6,
                               label=SUPPRESSION_LABEL)  # fmt: skip
                ax.fill_between(sel["epsilon"], sel["lower"], sel["upper"],
                                color=colours[arm.name], alpha=0.35, lw=0, zorder=1,
                                label="95% band over the sets")  # fmt: skip
                ax.plot(sel["epsilon"], sel["median"], color=colours[arm.name], lw=1.6,
                        ls=_style.arm_style(arm)["linestyle"],
                        label="median over the sets")  # fmt: skip
                if _bounded(arm) and "truth_in_bounds" in sel:
                    ax.plot(sel["epsilon"], sel["truth_in_bounds"], color=colours[arm.name],
                            ls=":", lw=1.4,
                            label="truth clamped to the truncation bounds")  # fmt: skip
            notes = [_wrapped(_verdict_line(v), 44)] if len(verdict) else []
            if len(verdict) and v.outside_bounds_share > 0:
                notes.append(f"{v.outside_bounds_share:.1%} of true counts outside bounds")
            if r == 0:
                notes.insert(0, arm_title(arm))
            ax.set_title("\n".join(notes), fontsize=7.5)
            log_axis(ax.xaxis, minor=False)  # many panels: each tick is laid out and drawn
            if measure.kind.log_scale:
                if limits is not None:
                    ax.set_ylim(*limits)
                log_axis(ax.yaxis, minor=False)
            if c == 0:
                ax.set_ylabel(f"{_wrapped(measure.title)}\n({measure.unit})", fontsize=8)
            if r == nrows - 1:
                ax.set_xlabel(f"{EPSILON} of the synthetic table", fontsize=8)
            ax.tick_params(which="both", labelsize=7)
    panel_legend(fig, axes, ncols=3)
    kind = "age-adjusted" if adjusted else "crude"
    prior = guide["epsilon_prior"].max() if len(guide) else 0.0
    paid = f"; arms with a prior also pay its {EPSILON} = {prior:g}" if prior else ""
    lines = "".join(f"\n{line}" for line in headline)
    fig.suptitle(f"{study_heading(study)}: what the synthetic tables keep, against {EPSILON}\n"
                 f"(area and group rates {kind}{paid}){lines}", fontsize=10)  # fmt: skip
    return fig


@styled
def figure_attack(summary: pd.DataFrame, result: dict, arms, study: str):
    """What an attacker recovers of the small true counts (the ones suppression hides), for
    each arm (columns) against epsilon: the share a synthetic table gives exactly (top)
    and to within one (bottom), median and 95% band over the sets, beside the
    no-privacy reference (grey), the prior alone (dash-dot; the hyperparameters alone guess
    the same), the mode over a release's sets (dots: each group of ``suppression.sets``
    of them one release), the posterior mode given the hyperparameters and a release's
    sets, told the range (triangles; thin dashes: told the range, with no set) and
    differencing on the suppressed table (dotted gold: the share its published margins pin
    exactly, and to within one; :mod:`dpcounts.attack.differencing`)."""
    from dpcounts.studies.stage.measures import ATTACK, MODE, POSTERIOR

    draws = summary[summary["metric"].isin(ATTACK + MODE + POSTERIOR)]
    sets = result.get("sets", 1)
    arms = [a for a in arms if a.name in set(draws["arm"])]
    colours = arm_colours(arms)
    attack = result["attack"]
    pinned = {
        "attack:exact": attack.get("pinned", {}).get("estimate", np.nan),
        "attack:within_one": attack.get("within_one", {}).get("estimate", np.nan),
    }
    titles = {"attack:exact": "guessed exactly", "attack:within_one": "guessed within one"}
    rule = result["rule"]
    fig, axes = plt.subplots(2, len(arms), figsize=(2.9 * len(arms) + 1.3, 5.6),
                             squeeze=False, sharex=True, sharey=True,
                             layout="constrained")  # fmt: skip
    for r, metric in enumerate(ATTACK):
        for c, arm in enumerate(arms):
            ax = axes[r, c]
            sel = draws[(draws["metric"] == metric) & (draws["arm"] == arm.name)]
            sel = sel.sort_values("epsilon")
            if len(sel):
                ref = sel.iloc[0]
                ax.axhline(ref["reference"], color="0.45", lw=1.2, label="no privacy (reference)")
                ax.axhline(ref["prior"], color="#8c564b", ls="-.", lw=1,
                           label="the prior (or the hyperparameters) alone: the expected "
                                 "count, rounded")  # fmt: skip
                ax.fill_between(sel["epsilon"], sel["lower"], sel["upper"],
                                color=colours[arm.name], alpha=0.35, lw=0,
                                label="95% band over the sets")  # fmt: skip
                ax.plot(sel["epsilon"], sel["median"], color=colours[arm.name], lw=1.6,
                        ls=_style.arm_style(arm)["linestyle"],
                        label="median over the sets (one set read as the truth)")  # fmt: skip
            mode = draws[(draws["metric"] == MODE[r]) & (draws["arm"] == arm.name)]
            mode = mode[mode["median"].notna()].sort_values("epsilon")
            if len(mode):
                words = f"median over releases of {sets} sets (the mode over them)"
                ax.plot(mode["epsilon"], mode["median"], color=colours[arm.name], lw=1.0,
                        marker="o", ms=2.5, label=words)  # fmt: skip
            post = draws[(draws["metric"] == POSTERIOR[r]) & (draws["arm"] == arm.name)]
            post = post[post["median"].notna()].sort_values("epsilon")
            if len(post):
                span = f"{rule['low']}-{rule['high']}"
                ax.axhline(post.iloc[0]["prior"], color="#8c564b", ls=(0, (2, 2)), lw=0.8,
                           label=f"told the range {span}, no set: the prior's mode "
                                 "there")  # fmt: skip
                ax.plot(post["epsilon"], post["median"], color=colours[arm.name], lw=1.0,
                        ls="--", marker="^", ms=3,
                        label=f"median over releases: the posterior mode given the "
                              f"hyperparameters and {sets} set{'s' if sets != 1 else ''}, "
                              f"told the range {span}")  # fmt: skip
            if np.isfinite(pinned[metric]):
                ax.axhline(
                    pinned[metric],
                    color="#b8860b",
                    ls=":",
                    lw=1.8,
                    label="differencing the suppressed table (its published margins)",
                )
            ax.set_ylim(-0.02, 1.02)
            log_axis(ax.xaxis, minor=False)
            if r == 0:
                ax.set_title(arm_title(arm), fontsize=8)
            if c == 0:
                ax.set_ylabel(f"share of the true counts {rule['low']}-{rule['high']}\n"
                              f"{titles[metric]}", fontsize=8)  # fmt: skip
            if r == 1:
                ax.set_xlabel(f"{EPSILON} of the synthetic table", fontsize=8)
            ax.tick_params(which="both", labelsize=7)
    panel_legend(fig, axes, ncols=2)
    cells = attack.get("cells", 0)
    fig.suptitle(f"{study_heading(study)}: what an attacker recovers of the {cells} true "
                 f"counts {rule['low']}-{rule['high']}, against {EPSILON}",
                 fontsize=10)  # fmt: skip
    return fig


@styled
def figure_guide(guide: pd.DataFrame, measures, arms, epsilons, study: str):
    """The guide's verdicts: one row per measure and arm, the verdict at the right; a dot at
    the total epsilon (the prior's budget included) from which privacy moves the measure
    less than the tolerance from the no-privacy reference: filled where that is the
    verdict (met), open where another verdict stands (the prior alone keeps it, synthesis
    alone loses it)."""
    measures = [m for m in measures if m.name in set(guide["measure"])]
    arms = [a for a in arms if a.name in set(guide["arm"])]
    colours = arm_colours(arms)
    rows = [(m, a) for m in measures for a in arms]
    prior = float(guide["epsilon_prior"].max()) if len(guide) else 0.0
    low, high = min(epsilons) / 1.6, (max(epsilons) + prior) * 1.6
    fig, ax = plt.subplots(figsize=(9.5, 1.6 + 0.26 * len(rows)), layout="constrained")
    for k, (measure, arm) in enumerate(rows):
        found = guide[(guide["measure"] == measure.name) & (guide["arm"] == arm.name)]
        if not len(found):
            continue
        v = found.iloc[0]
        if np.isfinite(v.epsilon_privacy):  # filled: the verdict; open: privacy alone
            met = v.verdict == "met"
            ax.plot(v.epsilon_privacy, k, _style.arm_style(arm)["marker"], ms=7,
                    color=colours[arm.name],
                    mfc=colours[arm.name] if met else "none")  # fmt: skip
            ax.annotate(f"{v.epsilon_privacy:.3g}", (v.epsilon_privacy, k), xytext=(6, 0),
                        textcoords="offset points", va="center", fontsize=7)  # fmt: skip
        text = _verdict_line(v)
        ax.text(1.01, k, text, transform=ax.get_yaxis_transform(), va="center", fontsize=7.5,
                color=colours[arm.name])  # fmt: skip
    for j, _ in enumerate(measures[1:], start=1):
        ax.axhline(j * len(arms) - 0.5, color="0.6", lw=0.6)
    ax.set_yticks(range(len(rows)),
                  [f"{_wrapped(m.title, 40)}  " if a is arms[0] else "" for m, a in rows],
                  fontsize=7.5)  # fmt: skip
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_ylabel("measure (one row per arm)", fontsize=8)
    log_axis(ax.xaxis)
    ax.set_xlim(low, high)
    ax.axvline(max(epsilons) + prior, color="grey", lw=0.6, ls=":")
    ax.grid(axis="x", which="major", lw=0.3)
    ax.set_xlabel(
        f"total {EPSILON} paid (the prior's {prior:g} included for arms that use "
        "it) from which privacy moves the measure less than the tolerance",
        fontsize=8,
    )
    for arm in arms:
        ax.plot(
            [], [], _style.arm_style(arm)["marker"], color=colours[arm.name], label=arm_title(arm)
        )
    ax.plot([], [], "o", color="grey", label=f"met from this {EPSILON} (the verdict)")
    ax.plot([], [], "o", color="grey", mfc="none",
            label=f"privacy adds no more than the tolerance from this {EPSILON}, but the "
                  "verdict (right) says why the measure is not met")  # fmt: skip
    fig.legend(loc="outside lower center", ncols=min(3, len(arms)), fontsize=8, frameon=False)
    tol = guide["tolerance"].iloc[0] if len(guide) else np.nan
    ax.set_title(f"Epsilon guide: {study_heading(study)} (tolerance {tol:g}); each verdict and "
                 "its reason as the guide's table gives them", fontsize=10)  # fmt: skip
    return fig


@styled
def figure_maps(geometry, key: str, area_rates: pd.DataFrame, arms, epsilons, study: str,
                outline: str | None = None, label: str = "rate per 100,000"):  # fmt: skip
    """The true area rates (left, once), then the mean synthetic rates of each arm (rows;
    :class:`~dpcounts.arms.Arm` values) at each map epsilon (columns), on one colour scale
    with one colour bar: every map's rule (:func:`~dpcounts.plots.maps.truth_scale`: the
    truth's 2nd to 98th percentile, log colours where that spans a decade, arrows where
    true or synthetic colours saturate); every axes holds a map, drawn as
    :func:`~dpcounts.plots.maps.map_projection` says (named in the footnote). Only the
    shapes of the strata's areas are drawn; a shape without a rate is light grey, and areas
    without a shape (``geometry.missing: allow``) are listed in the footnote. ``label``
    names the colour bar's unit (an SMR with expected counts as the denominator)."""
    from dpcounts.plots.maps import boundaries, map_grid, map_projection, truth_scale

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
    rows, columns = [], []
    for r, spec in enumerate(arms):
        arm, cells = spec.name, []
        for eps in epsilons:
            sel = area_rates[(area_rates["arm"] == arm) & at_epsilon(area_rates["epsilon"], eps)]
            frame[f"{arm}|{eps:g}"] = lookup(sel)
            columns.append(f"{arm}|{eps:g}")
            cells.append((f"{arm}|{eps:g}", eps_equals(eps) if r == 0 else ""))
        rows.append((_wrapped(arm_title(spec), 30), cells))
    scale = truth_scale(frame["truth"], *[frame[c] for c in columns])
    fig = map_grid(
        frame,
        ("truth", "true rates"),
        rows,
        norm=scale.norm,
        label=label + (" (log scale)" if scale.log else ""),
        outlines=boundaries(frame, outline) if outline else None,
        extend=scale.extend,
    )
    notes = [f"rows: arms; columns: {EPSILON}", "light grey: a shape without a rate"]
    if unused:
        notes.append(f"{unused} shape(s) whose key is no area of the strata: not drawn")
    unmapped = sorted(areas - set(frame[key]))
    if unmapped:
        more = f" and {len(unmapped) - 8} more" if len(unmapped) > 8 else ""
        notes.append(f"{len(unmapped)} of {len(areas)} areas have no shape and are not drawn: "
                     f"{', '.join(unmapped[:8])}{more}")  # fmt: skip
    lines = ["; ".join(notes[:2]), scale.words("the true rates"),
             *(["; ".join(notes[2:])] if notes[2:] else []), f"map: {projection}"]  # fmt: skip
    fig.supxlabel("\n".join(lines), fontsize=8)
    fig.suptitle(f"{study_heading(study)}: true area rates and mean synthetic rates over the "
                 "sets", fontsize=11)  # fmt: skip
    return fig


#: How the map of the suppressed table draws an area with nothing of its count shown, and
#: one whose rate rests on hidden counts (completed).
SUPPRESSED_COLOUR = "0.62"
SUPPRESSED_HATCH = "////"


def _areas(n) -> str:
    return f"{int(n):,} area" + ("" if n == 1 else "s")


@styled
def figure_suppressed_map(definition, strata: pd.DataFrame, geometry, area_rates: pd.DataFrame):
    """The table as an agency publishes it (issue #53, item 3), mapped between the true area
    rates (left) and each arm's mean synthetic rates at the study's largest map epsilon, on
    the true map's colour scale (:func:`figure_maps`' rule). In the published panel an area
    with no count shown and some hidden (a one-key table's suppressed area) is dark grey,
    named ``suppressed (low-high)`` in the legend; an area whose rate rests on hidden counts
    beside shown ones is hatched over its rate computed from the table completed as the
    study declares (:func:`dpcounts.studies.stage.suppression.published_areas`)."""
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Patch

    from dpcounts.plots.maps import area_paths, boundaries, map_grid, map_projection, truth_scale
    from dpcounts.studies.stage.measures import study_measures
    from dpcounts.studies.stage.suppression import published_areas

    d, rule = definition, definition.suppression
    published = published_areas(d, strata, study_measures(d, strata)).set_index("area")
    key, outline = d.geometry_key, d.geometry_outline
    frame = geometry[[key, *([outline] if outline else []), "geometry"]].copy()
    frame[key] = frame[key].astype(str)
    frame, projection = map_projection(frame[frame[key].isin(published.index)].copy())
    if not len(frame):
        raise ValueError(f"no shape's {key!r} is an area of the strata; nothing to map")
    epsilon = max(d.map_epsilons)

    def lookup(selection):
        return frame[key].map(selection.set_index("area")["rate"])

    frame["truth"] = lookup(area_rates[area_rates["arm"] == "truth"])
    frame["published"] = frame[key].map(published["rate"])
    hidden, shown = frame[key].map(published["hidden"]), frame[key].map(published["shown"])
    dark = ((hidden > 0) & (shown == 0)).to_numpy()
    hatched = ((hidden > 0) & (shown > 0)).to_numpy()
    frame.loc[dark, "published"] = np.nan  # drawn in SUPPRESSED_COLOUR below
    span = f"{rule.low}-{rule.high}"
    cells = [("published", f"as published: counts {span} suppressed")]
    for spec in d.arms:
        sel = area_rates[(area_rates["arm"] == spec.name) & at_epsilon(area_rates["epsilon"],
                                                                       epsilon)]  # fmt: skip
        if len(sel):
            frame[spec.name] = lookup(sel)
            cells.append((spec.name, f"{_wrapped(arm_title(spec), 44)}\n{eps_equals(epsilon)}"))
    scale = truth_scale(frame["truth"], *[frame[c] for c, _ in cells])
    label = "rate per 100,000" if d.denominator == "population" else d.rate_unit
    fig = map_grid(frame, ("truth", "true rates"), [("", cells)], norm=scale.norm,
                   label=label + (" (log scale)" if scale.log else ""),
                   outlines=boundaries(frame, outline) if outline else None,
                   extend=scale.extend)  # fmt: skip
    ax = next(a for a in fig.axes if a.get_title() == cells[0][1])
    paths = area_paths(frame)
    if dark.any():
        ax.add_collection(PathCollection([paths[i] for i in np.flatnonzero(dark)],
                                         facecolors=SUPPRESSED_COLOUR, linewidths=0))  # fmt: skip
    if hatched.any():
        ax.add_collection(PathCollection([paths[i] for i in np.flatnonzero(hatched)],
                                         facecolors="none", edgecolors="0.15", linewidths=0,
                                         hatch=SUPPRESSED_HATCH))  # fmt: skip
    completion = {"zero": "0", "midpoint": "the midpoint", "prior": "the prior's expected count"}
    handles = []
    if dark.any():
        handles.append(Patch(facecolor=SUPPRESSED_COLOUR,
                             label=f"suppressed ({span}): {_areas(dark.sum())}, no count "
                                   "shown"))  # fmt: skip
    if hatched.any():
        words = f"{_areas(hatched.sum())}, completed with {completion[rule.completion]}"
        handles.append(Patch(facecolor="white", edgecolor="0.15", hatch=SUPPRESSED_HATCH, lw=0,
                             label=f"rests on suppressed counts ({span}): {words}"))  # fmt: skip
    fig.legend(handles=handles, loc="outside lower left", fontsize=8, frameon=False,
               title="the published map", title_fontsize=8, alignment="left")  # fmt: skip
    lines = [f"the published table: {int(published['hidden'].sum()):,} of {len(strata):,} counts "
             f"not shown (counts {span}), completed with {completion[rule.completion]}; "
             f"synthetic: each arm's mean rate over the sets at {eps_equals(epsilon)}",
             scale.words("the true rates"), f"map: {projection}"]  # fmt: skip
    fig.supxlabel("\n".join(lines), fontsize=8)
    fig.suptitle(f"{study_heading(d.title)}: the table as published with small counts "
                 "suppressed, beside the truth and the synthetic tables", fontsize=11)  # fmt: skip
    return fig


@styled
def figure_coverage(table: pd.DataFrame, arms, study: str, epsilon_prior: float = 0.0):
    """Coverage against the total epsilon (the prior's budget included where the arm uses
    it), one column per quantity (the areas' rates, their age-adjusted rates, the
    disparities): a row of coverage per method (each arm a line, bars of +-2 Monte Carlo
    errors, the nominal level a dashed black line, the combining rules with no privacy a
    grey line), then a row of the median width ratio against the exact no-privacy
    interval per method."""
    from dpcounts.mechanisms.registry import family
    from dpcounts.studies.stage.coverage import (
        METHOD_WORDS,
        QUANTITIES,
        QUANTITY_WORDS,
        REFERENCE,
    )

    methods = list(dict.fromkeys(table["method"]))
    quantities = [q for q in QUANTITIES if q in set(table["quantity"])]
    arms = [a for a in arms if a.name in set(table["arm"])]
    colours = arm_colours(arms)
    level = float(table["level"].iloc[0])
    sets = int(table["sets"].iloc[0])
    releases = int(table["releases"].min())
    nrows, ncols = 2 * len(methods), len(quantities)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols + 1.4, 2.2 * nrows + 1.6),
                             squeeze=False, sharex=True, layout="constrained")  # fmt: skip
    for c, quantity in enumerate(quantities):
        mine = table[table["quantity"] == quantity]
        reference = mine[mine["arm"] == REFERENCE]
        for r, method in enumerate(methods):
            top, bottom = axes[r, c], axes[len(methods) + r, c]
            top.axhline(level, color="black", ls="--", lw=1.2,
                        label=f"nominal level ({level:.0%})")  # fmt: skip
            bottom.axhline(1.0, color="black", ls="--", lw=0.8,
                           label="as wide as the exact no-privacy interval")  # fmt: skip
            ref = reference[reference["method"] == method]
            if len(ref):
                top.axhline(ref["coverage"].iloc[0], color="0.55", lw=1.2,
                            label="combining rules with no privacy (reference)")  # fmt: skip
                bottom.axhline(ref["width_ratio"].iloc[0], color="0.55", lw=1.2)
            for arm in arms:
                rows = mine[(mine["arm"] == arm.name) & (mine["method"] == method)]
                if not len(rows):
                    continue
                rows = rows.sort_values("epsilon")
                spent = epsilon_prior if family(arm.mechanism).uses_prior else 0.0
                eps = rows["epsilon"].to_numpy(float) + spent
                cov = rows["coverage"].to_numpy(float)
                se = np.nan_to_num(rows["coverage_se"].to_numpy(float))
                style = _style.arm_style(arm)
                low, high = np.clip(cov - 2 * se, 0, 1), np.clip(cov + 2 * se, 0, 1)
                top.errorbar(eps, cov, yerr=[cov - low, high - cov], color=colours[arm.name],
                             ls=style["linestyle"], marker=style["marker"], ms=3.5, lw=1.4,
                             capsize=2, elinewidth=0.9, label=arm_title(arm))  # fmt: skip
                bottom.plot(eps, rows["width_ratio"], color=colours[arm.name],
                            ls=style["linestyle"], marker=style["marker"], ms=3.5,
                            lw=1.4)  # fmt: skip
            top.set_ylim(-0.02, 1.02)
            top.set_title(f"{QUANTITY_WORDS[quantity]}: {METHOD_WORDS[method]} intervals",
                          fontsize=9)  # fmt: skip
            bottom.set_title(f"{QUANTITY_WORDS[quantity]}: {METHOD_WORDS[method]} widths",
                             fontsize=9)  # fmt: skip
            bottom.set_yscale("log")
            log_axis(bottom.yaxis, minor=False)
            if c == 0:
                top.set_ylabel("share of the intervals\nholding the true value", fontsize=8)
                bottom.set_ylabel("median width / exact\nno-privacy width", fontsize=8)
        axes[-1, c].set_xlabel(f"total {EPSILON} (the prior's included)", fontsize=8)
    for ax in axes.flat:
        log_axis(ax.xaxis, minor=False)
        ax.tick_params(which="both", labelsize=7)
    panel_legend(fig, axes, ncols=3)
    fig.suptitle(f"{study_heading(study)}: coverage of {level:.0%} intervals from {sets} sets, "
                 f"against {EPSILON}\n(mean over {releases} releases; bars +-2 Monte Carlo "
                 "errors)", fontsize=10)  # fmt: skip
    return fig
