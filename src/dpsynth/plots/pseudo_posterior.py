"""Figures of seed 004 (vector-weighted pseudo-posterior synthesizers), one data set each.

Every function takes the aggregated tables of ``results/pseudo_posterior/`` and returns a
matplotlib ``Figure`` (built without pyplot, so no global backend state is touched).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy.stats import gaussian_kde

ORDER = ("unweighted", "LW", "CW", "SW", "LW_final", "CW_final")
COLORS = {
    "data": "0.35",
    "unweighted": "tab:gray",
    "LW": "tab:blue",
    "CW": "tab:orange",
    "SW": "tab:green",
    "LW_final": "tab:purple",
    "CW_final": "tab:red",
}
STAT_LABELS = {
    "q15": "15th percentile",
    "q90": "90th percentile",
    "mean": "mean",
    "median": "median",
}


def _present(frame: pd.DataFrame, order=ORDER) -> list[str]:
    names = set(frame["synthesizer"])
    return [name for name in order if name in names]


def _violins(ax, groups: list[np.ndarray], labels: list[str]) -> None:
    """Violins; a group with a single value (SW's weights) is drawn as a bar at that value."""
    for position, (values, label) in enumerate(zip(groups, labels, strict=True)):
        values = np.asarray(values, dtype=float)
        color = COLORS.get(label, "tab:gray")
        if np.ptp(values) > 0:
            parts = ax.violinplot(values, positions=[position], widths=0.8, showmedians=True)
            for body in parts["bodies"]:
                body.set_facecolor(color)
                body.set_alpha(0.6)
            for key in ("cbars", "cmins", "cmaxes", "cmedians"):
                parts[key].set_color(color)
        else:
            ax.hlines(values[0], position - 0.35, position + 0.35, color=color, linewidth=3)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")


def _one(frame: pd.DataFrame, dataset: str) -> pd.DataFrame:
    subset = frame[frame["dataset"] == dataset]
    if subset.empty:
        raise ValueError(f"no rows of data set {dataset!r}")
    return subset


def lipschitz_violins(records: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """Record-level Lipschitz bounds by synthesizer; the dotted line is LW's Delta."""
    records, summary = _one(records, dataset), _one(summary, dataset)
    names = _present(records)
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    _violins(ax, [records.loc[records.synthesizer == n, "lipschitz"] for n in names], names)
    delta = summary.set_index("synthesizer").at["LW", "delta"]
    ax.axhline(delta, color="red", linestyle=":", label=f"LW's Delta = {delta:.2f}")
    ax.set_ylabel("record-level Lipschitz bound")
    ax.set_title(f"{dataset}: record-level Lipschitz bounds")
    ax.legend(loc="upper right")
    return fig


def weight_violins(records: pd.DataFrame, dataset: str) -> Figure:
    records = _one(records, dataset)
    names = [n for n in _present(records) if n != "unweighted"]
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    _violins(ax, [records.loc[records.synthesizer == n, "weight"] for n in names], names)
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("record weight alpha")
    ax.set_title(f"{dataset}: record weights")
    return fig


def utility_violins(utility: pd.DataFrame, dataset: str, statistics: tuple[str, ...]) -> Figure:
    """Each statistic over the synthetic data sets; the dashed line is the data's value."""
    utility = _one(utility, dataset)
    names = _present(utility)
    fig = Figure(figsize=(5 * len(statistics), 4))
    axes = fig.subplots(1, len(statistics), squeeze=False)[0]
    data = utility[utility.synthesizer == "data"].iloc[0]
    for ax, stat in zip(axes, statistics, strict=True):
        _violins(ax, [utility.loc[utility.synthesizer == n, stat] for n in names], names)
        ax.axhline(data[stat], color="black", linestyle="--", label=f"data: {data[stat]:.2f}")
        ax.set_title(f"{dataset}: {STAT_LABELS[stat]}")
        ax.legend(loc="best")
    axes[0].set_ylabel("value in the synthetic data")
    return fig


def posterior_density(posterior: pd.DataFrame, dataset: str) -> Figure:
    """Posterior density of the mean parameter mu by synthesizer; dashed: the data mean."""
    posterior = _one(posterior, dataset)
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    for name in _present(posterior):
        mu = posterior.loc[posterior.synthesizer == name, "mu"].to_numpy()
        grid = np.linspace(mu.min(), mu.max(), 200)
        ax.plot(grid, gaussian_kde(mu)(grid), color=COLORS[name], label=name)
    ax.set_xlabel("mu (mean parameter)")
    ax.set_ylabel("posterior density")
    ax.set_title(f"{dataset}: posterior of mu")
    ax.legend()
    return fig


def reweighting_scatter(records: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """Lipschitz bound against weight before and after re-weighting (Algorithm 3)."""
    records, summary = _one(records, dataset), _one(summary, dataset)
    deltas = summary.set_index("synthesizer")["delta"]
    pairs = [(b, f"{b}_final") for b in ("LW", "CW") if f"{b}_final" in deltas.index]
    fig = Figure(figsize=(6 * len(pairs), 4.5))
    axes = fig.subplots(1, len(pairs), squeeze=False)[0]
    for ax, (before, after) in zip(axes, pairs, strict=True):
        for name in (before, after):
            own = records[records.synthesizer == name]
            ax.scatter(
                own["weight"],
                own["lipschitz"],
                s=6,
                alpha=0.6,
                color=COLORS[name],
                label=f"{name} (Delta = {deltas[name]:.2f})",
            )
        ax.axhline(deltas[before], color="red", linestyle="--", label=f"Delta of {before}")
        ax.set_xlabel("record weight alpha")
        ax.set_ylabel("record-level Lipschitz bound")
        ax.set_title(f"{dataset}: {before} vs {after}")
        ax.legend(loc="lower right", fontsize="small")
    return fig


def synthetic_violins(synthetic: pd.DataFrame, dataset: str) -> Figure:
    """One synthetic data set per synthesizer against the data."""
    synthetic = _one(synthetic, dataset)
    names = _present(synthetic, ("data", *ORDER))
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    _violins(ax, [synthetic.loc[synthetic.synthesizer == n, "value"] for n in names], names)
    ax.set_ylabel("count")
    ax.set_title(f"{dataset}: one synthetic data set per synthesizer")
    return fig
