"""Study 1's figures (Quick 2021, Figures 1-2): metrics against epsilon with 95% bands."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dpcounts.plots.style as _style
from dpcounts.arms import arm_named
from dpcounts.data.scenarios import SCENARIOS
from dpcounts.design import at_epsilon
from dpcounts.plots.style import EPSILON, arm_title, eps_equals, log_axis, panel_legend, styled
from dpcounts.studies.study1 import ARMS

#: Each arm's legend text (:data:`dpcounts.studies.study1.ARMS`), in the legends' order: the
#: label every figure gives the arm (:func:`dpcounts.plots.style.arm_title`).
ARM_TITLES = {arm.name: arm_title(arm) for arm in ARMS}
#: Line widths by what an arm is, over its colour and line style (every figure's,
#: :func:`dpcounts.plots.style.arm_style`): where curves coincide (in scenario 1 MD and the
#: PG variants do: the paper's point) they stay visible, drawn wide to narrow, MD widest
#: and lowest, PG with state priors narrowest on top.
_WIDTHS = {
    "md": dict(lw=5.0, alpha=0.45, zorder=2),
    "national": dict(lw=2.8, zorder=3),
    "state": dict(lw=1.2, zorder=4),
    "sanitised": dict(lw=2.0, zorder=3),
    "geometric": dict(lw=1.5, zorder=3),
}


def arm_style(name: str) -> dict:
    """The line style of the Study 1 arm ``name``: its colour and line style, as in every
    figure (:func:`dpcounts.plots.style.arm_style`), and its width here."""
    arm = arm_named(ARMS, name)
    style = _style.arm_style(arm)
    width = dict(_WIDTHS[arm.prior or arm.mechanism])  # a PG arm by its prior
    return {"color": style["color"], "linestyle": style["linestyle"], **width}


def scenario_title(number) -> str:
    """``Scenario 3: same n, real rates``: what the scenario holds equal (its definition,
    :data:`dpcounts.data.scenarios.SCENARIOS`)."""
    if int(number) not in SCENARIOS:
        return f"Scenario {number}"
    sizes, rates = SCENARIOS[int(number)]
    same = {"equal": "same", "real": "real"}
    return (f"Scenario {number}: {same[sizes]} n, "
            f"{'same rate' if rates == 'equal' else 'real rates'}")  # fmt: skip


def _band(ax, rows: pd.DataFrame, label: str, **style) -> None:
    rows = rows.sort_values("epsilon")
    ax.plot(rows["epsilon"], rows["median"], label=label, **style)
    ax.fill_between(rows["epsilon"], rows["lower"], rows["upper"], alpha=0.15, lw=0,
                    color=style["color"], zorder=1)  # fmt: skip


def _pair_panel(ax, rows: pd.DataFrame, arm: str, first, second, minor: bool = True) -> None:
    """Two group rates of one arm against epsilon (bands), true values dashed.

    ``first`` and ``second`` are (metric, legend label) pairs; ``minor``: the epsilon
    axis's unlabelled minor ticks (:func:`~dpcounts.plots.style.log_axis`)."""
    for (metric, label), color in zip((first, second), ("tab:purple", "tab:orange"), strict=True):
        sel = rows[(rows["arm"] == arm) & (rows["metric"] == metric)]
        if len(sel):
            _band(ax, sel, label, color=color, linestyle="-")
        truth = rows[(rows["arm"] == "truth") & (rows["metric"] == metric)]
        if len(truth):
            ax.axhline(truth["median"].iloc[0], color=color, linestyle="--", lw=1)
    log_axis(ax.xaxis, minor=minor)
    ax.set_xlabel(EPSILON)
    ax.set_ylabel("rate per 100,000")


