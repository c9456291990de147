"""Study 2's figures (Quick 2022, Figures 1-6 and the distribution of the gamma shapes a).

Figures 2-6 read the outputs of the study stage (:mod:`dpcounts.studies.stage`) for the studies
``pennlc`` and ``standin``: the strata with their prior rates, the summary and the area
rates. Every function returns a matplotlib Figure; titles say which data are real and
which are synthetic. The figures draw Study 2's arms (:class:`~dpcounts.arms.Arm` values,
the config's ``study2.arms``) in their order: each is named by its label
(:func:`~dpcounts.plots.style.arm_title`, its ``title``) and drawn in its colour, line and
marker (:func:`~dpcounts.plots.style.arm_style`), as in every figure; a study is named by
its ``title``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpcounts.arms import Arm, arm_named
from dpcounts.design import at_epsilon
from dpcounts.mechanisms import registry
from dpcounts.plots.style import (
    EPSILON,
    EXP_PM_EPSILON,
    arm_colours,
    arm_style,
    arm_title,
    eps_equals,
    log_axis,
    math,
    styled,
)
from dpcounts.studies.study2 import toy
from dpcounts.units import PER_100K


def _bounded(arm: Arm) -> bool:
    """Whether the arm's mechanism has truncation bounds (the registry's word)."""
    return not arm.baseline and registry.family(arm.mechanism).bounded


def _colours(arms) -> dict[str, str]:
    """Each arm's colour, by name (:func:`dpcounts.plots.style.arm_style`: by what the arm
    is, the same as in every other figure)."""
    return arm_colours(arms)


def _arm_of(arms, cal) -> Arm:
    """The arm among ``arms`` with the mechanism and method of the calibration ``cal``."""
    for arm in arms:
        if (arm.mechanism, arm.method) == (cal.mechanism, cal.method):
            return arm
    raise ValueError(f"no arm with mechanism {cal.mechanism!r} and method {cal.method!r} "
                     f"among {[arm.name for arm in arms]}")  # fmt: skip


# ---- Figure 1: the toy example ----------------------------------------------------------
@styled
def figure_toy(total: int, expected, epsilon: float, true_y1: int, tail: float, arms):
    """Figure 1: (a) privacy ratio against z_1, (b) posterior predictive of z_1. Each of
    the toy's two calibrations (:func:`dpcounts.studies.study2.toy.calibrations`) is drawn as the
    arm among ``arms`` (Study 2's) with its mechanism and method."""
    colours = _colours(arms)
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for cal in toy.calibrations(total, expected, epsilon, tail):
        arm = _arm_of(arms, cal)
        z1, ratio, y1 = toy.ratio_curve(cal)
        color = colours[arm.name]
        ax_a.plot(
            z1,
            ratio,
            color=color,
            label=f"{arm_title(arm)}: $a$ = ({cal.a[0]:.3g}, {cal.a[1]:.3g}), "
            f"{math('y_1')} = {y1} vs {y1 - 1}",
        )
        z1, probs = toy.predictive(cal, true_y1)
        ax_b.plot(z1, probs, color=color, marker=".", ms=3, label=arm_title(arm))
        if cal.truncated:
            for bound in cal.bounds():
                ax_a.axvline(bound[0], color=color, linestyle=":", linewidth=1)
    for bound in (np.exp(epsilon), np.exp(-epsilon)):
        ax_a.axhline(bound, color="black", linestyle="--", linewidth=1)
    log_axis(ax_a.yaxis)
    ax_a.set_xlabel(math("z_1"))
    ax_a.set_ylabel(math(r"p(z \mid y)\,/\,p(z \mid x)"))
    ax_a.set_title(f"(a) Privacy ratio; dashed: {EXP_PM_EPSILON}, dotted: truncation bounds")
    # lower right, lifted above the exp(-eps) line: the curves never go there
    ax_a.legend(fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 0.1))
    ax_b.axvline(
        true_y1, color="black", linestyle="--", linewidth=1, label=f"true {math('y_1')} = {true_y1}"
    )
    ax_b.axvline(
        expected[0],
        color="grey",
        linestyle=":",
        linewidth=1.5,
        label=f"{math('E[y_1]')} = {expected[0]:g}",
    )
    ax_b.set_xlim(0, max(4 * expected[0], 2 * true_y1))
    ax_b.set_xlabel(math("z_1"))
    ax_b.set_ylabel(math(r"P(z_1 \mid y)"))
    ax_b.set_title(f"(b) Posterior predictive of {math('z_1')}")
    ax_b.legend(fontsize=8)
    fig.suptitle(
        f"Toy example (Quick 2022, Figure 1): {math('y_{+}')} = {total}, {math('E[y]')} = "
        f"({expected[0]:g}, {expected[1]:g}), {eps_equals(epsilon)}; exact enumeration"
    )
    fig.tight_layout()
    return fig