@styled
def figure_rmse(summary: pd.DataFrame, arms=None):
    """Figure 1: rMSE x 100,000 against epsilon, one panel per scenario."""
    rows = summary[summary["metric"] == "rmse"]
    arms = arms or [m for m in ARM_TITLES if m in set(rows["arm"])]
    scenarios = sorted(rows["scenario"].unique())
    ncols = min(2, len(scenarios))
    nrows = -(-len(scenarios) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 4 * nrows + 1), squeeze=False)
    for ax, scenario in zip(axes.flat, scenarios, strict=False):
        for arm in arms:
            sel = rows[(rows["scenario"] == scenario) & (rows["arm"] == arm)]
            if len(sel):
                _band(ax, sel, ARM_TITLES[arm], **arm_style(arm))
        log_axis(ax.xaxis)
        log_axis(ax.yaxis)
        ax.set_title(scenario_title(scenario))
        ax.set_xlabel(EPSILON)
        ax.set_ylabel("rMSE x 100,000")
    for ax in list(axes.flat)[len(scenarios) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), frameon=False)
    fig.suptitle(
        "Study 1: root mean square error of the synthetic rates (median, 95% band)\n"
        "coinciding curves are drawn wide to narrow: a red edge around blue and green means MD "
        "equals them",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0.12 / nrows, 1, 0.96))
    return fig


@styled
def figure_disparities(summary: pd.DataFrame, scenario: int = 4, arms=None):
    """Figure 2: (a) urban vs rural and (b) New Mexico vs New York rates against epsilon."""
    rows = summary[summary["scenario"] == scenario]
    arms = arms or ["md", "pg_state", "pg_state_certified"]
    arms = [m for m in arms if m in set(rows["arm"])]
    panels = [
        ("Urban vs rural", ("rate_urban", "urban"), ("rate_rural", "rural")),
        ("New Mexico vs New York", ("rate_nm", "NM"), ("rate_ny", "NY")),
    ]
    fig, axes = plt.subplots(len(arms), 2, figsize=(11, 3.2 * len(arms)))
    axes = axes.reshape(len(arms), 2)
    for r, arm in enumerate(arms):
        for c, (title, first, second) in enumerate(panels):
            letter = chr(ord("a") + 2 * r + c)  # one letter per panel, row by row
            _pair_panel(axes[r, c], rows, arm, first, second)
            axes[r, c].set_title(f"({letter}) {title}: {ARM_TITLES[arm]}", fontsize=10)
            axes[r, c].legend(fontsize=8, frameon=False)
    fig.suptitle(
        f"Study 1, scenario {scenario}: group rates (median, 95% band); dashed = truth", y=1.0
    )
    fig.tight_layout()
    return fig


@styled
def figure_maps(counties, scenario_frame, county_means, epsilons, scenario: int = 4):
    """County maps: the (modelled) true rates (left) and the mean synthetic rates of MD and
    PG-state (rows) at each map epsilon (columns), on one colour scale (per 100,000; every
    map's rule, :func:`~dpcounts.plots.maps.truth_scale`) with one colour bar and the state
    outlines, drawn as :func:`~dpcounts.plots.maps.map_projection` says."""
    from dpcounts.plots.maps import boundaries, map_grid, map_projection, truth_scale
    from dpcounts.units import PER_100K

    frame, projection = map_projection(counties[["fips", "state", "geometry"]])
    frame = frame.copy()
    rate = scenario_frame.set_index("fips").loc[frame["fips"], "rate"].to_numpy()
    frame["truth"] = rate * PER_100K
    means = county_means[county_means["scenario"] == scenario]
    rows = []
    for arm in ("md", "pg_state"):
        cells = []
        for eps in epsilons:
            sel = means[(means["arm"] == arm) & at_epsilon(means["epsilon"], eps)]
            if sel.empty:
                continue
            column = f"{arm}_{eps:g}"
            frame[column] = sel.sort_values("county")["rate"].to_numpy() * PER_100K
            cells.append((column, eps_equals(eps) if not rows else ""))
        if cells:
            rows.append((ARM_TITLES[arm], cells))
    scale = truth_scale(frame["truth"], *[frame[c] for _, cells in rows for c, _ in cells])
    fig = map_grid(
        frame,
        ("truth", "Modelled true rates"),
        rows,
        norm=scale.norm,
        label="deaths per 100,000 (ages 35-44)" + (", log scale" if scale.log else ""),
        outlines=boundaries(frame, "state"),
        extend=scale.extend,
    )
    fig.suptitle(
        f"Study 1, scenario {scenario}: modelled truth and mean synthetic rates over the "
        f"datasets (rows: mechanisms; columns: {EPSILON})\nages 35-44; populations and rates "
        "modelled; white lines: states",
        fontsize=11,
    )
    fig.supxlabel(f"{scale.words('the true rates')}\nmap: {projection}", fontsize=8)
    return fig