# ---- Figure 2: the prior information -------------------------------------------------------
@styled
def figure_prior(strata: pd.DataFrame, keys, title: str, prior_label: str):
    """Figure 2: (a) statewide group rates vs the prior rates, (b) observed vs expected.

    ``strata``: a study's strata (``cases``, ``population``, ``prior_rate``); ``title``:
    the study's."""
    keys = list(keys)
    strata = strata.assign(expected=strata["population"] * strata["prior_rate"])
    groups = strata.groupby(keys, observed=True, sort=False).agg(
        cases=("cases", "sum"),
        population=("population", "sum"),
        expected=("expected", "sum"),
    )
    state_rate = groups["cases"] / groups["population"] * PER_100K
    prior_rate = groups["expected"] / groups["population"] * PER_100K
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11, 4.8))
    positive = (state_rate > 0) & (prior_rate > 0)
    ax_a.scatter(prior_rate[positive], state_rate[positive], s=12, alpha=0.7)
    lim = [
        min(state_rate[positive].min(), prior_rate[positive].min()) / 1.5,
        max(state_rate.max(), prior_rate.max()) * 1.5,
    ]
    ax_a.plot(lim, lim, color="black", linewidth=0.8)
    log_axis(ax_a.xaxis)
    log_axis(ax_a.yaxis)
    ax_a.set_xlabel(f"prior rate per 100,000 ({prior_label})")
    ax_a.set_ylabel("statewide rate per 100,000 (confidential)")
    ax_a.set_title(f"(a) Statewide vs prior rates, {len(groups)} groups ({' x '.join(keys)})")
    offset = 0.5
    ax_b.scatter(strata["expected"] + offset, strata["cases"] + offset, s=4, alpha=0.3)
    lim = [offset, float(max(strata["expected"].max(), strata["cases"].max())) * 1.5]
    ax_b.plot(lim, lim, color="black", linewidth=0.8)
    log_axis(ax_b.xaxis)
    log_axis(ax_b.yaxis)
    ax_b.set_xlabel("expected count " + math(r"n \lambda_0") + " (+ 0.5)")
    ax_b.set_ylabel("observed count (+ 0.5)")
    ax_b.set_title(f"(b) Observed vs expected counts, {len(strata)} strata")
    fig.suptitle(f"Study 2 prior information: {title}")
    fig.tight_layout()
    return fig


# ---- Figure 3 and 4: county age-adjusted rates --------------------------------------------
def _county_table(area_rates: pd.DataFrame, arm: str, epsilon=None) -> pd.Series:
    """Rate per county of ``arm`` (``truth``, ``prior`` or an arm at ``epsilon``)."""
    rows = area_rates[area_rates["arm"] == arm]
    if epsilon is not None:
        rows = rows[at_epsilon(rows["epsilon"], epsilon)]
    return rows.set_index("area")["rate"]


@styled
def figure_county_rates(area_rates: pd.DataFrame, epsilons, arms, primary: Arm, title: str):
    """Figure 3: county age-adjusted rates (mean over the sets) against the true ones, of
    the untruncated arms and the ``primary`` one."""
    truth = _county_table(area_rates, "truth")
    prior = _county_table(area_rates, "prior")
    colours = _colours(arms)
    drawn = [arm for arm in arms if not _bounded(arm)] + [primary]
    fig, axes = plt.subplots(1, len(epsilons), figsize=(5.2 * len(epsilons), 4.8), squeeze=False)
    for ax, eps in zip(axes[0], epsilons, strict=True):
        for arm in drawn:
            synth = _county_table(area_rates, arm.name, eps)
            if synth.empty:
                continue
            ax.scatter(
                truth.loc[synth.index],
                synth,
                s=14,
                alpha=0.8,
                color=colours[arm.name],
                marker=arm_style(arm)["marker"],
                label=arm_title(arm),
            )
        lim = [truth.min() * 0.8, truth.max() * 1.1]
        ax.plot(lim, lim, color="black", linewidth=0.8)
        ax.axhline(
            float(prior.mean()),
            color="grey",
            linestyle=":",
            linewidth=1,
            label="mean prior county rate",
        )
        ax.set_xlabel("true age-adjusted rate per 100,000")
        ax.set_ylabel("synthetic rate per 100,000\n(age-adjusted, mean over the sets)")
        ax.set_title(eps_equals(eps))
        ax.legend(fontsize=8)
    fig.suptitle(f"County age-adjusted rates from synthetic data: {title}")
    fig.tight_layout()
    return fig


@styled
def figure_maps(counties, area_rates: pd.DataFrame, epsilon: float, primary: Arm, title: str):
    """Figure 4: maps of the true and the synthetic (``primary`` arm, mean) county rates on
    one colour scale (every map's rule, :func:`~dpcounts.plots.maps.truth_scale`), with one
    colour bar, drawn in Pennsylvania's own projection
    (:func:`~dpcounts.plots.maps.map_projection`, named in the footnote)."""
    from dpcounts.plots.maps import map_grid, map_projection, truth_scale

    frame, projection = map_projection(counties[["county", "geometry"]])
    frame = frame.copy()
    frame["truth"] = frame["county"].map(_county_table(area_rates, "truth"))
    frame["synthetic"] = frame["county"].map(_county_table(area_rates, primary.name, epsilon))
    scale = truth_scale(frame["truth"], frame["synthetic"])
    synthetic = f"Synthetic: {arm_title(primary)},\n{eps_equals(epsilon)} (mean over the sets)"
    fig = map_grid(
        frame,
        ("truth", "True (confidential) rates"),
        [("", [("synthetic", synthetic)])],
        norm=scale.norm,
        label="age-adjusted rate per 100,000" + (" (log scale)" if scale.log else ""),
        extend=scale.extend,
    )
    fig.supxlabel(f"{scale.words('the true rates')}\nmap: {projection}", fontsize=8)
    fig.suptitle(f"County age-adjusted rates: {title}")
    return fig


# ---- Figures 5, 6 and the shapes: metrics against epsilon ---------------------------------
def _metric_panel(ax, summary, metric, arms, primary, title, prior_label):
    """One metric against epsilon: the truncated arms' medians, the ``primary`` arm's with
    its band."""
    rows = summary[summary["metric"] == metric]
    colours = _colours(arms)
    for arm in arms:
        line = rows[rows["arm"] == arm.name].sort_values("epsilon")
        if line.empty or not _bounded(arm):
            continue
        color = colours[arm.name]
        style = arm_style(arm)["linestyle"]
        if arm == primary:
            ax.plot(line["epsilon"], line["median"], color=color, ls=style,
                    label=f"{arm_title(arm)} (median)")  # fmt: skip
            ax.fill_between(line["epsilon"], line["lower"], line["upper"], color=color, alpha=0.2,
                            label=f"{arm_title(arm)}: 95% band over the sets")  # fmt: skip
        else:
            ax.plot(
                line["epsilon"],
                line["median"],
                color=color,
                linestyle=style,
                linewidth=0.8,
                alpha=0.8,
                label=f"{arm_title(arm)} (median)",
            )
    if len(rows):
        ax.axhline(rows["truth"].iloc[0], color="black", linestyle="--", linewidth=1,
                   label="true data")  # fmt: skip
        ax.axhline(rows["prior"].iloc[0], color="black", linestyle=":", linewidth=1.2,
                   label=prior_label)  # fmt: skip
    log_axis(ax.xaxis)
    ax.set_xlabel(f"{EPSILON} (synthesis budget)")
    ax.set_ylabel("ratio of age-adjusted rates")
    ax.set_title(title)