# --- Appendix C: the older age groups -------------------------------------------------------
def _appendix_note(correlation=None) -> str:
    """The line every Appendix C figure carries: what is modelled."""
    related = (
        "" if correlation is None else f", county pattern correlated {correlation:g} with 35-44"
    )
    return (
        "MODELLED truth: death totals = assumed national 1980 rates x modelled county "
        f"populations{related}"
    )


def _age_groups(summary: pd.DataFrame) -> list[str]:
    if "age_group" not in summary.columns:
        raise ValueError("an Appendix C summary needs an age_group column")
    return list(dict.fromkeys(summary["age_group"]))  # first-seen order (youngest first)


@styled
def figure_appendix_rmse(summary: pd.DataFrame, arms=None, correlation=None):
    """Appendix C: rMSE x 100,000 against epsilon, one row per age group, one column per
    scenario (median and 95% band over the datasets, log-log axes)."""
    rows = summary[summary["metric"] == "rmse"]
    groups = _age_groups(summary)
    arms = arms or [m for m in ARM_TITLES if m in set(rows["arm"])]
    scenarios = sorted(rows["scenario"].unique())
    nrows, ncols = len(groups), len(scenarios)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4.2 * ncols, 3.0 * nrows + 1.2), squeeze=False, layout="constrained"
    )
    for r, group in enumerate(groups):
        for c, scenario in enumerate(scenarios):
            ax = axes[r, c]
            here = rows[(rows["age_group"] == group) & (rows["scenario"] == scenario)]
            for arm in arms:
                sel = here[here["arm"] == arm]
                if len(sel):
                    _band(ax, sel, ARM_TITLES[arm], **arm_style(arm))
            log_axis(ax.xaxis, minor=False)  # 20 panels: each tick is drawn (and laid out)
            log_axis(ax.yaxis, minor=False)
            title = scenario_title(scenario)
            ax.set_title(f"Ages {group}. {title}", fontsize=9)
            ax.set_xlabel(EPSILON)
            ax.set_ylabel("rMSE x 100,000")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)), frameon=False)
    fig.suptitle(
        "Study 1, Appendix C (older age groups): rMSE of the synthetic rates "
        f"(median, 95% band)\n{_appendix_note(correlation)}"
    )
    return fig


@styled
def figure_appendix_disparities(
    summary: pd.DataFrame, scenario: int = 4, arms=("md", "pg_state"), correlation=None
):
    """Appendix C: urban vs rural and New Mexico vs New York rates against epsilon in
    ``scenario``, one row per age group, one column per comparison x arm; dashed
    lines are the (modelled) true values."""
    groups = _age_groups(summary)
    rows = summary[summary["scenario"] == scenario]
    arms = [m for m in arms if m in set(rows["arm"])]
    note = _appendix_note(correlation)
    if rows.empty or not arms:
        fig, ax = plt.subplots(figsize=(8, 2))
        ax.axis("off")
        ax.text(
            0.5,
            0.5,
            f"Scenario {scenario} (or its arms) is not in this Appendix C run:\n"
            "add it to study1.appendix_c.scenarios",
            ha="center",
            va="center",
        )
        fig.suptitle(f"Study 1, Appendix C\n{note}", fontsize=9)
        return fig
    panels = [
        ("Urban vs rural", ("rate_urban", "urban"), ("rate_rural", "rural")),
        ("NM vs NY", ("rate_nm", "NM"), ("rate_ny", "NY")),
    ]
    columns = [(panel, arm) for panel in panels for arm in arms]
    nrows, ncols = len(groups), len(columns)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.8 * ncols, 3.0 * nrows + 0.8), squeeze=False, layout="constrained"
    )
    for r, group in enumerate(groups):
        here = rows[rows["age_group"] == group]
        for c, ((title, first, second), arm) in enumerate(columns):
            _pair_panel(axes[r, c], here, arm, first, second, minor=False)  # 20 panels
            axes[r, c].set_title(f"Ages {group}. {title}: {ARM_TITLES[arm]}", fontsize=8)
            axes[r, c].legend(fontsize=7, frameon=False)
    fig.suptitle(
        f"Study 1, Appendix C, scenario {scenario}: group rates (median, 95% band); "
        f"dashed = truth\n{note}"
    )
    return fig


#: How Study 1's coverage figure draws each interval method (its colour is the arm's).
_METHOD_STYLES = {"posterior": dict(linestyle="-", marker="o"),
                  "combining": dict(linestyle="--", marker="s")}  # fmt: skip


@styled
def figure_coverage(table: pd.DataFrame, arms=None):
    """Study 1's coverage (:mod:`dpcounts.studies.study1_coverage`): per scenario and
    quantity (a column: the counties' rates, the disparities), the share of the intervals
    holding the dataset's value against epsilon (top; error bars +-2 Monte Carlo errors,
    the nominal level dashed black) and the intervals' median width over the exact
    no-privacy interval (bottom), one line per arm (its colour) and method (its line and
    marker). Each arm's points are moved a few per cent along epsilon (the same for its
    methods), so that coinciding lines stay visible."""
    from dpcounts.studies.stage.coverage import METHOD_WORDS, QUANTITIES, QUANTITY_WORDS

    arms = arms or [m for m in ARM_TITLES if m in set(table["arm"])]
    methods = list(dict.fromkeys(table["method"]))
    panels = [(s, q) for s in sorted(table["scenario"].unique()) for q in QUANTITIES
              if ((table["scenario"] == s) & (table["quantity"] == q)).any()]  # fmt: skip
    level = float(table["level"].iloc[0])
    sets, releases = int(table["sets"].iloc[0]), int(table["releases"].min())
    fig, axes = plt.subplots(2, len(panels), figsize=(4.6 * len(panels) + 1.6, 6.4),
                             squeeze=False, sharex=True, layout="constrained")  # fmt: skip
    for c, (scenario, quantity) in enumerate(panels):
        top, bottom = axes[0, c], axes[1, c]
        top.axhline(level, color="black", ls="--", lw=1.2, label=f"nominal level ({level:.0%})")
        bottom.axhline(1.0, color="black", ls=":", lw=1.0,
                       label="as wide as the exact no-privacy interval")  # fmt: skip
        mine = table[(table["scenario"] == scenario) & (table["quantity"] == quantity)]
        for k, arm in enumerate(arms):
            colour = arm_style(arm)["color"]
            dodge = 1.07 ** (k - (len(arms) - 1) / 2)
            for method in methods:
                rows = mine[(mine["arm"] == arm) & (mine["method"] == method)]
                rows = rows.sort_values("epsilon")
                if not len(rows):
                    continue
                label = f"{ARM_TITLES[arm]}, {METHOD_WORDS[method]}"
                eps = rows["epsilon"] * dodge
                top.errorbar(eps, rows["coverage"], yerr=2 * rows["coverage_se"],
                             color=colour, ms=4, lw=1.4, capsize=3, label=label,
                             **_METHOD_STYLES[method])  # fmt: skip
                bottom.plot(eps, rows["width_ratio"], color=colour, ms=4, lw=1.4,
                            **_METHOD_STYLES[method])  # fmt: skip
        low = (mine["coverage"] - 2 * mine["coverage_se"].fillna(0)).min()
        top.set_ylim(min(0.5, np.floor(10 * low) / 10), 1.01)
        top.set_title(f"{scenario_title(scenario)}\n{QUANTITY_WORDS[quantity]}", fontsize=10)
        bottom.set_yscale("log")
        log_axis(bottom.yaxis, minor=False)
        bottom.set_xlabel(EPSILON)
        for ax in (top, bottom):
            log_axis(ax.xaxis, minor=False)
        if c == 0:
            top.set_ylabel("share of the intervals\nholding the dataset's value")
            bottom.set_ylabel("median width / exact\nno-privacy width")
    panel_legend(fig, axes, ncols=2)
    fig.suptitle(f"Study 1: coverage of {level:.0%} intervals from {sets} sets, against "
                 f"{EPSILON}\n(mean over {releases} datasets, one release each; error bars "
                 "+-2 Monte Carlo errors)", fontsize=10)  # fmt: skip
    return fig