@styled
def figure_disparities(summary, metrics, titles, arms, primary, study_title, prior_label,
                       heading):  # fmt: skip
    """Figures 5 and 6: ratio metrics against epsilon; band = 95% sampling interval."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 4.4), squeeze=False)
    for ax, metric, title in zip(axes[0], metrics, titles, strict=True):
        _metric_panel(ax, summary, metric, arms, primary, title, prior_label)
    # one legend for the panels, below them: it covers no band
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=9,
               frameon=False)  # fmt: skip
    fig.suptitle(f"{heading}: {study_title}")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


@styled
def figure_shapes(summary: pd.DataFrame, total: int, arms, title: str):
    """The distribution of the gamma shapes a across strata against epsilon, one panel per
    arm (shared axes, so no band hides another): median (line), 2.5-97.5% range (band)
    and maximum (dashed) across strata; y./(e^eps - 1), MD's alpha, dotted in every panel."""
    drawn = [
        arm
        for arm in arms
        if ((summary["arm"] == arm.name) & (summary["metric"] == "gamma_shape")).any()
    ]
    fig, axes = plt.subplots(1, max(len(drawn), 1), figsize=(3.4 * max(len(drawn), 1) + 0.8, 4.2),
                             sharex=True, sharey=True, squeeze=False,
                             layout="constrained")  # fmt: skip
    axes = axes[0]
    colours = _colours(arms)
    eps = np.geomspace(summary["epsilon"].min(), summary["epsilon"].max(), 100)
    reference = math(r"y_{+} / (e^{\varepsilon} - 1)") + " (MD's " + math(r"\alpha") + ")"
    for ax, arm in zip(axes, drawn, strict=False):
        med = summary[(summary["arm"] == arm.name) & (summary["metric"] == "gamma_shape")]
        top = summary[(summary["arm"] == arm.name) & (summary["metric"] == "gamma_shape_max")]
        med, top = med.sort_values("epsilon"), top.sort_values("epsilon")
        color = colours[arm.name]
        ax.fill_between(med["epsilon"], med["lower"], med["upper"], color=color, alpha=0.25,
                        lw=0, label="2.5-97.5% of strata")  # fmt: skip
        ax.plot(med["epsilon"], med["median"], color=color, lw=1.8, label="median of strata")
        ax.plot(top["epsilon"], top["median"], color=color, ls="--", lw=1.2,
                label="largest across strata")  # fmt: skip
        ax.plot(eps, total / np.expm1(eps), color="black", ls=":", lw=1.2, label=reference)
        log_axis(ax.xaxis)
        log_axis(ax.yaxis)
        ax.set_title(arm_title(arm), color=color)
        ax.set_xlabel(f"{EPSILON} (synthesis budget)")
    axes[0].set_ylabel(f"gamma shape {math('a')} (log scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels))
    fig.suptitle(f"Prior informativeness {math('a')} across strata, per arm: {title}")
    return fig


def prior_label(prior) -> str:
    """How a figure names a study's prior (:class:`dpcounts.studies.stage.definition.Prior`)."""
    if prior.source == "sanitised":
        return f"prior: noisy statewide rates ({eps_equals(prior.epsilon, subscript='prior')})"
    if prior.source == "overall":
        return "prior: the overall rate"
    return f"prior: public rates ({prior.column})"


def study_figures(definition, strata, summary, area_rates, counties, *, arms, primary: str,
                  figure5, figure6) -> dict:  # fmt: skip
    """Figures 2-6 and ``shapes`` of one Study 2 study (a
    :class:`~dpcounts.studies.stage.definition.StudyDefinition`) from its stage's outputs, by stem.
    ``arms`` are Study 2's (``study2.arms``: the order, titles and colours of the legends),
    ``primary`` names the one highlighted; ``figure5`` and ``figure6`` name the
    disparities of those figures."""
    d = definition
    label = prior_label(d.prior)
    groups = d.prior.by or tuple(k for k in d.keys if k != d.area)
    disparities = {spec.name: spec for spec in d.disparities}
    highlighted = arm_named(arms, primary)

    def ratios(names, heading):
        titles = [f"({chr(97 + k)}) {disparities[n].title}" for k, n in enumerate(names)]
        metrics = [f"disparity:{n}" for n in names]
        return figure_disparities(summary, metrics, titles, arms, highlighted, d.title, label,
                                  heading)  # fmt: skip

    return {
        "figure2_prior": figure_prior(strata, groups, d.title, label),
        "figure3_county_rates": figure_county_rates(
            area_rates, d.map_epsilons, arms, highlighted, d.title
        ),  # fmt: skip
        "figure4_maps": figure_maps(
            counties, area_rates, d.map_epsilons[0], highlighted, d.title
        ),  # fmt: skip
        "figure5_disparities": ratios(figure5, "Disparities in synthetic data"),
        "figure6_subgroups": ratios(figure6, "Subgroup disparities in synthetic data"),
        "shapes": figure_shapes(summary, int(strata[d.count].sum()), arms, d.title),
    }
